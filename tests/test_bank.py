"""Catalog-wide proof: `attn-drill verify` over the whole bank, as CI and authors run it."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def verify(*args):
    out = subprocess.run([sys.executable, "-m", "attn_drill", "verify", "--json", *args], capture_output=True,
                         text=True, cwd=ROOT, env={"NO_COLOR": "1", "PATH": "/usr/bin:/bin", "HOME": "/tmp"},
                         timeout=1200)
    assert out.stdout, out.stderr
    return out.returncode, json.loads(out.stdout)


def _explain(data):
    return "\n".join(f"{p['problem']}: {'; '.join(p['problems'])}" for p in data["problems"] if not p["ok"])


@pytest.mark.slow
def test_every_problem_verifies():
    code, data = verify()
    assert code == 0 and data["ok"], _explain(data)
    assert len(data["problems"]) >= 24
    for p in data["problems"]:
        assert p["reference"] == "pass" and p["stub"] == "fails"
        assert p["mutants"] >= 4 and p["mutants_caught"] == p["mutants"]


@pytest.mark.slow
def test_every_problem_verifies_on_the_full_cases_with_another_seed():
    code, data = verify("--full", "--seed", "20261129")
    assert code == 0 and data["ok"], _explain(data)
