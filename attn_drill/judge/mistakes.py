"""Naming a failure by the known mistakes of a problem: its mutants (the reference with the mistake
typed in, from the spec's `mistakes:`), run here in the judge on the failing case.

A mutant names the first failing case when its outputs and gradients match the submission's (or it
raises the same error); the name is kept only if the mutant fails exactly where the submission
fails in every other case that ran (`consistent`), but for the cases whose evidence the OS
measured around the submission's room (peak memory): a mutant run in the judge has no such
measurement. Where several mutants fit the first failing case (one mistake's symptom is part of
another's), the grading goes on past it even when asked to stop at the first failure, and the first
of them that is consistent with every case is named; where none is, the catalogue's kinds are asked
as if none had fitted. A case where both sides overflow is consistent (where NaN/inf land depends on
how the code is written). Where no mutant fits, attn_drill.judge.symptoms may still say what the
failures have in common.
"""
from __future__ import annotations

import re

import torch

from .. import bank
from ..bank import catalogue, sources
from ..results import FAIL, PASS, Diagnosis
from ..room.params import apply
from ..room.side import Side, run_side
from ..room.usercode import load_source
from .prepare import Memo

# (grading key, case, mistake, traced) -> the mutant's side, or the error it raised
MUTANT_SIDES = Memo(2048, 1 << 30)


class Mistakes:
    """The known mistakes of one problem, for one grading. `judged(case, prep, truth, low, side,
    rules)` is the engine's verdict on a side (with the precision rule), so a mutant is judged as
    the submission is."""

    def __init__(self, spec, key: tuple, probes, judged):
        self.spec, self.key, self.probes, self.judged = spec, key, probes, judged
        self._modules: dict | None = None
        self._kinds: dict | None = None
        self._matched: dict[str, list[str]] = {}   # a kind named -> the keys of its candidates that fit
        self._backward_only: set[str] = set()      # kinds named where only a gradient (formula) is wrong
        self.fitting: list[str] = []   # the spec's mutants that fit the named case, closest first
        self.undecided: tuple | None = None   # ({kind: candidate keys}, case): two kinds fit that case
        self._backward = False         # the case named had right outputs and wrong gradients
        self._named_case: tuple | None = None   # that case's evidence, to ask the kinds later

    @property
    def ambiguous(self) -> bool:
        """More than one of the spec's mutants, or of the catalogue's kinds, fits the named case: only the
        other cases tell them apart."""
        return len(self.fitting) > 1 or self.undecided is not None

    def diagnosis(self, mid: str) -> Diagnosis:
        """The words of a spec's mistake or of a catalogue kind."""
        kind = catalogue.kind_of(mid)
        m = kind or self.spec.mistake(mid)
        if kind and mid in self._backward_only:
            # a kind's words describe the forward computation; here only a gradient is wrong
            return Diagnosis(mid, f"In the backward computation (a gradient formula): {kind.title.en}, at a place "
                                  "where the reference's gradient has it.",
                             f"问题在反向计算（某个梯度公式）里：{kind.title.zh}，参考实现的梯度在这里有对应的一项。")
        return Diagnosis(mid if kind else m.id, m.diagnosis.en, m.diagnosis.zh)

    def choose(self, mid: str, named_case: str, runs) -> str | None:
        """After the cases: the first of the mistakes that fit the named case (`mid` alone for a
        kind) that is consistent with every case that ran (`consistent`); where the problem's own
        mistakes fit that case but none fits every case, the catalogue's kinds are asked as if none
        had fitted; None when nothing is consistent."""
        cand = next((c for c in self.fitting or [mid] if self.consistent(c, named_case, runs)), None)
        if cand is None and self.fitting and self._named_case is not None:
            kind = self._kind(*self._named_case)
            if kind is not None and self.consistent(kind.mistake, named_case, runs):
                return kind.mistake
        return cand

    @property
    def modules(self) -> dict:
        if self._modules is None:
            self._modules = _load(self.spec)
        return self._modules

    def side(self, mid: str, case_name: str, data, traced: bool, module):
        """The mutant's side on a case, or the error it raised as `Type: message`."""
        return MUTANT_SIDES.get((self.key, case_name, mid, traced),
                                lambda: _run(module, data, traced, self.probes))

    @property
    def kinds(self) -> dict:
        """The catalogue's candidates for this reference (attn_drill.bank.catalogue), as modules by key."""
        if self._kinds is None:
            self._kinds = _load_kinds(self.spec)
        return self._kinds

    def name(self, case, prep, truth, low, sub: Side, res, limits) -> Diagnosis | None:
        """The known mistake that reproduces this failing case, if one does: a spec's mutant first,
        then the catalogue's candidates, named only when every candidate that fits is of one kind and
        the submission's outputs carry a finite number to tell kinds apart by."""
        fits = self._fits(self.modules, case, prep, truth, low, sub, res, limits)
        if fits:
            self.fitting = list(dict.fromkeys(mid for _, mid in sorted(fits)))
            self._named_case = (case, prep, truth, low, sub, res, limits)
            return self.diagnosis(self.fitting[0])
        return self._kind(case, prep, truth, low, sub, res, limits)

    def name_check(self, case, prep, sub: Side, said_alike=lambda obs: True) -> Diagnosis | None:
        """A failing check case (the grader reads an observation: a mask, bucket ids, slopes): the
        spec's mutant, else the one catalogue kind, whose observation on the same data is the
        submission's (`same_observation`) and of which the case's check says the same
        (`said_alike(obs)`: the same failures; values alike but of another dtype are not alike)."""
        if sub.problem is not None:
            return None
        fits = [mid for mid, module in self.modules.items()
                if module is not None and self._observes_as(mid, module, case, prep, sub, said_alike)]
        if fits:
            self.fitting = fits
            return self.diagnosis(fits[0])
        keys = [key for key, module in self.kinds.items()
                if self._observes_as(key, module, case, prep, sub, said_alike)]
        kinds = _by_kind(keys)
        if len(kinds) != 1:
            return None
        ((kid, keys),) = kinds.items()
        self._matched[kid] = keys
        return self.diagnosis(kid)

    def _observes_as(self, mid: str, module, case, prep, sub: Side, said_alike) -> bool:
        mut = self.side(mid, case.name, prep.low, False, module)
        return not isinstance(mut, str) and mut.problem is None and same_observation(sub.obs, mut.obs) and \
            said_alike(mut.obs)

    def _kind(self, case, prep, truth, low, sub: Side, res, limits) -> Diagnosis | None:
        if not _carries_numbers(sub):
            return None    # all NaN/inf: many kinds of mistake give that, a kind is no surer than a guess
        fits = self._fits(self.kinds, case, prep, truth, low, sub, res, limits)
        kinds = _by_kind(key for _, key in fits)
        self._backward = (res.forward == PASS and res.gradient == FAIL)
        if len(kinds) > 1:
            # candidates of two kinds fit this case: the other cases may tell them apart (decide())
            self.undecided = (kinds, case.name)
            return None
        if not kinds:
            return None    # no candidate fits
        return self._name_kind(*kinds.items())

    def _name_kind(self, item) -> Diagnosis:
        kid, keys = item
        self._matched[kid] = sorted(keys)
        if self._backward or all(BACKWARD in key for key in keys):
            self._backward_only.add(kid)
        return self.diagnosis(kid)

    def decide(self, runs) -> tuple[Diagnosis, str] | None:
        """After the cases: of the kinds whose candidates fitted the named case, those consistent with
        every case that ran (`consistent`); named only when they are one kind (or one family)."""
        if self.undecided is None:
            return None
        kinds, named_case = self.undecided
        kept = [key for keys in kinds.values() for key in keys
                if self._consistent(key, self.kinds[key], named_case, runs)]
        left = _by_kind(kept)
        if len(left) != 1:
            return None
        return self._name_kind(*left.items()), named_case

    def _fits(self, modules: dict, case, prep, truth, low, sub: Side, res, limits) -> list[tuple[float, str]]:
        out = []
        by_rule = res.tensor.startswith("trace rule")   # only then do the mutants' own ops matter
        # the exception the submission raised, as `Type: message`: matched by a mutant raising the same
        raised = sub.problem.message if sub.problem and sub.problem.kind == "exception" else None
        for mid, module in modules.items():
            if module is None:
                continue
            mut = self.side(mid, case.name, prep.low, by_rule, module)
            if isinstance(mut, str):   # a mutant that raises: the same error, or no match
                if raised is not None and _same_raise(sub.problem, raised, mut, modules is self._modules):
                    out.append((0.0, mid))
                continue
            if mut.problem or raised is not None:
                continue
            mres = self.judged(case, prep, truth, low, mut, rules=by_rule)[0]
            if mres.status == PASS:
                continue  # a mutant that is right on this case names nothing here
            if (res.tensor.startswith("trace rule") or res.tensor == "precision") and mres.tensor != res.tensor:
                continue  # the submission broke an op or precision rule: only a mutant breaking the same one
            if by_rule and mres.message != res.message:
                continue  # ...the same way (the same op, of the same size): right values say nothing more
            score = match(sub, mut, limits, truth)
            if score is not None:
                out.append((score, mid))
        return out

    def consistent(self, mid: str, named_case: str, runs) -> bool:
        """The named mistake's mutant (for a kind: one of the candidates that fit) fails exactly
        where the submission fails, with its numbers. `runs`: the engine's CaseRun of every case that ran."""
        if mid in self._matched:
            return any(self._consistent(key, self.kinds[key], named_case, runs) for key in self._matched[mid])
        module = self.modules.get(mid)
        return True if module is None else self._consistent(mid, module, named_case, runs)

    def _consistent(self, mid: str, module, named_case: str, runs) -> bool:
        for run in runs:
            case, res = run.case, run.result
            if case.name == named_case or run.skip or res.status not in (PASS, FAIL) \
                    or res.problem is not None or case.measured:
                continue   # a measured case: the OS measured the submission's room, no one measures a mutant here
            if case.is_check:
                # a check the submission fails: the mistake must be seen there as the submission is
                # (a check it passes says nothing: two right observations may differ in how they are right)
                if res.status == FAIL and not self._observes_as(mid, module, case, run.prep, run.sub,
                                                                lambda obs: True):
                    return False
                continue
            mut = self.side(mid, case.name, run.prep.low, bool(case.trace), module)
            if isinstance(mut, str):   # a mutant that raises where the submission did not
                return False
            mres, _ = self.judged(case, run.prep, run.truth, run.low, mut, rules=bool(case.trace))
            if res.status == PASS and mres.status != PASS:
                return False
            if res.status == FAIL and res.tensor.startswith("trace rule") and mres.message != res.message:
                return False   # an op rule broken another way (another op, another size)
            if res.status == FAIL and (mres.status == PASS or (match(run.sub, mut, run.limits, run.truth) is None
                                                             and not (_overflows(run.sub) and _overflows(mut)))):
                return False   # both overflowing is consistent: where NaN/inf appear depends on how it is written
        return True


_OBSERVED_RTOL = {torch.float32: 3e-5, torch.float16: 4e-3, torch.bfloat16: 3e-2}


def same_observation(a, b, depth: int = 0) -> bool:
    """Two check observations are the same: equal structure, equal integers and booleans, floats
    equal to a few roundings (two ways of writing one mistake round differently)."""
    if depth > 8:
        return False
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) or a.shape != b.shape:
            return False
        a, b = a.detach().cpu(), b.detach().cpu()
        if a.is_floating_point() or b.is_floating_point() or a.is_complex() or b.is_complex():
            wide = torch.complex128 if a.is_complex() or b.is_complex() else torch.float64
            # a few roundings of the narrower dtype (float32's last bits differ between two ways of
            # writing one mistake, gradients the most), relative to the tensor's own size
            rtol = max(_OBSERVED_RTOL.get(a.dtype, 1e-6), _OBSERVED_RTOL.get(b.dtype, 1e-6))
            b_wide = b.to(wide)
            finite = b_wide[torch.isfinite(b_wide)] if not b.is_complex() else b_wide
            size = finite.abs().max().item() if finite.numel() else 0.0
            atol = 1e-9 if rtol <= 1e-6 else max(1e-9, rtol * size)
            return bool(torch.allclose(a.to(wide), b_wide, rtol=rtol, atol=atol, equal_nan=True))
        return bool(torch.equal(a.long(), b.long()))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_observation(a[k], b[k], depth + 1) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same_observation(x, y, depth + 1) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and \
            (a == b or abs(a - b) <= 1e-9 + 1e-6 * abs(b) or (a != a and b != b))
    return type(a) is type(b) and a == b


def _overflows(side: Side) -> bool:
    """Some float output or gradient holds NaN or inf."""
    values = [v for _, v in side.outs] + list(side.grads.values())
    return any(isinstance(v, torch.Tensor) and v.is_floating_point() and not bool(torch.isfinite(v).all())
               for v in values)


def _carries_numbers(sub: Side) -> bool:
    """Some output of the submission is a finite number or not a float tensor at all."""
    return sub.problem is not None or any(
        not (isinstance(v, torch.Tensor) and v.is_floating_point()) or bool(torch.isfinite(v).any())
        for _, v in sub.outs)


def _pairs(sub: Side, other: Side) -> list[tuple[str, object, object]]:
    """(name, the submission's value, the other side's value) for every output and gradient of
    `other`, parameters' gradients in the submission's layout."""
    sub_map = dict(sub.outs)
    pairs = [(n, sub_map.get(n), v) for n, v in other.outs]
    for k, v in other.grads.items():
        if not k.startswith("param "):
            pairs.append(("grad " + k, sub.grads.get(k), v))
    if sub.mapping and other.mapping:
        by_ref = {k[len("param "):]: v for k, v in other.grads.items() if k.startswith("param ") and v is not None}
        for sub_name, plan in sub.mapping.items():
            try:
                pairs.append(("grad param " + sub_name, sub.grads.get(f"param {sub_name}"), apply(plan, by_ref)))
            except (KeyError, ValueError, TypeError, IndexError, RuntimeError):
                continue
    return pairs


def match(sub: Side, mut: Side, limits: dict, truth: Side | None = None) -> float | None:
    """How close the submission is to a mutant on this case (None: not a match): within a few of
    the case's bounds; or, below float64, a thousand times closer to the mutant than the mutant is
    to the truth (the same mistake written another way rounds differently, and a case of large
    logits makes that rounding grow past the bounds of a right answer)."""
    if mut.problem:
        return None
    score = 0.0
    truths = {name: t for name, _, t in _pairs(sub, truth)} if truth is not None else {}
    for name, s, m in _pairs(sub, mut):
        if isinstance(m, torch.Tensor):
            if not isinstance(s, torch.Tensor) or s.shape != m.shape:
                return None
            if not m.is_floating_point():
                if s.dtype != m.dtype or not torch.equal(s.detach().cpu(), m.detach().cpu()):
                    return None
                continue
            a, b = s.detach().cpu().double(), m.detach().cpu().double()
            allowed, rtol = _limit(limits.get(name), s.dtype, b)
            same = (torch.isnan(a) & torch.isnan(b)) | (a == b)   # equal infinities too
            diff = torch.where(same, torch.zeros_like(a), (a - b).abs())
            if torch.isnan(diff).any():
                return None
            if (diff > 4 * allowed + 4 * rtol * b.abs().nan_to_num()).any() and \
                    not _far_closer(diff, b, truths.get(name), s.dtype):
                return None
            score += float(diff.nan_to_num().norm()) / (float(b.nan_to_num().norm()) + 1e-30)
        elif m is not None and (type(s) is not type(m) or s != m):   # 9 is not tensor(9), nor 9.0
            return None
    return score


def _far_closer(diff: torch.Tensor, b: torch.Tensor, t, dtype: torch.dtype) -> bool:
    if dtype == torch.float64 or not isinstance(t, torch.Tensor) or t.shape != b.shape:
        return False
    effect = (b - t.detach().cpu().double()).abs()
    return bool(torch.isfinite(effect).all()) and float(diff.max()) <= 1e-3 * float(effect.max())


def _limit(lim: dict | None, dtype: torch.dtype, b: torch.Tensor) -> tuple[float, float]:
    """The (absolute, relative) bound of a match: the case's own where the engine judged the tensor;
    else (a gradient of a case that failed in its forward) a few roundings of the tensor's dtype at
    the scale of its largest value, since two ways of writing one mistake round differently."""
    if lim:
        return lim["allowed_abs"], lim["rtol"]
    if dtype == torch.float64 or not dtype.is_floating_point:
        return 1e-6, 1e-5
    eps = torch.finfo(dtype).eps
    return (4 * eps * float(b.abs().nan_to_num().max()) if b.numel() else 0.0), 4 * eps


def _by_kind(keys) -> dict[str, list[str]]:
    """Candidate keys grouped by kind; kinds of one family (a bound one too far, a length one too
    large: the same numbers) grouped under the family, whose words are true of each."""
    kinds: dict[str, list[str]] = {}
    for key in keys:
        kinds.setdefault(key.split("@")[0], []).append(key)
    families = {catalogue.FAMILY_OF.get(k[len(catalogue.PREFIX):]) for k in kinds}
    if len(kinds) > 1 and len(families) == 1 and None not in families:
        return {catalogue.PREFIX + families.pop(): [key for keys in kinds.values() for key in keys]}
    return kinds


class Raised(str):
    """What a mutant raised, as `Type: message`; `own`: raised by a line of the mutant's own code (its
    bound checks), not inside a library it called."""
    own = False


def _run(module, data, trace: bool, probes):
    try:
        return run_side(module, data, session=None, trace=trace, repeat=False, probes=probes)
    except Exception as exc:  # noqa: BLE001 - a mutant that raises is a result too
        raised = Raised(f"{type(exc).__name__}: {exc}")
        tb = exc.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        raised.own = tb is not None and tb.tb_frame.f_code.co_filename == getattr(module, "__file__", None)
        return raised


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def _same_raise(sub_problem, raised: str, mut, curated: bool) -> bool:
    """The submission and a mutant raised alike: the same text; or, where the submission's own `raise`
    statement raised it and the mutant's own line did (a bound check of each, worded by each), the same
    type: for a spec's mutant (one mistake, written for this problem), that is enough; for a catalogue
    candidate, its message must also carry the same numbers (the check fired at the same sizes)."""
    if raised == mut:
        return True
    frames = sub_problem.frames if sub_problem is not None else []
    own = bool(frames) and (frames[-1].code or "").lstrip().startswith("raise")
    kind, _, said = raised.partition(":")
    mkind, _, msaid = mut.partition(":")
    if not (own and getattr(mut, "own", False) and kind == mkind):
        return False
    numbers = _NUMBER.findall(said)
    return curated or (bool(numbers) and numbers == _NUMBER.findall(msaid))


_SOURCES: dict[tuple, str | None] = {}


def _load(spec) -> dict:
    """Each mistake's mutant as a module (None where the patch does not apply: verify says why).
    The patched sources are kept per reference text, so a mutant is patched and parsed once."""
    ref_src = sources.read(bank.reference_path(spec.id))
    out = {}
    for m in spec.mistakes:
        key = (spec.id, m.id, m.mutant, ref_src)
        if key not in _SOURCES:
            try:
                _SOURCES[key] = sources.mutant_source(spec, ref_src, m.id)
            except Exception:  # noqa: BLE001 - a broken mutant is reported by verify, not here
                _SOURCES[key] = None
            if len(_SOURCES) > 4096:
                _SOURCES.pop(next(iter(_SOURCES)))
        src = _SOURCES[key]
        out[m.id] = None if src is None else load_source(src, f"mutant_{m.id}")
    return out


BACKWARD = "~backward"       # in a candidate's key: its edits lie in a hand-written backward


def _load_kinds(spec) -> dict:
    """The catalogue's candidates for the problem's reference, as modules keyed `kind.<id>@<place>`."""
    ref_src = sources.read(bank.reference_path(spec.id))
    out = {}
    for i, cand in enumerate(catalogue.candidates(ref_src)):
        try:
            out[f"{cand.id}@{cand.place}{BACKWARD if cand.backward else ''}#{i}"] = \
                load_source(cand.source, f"kind_{i}")
        except Exception:  # noqa: BLE001 - a candidate that does not even load names nothing
            continue
    return out
