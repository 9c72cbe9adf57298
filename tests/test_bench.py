"""`attn-drill bench`: the SDPA-core detection, the statistics, and real runs on a small fixture bank (a copy
of mhsa with a `settings.bench` section). Nothing here asserts on a duration: benchmarks/bench_tool.py
measures the figures."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from attn_drill import bank
from attn_drill.cli import app
from attn_drill.judge.timing import _q, _rse, sdpa_shapes

ROOT = Path(__file__).resolve().parents[1]
ENV = {"NO_COLOR": "1", "COLUMNS": "100"}
runner = CliRunner()

BENCH = """
settings:
  bench:
    init: {hidden_dim: 64, num_heads: 4, dropout: 0.0}
    inputs: {x: [2, 64, 64]}
"""

CHUNKED = '''
import math
import torch
import torch.nn as nn


class MultiHeadSelfAttention(nn.Module):
    """Queries in chunks of 8: never builds the full (B, H, L, L) score tensor."""

    def __init__(self, hidden_dim, num_heads, dropout=0.1):
        super().__init__()
        self.h = num_heads
        self.qkv_proj = nn.Linear(hidden_dim, 3 * hidden_dim, bias=False)
        self.out_proj = nn.Linear(hidden_dim, hidden_dim, bias=False)

    def forward(self, x, key_padding_mask=None, attn_mask=None):
        B, L, E = x.shape
        D = E // self.h
        q, k, v = self.qkv_proj(x).view(B, L, 3, self.h, D).permute(2, 0, 3, 1, 4)   # 3 x (B, H, L, D)
        outs = []
        for i in range(0, L, 8):
            s = q[:, :, i:i + 8] @ k.transpose(-1, -2) / math.sqrt(D)                # (B, H, 8, L)
            outs.append(s.softmax(-1) @ v)
        return self.out_proj(torch.cat(outs, 2).transpose(1, 2).reshape(B, L, E))
'''

CACHED = '''
import torch.nn as nn
from reference_copy import MultiHeadSelfAttention as _Ref


class MultiHeadSelfAttention(_Ref):
    """Right once, then replays its first answer."""
    _memo = None

    def forward(self, x, key_padding_mask=None, attn_mask=None):
        if MultiHeadSelfAttention._memo is None or MultiHeadSelfAttention._memo.shape != x.shape:
            MultiHeadSelfAttention._memo = super().forward(x, key_padding_mask, attn_mask)
        return MultiHeadSelfAttention._memo
'''


@pytest.fixture
def fixture_bank(tmp_path, monkeypatch):
    """A bank holding mhsa with bench sizes, and a work folder."""
    b = tmp_path / "bank"
    for sub, name in (("problems", "mhsa.yaml"), ("reference", "mhsa.py"), ("graders", "mhsa.py")):
        (b / sub).mkdir(parents=True)
        shutil.copy(ROOT / sub / name, b / sub / name)
    with open(b / "problems" / "mhsa.yaml", "a", encoding="utf-8") as f:
        f.write(BENCH)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("ATTN_DRILL_BANK", str(b))
    monkeypatch.chdir(work)
    bank.root.cache_clear()
    bank.get.cache_clear()
    yield work
    bank.root.cache_clear()
    bank.get.cache_clear()


def _ops(*records):
    return [(name, [tuple(s) for s in ins], [tuple(s) for s in outs]) for name, ins, outs in records]


def test_sdpa_shapes_from_the_reference_trace():
    ops = _ops(("aten.mm.default", [(128, 64), (64, 192)], [(128, 192)]),
               ("aten.bmm.default", [(8, 64, 16), (8, 16, 48)], [(8, 64, 48)]),
               ("aten._softmax.default", [(2, 4, 64, 48)], [(2, 4, 64, 48)]),
               ("aten.bmm.default", [(8, 64, 48), (8, 48, 24)], [(8, 64, 24)]))
    assert sdpa_shapes(ops) == {"q": [2, 4, 64, 16], "k": [2, 4, 48, 16], "v": [2, 4, 48, 24], "is_causal": False}
    assert sdpa_shapes(ops[:1]) is None                       # no softmax: no attention core
    assert sdpa_shapes(ops[:3]) is None                       # no matmul with the weights


def test_statistics():
    assert _q([4.0, 1.0, 3.0, 2.0], 0.5) == 2.5
    assert _rse([1.0]) == float("inf")
    assert _rse([2.0, 2.0, 2.0]) == 0.0


def test_help_has_an_example_and_never_imports_torch():
    code = ("import sys; from typer.testing import CliRunner; from attn_drill.cli import app; "
            "r = CliRunner().invoke(app, ['bench', '--help']); print(r.output); "
            "assert r.exit_code == 0; assert 'torch' not in sys.modules, 'torch imported'")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**ENV, "PATH": ""})
    assert res.returncode == 0, res.stderr
    assert "attn-drill bench mhsa" in res.stdout


def test_unknown_problem_and_missing_file_exit_2(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert runner.invoke(app, ["bench", "nosuch"], env=ENV).exit_code == 2
    res = runner.invoke(app, ["bench", "mhsa"], env=ENV)
    assert res.exit_code == 2 and "does not exist" in res.output


def test_chunked_solution_times_and_uses_less_memory(fixture_bank):
    (fixture_bank / "mhsa.py").write_text(CHUNKED)
    res = runner.invoke(app, ["bench", "mhsa", "--json", "--max-seconds", "1"], env=ENV)
    assert res.exit_code == 0, res.output
    r = json.loads(res.output)
    assert r["ok"] and r["device"] == "cpu" and r["dtype"] == "float32" and r["inputs"] == {"x": [2, 64, 64]}
    assert r["sdpa_shapes"] == {"q": [2, 4, 64, 16], "k": [2, 4, 64, 16], "v": [2, 4, 64, 16], "is_causal": False}
    assert r["runs"] >= 3 and r["verified_runs"] == r["runs"] + r["warmup"] and r["max_rel_error"] < 1e-4
    assert set(r["series"]) == {"submission", "reference", "sdpa"} and set(r["ratios"]) == {"reference", "sdpa"}
    ref, sub = r["series"]["reference"], r["series"]["submission"]
    assert ref["largest"]["shape"] in ([8, 64, 64], [2, 4, 64, 64])          # the full score matrix
    assert sub["largest"]["bytes"] < ref["largest"]["bytes"]                  # chunks are smaller
    assert ref["flops"] == sub["flops"] > 0 and sub["gflops_per_s"] > 0
    for s in r["series"].values():
        assert s["q1_ms"] <= s["median_ms"] <= s["q3_ms"]


def test_a_cached_answer_is_caught(fixture_bank):
    shutil.copy(bank.reference_path("mhsa"), fixture_bank / "reference_copy.py")
    (fixture_bank / "mhsa.py").write_text(CACHED)
    res = runner.invoke(app, ["bench", "mhsa", "--max-seconds", "1"], env=ENV)
    assert res.exit_code == 1, res.output
    assert "differs from the reference on fresh inputs" in res.output


def test_a_hang_is_killed(fixture_bank):
    (fixture_bank / "mhsa.py").write_text(CHUNKED.replace("        B, L, E = x.shape", "        while True:\n"
                                                                                        "            pass"))
    res = runner.invoke(app, ["bench", "mhsa", "--json", "--time-limit", "3"], env=ENV)
    assert res.exit_code == 1, res.output
    r = json.loads(res.output)
    assert not r["ok"] and "timed out" in r["error"] and "mhsa.py:" in r["error"]
