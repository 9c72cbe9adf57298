"""Code under judgement attacking its own verdict, the next one, or the machine (issue: two trust
zones). Each test fails if the attack works: a false PASS, a forged result, a tool error, a next file
blamed, a file changed outside the submission's copy.

Most attacks are tried twice: through the real worker (the static policy refuses them first), and
with the static policy switched off in a judge run here, to prove the layer below holds on its own:
the judge is another process, the room never held the reference, fused kernels are blocked at
dispatch level, the audit hook guards files and processes, and every grading gets a fresh room.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from attn_drill import bank
from attn_drill.bank import policy, sources
from attn_drill.client import JudgeClient

FIXTURES = Path(__file__).resolve().parent / "fixtures"
ATTACKS = FIXTURES / "attacks"
SUBS = FIXTURES / "submissions"


@pytest.fixture(scope="module")
def fixture_bank_env():
    old = os.environ.get("ATTN_DRILL_BANK")
    os.environ["ATTN_DRILL_BANK"] = str(FIXTURES / "bank")
    bank.root.cache_clear()
    bank.get.cache_clear()
    yield
    if old is None:
        del os.environ["ATTN_DRILL_BANK"]
    else:
        os.environ["ATTN_DRILL_BANK"] = old
    bank.root.cache_clear()
    bank.get.cache_clear()


@pytest.fixture(scope="module")
def client(fixture_bank_env):
    c = JudgeClient().start()
    yield c
    c.close()


@pytest.fixture(scope="module")
def bare(fixture_bank_env):
    """Grades in this process with the static policy off: only the layers below it stand."""
    from attn_drill.judge import engine
    from attn_drill.judge.rooms import Zygote
    from attn_drill.judge.sandbox import hidden_from as _hidden
    zyg = Zygote().spawn([], dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
    real, real_use = policy.vet, sources.forbidden_use

    def no_refusals(*args, **kwargs):
        vetted = real(*args, **kwargs)
        vetted.refusals = []
        return vetted
    policy.vet = no_refusals
    sources.forbidden_use = lambda *args: []       # the static refusal of forbidden names is off too
    try:
        def grade(path, **kw):
            return engine.grade("attend", engine.Target(str(path), hidden=_hidden(str(path))), zyg, seed=5,
                                time_limit=kw.pop("time_limit", 20), **kw)
        yield grade
    finally:
        policy.vet, sources.forbidden_use = real, real_use
        zyg.close()


def _graded(client, name, **kw):
    return client.grade("attend", str(ATTACKS / f"{name}.py"), 5, time_limit=kw.pop("time_limit", 20), **kw)


# ---------------------------------------------------------------- 1. patching the judge in-process
def test_poisoning_a_library_function_cannot_reach_the_reference(client, bare):
    r = _graded(client, "poison_math")          # math.sqrt = 1: a library's attribute replaced, refused
    assert r.status == "error" and "library's own attribute" in r.message, r.message
    r = bare(ATTACKS / "poison_math.py")        # without the policy it would only hurt itself
    assert r.status == "fail" and r.diagnosis and r.diagnosis.mistake == "missing_scale"


def test_patching_the_engine_is_refused_and_would_not_reach_it(client, bare):
    r = _graded(client, "patch_judge")
    assert r.status == "error" and r.problem_error.kind == "refused" and "attn_drill" in r.message
    r = bare(ATTACKS / "patch_judge.py")        # without the policy, the room refuses the import itself
    assert r.status != "pass" and r.problem_error is not None
    assert "importing attn_drill" in r.problem_error.message, r.problem_error.message


# ---------------------------------------------------------------- 2. reaching the reference
def test_the_reference_is_neither_in_the_room_nor_readable_from_it(client, bare):
    r = _graded(client, "find_reference")
    assert r.status == "error" and r.problem_error.kind == "refused"
    r = bare(ATTACKS / "find_reference.py")     # gc and the stack refused, the bank file refused, nothing to find
    assert r.status != "pass"
    assert r.problem_error is not None and "not allowed while your code is graded" in r.problem_error.message


def test_a_room_holds_no_module_of_the_bank(bare, tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("import sys\nimport torch\n"
                     "names = sorted(n for n, m in list(sys.modules.items()) if n.startswith(('attn_drill_reference', "
                     "'attn_drill_grader', 'attn_drill_mutant', 'attn_drill.engine', 'attn_drill.judge', "
                     "'attn_drill.bank')) or '/fixtures/bank/' in str(getattr(m, '__file__', '')))\n"
                     "def attend(q, k, v, mask=None):\n    raise RuntimeError('MODULES=' + ','.join(names))\n")
    r = bare(probe)
    assert "MODULES=" in r.first_failure().message
    assert r.first_failure().message.split("MODULES=")[1].strip() == "", r.first_failure().message


# ---------------------------------------------------------------- 3. forging the reply
def test_a_forged_reply_is_the_submissions_failure(client, bare):
    r = _graded(client, "forge_reply")
    assert r.status != "pass"
    r = bare(ATTACKS / "forge_reply.py")        # writes on every descriptor, then exits: never a pass
    assert r.status == "fail" and r.problem_error.kind in ("crash", "runner"), r.message
    assert client.grade("attend", str(SUBS / "attend_pass.py"), 5, time_limit=20).status == "pass"


# ---------------------------------------------------------------- 4. hidden fused kernels
@pytest.mark.parametrize("name", ["fused_math", "fused_c_nn", "fused_vmap", "fused_encoder_layer"])
def test_fused_kernels_are_caught_where_they_run(client, bare, name):
    r = _graded(client, name)
    assert r.status != "pass"
    r = bare(ATTACKS / f"{name}.py")
    assert r.status != "pass"
    first = r.first_failure()
    assert first.problem is not None and first.problem.kind == "forbidden", (name, first.message)


# ---------------------------------------------------------------- 7. spoiling the next grading
def test_a_spoiler_changes_nothing_for_the_next_file(client, bare):
    r = bare(ATTACKS / "spoiler.py")
    assert r.status == "fail"
    good = bare(SUBS / "attend_pass.py")        # the thread, the closed stdin and the patch died with its room
    assert good.status == "pass", good.message
    wrong = bare(SUBS / "attend_wrong.py")      # and a patched engine does not make the next wrong file pass
    assert wrong.status == "fail"


def test_check_over_a_folder_grades_each_file_on_its_own(tmp_path, monkeypatch, fixture_bank_env):
    from typer.testing import CliRunner

    from attn_drill.cli import app
    work = tmp_path / "w"
    work.mkdir()
    (work / "attend.py").write_text((SUBS / "attend_pass.py").read_text())
    monkeypatch.chdir(work)
    res = CliRunner().invoke(app, ["check", "--seed", "5", "--json"], env={"NO_COLOR": "1"})
    assert res.exit_code == 0, res.output


# ---------------------------------------------------------------- 8. tool errors and labels
def test_a_meta_default_device_fails_only_its_own_grading(client):
    r = _graded(client, "meta_device")
    assert r.status in ("fail", "error")        # graded, not "the grader itself failed"
    assert client.grade("attend", str(SUBS / "attend_pass.py"), 5, time_limit=20).status == "pass"


def test_system_exit_inside_user_code_is_an_exception_at_its_line(client):
    r = _graded(client, "system_exit")
    first = r.first_failure()
    assert r.status == "fail" and first.problem.kind == "exception"
    assert "SystemExit" in first.problem.message and first.problem.frames[-1].line == 6


def test_a_segfault_points_at_the_users_line(client):
    r = client.grade("attend", str(SUBS / "attend_crash.py"), 5, time_limit=20)
    assert r.status == "fail" and r.problem_error.kind == "crash"
    assert "Segmentation fault" in r.message and r.problem_error.frames[-1].line == 10
