"""The precision rule for float64 cases (AUTHORING.md, "Precision"), applied to every problem.

Rounding at float32 level inside a float64 case (a float32 constant, a `.float()` upcast, a float32
buffer) is not a mistake of logic. Such a case is judged again by float32's rule, against the
reference run in float32 at float32's tolerances: if it passes there, it passes, with a warning
that names the likely cause. Where the case grades a step the statement asks to compute in float64
(`Case.full_float64`, on every float64 case when the spec says `full_float64: true`), float32-level
error fails under that name, and the result carries the error measured and the float64 bound it
failed. Error beyond float32's rounding fails as usual.
"""
from __future__ import annotations

import torch

from ..i18n import t
from ..results import FAIL, PASS, CaseResult
from .compare import FP64_LEVEL
from .prepare import reference_at_float32
from .verdicts import judge


def applies(case, side) -> bool:
    """The rule is for float64 cases run without autocast, on a side that produced outputs."""
    return case.dtype == torch.float64 and case.autocast is None and not side.problem


def apply(res: CaseResult, limits: dict, case, prep, truth, sub, files, key) -> tuple[CaseResult, dict]:
    """`res` and `limits` as judge() gave them for a float64 case, with the rule applied."""
    worst = max((c["relnorm"] for c in limits.values() if c.get("f32_level")), default=0.0)
    numeric = res.status == FAIL and res.compare is not None and not res.tensor.startswith("trace")
    if res.status == PASS and not worst:
        return res, limits
    if res.status == FAIL and not numeric:
        return res, limits                     # a shape, a count, a rule: not a question of precision
    res32 = None
    if numeric:
        ref32 = reference_at_float32(files, key, case, prep)
        res32 = judge(case, truth, ref32, sub, files.spec, tol_dtype=torch.float32)[0]
    if res32 is not None and res32.status != PASS:
        return res, limits                     # wrong beyond float32's rounding: a plain failure
    if res32 is not None:
        worst = max((c["relnorm"] for c in limits.values()), default=0.0)
    res.float32_level_error = worst
    if case.full_float64:
        res.status, res.forward = FAIL, FAIL
        res.message = t("engine.full_float64", err=f"{worst:.2g}", bound=f"{FP64_LEVEL:.0e}")
        res.tensor, res.detail, res.diagnosis = "precision", None, None
        res.float64_bound = FP64_LEVEL
        return res, limits
    res.warning = t("engine.precision_note", err=f"{worst:.2g}")
    if res32 is not None:
        res.status, res.forward, res.gradient = PASS, PASS, PASS if case.grad else res.gradient
        res.message, res.detail, res.diagnosis = "", None, None
        res.compare, res.max_error, res.allowed = res32.compare, res32.max_error, res32.allowed
    return res, limits
