"""The grading engine: runs in the judge process and returns a Report. It never executes the
submission: that happens in a room (attn_drill.room), which gets each case as data and sends back
outputs, gradients and the ops it ran.

Per case it builds three sides with the same parameters and inputs:
  truth     the reference in float64, on the case's inputs and parameters rounded to the case dtype
  ref_low   the reference in the case dtype (measures what that dtype costs by itself)
  sub       the submission in the case dtype, in its room (guarded, captured, traced)
and compares outputs, then gradients under a random upstream gradient; on the first failing case,
each known mistake (a mutant of the reference, run here) is tried against what the submission did.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import time
from pathlib import Path

import torch

from . import bank, policy, source, symptoms
from .api import Case, Ctx, Failure, case_seed
from .compare import weights_detail
from .i18n import lang, t, tn
from .judge import GraderBug, judge, mutant_match, stub_message
from .results import ERROR, FAIL, PASS, SKIP, CaseResult, Diagnosis, Frame, Report, UserProblem
from .room.side import CaseData, Side, run_side, side_from_wire
from .room.usercode import load_module, load_source, seed_all
from .rooms import RoomFailure, Zygote


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
        return _Grading(problem, target, rooms, seed, full, only_case, fail_fast, diagnose, time_limit,
                        cancel_fd).run()


class _Grading:
    def __init__(self, problem, target: Target, rooms, seed, full, only_case, fail_fast, diagnose, time_limit,
                 cancel_fd):
        self.spec = bank.get(problem)
        self.problem, self.target, self.rooms = problem, target, rooms
        self.seed, self.full, self.only_case = seed, full, only_case
        self.fail_fast, self.diagnose = fail_fast, diagnose
        self.time_limit = time_limit or self.spec.time_limit * (3 if full else 1)
        self.cancel_fd = cancel_fd
        self.report = Report(problem, target.shown or target.path, seed, full=full)
        self.room = None
        self.mutants = None
        self.probes = None
        self.runs: list = []              # (case, its state, its result), in order
        self.named = None                 # (mistake id, case) when a mutant named the first failure
        self.first_evidence = None        # (case, output, truth, (weights, reference weights), bound)

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
                r.output = self.room.output
                r.warnings += [w for w in self.room.warnings if w not in r.warnings]
                self.room.close()
        self._verdict()
        r.seconds = time.perf_counter() - t_start
        return r

    def _replay(self, case: str | None = None) -> str:
        shown = self.target.typed if self.target.typed is not None else (self.target.shown or _shown(self.target.path))
        return (f"attn-drill check {self.problem}{' ' + shown if shown else ''} --seed {self.seed}"
                + (f" --case {case}" if case else "") + (" --full" if self.full else ""))

    # ------------------------------------------------------------ before any code runs
    def _static(self) -> bool:
        """Read, parse and vet the file here, in the judge: True when it may run."""
        r = self.report
        src, problem, message, tree = source.vet_tree(Path(self.target.path), self.spec)
        if problem is not None:
            r.status, r.problem_error, r.message = ERROR, problem, message
            return False
        r.findings = [f.__dict__ for f in source.scan(src, self.spec, tree)]
        self.preload = policy.imported_modules(src, tree)
        return True

    def _cases(self) -> list[Case]:
        self.ref_mod = load_module(str(bank.reference_path(self.problem)), None, "reference")
        grader = load_module(str(bank.grader_path(self.problem)), None, "grader")
        probe_path = bank.probe_path(self.problem)
        self.probe_source = probe_path.read_text(encoding="utf-8") if probe_path.is_file() else None
        self.bank_key = _bank_key(self.problem, self.seed, self.full)
        if self.probe_source:
            self.probes = load_source(self.probe_source, f"probes_{self.problem}", filename=str(probe_path))
        all_cases = grader.cases(Ctx(self.seed, full=self.full, settings=self.spec.settings))
        names = [c.name for c in all_cases]
        if len(set(names)) != len(names):
            raise GraderBug(f"graders/{self.problem}.py: two cases share a name")
        if self.only_case is not None:
            all_cases = [c for c in all_cases if c.name == self.only_case]
            if not all_cases:
                raise KeyError(t("engine.no_case", case=self.only_case, id=self.problem, seed=self.seed,
                                 full="" if self.full else t("engine.try_full"), names=", ".join(names)))
        return all_cases

    # ------------------------------------------------------------ in the room
    def _in_room(self, cases: list[Case]) -> None:
        r = self.report
        preload = self.preload + (policy.imported_modules(self.probe_source) if self.probe_source else [])
        self.room = self.rooms.open(preload=preload)
        self.room.budget = self.time_limit
        self.room.path = self.target.room_path
        self.room.cancel_fd = self.cancel_fd
        try:
            reply = self.room.call({
                "op": "load", "path": self.target.room_path, "problem": self.problem, "lang": lang(),
                "forbidden": list(self.spec.all_forbidden), "probes": self.probe_source,
                "hidden": self.target.hidden, "writable": self.target.writable, "budget": self.time_limit,
                "folders": [str(Path(self.target.room_path).parent)]})
        except RoomFailure as exc:
            r.status, r.problem_error, r.message = FAIL, exc.problem, exc.problem.message
            return
        if reply.get("problem"):
            p = _problem_from_wire(reply["problem"])
            r.status, r.problem_error, r.message = ERROR, p, p.message
            return
        # one case ahead: while the room runs case i, the judge prepares case i + 1 (its float64
        # truth, its reference in the case dtype) and sends it
        ahead = self._start(cases[0]) if cases else None
        for i, case in enumerate(cases):
            started, ahead = ahead, None
            try:
                if i + 1 < len(cases):
                    ahead = self._start(cases[i + 1])
                res = self._finish(started)
            except RoomFailure as exc:
                res = CaseResult(case.name, FAIL, case.shapes(), _dtype_name(case.dtype), case.note, forward=FAIL,
                                 problem=exc.problem, message=exc.problem.message)
                r.cases.append(res)
                r.problem_error = exc.problem
                r.replay = self._replay(case.name)
                break
            r.cases.append(res)
            self.runs.append((case, started, res))
            if res.warning and not any(res.warning.split(" (")[0] in w for w in r.warnings):
                r.warnings.append(f"{res.name}: {res.warning}")
            if res.diagnosis and r.diagnosis is None:
                r.diagnosis = res.diagnosis
            if res.status in (FAIL, ERROR):
                if "--case" not in r.replay:
                    r.replay = self._replay(res.name)
                stub = bool(res.problem and res.problem.message.startswith("NotImplementedError"))
                if self.fail_fast or res.status == ERROR or stub:
                    break
        self._explain()

    def _explain(self) -> None:
        """After the cases: keep a mutant's name only if it fits every case that ran; without a name,
        the symptom rules (attn_drill.symptoms) say what the failures have in common."""
        r = self.report
        if r.diagnosis is not None and self.named is not None and not self.fail_fast and not self._consistent():
            for c in r.cases:
                if c.diagnosis and c.diagnosis.mistake == r.diagnosis.mistake:
                    c.diagnosis = None
            r.diagnosis = None
        if r.diagnosis is not None or r.first_failure() is None:
            return
        first = self.first_evidence
        sym = None
        if first is not None:
            case, sub_out, truth_out, weights, bound = first
            traits = symptoms.traits_of(case)
            if weights is not None:                  # the most specific evidence first
                sym = symptoms.weights_pattern(weights[0], weights[1], case.kwargs)
            if sym is None:
                sym = symptoms.nan_rows(sub_out, truth_out, traits)
            if sym is None:
                sym = symptoms.padded_batches_only(sub_out, truth_out, case.kwargs, bound)
        if sym is None:
            ran = [(res, case) for case, _, res in self.runs]
            sym = symptoms.across_cases([x for x, _ in ran], [c for _, c in ran])
        if sym is not None:
            r.symptom = Diagnosis(sym.id, sym.en, sym.zh)

    def _consistent(self) -> bool:
        """The named mistake's mutant fails exactly where the submission fails, with its numbers."""
        mid, named_case = self.named
        mmod = (self.mutants or {}).get(mid)
        if mmod is None:
            return True
        for case, st, res in self.runs:
            if case.name == named_case or case.is_check or st.get("skip") or res.status not in (PASS, FAIL) \
                    or res.problem is not None:
                continue
            mut = _MUTANT_SIDES.get((self.bank_key, case.name, mid, bool(case.trace)), lambda: _run_mutant(
                mmod, st["prep"].low, bool(case.trace), self.probes))
            if isinstance(mut, str):   # a mutant that raises where the submission did not
                return False
            mres, _ = self._judged(case, st["prep"], st["truth"], st["low"], mut, rules=bool(case.trace))
            if res.status == PASS and mres.status != PASS:
                return False
            if res.status == FAIL and (mres.status == PASS or
                                       mutant_match(st["sub"], mut, st.get("limits", {})) is None):
                return False
        return True

    def _start(self, case: Case) -> dict:
        """The judge's share of a case before the room's: the sides it computes, then the request."""
        case.seed = case_seed(self.seed, case.name)
        if case.device == "cuda" and not torch.cuda.is_available():
            return {"case": case, "skip": True}
        st = {"case": case, "skip": False}
        if case.is_check:
            st["prep"] = Prepared(case, self.ref_mod, check=True)
        else:
            st.update(_REFERENCE_SIDES.get((self.bank_key, case.name), lambda: self._reference_sides(case)))
        st["ticket"] = self.room.submit({"op": "case", "data": st["prep"].low.to_wire(), "trace": bool(case.trace),
                                         "repeat": True})
        return st

    def _reference_sides(self, case: Case) -> dict:
        """The case's inputs and the reference's sides: in float64 (the truth), in the case dtype, and
        in that dtype on nudged inputs. A function of (the bank's files, seed, --full, case) only."""
        prep = Prepared(case, self.ref_mod)
        truth = run_side(self.ref_mod, prep.truth, session=None, trace=False, repeat=False, probes=self.probes)
        prep.share_upstream()
        low = None if case.dtype == torch.float64 and case.autocast is None else \
            run_side(self.ref_mod, prep.low, session=None, trace=False, repeat=False, probes=self.probes)
        if low is not None:
            low.others = [run_side(self.ref_mod, prep.nudged(k), session=None, trace=False, repeat=False,
                                   probes=self.probes) for k in range(NUDGED_RUNS)]
        return {"prep": prep, "truth": truth, "low": low}

    def _finish(self, st: dict) -> CaseResult:
        case = st["case"]
        if st["skip"]:
            return CaseResult(case.name, SKIP, case.shapes(), _dtype_name(case.dtype), case.note,
                              message=t("engine.no_cuda", reason=case.cuda_reason))
        sub = st["sub"] = self._side(self.room.result(st["ticket"]))
        return self._check_case(case, st["prep"], sub) if case.is_check else \
            self._case(case, st["prep"], st["truth"], st["low"], sub, st)

    @staticmethod
    def _side(reply: dict) -> Side:
        if reply.get("problem") and not reply.get("side"):
            return Side(problem=_problem_from_wire(reply["problem"]))
        try:
            return side_from_wire(reply.get("side"))
        except (ValueError, TypeError, KeyError) as exc:
            return Side(problem=UserProblem("runner", t("engine.unreadable_reply", why=exc)))

    def _judged(self, case: Case, prep, truth, low, side, rules: bool = True):
        """judge(), then the precision rule for float64 cases."""
        res, limits = judge(case, truth, low, side, self.spec, rules=rules)
        if case.dtype == torch.float64 and case.autocast is None and not side.problem:
            res, limits = self._precision(case, prep, truth, side, res, limits)
        return res, limits

    def _case(self, case: Case, prep, truth, low, sub, st: dict | None = None) -> CaseResult:
        res, limits = self._judged(case, prep, truth, low, sub)
        if st is not None:
            st["limits"] = limits
        first = res.status == FAIL and self.first_evidence is None and not case.is_check  # evidence for symptoms
        weights = None
        if res.forward == FAIL and first and (res.detail is not None or sub.problem is None):
            # only now trace both sides, to compare the attention weights over (query, key)
            w_sub = sub.weights if case.trace else self._side(self.room.call(
                {"op": "case", "data": prep.low.to_wire(), "trace": True, "repeat": False})).weights
            traced = run_side(self.ref_mod, prep.truth, session=None, trace=True, repeat=False, probes=self.probes)
            if w_sub is not None and traced.weights is not None and traced.weights.shape == w_sub.shape:
                weights = (w_sub, traced.weights)
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
        if res.status == FAIL and self.diagnose and self.report.first_failure() is None and \
                (not sub.problem or sub.problem.kind == "exception"):
            res.diagnosis = self._mutant_named(case, prep, truth, low, sub, res, limits)
            if res.diagnosis is not None:
                self.named = (res.diagnosis.mistake, case.name)
        return res

    def _precision(self, case: Case, prep, truth, sub, res: CaseResult, limits: dict):
        """The precision rule for float64 cases (AUTHORING.md): float32-level rounding is not a logic
        error. It passes with a warning naming the likely cause, unless the problem's statement asks
        for float64 all the way (spec full_float64), where it fails under that name."""
        worst = max((c["relnorm"] for c in limits.values() if c.get("f32_level")), default=0.0)
        numeric = res.status == FAIL and res.compare is not None and not res.tensor.startswith("trace")
        if res.status == PASS and not worst:
            return res, limits
        res32 = self._at_float32(case, prep, truth, sub) if numeric else None
        if res32 is not None and res32.status != PASS:
            return res, limits                     # wrong beyond float32's rounding: a plain failure
        if res32 is not None:
            worst = max((c["relnorm"] for c in limits.values()), default=0.0)
        if self.spec.full_float64:
            res.status, res.forward = FAIL, FAIL
            res.message = t("engine.full_float64", err=f"{worst:.2g}")
            res.tensor, res.detail, res.diagnosis = "precision", None, None
            return res, limits
        res.warning = t("engine.precision_note", err=f"{worst:.2g}")
        if res32 is not None:
            res.status, res.forward, res.gradient = PASS, PASS, PASS if case.grad else res.gradient
            res.message, res.detail, res.diagnosis = "", None, None
            res.compare, res.max_error, res.allowed = res32.compare, res32.max_error, res32.allowed
        return res, limits

    def _at_float32(self, case: Case, prep, truth, sub) -> CaseResult:
        """A float64 case judged by float32's rule: against the reference run in float32, at
        float32's tolerances."""
        case32 = dataclasses.replace(case, dtype=torch.float32)
        prep32 = Prepared(case32, self.ref_mod)
        prep32.low.upstream = {n: g.to(torch.float32) for n, g in prep.low.upstream.items()}
        ref32 = run_side(self.ref_mod, prep32.low, session=None, trace=False, repeat=False, probes=self.probes)
        return judge(case, truth, ref32, sub, self.spec, tol_dtype=torch.float32)[0]

    def _mutant_named(self, case, prep, truth, low, sub, res, limits) -> Diagnosis | None:
        if self.mutants is None:
            self.mutants = _mutants(self.spec)
        best = None
        by_rule = res.tensor.startswith("trace rule")   # only then do the mutants' own ops matter
        raised = _raised(sub.problem) if sub.problem else None
        for mid, mmod in self.mutants.items():
            if mmod is None:
                continue
            mut = _MUTANT_SIDES.get((self.bank_key, case.name, mid, by_rule), lambda: _run_mutant(
                mmod, prep.low, by_rule, self.probes))
            if isinstance(mut, str):   # a mutant that raises: the same error, or no match
                if raised is not None and raised == mut:
                    best = (0.0, mid) if best is None else best
                continue
            if mut.problem or raised is not None:
                continue
            mres = self._judged(case, prep, truth, low, mut, rules=by_rule)[0]
            if mres.status == PASS:
                continue  # a mutant that is right on this case names nothing here
            if (res.tensor.startswith("trace rule") or res.tensor == "precision") and mres.tensor != res.tensor:
                continue  # the submission broke an op or precision rule: only a mutant breaking the same one
            score = mutant_match(sub, mut, limits)
            if score is not None and (best is None or score < best[0]):
                best = (score, mid)
        if best:
            m = self.spec.mistake(best[1])
            return Diagnosis(m.id, m.diagnosis.en, m.diagnosis.zh)
        return None

    def _check_case(self, case: Case, prep, sub) -> CaseResult:
        res = CaseResult(case.name, PASS, case.shapes(), _dtype_name(case.dtype), case.note, forward=PASS)

        def ref_side(data):
            return lambda: run_side(self.ref_mod, data, session=None, trace=False, repeat=False,
                                    probes=self.probes).obs
        ref = LazyObs(ref_side(prep.low))      # most checks read only the submission's observation
        case.truth_obs = ref if case.dtype == torch.float64 else LazyObs(ref_side(prep.truth))
        res.time_ms = sub.seconds * 1000
        if sub.problem:
            res.status, res.forward, res.problem, res.message = FAIL, FAIL, sub.problem, stub_message(sub.problem)
            if sub.problem.kind in ("missing", "interface"):
                res.status = ERROR
            return res
        try:
            failures = list(case.check(sub.obs, ref, case) or [])
        except Exception as exc:  # noqa: BLE001 - the observation comes from untrusted code
            failures = [t("engine.uncheckable", error=f"{type(exc).__name__}: {exc}")]
        for i, rule in enumerate(case.trace):
            msg = rule.check(sub.ops, case)
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
        return res

    # ------------------------------------------------------------ the verdict
    def _verdict(self) -> None:
        r = self.report
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
            r.message = tn("report.all_passed", n) + (tn("report.skipped", len(skipped)) if skipped else "")
            r.replay = ""


NUDGED_RUNS = 3        # extra low-precision runs of the reference, on nudged inputs, per case


class LazyObs:
    """The reference's observation of a check case, computed on first use."""

    def __init__(self, make):
        self._make, self._done, self._value = make, False, None

    @property
    def value(self):
        if not self._done:
            self._value, self._done = self._make(), True
        return self._value

    def __getitem__(self, key):
        return self.value[key]

    def get(self, key, default=None):
        return self.value.get(key, default)

    def __iter__(self):
        return iter(self.value)

    def __len__(self):
        return len(self.value)


class Prepared:
    """Inputs, parameters and upstream gradients of one case, for every side."""

    def __init__(self, case: Case, ref_mod, check: bool = False):
        self.case = case
        params: dict[str, torch.Tensor] = {}
        if case.init is not None:
            seed_all(case.seed)
            base = getattr(ref_mod, case.target)(**case.init)
            params = {n: p.detach().to(torch.float64) for n, p in base.named_parameters()}
        d = case.dtype
        params_low = {n: p.to(dtype=d) for n, p in params.items()}
        common = dict(name=case.name, target=case.target, init=case.init, device=case.device,
                      grad=case.grad and not check, train=case.train, deterministic=case.deterministic,
                      probe=case.probe, probe_args=dict(case.probe_args), check=check,
                      output_names=case.output_names, seed=case.seed)
        self.low = CaseData(dtype=d, autocast=case.autocast, inputs=_cast(case.inputs, d), kwargs=_cast(case.kwargs, d),
                            params=params_low, **common)
        self.truth = CaseData(dtype=torch.float64, autocast=None, inputs=_cast(case.inputs, d, truth=True),
                              kwargs=_cast(case.kwargs, d, truth=True),
                              params={n: p.to(torch.float64) for n, p in params_low.items()}, **common)
        self.truth.upstream = _Upstream(case)

    def nudged(self, k: int) -> CaseData:
        """The low-precision data with every floating input and parameter moved by one unit in the last
        place, up or down at random: a rounding path of its own for the reference."""
        gen = torch.Generator().manual_seed(case_seed(self.case.seed, f"nudge:{k}"))

        def nudge(v):
            if not (isinstance(v, torch.Tensor) and v.is_floating_point()) or v.numel() == 0:
                return v
            up = torch.rand(v.shape, generator=gen) < 0.5
            inf = torch.tensor(float("inf"), dtype=v.dtype)
            return torch.where(up, torch.nextafter(v, inf), torch.nextafter(v, -inf))
        return dataclasses.replace(self.low, inputs={n: nudge(v) for n, v in self.low.inputs.items()},
                                   params={n: nudge(v) for n, v in self.low.params.items()})

    def share_upstream(self) -> None:
        """The upstream gradients the truth used, in the case dtype, for the other sides."""
        self.low.upstream = dict(self.truth.upstream.low)


class _Upstream(dict):
    """Upstream gradients made on demand from the case seed and the output's name and shape."""

    def __init__(self, case: Case):
        super().__init__()
        self.case = case
        self.low: dict[str, torch.Tensor] = {}

    def for_output(self, name: str, like: torch.Tensor) -> torch.Tensor:
        if name not in self.low:
            gen = torch.Generator().manual_seed(case_seed(self.case.seed, "upstream:" + name))
            g = torch.randn(tuple(like.shape), generator=gen, dtype=torch.float64)
            self.low[name] = g.to(self.case.dtype if self.case.dtype.is_floating_point else torch.float32)
            self[name] = self.low[name].to(torch.float64)
        return self[name]


def _cast(values: dict, dtype, truth: bool = False) -> dict:
    out = {}
    for k, v in values.items():
        if isinstance(v, torch.Tensor) and v.is_floating_point():
            v = v.to(dtype=dtype)
            if truth:
                v = v.to(torch.float64)
        out[k] = v
    return out


def _problem_from_wire(p) -> UserProblem:
    try:
        frames = [Frame(str(f[0])[:200], int(f[1]), str(f[2])[:200], str(f[3])[:500]) for f in p.get("frames") or []]
        return UserProblem(str(p.get("kind", "runner"))[:30], str(p.get("message", ""))[:4000], frames[:16])
    except (AttributeError, TypeError, ValueError, IndexError):
        return UserProblem("runner", t("engine.unreadable_reply", why="?"))


def _dtype_name(dtype) -> str:
    return str(dtype).replace("torch.", "")


def _shown(path: str) -> str:
    try:
        return str(Path(path).relative_to(Path.cwd()))
    except ValueError:
        return path


def _raised(problem: UserProblem) -> str | None:
    """The exception a submission raised, as `Type: message`, for matching a mutant raising the same."""
    return problem.message if problem.kind == "exception" else None


class _Memo:
    """What the judge computed for a case with trusted code (the reference, a mutant), kept for the next
    grading of the same case: verify grades every mutant on the same cases, watch re-grades at one
    seed. The key holds the bank files' contents, the seed, --full and the case's name, which fix
    the inputs; the least recently used entries go first."""

    def __init__(self, size: int):
        self.size, self.items = size, collections.OrderedDict()

    def get(self, key, make):
        if key in self.items:
            self.items.move_to_end(key)
            return self.items[key]
        value = self.items[key] = make()
        while len(self.items) > self.size:
            self.items.popitem(last=False)
        return value


_REFERENCE_SIDES = _Memo(256)
_MUTANT_SIDES = _Memo(2048)


def _bank_key(problem: str, seed: int, full: bool) -> tuple:
    import hashlib
    h = hashlib.sha256()
    for path in (bank.spec_path(problem), bank.reference_path(problem), bank.grader_path(problem),
                 bank.probe_path(problem)):
        h.update(path.read_bytes() if path.is_file() else b"-")
    return problem, h.hexdigest(), seed, full


def _run_mutant(mmod, data, trace: bool, probes):
    """A mutant's side on a case, or the error it raised as `Type: message`."""
    try:
        return run_side(mmod, data, session=None, trace=trace, repeat=False, probes=probes)
    except Exception as exc:  # noqa: BLE001 - a mutant that raises is a result too
        return f"{type(exc).__name__}: {exc}"


def _mutants(spec) -> dict:
    ref_src = source.read(bank.reference_path(spec.id))
    out = {}
    for m in spec.mistakes:
        try:
            out[m.id] = load_source(source.mutant_source(spec, ref_src, m.id), f"mutant_{m.id}")
        except Exception:  # noqa: BLE001 - a broken mutant is reported by verify, not here
            out[m.id] = None
    return out
