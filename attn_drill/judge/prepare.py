"""The judge's share of a case before the room runs it: the problem's trusted files, the inputs and
parameters of every side, the upstream gradients, and the reference's own sides.

Per case there are three sides with the same parameters and inputs:
  truth     the reference in float64, on the case's inputs and parameters rounded to the case dtype
  low       the reference in the case dtype (what that dtype costs by itself), and the same on
            NUDGED_RUNS copies of the inputs moved by one unit in the last place
  sub       the submission in the case dtype, in its room
What trusted code computes for a case is kept (Memo) for the next grading of the same case: verify
grades every mutant on the same cases, watch re-grades at one seed. The key holds the bank files'
contents, the seed, --full and the case's name, which fix the inputs.
"""
from __future__ import annotations

import collections
import dataclasses
import hashlib
from pathlib import Path

import torch

from .. import bank
from ..bank.api import Case, case_seed
from ..room.side import CaseData, Side, run_side
from ..room.usercode import load_module, load_source, seed_all

NUDGED_RUNS = 3        # extra low-precision runs of the reference, on nudged inputs, per case


class Memo:
    """A bounded store of what trusted code computed: at most `size` entries and `max_bytes` of tensors
    in them; the least recently used entries go first."""

    def __init__(self, size: int, max_bytes: int = 512 << 20):
        self.size, self.max_bytes, self.items, self.bytes = size, max_bytes, collections.OrderedDict(), 0

    def get(self, key, make):
        if key in self.items:
            self.items.move_to_end(key)
            return self.items[key][0]
        value = make()
        weight = _tensor_bytes(value)
        if weight > self.max_bytes:
            return value                          # too big to keep: computed again next time
        self.items[key] = (value, weight)
        self.bytes += weight
        while len(self.items) > self.size or self.bytes > self.max_bytes:
            self.bytes -= self.items.popitem(last=False)[1][1]
        return value


def _tensor_bytes(value, depth: int = 0) -> int:
    """The bytes of the tensors a kept value holds (sides, their outputs and gradients, case inputs)."""
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if depth > 4:
        return 0
    if isinstance(value, dict):
        return sum(_tensor_bytes(v, depth + 1) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(_tensor_bytes(v, depth + 1) for v in value)
    if isinstance(value, (Side, ReferenceSides, Prepared, CaseData)):
        return sum(_tensor_bytes(v, depth + 1) for k, v in vars(value).items() if k not in ("case", "ops"))
    return 0


REFERENCE_SIDES = Memo(256)
_LOADED: dict[str, "ProblemFiles"] = {}
FLOAT32_SIDES = Memo(256, 256 << 20)


def problem_files(pid: str) -> "ProblemFiles":
    """The problem's trusted files, loaded once per judge while their contents stay the same (a judge
    grading many files of one problem, as verify and watch do, execs its reference and grader once)."""
    h = hashlib.sha256()
    for path in (bank.spec_path(pid), bank.reference_path(pid), bank.grader_path(pid), bank.probe_path(pid)):
        h.update(path.read_bytes() if Path(path).is_file() else b"-")
    digest = h.hexdigest()
    kept = _LOADED.get(pid)
    if kept is None or kept.digest != digest:
        kept = _LOADED[pid] = ProblemFiles(pid, digest)
    return kept


class ProblemFiles:
    """A problem's trusted files, loaded in the judge: the spec, the reference, the grader, the probes."""

    def __init__(self, pid: str, digest: str):
        self.spec = bank.get(pid)
        self.id = pid
        self.ref_mod = load_module(str(bank.reference_path(pid)), None, "reference")
        self.grader = load_module(str(bank.grader_path(pid)), None, "grader")
        probe_path = bank.probe_path(pid)
        self.probe_source = probe_path.read_text(encoding="utf-8") if probe_path.is_file() else None
        self.probes = load_source(self.probe_source, f"probes_{pid}", filename=str(probe_path)) \
            if self.probe_source else None
        self.digest = digest      # of the files' contents as read just before they were loaded

    def key(self, seed: int, full: bool) -> tuple:
        """What fixes every case of a grading: the bank files' contents, the seed and --full."""
        return self.id, self.digest, seed, full

    def run(self, data: CaseData, trace: bool = False) -> Side:
        """The reference's side on `data` (exceptions propagate: the reference is trusted)."""
        return run_side(self.ref_mod, data, session=None, trace=trace, repeat=False, probes=self.probes)


@dataclasses.dataclass
class ReferenceSides:
    prep: "Prepared"
    truth: Side
    low: Side | None           # None for a float64 case without autocast: the truth is the case dtype


def reference_sides(files: ProblemFiles, key: tuple, case: Case) -> ReferenceSides:
    """The case's inputs and the reference's sides: in float64 (the truth), in the case dtype, and in
    that dtype on nudged inputs. A function of (the bank's files, seed, --full, case) only: kept."""
    def make() -> ReferenceSides:
        prep = Prepared(case, files.ref_mod)
        truth = files.run(prep.truth)
        prep.share_upstream()
        low = None if case.dtype == torch.float64 and case.autocast is None else files.run(prep.low)
        if low is not None:
            low.others = [files.run(prep.nudged(k)) for k in range(NUDGED_RUNS)]
        return ReferenceSides(prep, truth, low)
    return REFERENCE_SIDES.get((key, case.name), make)


def reference_at_float32(files: ProblemFiles, key: tuple, case: Case, prep: "Prepared") -> Side:
    """The reference run in float32 on a float64 case's inputs (the precision rule judges a float64
    case again by float32's rule against it); kept like the other reference sides."""
    def make() -> Side:
        case32 = dataclasses.replace(case, dtype=torch.float32)
        prep32 = Prepared(case32, files.ref_mod)
        prep32.low.upstream = {n: g.to(torch.float32) for n, g in prep.low.upstream.items()}
        return files.run(prep32.low)
    return FLOAT32_SIDES.get((key, case.name), make)


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
        self.low = CaseData(dtype=d, autocast=case.autocast, inputs=_cast(case.inputs, d),
                            kwargs=_cast(case.kwargs, d), params=params_low, **common)
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
