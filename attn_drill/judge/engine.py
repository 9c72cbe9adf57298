"""The grading engine: runs in the judge process and returns a Report. It never executes the
submission: that happens in a room (attn_drill.room), which gets each case as data and sends back
outputs, gradients and the ops it ran.

This module is the orchestration only: vet the file (attn_drill.bank.sources), build the cases
(the grader), send each case to the room one case ahead while the judge prepares the next
(attn_drill.judge.prepare: the reference's sides), judge what comes back (verdicts, with the
precision rule of precision.py), name the first failure (mistakes.py, then symptoms.py), and
give the whole grading its verdict.
"""
from __future__ import annotations

import contextlib
import dataclasses
import time
from pathlib import Path

import torch

from .. import rules
from ..bank import policy, sources
from ..bank.api import Case, Ctx, Failure, case_seed
from ..errors import GraderBug, UsageError
from ..i18n import lang, t
from ..results import ERROR, FAIL, PASS, SKIP, CaseResult, Diagnosis, Report, printable
from ..room.side import Side
from . import precision, symptoms, untrusted
from .compare import weights_detail
from .mistakes import Mistakes
from .prepare import LazyObs, Prepared, ProblemFiles, problem_files, reference_sides
from .rooms import RoomFailure, Zygote
from .verdicts import judge, property_failure, report_verdict, stub_message


class Target:
    """Where the file to grade is, as the judge sees it and as its room sees it."""

    def __init__(self, path: str, room_path: str | None = None, hidden=(), writable=None, shown: str | None = None,
                 typed: str | None = None):
        self.path = str(Path(path).resolve())
        self.room_path = room_path or self.path
        self.hidden = list(hidden)
        self.writable = writable
        self.shown = shown
        self.typed = typed        # the path as the user typed it for the replay command; "": the default ./<id>.py

    def where(self) -> str:
        """The file as the replay command names it."""
        if self.typed is not None:
            return self.typed
        if self.shown:
            return self.shown
        try:
            return str(Path(self.path).relative_to(Path.cwd()))
        except ValueError:
            return self.path


@dataclasses.dataclass
class CaseRun:
    """One case of a grading, from the judge's preparation to its verdict."""
    case: Case
    skip: bool = False                  # a CUDA case on a machine without CUDA
    prep: Prepared | None = None
    truth: Side | None = None           # the reference in float64 (not for check cases)
    low: Side | None = None             # the reference in the case dtype
    ticket: int | None = None           # the room's reply to this case, when it comes
    sub: Side | None = None             # the submission's side
    limits: dict = dataclasses.field(default_factory=dict)   # what compare() allowed, per tensor
    result: CaseResult | None = None
    rss: int | None = None              # a measured case: the room's resident memory before it ran


@contextlib.contextmanager
def _judge_globals():
    """The references and graders run here: keep torch's global state as they expect it."""
    saved = (torch.get_default_dtype(), torch.is_grad_enabled())
    torch.set_default_dtype(torch.float32)
    torch.set_grad_enabled(True)
    try:
        yield
    finally:
        torch.set_default_dtype(saved[0])
        torch.set_grad_enabled(saved[1])


def grade(problem: str, target: Target | str, rooms: Zygote, seed: int = 0, full: bool = False,
          only_case: str | None = None, fail_fast: bool = False, diagnose: bool = True,
          time_limit: float | None = None, cancel_fd: int | None = None) -> Report:
    """Grade one file against one problem; never raises for anything the file does."""
    if isinstance(target, str):
        target = Target(target)
    with _judge_globals():
        return Grading(problem, target, rooms, seed, full, only_case, fail_fast, diagnose, time_limit,
                       cancel_fd).run()


class Grading:
    def __init__(self, problem, target: Target, rooms, seed, full, only_case, fail_fast, diagnose, time_limit,
                 cancel_fd):
        from .. import bank
        self.spec = bank.get(problem)
        self.problem, self.target, self.rooms = problem, target, rooms
        self.seed, self.full, self.only_case = seed, full, only_case
        self.fail_fast, self.diagnose = fail_fast, diagnose
        self.time_limit = rules.time_limit(self.spec, full, time_limit)
        self.cancel_fd = cancel_fd
        # the file's name is the user's text, shown on terminals and in reports: made printable
        self.report = Report(problem, printable(target.shown or target.path), seed, full=full,
                             where=printable(target.where()))
        self.room = None
        self.room_cases = 0
        self._earlier_output = ""         # what rooms closed before this one printed
        self._earlier_seconds = 0.0       # and the time they used (one time limit for the whole grading)
        self.base_rss: int | None = None  # a fresh room's resident memory before the submission loaded
        self.files: ProblemFiles | None = None
        self.mistakes: Mistakes | None = None
        self.runs: list[CaseRun] = []     # in order
        self.named = None                 # (mistake id, case) when a mutant named the first failure
        self.first_evidence = None        # (case, output, truth, (weights, reference weights, used), bound)

    def run(self) -> Report:
        t_start = time.perf_counter()
        r = self.report
        r.replay = self._replay()
        try:
            if self._static():
                cases = self._cases()
                self._in_room(cases)
        finally:
            if self.room is not None:
                r.output = self._earlier_output + self.room.output
                r.warnings += [w for w in self.room.warnings if w not in r.warnings]
                self.room.close()
        report_verdict(r)
        r.seconds = time.perf_counter() - t_start
        return r

    def _replay(self, case: str | None = None) -> str:
        return rules.replay(self.problem, self.target.where(), self.seed, self.full, case)

    # ------------------------------------------------------------ before any code runs
    def _static(self) -> bool:
        """Read, parse and vet the file here, in the judge: True when it may run."""
        r = self.report
        self.vetting = v = sources.vet_tree(Path(self.target.path), self.spec, load=True)
        if v.problem is not None:
            r.status, r.problem_error, r.message = ERROR, v.problem, v.message
            return False
        found = v.findings if v.findings is not None else sources.scan(v.src, self.spec, v.tree)
        r.findings = [f.__dict__ for f in found]
        self.preload = policy.imported_modules(v.src, v.tree, self.spec.imports)
        return True

    def _cases(self) -> list[Case]:
        self.files = files = problem_files(self.problem)
        self.key = files.key(self.seed, self.full)
        self.mistakes = Mistakes(self.spec, self.key, files.probes, self._judged)
        all_cases = files.grader.cases(Ctx(self.seed, full=self.full, settings=self.spec.settings))
        names = [c.name for c in all_cases]
        if len(set(names)) != len(names):
            raise GraderBug(f"graders/{self.problem}.py: two cases share a name")
        for c in all_cases:
            if c.full_float64 and c.dtype != torch.float64:
                raise GraderBug(f"graders/{self.problem}.py: case {c.name} has full_float64 but is not float64")
            c.full_float64 = c.full_float64 or (self.spec.full_float64 and c.dtype == torch.float64)
            half = c.dtype in (torch.bfloat16, torch.float16)
            if c.float32_outputs and not (half and set(c.float32_outputs) <= set(c.output_names or ())):
                raise GraderBug(f"graders/{self.problem}.py: case {c.name}: float32_outputs must name outputs "
                                f"of a bfloat16/float16 case")
        if self.only_case is not None:
            all_cases = [c for c in all_cases if c.name == self.only_case]
            if not all_cases:
                raise UsageError(t("engine.no_case", case=self.only_case, id=self.problem, seed=self.seed,
                                   full="" if self.full else t("engine.try_full"), names=", ".join(names)))
        return all_cases

    # ------------------------------------------------------------ in the room
    def _open_room(self, fresh: bool = False) -> bool:
        """A room with the submission loaded in it; False when it could not load (the report says why).
        A room opened for a measured case (`fresh`) has its peak reset before the load, so the case's
        peak counts all the submission holds: what it allocates at import or in earlier calls too."""
        r = self.report
        if self.room is not None:                 # what the earlier room ran: its output, its time
            self._earlier_output += self.room.output
            r.warnings += [w for w in self.room.warnings if w not in r.warnings]
            self._earlier_seconds += self.room.used
            self.room.close()
        probe_source = self.files.probe_source
        preload = self.preload + (policy.imported_modules(probe_source) if probe_source else [])
        self.room = self.rooms.open(preload=preload)
        self.room_cases = 0                       # cases sent to this room
        self.room.budget = self.time_limit - self._earlier_seconds
        self.room.path = self.target.room_path
        self.room.cancel_fd = self.cancel_fd
        self.base_rss = self.room.memory(reset=True)["rss"] if fresh else None
        try:
            problem = untrusted.loaded(self.room.call(load_request(
                self.spec, self.vetting, self.target.room_path, probe_source, self.target.hidden,
                self.target.writable, self.room.budget, measured=fresh)))
        except RoomFailure as exc:
            r.status, r.problem_error, r.message = FAIL, exc.problem, exc.problem.message
            return False
        except untrusted.Unreadable as exc:
            problem = untrusted.problem({"kind": "runner", "message": str(exc)})
        if problem is not None:
            r.status, r.problem_error, r.message = ERROR, problem, problem.message
            return False
        return True

    def _in_room(self, cases: list[Case]) -> None:
        r = self.report
        if not self._open_room(fresh=bool(cases) and cases[0].measured):
            return
        # one case ahead: while the room runs case i, the judge prepares case i + 1 (its float64
        # truth, its reference in the case dtype) and sends it
        # (a case that runs alone, fresh or measured, is sent to a room opened for it, with nothing ahead of it)
        ahead = self._start(cases[0]) if cases else None
        for i, case in enumerate(cases):
            run, ahead = ahead, None
            try:
                run = run or self._start(case)
                if i + 1 < len(cases) and not case.alone and not cases[i + 1].alone:
                    ahead = self._start(cases[i + 1])
                res = self._finish(run)
            except RoomFailure as exc:
                res = CaseResult(case.name, FAIL, case.shapes(), _dtype_name(case.dtype), case.note, forward=FAIL,
                                 problem=exc.problem, message=exc.problem.message)
                r.cases.append(res)
                r.problem_error = exc.problem
                r.replay = self._replay(case.name)
                break
            run.result = res
            r.cases.append(res)
            self.runs.append(run)
            if res.warning and not any(res.warning.split(" (")[0] in w for w in r.warnings):
                r.warnings.append(f"{res.name}: {res.warning}")
            if res.diagnosis and r.diagnosis is None:
                r.diagnosis = res.diagnosis
            if res.status in (FAIL, ERROR):
                if "--case" not in r.replay:
                    r.replay = self._replay(res.name)
                stub = bool(res.problem and res.problem.unwritten)
                if (self.fail_fast and not self.mistakes.ambiguous) or res.status == ERROR or stub:
                    break
        self._explain()

    def _explain(self) -> None:
        """After the cases: keep a mutant's name only if it fits every case that ran; without a name,
        the symptom rules (attn_drill.judge.symptoms) say what the failures have in common."""
        r = self.report
        if r.diagnosis is not None and self.named is not None and (not self.fail_fast or self.mistakes.ambiguous):
            keep = self.mistakes.choose(*self.named, self.runs)
            if keep != r.diagnosis.mistake:
                d = None if keep is None else self.mistakes.diagnosis(keep)
                for c in r.cases:
                    if c.diagnosis and c.diagnosis.mistake == r.diagnosis.mistake:
                        c.diagnosis = d
                r.diagnosis = d
        if r.diagnosis is None and r.first_failure() is not None and self.mistakes is not None:
            decided = self.mistakes.decide(self.runs)    # two kinds fitted the first failure: told apart now
            if decided is not None:
                r.diagnosis, named_case = decided
                for c in r.cases:
                    if c.name == named_case:
                        c.diagnosis = r.diagnosis
        if r.diagnosis is not None or r.first_failure() is None:
            return
        if any(property_failure(run.result) for run in self.runs):
            return        # a rule of how the code ran was broken: its own message says what, a pattern would not
        sym = symptoms.explain(self.first_evidence, [(run.result, run.case) for run in self.runs])
        if sym is not None:
            r.symptom = Diagnosis(sym.id, sym.en, sym.zh)

    def _start(self, case: Case) -> CaseRun:
        """The judge's share of a case before the room's: the sides it computes, then the request."""
        case.seed = case_seed(self.seed, case.name)
        if case.device == "cuda" and not torch.cuda.is_available():
            return CaseRun(case, skip=True)
        run = CaseRun(case)
        if case.is_check:
            run.prep = Prepared(case, self.files.ref_mod, check=True)
        else:
            sides = reference_sides(self.files, self.key, case)
            run.prep, run.truth, run.low = sides.prep, sides.truth, sides.low
        if case.alone and (self.room_cases or (case.measured and self.base_rss is None)):
            # in a room of its own, opened for it (a measured one: its peak counts from before the load)
            if not self._open_room(fresh=case.measured):
                raise RoomFailure(self.report.problem_error)
        if case.measured:
            run.rss, self.base_rss = self.base_rss, None
        self.room.limit = max(self.room.limit if self.room.in_flight else 0, _reply_bytes(run))
        self.room_cases += 1
        run.ticket = self.room.submit({"op": "case", "data": run.prep.low.to_wire(), "trace": _traced(case),
                                       "repeat": True})
        return run

    def _finish(self, run: CaseRun) -> CaseResult:
        case = run.case
        if run.skip:
            return CaseResult(case.name, SKIP, case.shapes(), _dtype_name(case.dtype), case.note,
                              message=t("engine.no_cuda", reason=case.cuda_reason))
        run.sub = untrusted.side(self.room.result(run.ticket))
        if case.measured:                        # measured by the kernel, read outside the room
            hwm = self.room.memory()["hwm"]
            run.sub.peak_bytes = max(0, hwm - run.rss) if hwm is not None and run.rss is not None else None
            if run.sub.peak_bytes is None and t("engine.no_peak") not in self.report.warnings:
                self.report.warnings.append(t("engine.no_peak"))
        return self._check_case(run) if case.is_check else self._case(run)

    def _judged(self, case: Case, prep, truth, low, side, rules: bool = True):
        """judge(), then the precision rule for float64 cases."""
        res, limits = judge(case, truth, low, side, self.spec, rules=rules)
        if precision.applies(case, side):
            res, limits = precision.apply(res, limits, case, prep, truth, side, self.files, self.key)
        return res, limits

    def _case(self, run: CaseRun) -> CaseResult:
        case, prep, truth, low, sub = run.case, run.prep, run.truth, run.low, run.sub
        res, run.limits = self._judged(case, prep, truth, low, sub)
        first = res.status == FAIL and self.first_evidence is None and not case.is_check  # evidence for symptoms
        weights = None
        if res.forward == FAIL and first and (res.detail is not None or sub.problem is None):
            # only now trace both sides, to compare the attention weights over (query, key)
            seen = sub if _traced(case) else untrusted.side(self.room.call(
                {"op": "case", "data": prep.low.to_wire(), "trace": True, "repeat": False}))
            w_sub = seen.weights
            traced = self.files.run(prep.truth, trace=True)
            if w_sub is not None and traced.weights is not None and traced.weights.shape == w_sub.shape \
                    and w_sub.numel() > 0:    # a first softmax over nothing (no compressed block yet) shows nothing
                weights = (w_sub, traced.weights, seen.weights_used is not False)
                if res.detail is not None:
                    res.detail["weights"] = weights_detail(w_sub, traced.weights)
        if first and not sub.problem:
            name = res.tensor if res.tensor in dict(sub.outs) else (sub.outs[0][0] if sub.outs else None)
            got, want = dict(sub.outs).get(name), dict(truth.outs).get(name)
            bound = (res.compare or {}).get("allowed_abs", 1e-6)
            self.first_evidence = (case, got, want, weights, bound) if isinstance(got, torch.Tensor) and \
                isinstance(want, torch.Tensor) else (case, None, None, weights, bound)
        if sub.adapted and sub.adapted not in self.report.warnings:
            self.report.warnings.append(sub.adapted)
        # (a measured case is named by nothing run here: a mutant run in the judge has no measured peak)
        if res.status == FAIL and self.diagnose and self.report.first_failure() is None and not case.measured and \
                (not sub.problem or sub.problem.kind == "exception"):
            res.diagnosis = self.mistakes.name(case, prep, truth, low, sub, res, run.limits)
            if res.diagnosis is not None:
                self.named = (res.diagnosis.mistake, case.name)
        return res

    def _check_case(self, run: CaseRun) -> CaseResult:
        case, prep, sub = run.case, run.prep, run.sub
        res = CaseResult(case.name, PASS, case.shapes(), _dtype_name(case.dtype), case.note, forward=PASS)

        def ref_side(data):
            return lambda: self.files.run(data).obs
        ref = LazyObs(ref_side(prep.low))      # most checks read only the submission's observation
        case.truth_obs = ref if case.dtype == torch.float64 else LazyObs(ref_side(prep.truth))
        res.time_ms = sub.seconds * 1000
        if sub.problem:
            res.status, res.forward, res.problem, res.message = FAIL, FAIL, sub.problem, stub_message(sub.problem)
            if sub.problem.kind in ("missing", "interface"):
                res.status = ERROR
            return res
        def check(obs) -> list:
            try:
                return list(case.check(obs, ref, case) or [])
            except Exception as exc:  # noqa: BLE001 - the observation comes from untrusted code
                return [t("engine.uncheckable", error=f"{type(exc).__name__}: {exc}")]

        def said(failures) -> list[str]:
            return [f.message if isinstance(f, Failure) else str(f) for f in failures]
        failures = check(sub.obs)
        checked = said(failures)              # what the check says of it: a known mistake must say the same
        for rule in case.trace:
            msg = rule.verdict(sub, case)
            if msg:
                failures.append(msg)
        failures = [f if isinstance(f, Failure) else Failure(str(f)) for f in failures]
        if failures:
            res.status, res.forward = FAIL, FAIL
            res.checks = [f.message for f in failures]
            res.message = failures[0].message
            named = next((f.mistake for f in failures if f.mistake), None)
            m = self.spec.mistake(named) if named else None
            if m:
                res.diagnosis = Diagnosis(m.id, m.diagnosis.en, m.diagnosis.zh)
            elif self.diagnose and self.report.first_failure() is None and not case.measured:
                # no grader rule named it: the known mistake whose observation is the submission's
                res.diagnosis = self.mistakes.name_check(case, prep, sub, lambda obs: said(check(obs)) == checked)
                if res.diagnosis is not None:
                    self.named = (res.diagnosis.mistake, case.name)
        return res


def load_request(spec, vetting, room_path: str, probe_source: str | None, hidden, writable, budget: float,
                 measured: bool = False) -> dict:
    """What a room needs to load a submission: the text the judge vetted (never read again from the
    disk), its vetted helper files under the names they have in the room, what it may import, what is
    forbidden, the probes, where it may not read or write, its time."""
    folder = Path(room_path).parent
    return {"op": "load", "path": room_path, "source": vetting.src, "problem": spec.id, "lang": lang(),
            "helpers": {name: [str(folder / Path(path).name), text] for name, (path, text) in vetting.helpers.items()},
            "imports": policy.import_rules(spec.imports, vetting.helpers),
            "forbidden": list(spec.all_forbidden), "probes": probe_source, "hidden": list(hidden or ()),
            "writable": writable, "budget": budget, "measured": measured}


def _dtype_name(dtype) -> str:
    return str(dtype).replace("torch.", "")


def _traced(case: Case) -> bool:
    """A case with a rule on the ops the submission runs: the room records them (only then)."""
    return any(getattr(rule, "needs_ops", True) for rule in case.trace)


REPLY_FLOOR = 32 << 20       # bytes a reply may hold whatever the case (prints, op traces, weights)


def _reply_bytes(run: CaseRun) -> int:
    """The most bytes the room's reply to this case may hold: a few times what the reference returns."""
    if run.truth is None:
        return 2 * REPLY_FLOOR                  # a check case: an observation (a figure's images...)
    held = sum(v.numel() * v.element_size() for v in [*dict(run.truth.outs).values(), *run.truth.grads.values()]
               if isinstance(v, torch.Tensor))
    return REPLY_FLOOR + 8 * held
