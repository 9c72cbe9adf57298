"""The engine on a fixture bank: one submission per outcome, graded through the real worker."""
import os

import pytest

from attn_drill import bank
from attn_drill.errors import UsageError
from attn_drill.client import JudgeClient

SUBS = os.path.join(os.path.dirname(__file__), "fixtures", "submissions")


@pytest.fixture(scope="module")
def client():
    old = os.environ.get("ATTN_DRILL_BANK")
    os.environ["ATTN_DRILL_BANK"] = os.path.join(os.path.dirname(__file__), "fixtures", "bank")
    bank.root.cache_clear()
    bank.get.cache_clear()
    c = JudgeClient().start()
    yield c
    c.close()
    if old is None:
        del os.environ["ATTN_DRILL_BANK"]
    else:
        os.environ["ATTN_DRILL_BANK"] = old
    bank.root.cache_clear()
    bank.get.cache_clear()


def grade(client, name, **kw):
    kw.setdefault("time_limit", 20)
    return client.grade("attend", os.path.join(SUBS, f"attend_{name}.py"), 5, **kw)


def test_pass(client):
    r = grade(client, "pass")
    assert r.status == "pass", r.message
    assert [c.status for c in r.cases] == ["pass"] * 4
    assert all(c.forward == "pass" and c.gradient == "pass" for c in r.cases)
    assert r.replay == ""


def test_wrong_values_are_diagnosed(client):
    r = grade(client, "wrong")
    assert r.status == "fail"
    first = r.first_failure()
    assert first.forward == "fail" and first.compare["mismatched"] > 0
    assert first.detail["window"] and first.detail["heatmap"]["ratio"]
    assert r.diagnosis.mistake == "missing_scale"
    assert f"--case {first.name}" in r.replay and "--seed 5" in r.replay


def test_a_close_mistake_is_named(client):
    r = grade(client, "mutant_like")
    assert r.status == "fail" and r.diagnosis.mistake == "softmax_query_axis"


def test_syntax_error_points_at_the_line(client):
    r = grade(client, "syntax")
    assert r.status == "error"
    assert r.problem_error.kind == "syntax"
    assert r.problem_error.frames[0].line == 12


def test_import_error(client):
    r = grade(client, "import")
    assert r.status == "error" and r.problem_error.kind == "import"
    assert "not_a_real_module_xyz" in r.problem_error.message


def test_missing_name_is_an_interface_error(client):
    r = grade(client, "missing")
    assert r.status == "error" and r.problem_error.kind == "missing"
    assert "attend" in r.message and "attention" in r.message


def test_parameter_mismatch_lists_names_and_shapes(client):
    r = grade(client, "interface")
    assert r.status == "error" and r.problem_error.kind == "interface"
    assert "proj.bias" in r.message and "not in the reference" in r.message


def test_wrong_shape(client):
    r = grade(client, "shape")
    assert r.status == "fail"
    assert "shape [2, 3, 5]" in r.first_failure().message and "expected [2, 5, 3]" in r.first_failure().message


def test_nan_from_a_softmax_without_max_subtraction(client):
    r = grade(client, "nan")
    assert r.status == "fail"
    first = r.first_failure()
    assert first.name == "large_logits_fp32"
    assert "NaN" in first.message


def test_input_mutation(client):
    r = grade(client, "mutate")
    assert r.status == "fail"
    assert "in place" in r.first_failure().message and "v" in r.first_failure().message


def test_forbidden_call_is_refused_before_any_case_runs(client):
    r = grade(client, "forbidden")
    assert r.status == "error" and not r.cases            # found in the source: no case needs to run
    assert r.problem_error.kind == "forbidden" and "scaled_dot_product_attention" in r.problem_error.message
    frame = r.problem_error.frames[-1]
    assert frame.line == 9 and frame.code[frame.col - 1:].startswith("scaled_dot_product_attention")


def test_detached_gradient(client):
    r = grade(client, "detach")
    assert r.status == "fail"
    first = r.first_failure()
    assert first.forward == "pass" and first.gradient == "fail"
    assert "no gradient reaches `v`" in first.message


def test_timeout_points_at_the_loop(client):
    r = grade(client, "timeout", time_limit=3)
    assert r.status == "fail" and r.problem_error.kind == "timeout"
    assert any(f.line in (9, 10) for f in r.problem_error.frames)
    assert grade(client, "pass").status == "pass"  # a fresh worker takes over


def test_crash_is_a_graded_failure(client):
    r = grade(client, "crash")
    assert r.status == "fail" and r.problem_error.kind == "crash"
    assert grade(client, "pass").status == "pass"


def test_huge_allocation_is_a_graded_failure(client):
    r = grade(client, "memory")
    assert r.status == "fail"
    assert r.first_failure().problem.kind == "memory"


def test_seed_replays_exactly(client):
    a = grade(client, "wrong")
    b = grade(client, "wrong", case=a.first_failure().name)
    assert len(b.cases) == 1
    assert b.cases[0].max_error == a.first_failure().max_error


def test_unknown_case_is_a_usage_error(client):
    with pytest.raises(UsageError, match="no case"):
        grade(client, "pass", case="nope")


def test_global_state_changes_end_with_the_grading(client):
    grade(client, "globals")
    r = grade(client, "pass")
    assert r.status == "pass", r.message


def test_attention_weights_localise_the_mistake(client):
    before = grade(client, "wrong").first_failure().detail["weights"]       # no 1/sqrt(D): scores differ
    assert not before["matches"] and before["max"] > 1e-3 and before["diff"]
    after = grade(client, "after_softmax").first_failure().detail["weights"]  # 2 * v: weights are right
    assert after["matches"]


@pytest.mark.parametrize("twin", [True, False])
def test_a_dtype_hint_only_where_the_dtype_is_all_that_differs(twin):
    """Only the float32 case fails: a precision hint when a float64 case has the same call, else the
    pattern alone (the float32 case may merely be the one with more beams)."""
    import torch

    from attn_drill.bank.api import Case
    from attn_drill.judge.symptoms import across_cases
    from attn_drill.results import CaseResult
    x = torch.zeros(2, 3)

    def case(name, dtype, beams):
        return Case(name=name, target="search", inputs={"x": x}, kwargs={"beams": beams}, dtype=dtype)
    cases = [case("a_fp64", torch.float64, 2), case("b_fp64", torch.float64, 3),
             case("c_fp32", torch.float32, 2 if twin else 4)]
    results = [CaseResult("a_fp64", "pass", forward="pass"), CaseResult("b_fp64", "pass", forward="pass"),
               CaseResult("c_fp32", "fail", forward="fail")]
    said = across_cases(results, cases)
    assert said is not None and said.id == "only_fp32"
    assert ("precision problem" in said.en) == twin and ("精度" in said.zh) == twin
    assert twin or "not a clue" in said.en


def test_float64_cases_failing_by_precision_alone_keep_their_hint():
    """No float32 twin of the failing float64 case, but it fails by the precision rule: the hint stays."""
    import torch

    from attn_drill.bank.api import Case
    from attn_drill.judge.symptoms import across_cases
    from attn_drill.results import CaseResult
    x = torch.zeros(2, 3)
    cases = [Case(name="a_fp32", target="f", inputs={"x": x}, dtype=torch.float32),
             Case(name="b_bf16", target="f", inputs={"x": torch.zeros(4, 3)}, dtype=torch.bfloat16),
             Case(name="c_fp64", target="f", inputs={"x": torch.zeros(5, 3)}, dtype=torch.float64)]
    failed = CaseResult("c_fp64", "fail", forward="fail", tensor="precision")
    said = across_cases([CaseResult("a_fp32", "pass", forward="pass"), CaseResult("b_bf16", "pass", forward="pass"),
                         failed], cases)
    assert said is not None and said.id == "only_fp64" and "float32 and back" in said.en
