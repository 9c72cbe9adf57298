"""Compare a submission's tensor with the float64 ground truth, judged by the dtype's own error.

The rule (after flash-attention's tests and torch.testing.assert_close):
  allowed_abs = max(k * reference_error_in_this_dtype, atol[dtype])   k = 4 forward, 6 gradients
  and, for a gradient in bfloat16 or float16, at least one rounding at the case's gradient scale
  (unit roundoff of the dtype times the largest |gradient| of the case): a correct formulation
  may round an intermediate of that size (1 - sigmoid(x) in place of exp(a - lse)), which makes a
  small gradient wrong by half of itself while no larger than one rounding of its neighbours
  an element passes when |got - truth| <= allowed_abs + rtol[dtype] * |truth|
  and the whole tensor must also pass a relative-norm gate ||got - truth|| / ||truth|| <= gate, where
  gate = max(gate[dtype], k * the reference's own relative error) (at most 0.5), so a zero or
  constant output never passes, however loose the absolute floor. A tensor whose every element is
  within that one rounding at the case's scale passes the gate: there the elementwise bound judges.
"""
from __future__ import annotations

import math

import torch

# dtype -> (atol floor, rtol, relative-norm gate)
TOLERANCES = {
    torch.float64: (1e-7, 1e-7, 1e-6),     # torch.testing.assert_close's float64 defaults, never tighter
    torch.float32: (1e-5, 1.3e-6, 1e-3),
    torch.bfloat16: (1e-5, 1.6e-2, 6e-2),
    torch.float16: (1e-5, 1e-3, 1e-2),
}
# wider than flash-attention's 2x/3x: hand-written solutions order their float operations in many ways
K_FORWARD, K_GRAD = 4.0, 6.0
ILL_CONDITIONED = 0.1   # the reference's own relative error above which a tensor is not judged
FP64_LEVEL = 1e-10      # a float64 result off by more than this (relative norm) carries float32-level error
HEAT_ROWS, HEAT_COLS = 16, 40


def tolerance(dtype: torch.dtype):
    return TOLERANCES.get(dtype, TOLERANCES[torch.float32])


def _index(flat_idx: int, shape) -> list[int]:
    idx = []
    for s in reversed(list(shape)):
        idx.append(flat_idx % s if s else 0)
        flat_idx //= s if s else 1
    return list(reversed(idx))


def case_scale(tensors) -> float:
    """The largest finite |value| over a case's tensors of one kind (its input gradients)."""
    out = 0.0
    for x in tensors:
        if isinstance(x, torch.Tensor) and x.numel() and x.is_floating_point():
            finite = x.detach()[torch.isfinite(x.detach())]
            if finite.numel():
                out = max(out, float(finite.abs().max()))
    return out


def compare(got: torch.Tensor, truth: torch.Tensor, ref_low, dtype: torch.dtype,
            grad: bool = False, rtol: float | None = None, scale: float = 0.0) -> dict:
    """Judge `got` (any dtype) against `truth` (float64). `ref_low` is the reference run in `dtype`, or
    several such runs (on inputs moved by one unit in the last place): the allowance follows the
    largest of their errors, so it is a property of the case rather than of one rounding path.
    `scale`: case_scale() of the case's gradients, for a gradient in a half dtype (else 0)."""
    atol, rtol_d, gate = tolerance(dtype)
    rtol = rtol_d if rtol is None else rtol
    half = dtype in (torch.bfloat16, torch.float16)
    rounding = torch.finfo(dtype).eps / 2 * scale if half and grad else 0.0   # one rounding at the case's scale
    truth = truth.detach().to("cpu", torch.float64)
    g = got.detach().to("cpu", torch.float64)
    ref_err, ref_dev = 0.0, 0.0
    runs = ref_low if isinstance(ref_low, (list, tuple)) else ([ref_low] if ref_low is not None else [])
    for run in runs if dtype != torch.float64 else ():
        if not isinstance(run, torch.Tensor) or run.shape != truth.shape:
            continue
        r = run.detach().to("cpu", torch.float64)
        finite = torch.isfinite(r) & torch.isfinite(truth)
        if finite.any():
            ref_err = max(ref_err, float((r - truth)[finite].abs().max()))
            ref_dev = max(ref_dev, float((r - truth)[finite].norm()))
    k = K_GRAD if grad else K_FORWARD
    allowed_abs = max(k * ref_err, atol, rounding)
    diff = (g - truth).abs()
    bound = allowed_abs + rtol * truth.abs()
    nonfinite = ~torch.isfinite(g)
    bad = (diff > bound) | nonfinite
    bad &= torch.isfinite(truth)  # the truth is never NaN by construction; be safe
    n = truth.numel()
    finite_diff = torch.where(torch.isfinite(diff), diff, torch.zeros_like(diff))
    result = {
        "ok": True, "total": n, "mismatched": int(bad.sum()), "allowed_abs": allowed_abs, "rtol": rtol,
        "ref_err": ref_err, "max_abs": 0.0, "max_abs_index": [], "max_rel": 0.0, "max_rel_index": [],
        "relnorm": 0.0, "gate": gate, "nonfinite": int(nonfinite.sum()), "nonfinite_index": [],
    }
    if n == 0:
        return result
    i = int(finite_diff.reshape(-1).argmax())
    result["max_abs"] = float(finite_diff.reshape(-1)[i])
    result["max_abs_index"] = _index(i, truth.shape)
    # the one element a table row shows: the one furthest over its bound where any is, else the
    # greatest error; with its own bound (allowed_abs + rtol * |truth| there), so the sign is true
    over = (finite_diff / bound.clamp_min(1e-300)).reshape(-1)
    shown = int(over.argmax()) if bool((bad & torch.isfinite(diff)).any()) else i
    result["shown"] = [float(finite_diff.reshape(-1)[shown]), float(bound.reshape(-1)[shown])]
    rel = finite_diff / truth.abs().clamp_min(1e-300)
    rel = torch.where(truth.abs() > 0, rel, torch.zeros_like(rel))
    j = int(rel.reshape(-1).argmax())
    result["max_rel"] = float(rel.reshape(-1)[j])
    result["max_rel_index"] = _index(j, truth.shape)
    if result["nonfinite"]:
        result["nonfinite_index"] = _index(int(nonfinite.reshape(-1).nonzero()[0]), truth.shape)
    norm_t = float(truth.norm())
    denom = max(norm_t, atol * math.sqrt(n), rounding * math.sqrt(n) / gate)
    result["relnorm"] = float(torch.where(nonfinite, torch.zeros_like(diff), diff).norm()) / denom
    if result["nonfinite"]:
        result["relnorm"] = float("inf")
    # the gate, like the elementwise bound, widens with the reference's own error in this dtype
    gate = result["gate"] = min(0.5, max(gate, k * ref_dev / denom))
    result["ok"] = result["mismatched"] == 0 and result["relnorm"] <= gate
    result["f32_level"] = bool(dtype == torch.float64 and FP64_LEVEL < result["relnorm"] < math.inf)
    # When the reference itself is this far off in this dtype (e.g. gradients through a saturated
    # softmax in float32), the tensor carries no signal there: it is not judged, whatever it holds,
    # except that it must be finite.
    result["ill_conditioned"] = ref_dev / denom > ILL_CONDITIONED
    if result["ill_conditioned"]:
        result["ok"] = result["nonfinite"] == 0
    return result


def detail(got: torch.Tensor, truth: torch.Tensor, cmp: dict, axes=("query", "key")) -> dict:
    """Got against expected around the worst element, and a heatmap of the error over the last two dims."""
    truth = truth.detach().to("cpu", torch.float64)
    g = got.detach().to("cpu", torch.float64)
    worst = cmp["nonfinite_index"] or cmp["max_abs_index"]
    out = {"index": worst, "window": [], "heatmap": None, "axes": list(axes)}
    if truth.dim() == 0:
        out["window"] = [{"index": [], "got": float(g), "expected": float(truth)}]
        return out
    lead = tuple(worst[:-1])
    row_g, row_t = g[lead], truth[lead]
    c = worst[-1]
    lo, hi = max(0, c - 3), min(row_t.numel(), c + 4)
    out["window"] = [{"index": list(lead) + [j], "got": float(row_g[j]), "expected": float(row_t[j])}
                     for j in range(lo, hi)]
    if truth.dim() >= 2:
        lead2 = tuple(worst[:-2])
        bound = cmp["allowed_abs"] + cmp["rtol"] * truth[lead2].abs()
        err = (g[lead2] - truth[lead2]).abs()
        ratio = torch.where(torch.isfinite(err), err / bound, torch.full_like(err, 1e9))
        ratio = _pool(ratio, HEAT_ROWS, HEAT_COLS)
        out["heatmap"] = {"leading_index": list(lead2), "rows": truth.shape[-2], "cols": truth.shape[-1],
                          "ratio": [[round(float(v), 3) for v in r] for r in ratio]}
    return out


def _pool(m: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """Max-pool a 2-D map down to at most rows x cols cells."""
    r, c = m.shape
    if r <= rows and c <= cols:
        return m
    m = m.clamp_max(1e9)[None, None]
    out = torch.nn.functional.adaptive_max_pool2d(m, (min(r, rows), min(c, cols)))
    return out[0, 0]


def weights_detail(got: torch.Tensor, truth: torch.Tensor) -> dict:
    """Where the submission's attention weights (its first softmax) differ from the reference's.

    `matches` says whether they agree to the dtype's rounding: if they do, the mistake is after the
    softmax; if not, in the scores, the masks or the softmax. The map is |got - truth| over
    (query, key) at the leading index (batch, head) where the difference is largest.
    """
    g = got.detach().to("cpu", torch.float64)
    t = truth.detach().to("cpu", torch.float64)
    diff = torch.where(torch.isnan(g) | torch.isnan(t), torch.full_like(g, float("inf")), (g - t).abs())
    eps = torch.finfo(got.dtype).eps if got.is_floating_point() else 0.0
    limit = max(1e-6, 16 * eps)
    worst = int(diff.reshape(-1).argmax())
    index = _index(worst, t.shape)
    lead = tuple(index[:-2])
    m = diff[lead]

    def grid(x: torch.Tensor) -> list[list[float]]:
        return [[round(float(v), 6) for v in r] for r in _pool(x, HEAT_ROWS, HEAT_COLS)]
    # got and expected: the two maps themselves at that (batch, head), for the HTML report and notebooks
    return {"matches": bool((diff <= limit).all()), "max": float(diff.reshape(-1)[worst]), "index": index,
            "leading_index": list(lead), "rows": t.shape[-2], "cols": t.shape[-1], "limit": limit,
            "diff": grid(m), "got": grid(torch.nan_to_num(g[lead], nan=0.0)), "expected": grid(t[lead])}
