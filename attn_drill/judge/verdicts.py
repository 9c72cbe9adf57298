"""Verdicts: on a case (outputs, then gradients: inputs, then parameters in the submission's
layout, then op-trace rules), and on a whole grading (report_verdict)."""
from __future__ import annotations

import torch

from ..bank.api import Case
from ..errors import GraderBug
from ..i18n import index, t, tn
from ..results import ERROR, FAIL, PASS, SKIP, CaseResult, Report, UserProblem
from ..room.params import apply
from ..room.side import Side
from .compare import case_scale, compare, detail


def _value_str(v) -> str:
    if isinstance(v, dict) and set(v) == {"$object"}:
        return t("judge.an_object", type=v["$object"])
    if isinstance(v, torch.Tensor):
        return t("judge.a_tensor", shape=list(v.shape), dtype=str(v.dtype).replace("torch.", ""), device=v.device)
    return f"{type(v).__name__} {v!r}"[:120]


# what a case failed by when it failed a property rather than a value (CaseResult.tensor): the
# inputs changed in place, two runs that differ, an op-trace rule ("trace rule <i>")
PROPERTY_INPUTS, PROPERTY_REPEAT, PROPERTY_TRACE = "inputs", "repeat", "trace rule"


def property_failure(res: CaseResult) -> bool:
    """The case failed a property of how the code ran, not the values it returned."""
    return res.status == FAIL and (res.tensor in (PROPERTY_INPUTS, PROPERTY_REPEAT)
                                   or res.tensor.startswith(PROPERTY_TRACE))


def _judge(case: Case, truth: Side, low: Side | None, sub: Side, spec, rules: bool = True,
           tol_dtype=None) -> tuple[CaseResult, dict]:
    res = CaseResult(case.name, PASS, case.shapes(), str(case.dtype).replace("torch.", ""), case.note)
    if case.autocast is not None:
        res.dtype += f" autocast {str(case.autocast).replace('torch.', '')}"
    res.time_ms = sub.seconds * 1000
    limits = {}
    if sub.problem:
        res.status, res.problem, res.message, res.forward = FAIL, sub.problem, sub.problem.message, FAIL
        res.message = stub_message(sub.problem)
        if sub.problem.kind in ("missing", "interface"):
            res.status = ERROR
        return res, limits
    if sub.mutated:
        res.tensor = PROPERTY_INPUTS
        return _fail(res, "forward", t("judge.mutated", names=", ".join(sub.mutated))), limits
    low_map = dict(low.outs) if low else {}
    sub_map = dict(sub.outs)
    res.forward = PASS
    worst = None  # (score, name, cmp, got, truth)
    # -- forward: names, shapes, dtypes, devices, then values
    for name, expect in truth.outs:
        if name not in sub_map:
            return _fail(res, "forward", t("judge.count", got=len(sub.outs), want=len(truth.outs),
                                           names=", ".join(n for n, _ in truth.outs))), limits
        got = sub_map[name]
        if isinstance(expect, torch.Tensor):
            if not isinstance(got, torch.Tensor):
                return _fail(res, "forward", t("judge.not_tensor", name=name, got=_value_str(got))), limits
            if tuple(got.shape) != tuple(expect.shape):
                return _fail(res, "forward", t("judge.shape", name=name, got=list(got.shape),
                                               want=list(expect.shape))), limits
            in_low = low and tol_dtype is None and isinstance(low_map.get(name), torch.Tensor)
            want_dtype = low_map[name].dtype if in_low else \
                (case.dtype if expect.is_floating_point() else expect.dtype)
            kept_wider = name in case.float32_outputs and got.dtype == torch.float32   # as the statement allows
            if got.dtype != want_dtype and not kept_wider:
                key = "judge.dtype" if want_dtype.is_floating_point else "judge.dtype_stated"   # int ids, bool masks
                return _fail(res, "forward", t(key, name=name, got=got.dtype, want=want_dtype)), limits
            if got.device.type != torch.device(case.device).type:
                return _fail(res, "forward", t("judge.device", name=name, got=got.device, want=case.device)), limits
            if not expect.is_floating_point() or case.exact:
                if not torch.equal(got.detach().cpu(), expect.detach().cpu().to(got.dtype)):
                    n_bad = int((got.detach().cpu() != expect.detach().cpu().to(got.dtype)).sum())
                    return _fail(res, "forward", t("judge.exact", name=name, bad=n_bad, total=expect.numel())), limits
                continue
            if not torch.isfinite(expect).all():
                raise GraderBug(f"{case.name}: the reference's `{name}` has NaN/inf (a grader bug)")
            cmp = compare(got, expect, _runs(low, name), tol_dtype or _tol_dtype(case), grad=False, rtol=case.rtol)
            limits[name] = cmp
            worst = _worse(worst, (name, cmp, got, expect))
        else:
            if isinstance(expect, float) and not case.exact:
                ok = isinstance(got, (int, float)) and abs(got - expect) <= 1e-9 * max(1.0, abs(expect))
            else:
                ok = type(got) is type(expect) and got == expect or \
                    (isinstance(expect, int) and isinstance(got, int) and got == expect)
            if not ok:
                return _fail(res, "forward", t("judge.value", name=name, got=repr(got)[:200],
                                               want=repr(expect)[:200])), limits
    if worst is not None:
        name, cmp, got, expect = worst
        res.tensor, res.compare, res.max_error, res.allowed = name, cmp, cmp["max_abs"], cmp["allowed_abs"]
        if not cmp["ok"]:
            res.status, res.forward = FAIL, FAIL
            res.message = _cmp_message(name, cmp)
            res.detail = detail(got, expect, cmp, case.axes)
            return res, limits
    if sub.nondeterministic:
        res.tensor = PROPERTY_REPEAT
        return _fail(res, "forward", t("judge.nondeterministic", what=sub.nondeterministic)), limits
    # -- gradients
    if case.grad and truth.grads:
        res.gradient = PASS
        gworst = None
        scale = case_scale(v for k, v in truth.grads.items() if not k.startswith("param "))
        for key, tg in truth.grads.items():
            if tg is None or key.startswith("param "):
                continue  # parameters are judged in the submission's layout, by _judge_param_grads
            sg = sub.grads.get(key)
            if sg is None:
                return _fail(res, "gradient", t("judge.no_grad", name=key)), limits
            if tuple(sg.shape) != tuple(tg.shape):
                return _fail(res, "gradient", t("judge.grad_shape", name=key, got=list(sg.shape),
                                                want=list(tg.shape))), limits
            cmp = compare(sg, tg, _runs(low, key, grads=True), tol_dtype or _tol_dtype(case), grad=True,
                          rtol=case.rtol, scale=scale)
            limits["grad " + key] = cmp
            gworst = _worse(gworst, (key, cmp, sg, tg))
        if gworst is not None and not gworst[1]["ok"]:
            key, cmp, sg, tg = gworst
            res.status, res.gradient = FAIL, FAIL
            res.tensor, res.compare = f"grad {key}", cmp
            res.max_error, res.allowed = cmp["max_abs"], cmp["allowed_abs"]
            res.message = _cmp_message(t("judge.gradient_of", name=key), cmp)
            axes = ("row", "col") if "param" in key else case.axes
            res.detail = detail(sg, tg, cmp, axes if "param" not in key else ("out feature", "in feature"))
            return res, limits
    # -- op-trace rules
    for i, rule in enumerate(case.trace if rules else ()):
        msg = rule.verdict(sub, case)
        if msg:
            res.tensor = f"{PROPERTY_TRACE} {i}"
            return _fail(res, "forward", msg), limits
    return res, limits


def judge(case: Case, truth: Side, low: Side | None, side: Side, spec, rules: bool = True,
          tol_dtype=None) -> tuple[CaseResult, dict]:
    """The whole verdict on one side of a case: outputs, input gradients, trace rules (unless `rules`
    is off: a side run without the tracer), parameter gradients. `tol_dtype` judges by another
    dtype's rule (a float64 case at float32's, with `low` the reference in float32)."""
    res, limits = _judge(case, truth, low, side, spec, rules, tol_dtype)
    if res.status == PASS and case.grad and case.init is not None:
        res = _judge_param_grads(res, case, truth, low, side, limits, tol_dtype)
    return res, limits


def _worse(current, candidate):
    """Of two (name, compare, got, truth) tuples, the one to report: a failure first, then the larger
    error relative to what was allowed."""
    if current is None:
        return candidate
    def key(item):
        cmp = item[1]
        return (not cmp["ok"], cmp["max_abs"] / (cmp["allowed_abs"] + 1e-300))
    return candidate if key(candidate) > key(current) else current


def _judge_param_grads(res: CaseResult, case: Case, truth: Side, low: Side | None, sub: Side, limits,
                       tol_dtype=None) -> CaseResult:
    """Gradients of parameters, compared in the submission's layout (merged or separate projections)."""
    mapping = sub.mapping or {}
    t_by_ref = {k[len("param "):]: v for k, v in truth.grads.items() if k.startswith("param ") and v is not None}
    lows = [] if low is None else [low] + list(getattr(low, "others", ()))
    scale = case_scale(t_by_ref.values())
    worst = None
    for sub_name, plan in mapping.items():
        try:
            tg = apply(plan, t_by_ref)
        except (KeyError, ValueError, TypeError, IndexError, RuntimeError):
            continue
        lg = []
        for side in lows:
            # frozen parameters (LoRA's base weights) have no gradient: a plan that needs one fails alone
            by_ref = {k[len("param "):]: v for k, v in side.grads.items() if k.startswith("param ") and v is not None}
            try:
                lg.append(apply(plan, by_ref))
            except (KeyError, ValueError, TypeError, IndexError, RuntimeError):
                pass
        sg = sub.grads.get(f"param {sub_name}")
        if sg is None:               # the reference's has a gradient; this one has none (frozen, detached...)
            return _fail(res, "gradient", t("judge.no_param_grad", name=sub_name))
        if not isinstance(tg, torch.Tensor) or not isinstance(sg, torch.Tensor) or sg.shape != tg.shape:
            got = tuple(sg.shape) if isinstance(sg, torch.Tensor) else type(sg).__name__
            want = tuple(tg.shape) if isinstance(tg, torch.Tensor) else type(tg).__name__
            return _fail(res, "gradient", t("judge.grad_shape", name=f"param {sub_name}", got=got, want=want))
        cmp = compare(sg, tg, lg, tol_dtype or _tol_dtype(case), grad=True, rtol=case.rtol, scale=scale)
        limits["grad param " + sub_name] = cmp
        worst = _worse(worst, (sub_name, cmp, sg, tg))
    # the room sends the mapping: a reference parameter no plan reads would go unchecked (adapt() maps
    # every one of them, or the case is an interface error)
    covered = {n for plan in mapping.values() for n in _plan_names(plan)}
    missing = sorted(set(t_by_ref) - covered)
    if missing:
        return _fail(res, "gradient", t("judge.param_unmapped", name=missing[0]))
    if worst is not None and not worst[1]["ok"]:
        name, cmp, sg, tg = worst
        res.status, res.gradient = FAIL, FAIL
        res.tensor, res.compare = f"grad param {name}", cmp
        res.max_error, res.allowed = cmp["max_abs"], cmp["allowed_abs"]
        res.message = _cmp_message(t("judge.gradient_of_param", name=name), cmp)
        res.detail = detail(sg, tg, cmp, ("out feature", "in feature"))
    return res


def _plan_names(plan) -> list[str]:
    """The reference parameters a (well-formed) plan reads."""
    if isinstance(plan, (list, tuple)) and len(plan) >= 2:
        if plan[0] in ("copy", "slice") and isinstance(plan[1], str):
            return [plan[1]]
        if plan[0] == "cat" and isinstance(plan[1], (list, tuple)):
            return [n for n in plan[1] if isinstance(n, str)]
    return []


def stub_message(problem: UserProblem) -> str:
    if problem.unwritten and problem.frames:
        fr = problem.frames[-1]
        return t("judge.not_written", file=fr.file, line=fr.line, func=fr.func)
    return problem.message


def _runs(low: Side | None, name: str, grads: bool = False) -> list:
    """The reference's value of `name` in the case dtype, from every low-precision run there is."""
    if low is None:
        return []
    out = []
    for side in [low] + list(getattr(low, "others", ())):
        v = side.grads.get(name) if grads else dict(side.outs).get(name)
        if isinstance(v, torch.Tensor):
            out.append(v)
    return out


def _tol_dtype(case: Case):
    """Tolerances follow the precision the math really ran in: the autocast dtype when there is one."""
    return case.autocast or case.dtype


def _fail(res: CaseResult, where: str, message: str) -> CaseResult:
    res.status = FAIL
    setattr(res, where, FAIL)
    res.message = message
    return res


def _cmp_message(name: str, cmp: dict) -> str:
    if cmp["nonfinite"]:
        return t("cmp.nonfinite", name=name, n=cmp["nonfinite"], at=index(cmp["nonfinite_index"]))
    share = 100.0 * cmp["mismatched"] / max(cmp["total"], 1)
    if cmp["mismatched"] == 0:
        return t("cmp.off_as_whole", name=name, relnorm=f"{cmp['relnorm']:.3g}", gate=f"{cmp['gate']:.3g}")
    return t("cmp.differs", name=name, bad=cmp["mismatched"], total=cmp["total"], share=f"{share:.1f}",
             worst=f"{cmp['max_abs']:.3g}", at=index(cmp["max_abs_index"]), allowed=f"{cmp['allowed_abs']:.2g}",
             rtol=f"{cmp['rtol']:.2g}")


# ---------------------------------------------------------------- the whole grading
def report_verdict(r: Report) -> None:
    """The report's status and one-line message from its cases, findings and problems."""
    if r.status == ERROR and r.problem_error:
        return
    failed = [c for c in r.cases if c.status in (FAIL, ERROR)]
    forbidden = [f for f in r.findings if f["line"]]
    missing = [f for f in r.findings if not f["line"]]
    first = r.first_failure()
    if r.problem_error and (not r.cases or r.problem_error.kind in ("timeout", "crash", "runner")):
        r.status = FAIL if r.problem_error.kind in ("timeout", "crash", "runner", "memory") else ERROR
        r.message = r.problem_error.message
    elif first is not None and first.status == ERROR and first.problem:
        r.status, r.problem_error = ERROR, first.problem
        r.message = first.problem.message
    elif failed or forbidden or missing:
        r.status = FAIL
        ran = [c for c in r.cases if c.status != SKIP]
        parts = []
        if failed:
            parts.append(t("report.cases_failed", failed=len(failed), ran=len(ran)))
        if forbidden:
            parts.append(t("report.forbidden", name=forbidden[0]["name"], line=forbidden[0]["line"]))
        if missing:
            parts.append(missing[0]["message"])
        r.message = "; ".join(parts)
    else:
        r.status = PASS
        skipped = [c for c in r.cases if c.status == SKIP]
        n = len(r.cases) - len(skipped)
        r.message = tn(r.passed_key(), n) + (tn("report.skipped", len(skipped)) if skipped else "")
        r.replay = ""
