"""The grading engine: runs one file against one problem's cases and returns a Report.

It runs inside the worker process (torch is imported here, never on the path of `list`).
Per case it builds three sides with the same parameters and inputs:
  truth     the reference in float64, on the case's inputs and parameters rounded to the case dtype
  ref_low   the reference in the case dtype (measures what that dtype costs by itself)
  sub       the submission in the case dtype, run under guards, a capture and an op tracer
and compares outputs, then gradients under a random upstream gradient.
"""
from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path

import torch

from . import bank, source
from .api import Case, Ctx, Failure, case_seed
from .compare import weights_detail
from .judge import GraderBug, judge, mutant_match, stub_message
from .results import ERROR, FAIL, PASS, SKIP, CaseResult, Diagnosis, Frame, Report, UserProblem
from .sides import Prepared, run_side
from .usercode import FORBIDDEN_OPS, Session, UserProblemError, load_module, load_source


@contextlib.contextmanager
def _isolated_globals():
    """Whatever a submission does to torch's global state or sys.modules ends with its grading."""
    saved = (torch.get_default_dtype(), torch.is_grad_enabled(), torch.get_num_threads(),
             torch.are_deterministic_algorithms_enabled())
    modules = set(sys.modules)
    try:
        yield
    finally:
        torch.set_default_dtype(saved[0])
        torch.set_grad_enabled(saved[1])
        if torch.get_num_threads() != saved[2]:
            torch.set_num_threads(saved[2])
        if torch.are_deterministic_algorithms_enabled() != saved[3]:  # the setter imports inductor: seconds
            torch.use_deterministic_algorithms(saved[3])
        for name in set(sys.modules) - modules:
            if name.startswith("attn_drill_"):
                del sys.modules[name]


def grade(problem: str, path: str, seed: int = 0, full: bool = False, only_case: str | None = None,
          fail_fast: bool = False, diagnose: bool = True) -> Report:
    """Grade one file against one problem; never raises for anything the file does."""
    with _isolated_globals():
        return _grade(problem, path, seed, full, only_case, fail_fast, diagnose)


def _grade(problem: str, path: str, seed: int, full: bool, only_case: str | None, fail_fast: bool,
           diagnose: bool) -> Report:
    t_start = time.perf_counter()
    spec = bank.get(problem)
    path = str(Path(path).resolve())
    report = Report(problem, path, seed, full=full)
    report.replay = f"attn-drill check {problem} {_shown(path)} --seed {seed}" + (" --full" if full else "")
    # -- static: syntax and API scan
    try:
        src = source.read(Path(path))
    except (UnicodeDecodeError, OSError) as exc:
        report.status = ERROR
        why = "is not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else f"cannot be read ({exc.strerror})"
        report.problem_error = UserProblem("syntax", f"{Path(path).name} {why}")
        report.message = f"your file {why}: save it as a UTF-8 Python file"
        return _finish(report, t_start)
    err = source.syntax_error(src, path)
    if err:
        report.status = ERROR
        report.problem_error = UserProblem("syntax", f"SyntaxError: {err['message']}",
                                           [Frame(Path(path).name, err["line"], "<module>", err["text"].strip())])
        report.message = f"your file does not parse: line {err['line']}: {err['message']}"
        return _finish(report, t_start)
    report.findings = [f.__dict__ for f in source.scan(src, spec)]
    session = Session(path, spec.all_forbidden)
    try:
        sub_mod = load_module(path, session, "submission")
    except UserProblemError as exc:
        report.status, report.problem_error = ERROR, exc.problem
        report.message = exc.problem.message
        report.output = session.stdout.getvalue()
        return _finish(report, t_start)
    torch.set_default_dtype(torch.float32)   # undo what the file may have set at import time
    torch.set_grad_enabled(True)
    ref_mod = load_module(str(bank.reference_path(problem)), None, "reference")
    grader = load_module(str(bank.grader_path(problem)), None, "grader")
    ctx = Ctx(seed, full=full, settings=spec.settings)
    all_cases = grader.cases(ctx)
    names = [c.name for c in all_cases]
    if len(set(names)) != len(names):
        raise GraderBug(f"graders/{problem}.py: two cases share a name")
    if only_case is not None:
        all_cases = [c for c in all_cases if c.name == only_case]
        if not all_cases:
            raise KeyError(f"no case '{only_case}' for {problem} with seed {seed}"
                           f"{'' if full else ' (try --full)'}; cases: {', '.join(names)}")
    mutant_mods = None
    for case in all_cases:
        case.seed = case_seed(seed, case.name)
        if case.device == "cuda" and not torch.cuda.is_available():
            report.cases.append(CaseResult(case.name, SKIP, case.shapes(), str(case.dtype).replace("torch.", ""),
                                           case.note, message=case.cuda_reason + "; this machine has no CUDA"))
            continue
        if case.is_check:
            res = _run_check(case, sub_mod, ref_mod, session, spec)
        else:
            prep = Prepared(case, ref_mod)
            truth = run_side(ref_mod, prep, truth=True, session=None, trace=False, repeat=False)
            low = None if case.dtype == torch.float64 and case.autocast is None else \
                run_side(ref_mod, prep, truth=False, session=None, trace=False, repeat=False)
            sub = run_side(sub_mod, prep, truth=False, session=session, trace=True, repeat=True)
            forb = [o.name for o in sub.ops if any(f in o.name for f in FORBIDDEN_OPS)]
            if forb and "scaled_dot_product_attention" in spec.all_forbidden and not sub.problem:
                sub.problem = UserProblem("forbidden", f"your code ran {forb[0]}, a fused attention kernel this "
                                                       f"problem forbids: write it by hand")
            res, limits = judge(case, truth, low, sub, spec)
            if res.forward == FAIL and res.detail is not None and sub.weights is not None:
                # only now trace the reference too, to compare the attention weights over (query, key)
                traced = run_side(ref_mod, prep, truth=True, session=None, trace=True, repeat=False)
                if traced.weights is not None and traced.weights.shape == sub.weights.shape:
                    res.detail["weights"] = weights_detail(sub.weights, traced.weights)
            if sub.adapted and sub.adapted not in report.warnings:
                report.warnings.append(sub.adapted)
            first_failure = report.first_failure() is None
            if res.status == FAIL and diagnose and not sub.problem and first_failure:
                if mutant_mods is None:
                    mutant_mods = _mutants(spec, ref_mod)
                best = None
                for mid, mmod in mutant_mods.items():
                    if mmod is None:
                        continue
                    try:
                        mut = run_side(mmod, prep, truth=False, session=None, trace=True, repeat=False)
                    except Exception:  # noqa: BLE001 - a mutant that crashes here cannot be the match
                        continue
                    if mut.problem:
                        continue
                    mres = judge(case, truth, low, mut, spec)[0]
                    if mres.status == PASS:
                        continue  # a mutant that is right on this case names nothing here
                    if res.tensor.startswith("trace rule") and mres.tensor != res.tensor:
                        continue  # the submission broke an op rule: only a mutant breaking the same one
                    score = mutant_match(sub, mut, limits)
                    if score is not None and (best is None or score < best[0]):
                        best = (score, mid)
                if best:
                    m = spec.mistake(best[1])
                    res.diagnosis = Diagnosis(m.id, m.diagnosis.en, m.diagnosis.zh)
        report.cases.append(res)
        if res.diagnosis and report.diagnosis is None:
            report.diagnosis = res.diagnosis
        if res.status in (FAIL, ERROR):
            if "--case" not in report.replay:
                report.replay = (f"attn-drill check {problem} {_shown(path)} --seed {seed} --case {res.name}"
                                 + (" --full" if full else ""))
            stub = res.message.startswith("not written yet")
            if fail_fast or res.status == ERROR or stub:
                break
    report.output = session.stdout.getvalue()
    report.warnings += session.warnings
    failed = [c for c in report.cases if c.status in (FAIL, ERROR)]
    forbidden = [f for f in report.findings if f["line"]]
    missing = [f for f in report.findings if not f["line"]]
    first = report.first_failure()
    if first is not None and first.status == ERROR and first.problem:
        report.status, report.problem_error = ERROR, first.problem
        report.message = first.problem.message
    elif failed or forbidden or missing:
        report.status = FAIL
        ran = [c for c in report.cases if c.status != SKIP]
        parts = []
        if failed:
            parts.append(f"{len(failed)} of {len(ran)} case(s) failed")
        if forbidden:
            parts.append(f"uses forbidden `{forbidden[0]['name']}` (line {forbidden[0]['line']})")
        if missing:
            parts.append(missing[0]["message"])
        report.message = "; ".join(parts)
    else:
        report.status = PASS
        skipped = [c for c in report.cases if c.status == SKIP]
        report.message = f"all {len(report.cases) - len(skipped)} cases passed" + (
            f" ({len(skipped)} skipped: {skipped[0].message})" if skipped else "")
        report.replay = ""
    return _finish(report, t_start)


def _shown(path: str) -> str:
    try:
        return str(Path(path).relative_to(Path.cwd()))
    except ValueError:
        return path


def _finish(report: Report, t_start: float) -> Report:
    report.seconds = time.perf_counter() - t_start
    return report


def _mutants(spec, ref_mod) -> dict:
    ref_src = source.read(bank.reference_path(spec.id))
    out = {}
    for m in spec.mistakes:
        try:
            out[m.id] = load_source(source.mutant_source(spec, ref_src, m.id), f"mutant_{m.id}")
        except Exception:  # noqa: BLE001 - a broken mutant is reported by verify, not here
            out[m.id] = None
    return out


def _run_check(case: Case, sub_mod, ref_mod, session: Session, spec) -> CaseResult:
    res = CaseResult(case.name, PASS, case.shapes(), str(case.dtype).replace("torch.", ""), case.note,
                     forward=PASS)
    t0 = time.perf_counter()
    try:
        with session.user():
            torch.manual_seed(case.seed)
            failures = list(case.check(sub_mod, ref_mod, case) or [])
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001
        prob = session.problem(exc)
        res.status, res.forward, res.problem, res.message = FAIL, FAIL, prob, stub_message(prob)
        res.time_ms = (time.perf_counter() - t0) * 1000
        return res
    res.time_ms = (time.perf_counter() - t0) * 1000
    failures = [f if isinstance(f, Failure) else Failure(str(f)) for f in failures]
    if failures:
        res.status, res.forward = FAIL, FAIL
        res.checks = [f.message for f in failures]
        res.message = failures[0].message
        named = next((f.mistake for f in failures if f.mistake), None)
        m = spec.mistake(named) if named else None
        if m:
            res.diagnosis = Diagnosis(m.id, m.diagnosis.en, m.diagnosis.zh)
    return res
