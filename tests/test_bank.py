"""The whole bank, proved one thing per test (each runnable with -k), against one judge per test process:

  test_reference_passes[<id>]                 the reference passes every default case
  test_stub_fails[<id>]                       the untouched stub fails
  test_known_mistake[<id>.<mistake>]          graded as `check` grades it (every case), in Chinese: the
                                              mutant fails, is named as itself (never as another), and
                                              what the graders say about it comes in Chinese
  test_questions_are_sound[<id>]              the follow-up questions, their proofs run with the reference
  test_reference_passes_full_at_another_seed[<id>]   the reference passes every --full case at another seed
  test_full_cases_at_another_seed[<id>]       (--sweep) `verify <id> --full` at another seed: the reference
                                              passes, every mutant fails there too and is named as itself

Each mutant is graded once per run, in full with the default cases; with --sweep (CI), once more,
fail-fast with --full at another seed.
`attn-drill verify` itself is tested on the fixture bank (test_cli).
"""
from __future__ import annotations

import re

import pytest

from attn_drill import bank, rules
from attn_drill.bank import sources
from attn_drill.verbs.verify import verify_one

IDS = bank.ids()
MUTANTS = [(pid, m.id) for pid in IDS for m in bank.get(pid).mistakes]
CJK = re.compile("[\u4e00-\u9fff]")
OTHER_SEED = 20261129


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("bank")


def _write(folder, name: str, text: str):
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def _named(report) -> str | None:
    named = report.diagnosis or report.symptom
    return named.mistake if named else None


def test_the_bank_is_whole():
    assert len(IDS) >= 24
    for pid in IDS:
        assert len(bank.get(pid).mistakes) >= 4, pid


@pytest.mark.parametrize("pid", IDS)
def test_reference_passes(judge, folder, pid):
    # graded from a copy: a room may not read the bank itself
    path = _write(folder, f"ref_{pid}.py", sources.read(bank.reference_path(pid)))
    r = judge.grade(pid, path, 0, time_limit=rules.time_limit(bank.get(pid)))
    first = r.first_failure()
    assert r.status == "pass", f"{r.message} {first.name + ': ' + first.message if first else ''}"


@pytest.mark.parametrize("pid", IDS)
def test_stub_fails(judge, folder, pid):
    spec = bank.get(pid)
    path = _write(folder, f"stub_{pid}.py", sources.make_stub(spec, sources.read(bank.reference_path(pid))))
    r = judge.grade(pid, path, 0, fail_fast=True, diagnose=False, time_limit=rules.time_limit(spec))
    assert r.status != "pass", "the untouched stub passes: the cases prove nothing"


@pytest.mark.parametrize("pid, mid", MUTANTS, ids=[f"{p}.{m}" for p, m in MUTANTS])
def test_known_mistake(judge, folder, pid, mid):
    spec = bank.get(pid)
    path = _write(folder, f"{pid}__{mid}.py", sources.mutant_source(spec, sources.read(bank.reference_path(pid)), mid))
    r = judge.grade(pid, path, 0, lang="zh", time_limit=rules.time_limit(spec))
    assert r.status != "pass", f"mutant {pid}.{mid} passes every case"
    assert _named(r) == mid, f"named {_named(r)!r}, expected {mid!r} ({r.message})"
    english = [f"{c.name}: {s}" for c in r.cases
               for s in list(c.checks) + ([c.message] if c.tensor.startswith("trace rule") else []) if s and
               not CJK.search(s)]
    assert not english, "the graders' words in English only:\n" + "\n".join(english)


@pytest.mark.parametrize("pid", IDS)
def test_questions_are_sound(judge, pid):
    from attn_drill.verbs.quizzing import questions_of
    assert len(questions_of(pid)) >= 3
    assert judge.check_questions(pid) == []


@pytest.mark.parametrize("pid", IDS)
def test_reference_passes_full_at_another_seed(judge, folder, pid):
    path = _write(folder, f"ref_full_{pid}.py", sources.read(bank.reference_path(pid)))
    r = judge.grade(pid, path, OTHER_SEED, full=True, time_limit=rules.time_limit(bank.get(pid), True))
    first = r.first_failure()
    assert r.status == "pass", f"{r.message} {first.name + ': ' + first.message if first else ''}"


@pytest.mark.sweep
@pytest.mark.parametrize("pid", IDS)
def test_full_cases_at_another_seed(judge, tmp_path, pid):
    row = verify_one(pid, judge, OTHER_SEED, True, tmp_path)
    assert row.ok, "; ".join(row.problems)
    assert row.reference == "pass" and row.stub == "fails" and row.mutants_caught == row.mutants
