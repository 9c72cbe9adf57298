"""What a grader module (graders/<id>.py) sees: Case, Ctx, Failure and trace rules.

A grader exports one function:

    def cases(ctx: Ctx) -> list[Case]

The engine builds the reference in float64 (ground truth), the reference in the case's
dtype (to measure the dtype's own error) and the submission in the case's dtype, with the
reference's parameters copied in, runs all three on the same inputs, and compares outputs
and gradients under a random upstream gradient. The submission runs in a room (another
process, see attn_drill.room); graders never do.

A case may name a `probe`: a function of probes/<id>.py (or a built-in of attn_drill.room.kit)
that drives the implementation instead of one plain call, on both sides. With `check=` the
probe's result is an observation, judged by check(sub_obs, ref_obs, case) -> [Failure | str]
here in the judge (figures, formulas, unit tests, statistics, properties).
"""
from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import torch

from ..i18n import spaced, t


# The bound (relative to the result's scale) for a custom check that compares a float64 case's
# result with the float64 truth: float32-level error is not a mistake of logic (AUTHORING.md,
# "Precision"; a .float() softmax, a float32 constant), and the problem's tensor cases warn about it.
# A case that grades a step the statement asks to compute in float64 (Case.full_float64) keeps a
# tight bound, FLOAT64_LEVEL: float64_bound(case) picks the one that applies.
FLOAT32_LEVEL = 1e-5
FLOAT64_LEVEL = 1e-9


def float64_bound(case: "Case") -> float:
    """What a custom check allows, relative to the result's scale, between a float64 case's result and
    the float64 truth: float32-level error passes unless the case grades a float64 step."""
    return FLOAT64_LEVEL if case.full_float64 else FLOAT32_LEVEL


@dataclass
class Failure:
    """A failed custom check. `mistake` names a known mistake when the check recognises it."""
    message: str
    mistake: str | None = None


from ..room.kit import type_name  # noqa: E402,F401 - checks name what a submission returned
from ..room.tracer import OpRecord, OpTracer  # noqa: E402,F401 - graders' checks may trace the reference


class TraceRule:
    """A constraint on what the submission did, judged from evidence the judge holds on its side:
    the aten ops the room recorded (forward and backward; `side.ops`), or what the judge measured
    from outside the room (`side.peak_bytes`). A rule on ops cannot pass on a trace the room could not
    keep whole (`side.ops_dropped`)."""
    needs_ops = True

    def verdict(self, side, case: "Case") -> str | None:
        """The failure message, or None when the rule holds."""
        if self.needs_ops and getattr(side, "ops_dropped", 0):
            return t("trace.incomplete", n=len(side.ops) + side.ops_dropped)
        return self.check(side, case)

    def check(self, side, case: "Case") -> str | None:  # pragma: no cover - interface
        raise NotImplementedError


@dataclass
class MaxNumel(TraceRule):
    """No op may produce a tensor with more than `limit` elements (e.g. no full Lq x Lk scores)."""
    limit: int
    what: str | None = None             # what must not be made; None: "intermediate tensor"
    # every op the code runs: its forward, its backward, and what automatic differentiation runs for it
    # inside the forward (forward-mode AD labels every op of its block so)
    phases: tuple = ("forward", "backward", "autograd")

    VIEWS = ("aten.detach", "aten.view", "aten.t.", "aten.transpose", "aten.expand")
    COPIES = ("aten._to_copy", "aten.clone")   # a copy (or cast) of an input is no intermediate of its own

    def check(self, side, case):
        # a copy counts once it is larger than every input: then it copies an expanded view (the
        # cache repeated per query head), however the expansion was written
        largest_input = max((v.numel() for v in _flat_tensors(case.inputs.values())), default=0)
        big = [o for o in side.ops if o.phase in self.phases and o.out_numel > self.limit
               and not o.name.startswith(self.VIEWS)
               and not (o.name.startswith(self.COPIES) and o.out_numel <= largest_input)]
        if big:
            worst = max(big, key=lambda o: o.out_numel)
            return spaced(t("trace.too_big", op=worst.name, shape=list(max(worst.out_shapes, key=_numel)),
                            n=worst.out_numel, phase=t(f"trace.phase.{worst.phase}") if worst.phase in _PHASES
                            else worst.phase, limit=self.limit, what=self.what or t("trace.intermediate")))
        return None


_PHASES = ("forward", "backward", "autograd")      # trace.phase.<phase>


@dataclass
class OpInputDtype(TraceRule):
    """Every call of an op whose name contains `op` (or any of several, e.g. ("softmax", "exp"): a
    softmax however it is written) must receive `dtype` inputs, and at least one must run."""
    op: str | tuple[str, ...]
    dtype: torch.dtype
    phases: tuple = ("forward", "autograd")    # the forward, also where it runs under an AD level

    def check(self, side, case):
        names = (self.op,) if isinstance(self.op, str) else tuple(self.op)
        seen = [o for o in side.ops if o.phase in self.phases and _op_named(o.name, names)]
        what = t("trace.or").join(names)
        if not seen:
            return t("trace.no_op", what=what)
        bad = [o for o in seen if o.in_dtypes and o.in_dtypes[0] != self.dtype]
        if bad:
            return t("trace.input_dtype", op=bad[0].name, got=bad[0].in_dtypes[0], want=self.dtype, what=what)
        return None


def _op_named(name: str, words: tuple[str, ...]) -> bool:
    """aten.<op>.<overload> whose op is one of `words` or a variant of it: softmax matches _softmax,
    _safe_softmax and log_softmax; exp matches exp_ but not expand."""
    parts = name.split(".")
    if len(parts) < 2 or parts[0] != "aten":
        return False
    return any(w in parts[1].split("_") for w in words)


@dataclass
class NoAutograd(TraceRule):
    """The submission must not let automatic differentiation compute anything inside its forward: no
    backward engine (torch.autograd.grad, .backward(), torch.func.grad or vjp) and no forward-mode AD
    (torch.func.jvp, jacfwd, torch.autograd.forward_ad), whichever route reaches them."""
    what: str | None = None             # what must be hand-written; None: "the backward pass"

    def check(self, side, case):
        ran = [o for o in side.ops if o.phase == "autograd"]
        if ran:
            names = sorted({o.name.split(".")[1] if o.name.count(".") else o.name for o in ran})
            return spaced(t("trace.autograd", n=len(ran), names=", ".join(names[:4]),
                            what=self.what or t("trace.the_backward")))
        return None


@dataclass
class PeakMemory(TraceRule):
    """The room's peak resident memory while the case runs, above what it held just before, at most
    `limit` bytes. Measured by the kernel and read from outside the room (the zygote reads the room's
    VmHWM), so any route counts: torch, numpy, lists. Give such a case sizes where the memory the rule
    forbids (a full score matrix) is tens of megabytes, far above what a correct solution needs."""
    limit: int
    what: str | None = None             # what must not be held at once; None: "the intermediates"
    needs_ops = False
    measured = True

    def check(self, side, case):
        peak = getattr(side, "peak_bytes", None)
        if peak is None or peak <= self.limit:
            return None                    # not measured (a mutant run in the judge), or within
        return spaced(t("trace.peak", got=f"{peak / 2 ** 20:.0f}", limit=f"{self.limit / 2 ** 20:.0f}",
                        what=self.what or t("trace.intermediate")))


# Words a grader puts in Case.traits. When the cases that fail share a trait that no passing case
# has, the report says so (a failure only at B = 1, only with large logits...): see attn_drill.judge.symptoms.
# The dtype is a trait by itself (fp64, fp32, bf16, fp16); so is "grad" for a gradient-only failure.
TRAITS = {
    "b1": "batch size 1",
    "l1": "sequence length 1",
    "lq_ne_lk": "a query length different from the key length",
    "dv_ne_d": "a value head dim different from the query/key head dim",
    "large_logits": "large logits (scores in the hundreds)",
    "pad": "key padding",
    "causal": "a causal mask",
    "mask3d": "a per-batch (3-D) attention mask",
    "long": "a long sequence",
    "h1": "a single head",
}


@dataclass
class Case:
    name: str                           # unique in the problem; used by --case to replay
    target: str                         # the interface name to call (class or function)
    inputs: dict[str, Any] = field(default_factory=dict)   # positional, in order
    kwargs: dict[str, Any] = field(default_factory=dict)   # keyword
    init: dict[str, Any] | None = None  # constructor kwargs; None means target is a function
    dtype: torch.dtype = torch.float64  # floating inputs and parameters are cast to it
    device: str = "cpu"                 # "cuda" cases are skipped with a reason when CUDA is absent
    autocast: torch.dtype | None = None  # run under torch.autocast(device, dtype=autocast)
    grad: bool = True                   # compare gradients w.r.t. floating `inputs` and parameters
    train: bool = False                 # module.train() instead of .eval()
    deterministic: bool = True          # run the submission twice and require the same answer
    probe: str | None = None            # probes/<id>.py function (or kit built-in) run instead of impl(*inputs)
    probe_args: dict[str, Any] = field(default_factory=dict)   # data handed to the probe as p.args
    check: Callable[[Any, Any, "Case"], Iterable[Failure | str]] | None = None  # check(sub_obs, ref_obs, case)
    trace: tuple[TraceRule, ...] = ()   # constraints on the ops the submission runs
    exact: bool = False                 # non-float outputs and exact=True floats must be equal
    rtol: float | None = None           # override the dtype's relative tolerance (rarely needed)
    # the case grades a step the statement asks to compute in float64 (AUTHORING.md, "Precision"):
    # float32-level error fails here; set on every case by the spec's full_float64: true
    full_float64: bool = False
    # outputs that may come back in float32 in a bfloat16/float16 case, as the statement says (a
    # log-sum-exp kept in float32, like flash-attn's softmax_lse); judged at the case dtype's rule
    float32_outputs: tuple[str, ...] = ()
    note: str = ""                      # mask / layout words for the report, e.g. "causal+pad"
    output_names: tuple[str, ...] | None = None  # names for tuple outputs, e.g. ("dQ", "dK", "dV")
    axes: tuple[str, str] = ("position", "feature")  # labels of the last two dims for the heatmap
    cuda_reason: str = "needs a CUDA device"
    traits: tuple[str, ...] = ()        # what sets this case apart, for symptom rules: see TRAITS
    # run in a room opened for this case, the file loaded anew: nothing an earlier call did (state kept
    # in the module, counters) carries over into it, and it carries nothing over
    fresh: bool = False
    seed: int = 0                       # filled in by the engine from the master seed and name
    truth_obs: Any = None               # check cases: the reference's observation in float64 (set by the engine)

    @property
    def is_check(self) -> bool:
        return self.check is not None

    @property
    def measured(self) -> bool:
        """A rule on what the OS measures around the room (PeakMemory): the case runs alone there, and
        nothing run in the judge (a mutant) has that measurement."""
        return any(getattr(rule, "measured", False) for rule in self.trace)

    @property
    def alone(self) -> bool:
        """The case runs alone in a room opened for it (fresh, or measured)."""
        return self.fresh or self.measured

    def shapes(self) -> str:
        """Compact shapes of the positional tensor inputs, e.g. 'x 2×7×15'."""
        parts = [f"{k} {'×'.join(map(str, v.shape)) or 'scalar'}" for k, v in self.inputs.items()
                 if isinstance(v, torch.Tensor)]
        return ", ".join(parts)


class Ctx:
    """Deterministic randomness and helpers for building cases from one master seed."""

    def __init__(self, seed: int, full: bool = False, settings: dict | None = None, cuda: bool | None = None):
        self.seed = int(seed)
        self.full = bool(full)
        self.settings = dict(settings or {})
        self.cuda = torch.cuda.is_available() if cuda is None else cuda
        self.gen = torch.Generator().manual_seed(self.seed)

    def randn(self, *shape: int, scale: float = 1.0) -> torch.Tensor:
        return torch.randn(*shape, generator=self.gen, dtype=torch.float64) * scale

    def rand(self, *shape: int) -> torch.Tensor:
        return torch.rand(*shape, generator=self.gen, dtype=torch.float64)

    def randint(self, low: int, high: int, shape=()) -> torch.Tensor:
        return torch.randint(low, high, tuple(shape), generator=self.gen)

    def int(self, low: int, high: int) -> int:
        """A random int in [low, high]."""
        return int(torch.randint(low, high + 1, (), generator=self.gen))

    def choice(self, seq):
        seq = list(seq)
        return seq[self.int(0, len(seq) - 1)]

    def masks(self, batch: int, length: int, pad: bool = False, mask: str | None = None):
        """The usual self-attention masks as (kwargs, words for the report's mask column).

        pad:  a (B, L) key_padding_mask (True = padding) with per-row lengths
        mask: None, "causal" (a shared (L, L) keep-mask) or "random3d" (a (B, L, L) keep-mask per
              batch element in which every query keeps key 0, so no row is fully masked)
        """
        kwargs, words = {}, []
        if pad:
            kwargs["key_padding_mask"] = padding_mask(self.lengths(batch, length), length)
            words.append("pad")
        if mask == "causal":
            kwargs["attn_mask"] = causal_keep(length)
            words.append("causal 2-D")
        elif mask == "random3d":
            keep = self.rand(batch, length, length) > 0.4
            keep[..., 0] = True
            kwargs["attn_mask"] = keep
            words.append("random 3-D")
        elif mask is not None:
            raise ValueError(f"unknown mask kind {mask!r}: use None, 'causal' or 'random3d'")
        return kwargs, words

    def chunks(self, length: int, prefill: int, max_chunk: int) -> list[int]:
        """A decode schedule: a prefill of `prefill` tokens, then random chunks of 1..max_chunk tokens,
        `length` tokens in all."""
        out, left = [prefill], length - prefill
        while left > 0:
            n = min(left, self.int(1, max_chunk))
            out.append(n)
            left -= n
        return out

    def lengths(self, batch: int, length: int, min_len: int = 1) -> torch.Tensor:
        """Valid lengths per batch row: the first row full, the others random in [min_len, length]."""
        lens = torch.randint(min_len, length + 1, (batch,), generator=self.gen)
        lens[0] = length
        if batch > 1 and length > min_len:
            lens[1] = min(lens[1].item(), length - 1)
        return lens


def traits(*, B: int | None = None, L: int | None = None, Lq: int | None = None, Lk: int | None = None,
           D: int | None = None, Dv: int | None = None, H: int | None = None, pad: bool = False,
           mask: str | None = None, large_logits: bool = False, long_from: int = 64) -> tuple[str, ...]:
    """Case.traits from a case's sizes and masks (see TRAITS): traits(B=1, L=7, pad=True, mask="causal")."""
    Lq = Lq if Lq is not None else L
    Lk = Lk if Lk is not None else Lq
    out = []
    if B == 1:
        out.append("b1")
    if Lq == 1 or Lk == 1:
        out.append("l1")
    if Lq is not None and Lk is not None and Lq != Lk:
        out.append("lq_ne_lk")
    if D is not None and Dv is not None and D != Dv:
        out.append("dv_ne_d")
    if H == 1:
        out.append("h1")
    if pad:
        out.append("pad")
    if mask in ("causal", "random3d", "mask3d"):
        out.append("causal" if mask == "causal" else "mask3d")
    if large_logits:
        out.append("large_logits")
    if max(Lq or 0, Lk or 0) >= long_from:
        out.append("long")
    return tuple(out)


def on_cuda(case: Case, dtype: torch.dtype = torch.float16, autocast: torch.dtype | None = None,
            name: str | None = None) -> Case:
    """A CUDA variant of a case (the GPU tier): the same inputs on the device, in `dtype` (float16 by
    default) or in float32 under autocast. Without CUDA it is reported as skipped with the reason."""
    what = f"{'autocast ' if autocast else ''}{str(autocast or dtype).replace('torch.', '')}"
    return dataclasses.replace(
        case, name=name or f"{case.name}_cuda_{what.replace(' ', '_')}", device="cuda",
        dtype=torch.float32 if autocast else dtype, autocast=autocast,
        cuda_reason=f"GPU tier ({what} on CUDA)")


def padding_mask(lengths: torch.Tensor, length: int) -> torch.Tensor:
    """(B, L) bool, True = padding (ignored), right-padded after each row's valid length."""
    return torch.arange(length)[None, :] >= lengths[:, None]


def causal_keep(lq: int, lk: int | None = None) -> torch.Tensor:
    """(Lq, Lk) bool, True = may attend; bottom-right aligned when Lk > Lq (a KV-cache suffix)."""
    lk = lq if lk is None else lk
    return torch.ones(lq, lk, dtype=torch.bool).tril(diagonal=lk - lq)


def case_seed(master: int, name: str) -> int:
    digest = hashlib.sha256(f"{master}:{name}".encode()).digest()
    return int.from_bytes(digest[:6], "little")


def _flat_tensors(values) -> list:
    """The tensors among a case's inputs, also inside lists, tuples and dicts."""
    out = []
    for v in values:
        if isinstance(v, torch.Tensor):
            out.append(v)
        elif isinstance(v, (list, tuple)):
            out += _flat_tensors(v)
        elif isinstance(v, dict):
            out += _flat_tensors(v.values())
    return out


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n


__all__ = ["Case", "Ctx", "Failure", "OpRecord", "OpTracer", "TraceRule", "MaxNumel", "OpInputDtype", "NoAutograd",
           "PeakMemory", "FLOAT32_LEVEL", "FLOAT64_LEVEL", "float64_bound",
           "on_cuda", "padding_mask", "causal_keep", "case_seed", "type_name", "TRAITS", "traits"]
