"""The precision rule for float64 cases (AUTHORING.md, "Precision").

Rounding at float32 level inside a float64 case is not a mistake of logic: it passes with a
warning that names the likely cause, except in a case that grades a step the statement asks to
compute in float64 (`Case.full_float64`; every float64 case where the spec says `full_float64`),
where it fails under that name. Never tighter than assert_close's float64 defaults (rtol 1e-7,
atol 1e-7).
"""
import json
from pathlib import Path

import pytest

from attn_drill import bank
from attn_drill.bank import sources

ALTERNATIVES = Path(__file__).parent / "fixtures" / "alternatives"



def edited(tmp_path, pid: str, old: str, new: str) -> Path:
    src = sources.read(bank.reference_path(pid))
    assert old in src
    path = tmp_path / f"{pid}.py"
    path.write_text(src.replace(old, new), encoding="utf-8")
    return path


@pytest.mark.parametrize("name", ["gqa__float_softmax_upcast", "alibi__float32_slopes"])
def test_float32_rounding_in_a_float64_case_passes_with_a_warning_naming_the_cause(judge, name):
    r = judge.grade(name.split("__")[0], str(ALTERNATIVES / f"{name}.py"), 3, time_limit=60)
    assert r.status == "pass", r.message
    warned = [c for c in r.cases if c.warning]
    assert warned and all(c.dtype == "float64" for c in warned)
    assert all("float32-level error in a float64 case" in c.warning and ".float() upcast" in c.warning
               for c in warned)
    assert any("float32-level" in w for w in r.warnings)       # and the report says so, not only the case


def test_where_the_statement_asks_for_float64_it_fails_under_that_name(judge, tmp_path):
    """rope: the statement asks the rotation of a float64 x in float64 (its apply cases grade that
    step); a float32 rotation fails, and says why."""
    assert not bank.get("rope").full_float64          # only the rotation, not the whole problem
    path = edited(tmp_path, "rope", "real = torch.float64 if x.dtype == torch.float64 else torch.float32",
                  "real = torch.float32")
    r = judge.grade("rope", str(path), 3, time_limit=60)
    assert r.status == "fail"
    first = r.first_failure()
    assert first.dtype == "float64" and "asks float64 inputs to be computed in float64" in first.message
    assert first.name.startswith("apply_")
    assert r.diagnosis is not None and r.diagnosis.mistake == "always_float32"


def test_the_json_of_a_precision_failure_shows_the_bound_it_failed(judge, tmp_path):
    """The float64 comparison itself can pass (max_error under allowed, nothing mismatched): the case
    fails on the float32-level error it measured against the float64 bound, and the JSON says both."""
    from attn_drill.judge.compare import FP64_LEVEL
    from attn_drill.render.exercism import exercism
    path = edited(tmp_path, "rope", "real = torch.float64 if x.dtype == torch.float64 else torch.float32",
                  "real = torch.float32")
    r = judge.grade("rope", str(path), 3, time_limit=60)
    data = json.loads(json.dumps(exercism(r)))
    failed = [t for t in data["tests"] if t["status"] == "fail" and t["attn_drill"]["tensor"] == "precision"]
    assert failed
    for test in failed:
        case = test["attn_drill"]
        assert case["float64_bound"] == FP64_LEVEL
        assert case["float32_level_error"] > case["float64_bound"]
        assert "float32-level error" in test["message"] and f"{FP64_LEVEL:.0e}" in test["message"]
        assert {"max_error", "allowed", "mismatched", "total"} <= set(case)      # the older fields stay
    passed = [t["attn_drill"] for t in data["tests"] if t["status"] == "pass"]
    assert all(c["float64_bound"] is None for c in passed)


def test_a_float32_rotation_fails_in_the_cache_case_of_rope_cached_decode(judge, tmp_path):
    """rope_cached_decode asks float64 only in the rotation: the cache case reads the rotated keys to
    float64 precision (a float32 softmax passes elsewhere, tests/fixtures/alternatives)."""
    assert not bank.get("rope_cached_decode").full_float64
    path = edited(tmp_path, "rope_cached_decode",
                  "real = torch.float64 if x.dtype == torch.float64 else torch.float32", "real = torch.float32")
    r = judge.grade("rope_cached_decode", str(path), 0, time_limit=60)
    assert r.status == "fail"
    failing = [c for c in r.cases if c.status == "fail"]
    assert [c.name for c in failing] == ["cache_contents"]
    assert "float32-level error" in failing[0].message and "rotation" in failing[0].message


def test_an_lse_in_float32_is_allowed_in_bfloat16_only(judge, tmp_path):
    """ring_attention's statement lets lse come back in float32 in bfloat16 (flash-attn's
    softmax_lse); in float64 an lse rounded to float32 still fails on its dtype."""
    src = (ALTERNATIVES / "ring_attention__float32_lse.py").read_text(encoding="utf-8")
    old = "work = torch.promote_types(s.dtype, torch.float32)"
    assert old in src
    path = tmp_path / "ring_attention.py"
    path.write_text(src.replace(old, "work = torch.float32"), encoding="utf-8")   # float32 in float64 too
    r = judge.grade("ring_attention", str(path), 0, time_limit=60)
    failing = [c for c in r.cases if c.status == "fail"]
    assert failing and all(c.dtype == "float64" for c in failing)
    assert "`lse` has dtype torch.float32" in failing[0].message


def test_float64_tolerances_are_never_tighter_than_assert_close(judge, tmp_path):
    """An output off by 9e-8 everywhere (inside assert_close's float64 atol of 1e-7) passes."""
    path = edited(tmp_path, "mhsa", "        return self.out_proj(out)",
                  "        out = self.out_proj(out)\n"
                  "        return out + 9e-8 if out.dtype == torch.float64 else out")
    r = judge.grade("mhsa", str(path), 3, time_limit=60)
    assert r.status == "pass", r.message
    shifted = tmp_path / "shifted"
    shifted.mkdir()
    worse = edited(shifted, "mhsa", "        return self.out_proj(out)",
                   "        out = self.out_proj(out)\n"
                   "        return out + 1e-4 if out.dtype == torch.float64 else out")
    assert judge.grade("mhsa", str(worse), 3, time_limit=60).status == "fail"   # the rule can fail


def _merge_weight_gradient(weight_dtype):
    """The gradient of out_a in an exact merge of two partials: (1 - sigmoid(d)) * g, with the
    weight computed in `weight_dtype`, for rows where out_a weighs little (d around 5)."""
    import torch
    gen = torch.Generator().manual_seed(0)
    d = 4 + 2 * torch.rand(64, 1, generator=gen, dtype=torch.float64)
    g = torch.randn(64, 9, generator=gen, dtype=torch.float64)
    w = (1 - torch.sigmoid(d.to(weight_dtype))).double()
    return w * g, (1 - torch.sigmoid(d)) * g, g


def test_a_half_dtype_gradient_may_carry_one_rounding_at_the_cases_scale():
    """AUTHORING.md: 1 - sigmoid rounded in bfloat16 makes a small gradient wrong by up to half of
    itself, but by less than one rounding of the case's largest gradient: it passes; the same
    gradient zeroed, or twice too large, fails."""
    import torch
    from attn_drill.judge.compare import case_scale, compare
    got, truth, g = _merge_weight_gradient(torch.bfloat16)
    low = (got.bfloat16(),)                       # the reference's own run is as rounded as it gets
    exact_ref = (truth.bfloat16(),)
    scale = case_scale([truth, g])                # the other partial's gradient is about g
    rel = float(((got - truth).abs() / truth.abs()).max())
    assert rel > 0.2                              # far beyond bfloat16's rtol: the rule is needed
    assert not compare(got, truth, exact_ref, torch.bfloat16, grad=True)["ok"]     # without the scale
    assert compare(got, truth, exact_ref, torch.bfloat16, grad=True, scale=scale)["ok"]
    assert compare(got, truth, low, torch.bfloat16, grad=True, scale=scale)["ok"]
    big = truth * 100                             # a gradient at the case's scale
    assert not compare(torch.zeros_like(big), big, (big.bfloat16(),), torch.bfloat16, grad=True,
                       scale=scale)["ok"]
    assert not compare(2 * big, big, (big.bfloat16(),), torch.bfloat16, grad=True, scale=scale)["ok"]
    # float32 and float64 keep their rules: the scale changes nothing there
    assert compare(got, truth, (truth.float(),), torch.float32, grad=True, scale=scale) == \
        compare(got, truth, (truth.float(),), torch.float32, grad=True)
