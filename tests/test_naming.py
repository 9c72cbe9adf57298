"""Naming a mistake: recall (a known mistake gets its name) and precision (no wrong name, ever).

Graded as `attn-drill check` grades: every case runs, so a mutant's name is kept only if it fits
every case. The evidence:
  tests/fixtures/symptoms/<id>__<name>[__<how>].py must be named <name> (a mutant or a symptom rule)
  tests/fixtures/symptoms/<id>__unnamed_<how>.py   must get no name: a wrong name is worse than none
  every spec's mutants                             must be named as themselves
"""
from pathlib import Path

import pytest

from attn_drill import bank, source
from attn_drill.worker import WorkerClient

FIXTURES = sorted((Path(__file__).parent / "fixtures" / "symptoms").glob("*.py"))
SEEDS = (0, 1, 2)


def expected(path: Path) -> tuple[str, str | None]:
    pid, name = path.stem.split("__")[:2]
    return pid, None if name.startswith("unnamed") else name


def named(report) -> str | None:
    if report.diagnosis is not None:
        return report.diagnosis.mistake
    return report.symptom.mistake if report.symptom is not None else None


@pytest.fixture(scope="module")
def client():
    with WorkerClient() as c:
        yield c


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_a_fixture_gets_its_name_or_none(client, path):
    pid, want = expected(path)
    for seed in SEEDS:
        r = client.grade(pid, str(path), seed, time_limit=60)
        assert r.status != "pass", f"seed {seed}: the fixture should fail"
        assert named(r) == want, f"seed {seed}: named {named(r)!r}, expected {want!r} ({r.message})"


def test_naming_recall_and_precision_over_every_mutant(client, tmp_path):
    """Each mutant of the bank, graded in full: named as itself (recall), never as another (precision)."""
    right, wrong, unnamed = [], [], []
    for pid in bank.ids():
        spec = bank.get(pid)
        ref = source.read(bank.reference_path(pid))
        for m in spec.mistakes:
            path = tmp_path / f"{pid}__{m.id}.py"
            path.write_text(source.mutant_source(spec, ref, m.id), encoding="utf-8")
            r = client.grade(pid, str(path), 0, time_limit=60)
            assert r.status != "pass", f"mutant {pid}.{m.id} passes"
            got = named(r)
            (right if got == m.id else unnamed if got is None else wrong).append(f"{pid}.{m.id} -> {got}")
    n = len(right) + len(wrong) + len(unnamed)
    print(f"\nnaming over {n} mutants: recall {len(right) / n:.3f}, "
          f"precision {len(right) / max(1, len(right) + len(wrong)):.3f}; unnamed: {unnamed}")
    assert not wrong, f"named wrongly: {wrong}"
    assert len(right) / n >= 0.97, f"named {len(right)} of {n}; unnamed: {unnamed}"
