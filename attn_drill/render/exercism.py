"""Machine-readable reports: the exercism test-runner format (version 3) with attn-drill's numbers."""
from __future__ import annotations

from ..i18n import pick, t
from ..rules import replay
from ..results import ERROR, FAIL, PASS, SKIP, Report


def _named(r: Report) -> dict | None:
    """The mistake (or symptom) the report names, with its words: id, title, explanation."""
    from .report import mistake_title
    d = r.diagnosis or r.symptom
    if d is None:
        return None
    return {"id": d.mistake, "kind": "mistake" if r.diagnosis else "symptom",
            "title": mistake_title(r.problem, d.mistake), "explanation": pick(d.en, d.zh)}


def exercism(r: Report) -> dict:
    """The exercism test-runner format, version 3, plus per-case numbers under `attn_drill`."""
    tests = []
    # the format knows pass, fail and error: a skipped case is not in `tests`, it is listed under
    # attn_drill.skipped with its reason (never counted as passed)
    skipped = [{"name": c.name, "reason": c.message} for c in r.cases if c.status == SKIP]
    for c in r.cases:
        if c.status == SKIP:
            continue
        status = {PASS: "pass", FAIL: "fail", ERROR: "error"}[c.status]
        msg = c.message or None
        if c.diagnosis:
            msg = f"{msg} {t('report.looks_like')}: {c.diagnosis.mistake}: {pick(c.diagnosis.en, c.diagnosis.zh)}"
        tests.append({
            "name": c.name, "status": status, "message": msg if status != "pass" else None,
            "output": None, "test_code": replay(r.problem, r.where, r.seed, r.full, c.name),
            "task_id": None,
            "attn_drill": {"shapes": c.shapes, "dtype": c.dtype, "note": c.note, "seed": r.seed,
                           "forward": c.forward, "gradient": c.gradient, "tensor": c.tensor or None,
                           "max_error": c.max_error, "allowed": c.allowed, "time_ms": round(c.time_ms, 3),
                           "mismatched": c.compare["mismatched"] if c.compare else None,
                           "total": c.compare["total"] if c.compare else None,
                           "diagnosis": c.diagnosis.mistake if c.diagnosis else None,
                           "float32_level_error": c.float32_level_error, "float64_bound": c.float64_bound},
        })
    from .report import summary_line
    message = None
    if r.status != PASS:
        message = summary_line(r)
        if r.problem_error:
            fr = r.problem_error.frames[-1] if r.problem_error.frames else None
            message = r.problem_error.message + (f" ({fr.file}:{fr.line})" if fr else "")
    return {
        "version": 3, "status": r.status, "message": message,
        "tests": tests,
        "attn_drill": {"problem": r.problem, "file": r.file, "seed": r.seed, "full": r.full,
                       "seconds": round(r.seconds, 3), "replay": r.replay or None,
                       "diagnosis": r.diagnosis.mistake if r.diagnosis else None,
                       "symptom": r.symptom.mistake if r.symptom else None,
                       "named": _named(r),
                       "skipped": skipped,
                       "findings": r.findings, "warnings": r.warnings,
                       "output": (r.output[:500] or None)},
    }
