"""The precision rule for float64 cases (AUTHORING.md, "Precision").

Rounding at float32 level inside a float64 case is not a mistake of logic: it passes with a
warning that names the likely cause, except where the statement asks for float64 all the way
(spec `full_float64`), where it fails under that name. Never tighter than assert_close's float64
defaults (rtol 1e-7, atol 1e-7).
"""
from pathlib import Path

import pytest

from attn_drill import source, bank
from attn_drill.worker import WorkerClient

ALTERNATIVES = Path(__file__).parent / "fixtures" / "alternatives"


@pytest.fixture(scope="module")
def client():
    with WorkerClient() as c:
        yield c


def edited(tmp_path, pid: str, old: str, new: str) -> Path:
    src = source.read(bank.reference_path(pid))
    assert old in src
    path = tmp_path / f"{pid}.py"
    path.write_text(src.replace(old, new), encoding="utf-8")
    return path


@pytest.mark.parametrize("name", ["gqa__float_softmax_upcast", "alibi__float32_slopes"])
def test_float32_rounding_in_a_float64_case_passes_with_a_warning_naming_the_cause(client, name):
    r = client.grade(name.split("__")[0], str(ALTERNATIVES / f"{name}.py"), 3, time_limit=60)
    assert r.status == "pass", r.message
    warned = [c for c in r.cases if c.warning]
    assert warned and all(c.dtype == "float64" for c in warned)
    assert all("float32-level error in a float64 case" in c.warning and ".float() upcast" in c.warning
               for c in warned)
    assert any("float32-level" in w for w in r.warnings)       # and the report says so, not only the case


def test_where_the_statement_asks_for_float64_it_fails_under_that_name(client, tmp_path):
    """rope: a float64 input must stay float64 (full_float64); a float32 rotation fails, and says why."""
    assert bank.get("rope").full_float64
    path = edited(tmp_path, "rope", "real = torch.float64 if x.dtype == torch.float64 else torch.float32",
                  "real = torch.float32")
    r = client.grade("rope", str(path), 3, time_limit=60)
    assert r.status == "fail"
    first = r.first_failure()
    assert first.dtype == "float64" and "asks float64 inputs to be computed in float64" in first.message
    assert r.diagnosis is not None and r.diagnosis.mistake == "always_float32"


def test_float64_tolerances_are_never_tighter_than_assert_close(client, tmp_path):
    """An output off by 9e-8 everywhere (inside assert_close's float64 atol of 1e-7) passes."""
    path = edited(tmp_path, "mhsa", "        return self.out_proj(out)",
                  "        out = self.out_proj(out)\n"
                  "        return out + 9e-8 if out.dtype == torch.float64 else out")
    r = client.grade("mhsa", str(path), 3, time_limit=60)
    assert r.status == "pass", r.message
    shifted = tmp_path / "shifted"
    shifted.mkdir()
    worse = edited(shifted, "mhsa", "        return self.out_proj(out)",
                   "        out = self.out_proj(out)\n"
                   "        return out + 1e-4 if out.dtype == torch.float64 else out")
    assert client.grade("mhsa", str(worse), 3, time_limit=60).status == "fail"   # the rule can fail


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
    from attn_drill.compare import case_scale, compare
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
