"""Naming a mistake: recall (a known mistake gets its name) and precision (no wrong name, ever).

Graded as `attn-drill check` grades: every case runs, so a mutant's name is kept only if it fits
every case. The evidence:
  tests/fixtures/symptoms/<id>__<name>[__<how>].py must be named <name> (a mutant or a symptom rule)
  tests/fixtures/symptoms/<id>__unnamed_<how>.py   must get no name: a wrong name is worse than none
  tests/fixtures/symptoms/edits.yaml               the same, for fixtures that are a reference with a few
                                                   text edits (written out before grading)
  every spec's mutants                             must be named as themselves (test_bank)
"""
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
SYMPTOMS = Path(__file__).parent / "fixtures" / "symptoms"
EDITED = {e["fixture"]: e["edits"] for e in yaml.safe_load((SYMPTOMS / "edits.yaml").read_text(encoding="utf-8"))}
FIXTURES = sorted([*SYMPTOMS.glob("*.py"), *(SYMPTOMS / f"{name}.py" for name in EDITED)])
SEEDS = (0, 1, 2)                 # the first in every run; the others with --sweep (CI)


def fixture_file(path: Path, tmp_path: Path) -> Path:
    """The fixture as a file: itself, or its reference with its edits made (each `old` occurs once)."""
    if path.exists():
        return path
    pid = path.stem.split("__")[0]
    text = (ROOT / "reference" / f"{pid}.py").read_text(encoding="utf-8")
    for e in EDITED[path.stem]:
        assert text.count(e["old"]) == 1, f"{path.stem}: an edit no longer matches reference/{pid}.py once"
        text = text.replace(e["old"], e["new"])
    out = tmp_path / path.name
    out.write_text(text, encoding="utf-8")
    return out


def expected(path: Path) -> tuple[str, str | None]:
    pid, name = path.stem.split("__")[:2]
    return pid, None if name.startswith("unnamed") else name


def named(report) -> str | None:
    if report.diagnosis is not None:
        return report.diagnosis.mistake
    return report.symptom.mistake if report.symptom is not None else None


@pytest.mark.parametrize("path, seed", [
    pytest.param(path, seed, id=f"{path.stem}-{seed}", marks=[pytest.mark.sweep] if seed != SEEDS[0] else [])
    for path in FIXTURES for seed in SEEDS])
def test_a_fixture_gets_its_name_or_none(judge, path, seed, tmp_path):
    pid, want = expected(path)
    file = fixture_file(path, tmp_path)
    r = judge.grade(pid, str(file), seed, time_limit=60)
    assert r.status != "pass", f"seed {seed}: the fixture should fail"
    assert named(r) == want, f"seed {seed}: named {named(r)!r}, expected {want!r} ({r.message})"


def test_a_kind_named_on_gradients_alone_says_so(judge):
    """A kind's words describe the forward computation: named on a case whose outputs are right (or
    at places inside a hand-written backward), the report says the mistake is in the backward."""
    r = judge.grade("flash_attention", str(Path(__file__).parent / "fixtures" / "symptoms" /
                                          "flash_attention__kind.scale_missing__dk_only.py"), 0, time_limit=60)
    assert r.diagnosis is not None and r.diagnosis.mistake == "kind.scale_missing"
    assert r.diagnosis.en.startswith("In the backward computation") and "反向计算" in r.diagnosis.zh
