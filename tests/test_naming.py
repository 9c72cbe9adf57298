"""Naming a mistake: recall (a known mistake gets its name) and precision (no wrong name, ever).

Graded as `attn-drill check` grades: every case runs, so a mutant's name is kept only if it fits
every case. The evidence:
  tests/fixtures/symptoms/<id>__<name>[__<how>].py must be named <name> (a mutant or a symptom rule)
  tests/fixtures/symptoms/<id>__unnamed_<how>.py   must get no name: a wrong name is worse than none
  every spec's mutants                             must be named as themselves (test_bank)
"""
from pathlib import Path

import pytest

FIXTURES = sorted((Path(__file__).parent / "fixtures" / "symptoms").glob("*.py"))
SEEDS = (0, 1, 2)


def expected(path: Path) -> tuple[str, str | None]:
    pid, name = path.stem.split("__")[:2]
    return pid, None if name.startswith("unnamed") else name


def named(report) -> str | None:
    if report.diagnosis is not None:
        return report.diagnosis.mistake
    return report.symptom.mistake if report.symptom is not None else None


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_a_fixture_gets_its_name_or_none(judge, path):
    pid, want = expected(path)
    for seed in SEEDS:
        r = judge.grade(pid, str(path), seed, time_limit=60)
        assert r.status != "pass", f"seed {seed}: the fixture should fail"
        assert named(r) == want, f"seed {seed}: named {named(r)!r}, expected {want!r} ({r.message})"


def test_a_kind_named_on_gradients_alone_says_so(judge):
    """A kind's words describe the forward computation: named on a case whose outputs are right (or
    at places inside a hand-written backward), the report says the mistake is in the backward."""
    r = judge.grade("flash_attention", str(Path(__file__).parent / "fixtures" / "symptoms" /
                                          "flash_attention__kind.scale_missing__dk_only.py"), 0, time_limit=60)
    assert r.diagnosis is not None and r.diagnosis.mistake == "kind.scale_missing"
    assert r.diagnosis.en.startswith("In the backward computation") and "反向计算" in r.diagnosis.zh
