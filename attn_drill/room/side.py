"""One side of a case: build the implementation with the case's parameters, run it on the case's
inputs (traced, for submissions), and take its gradients under the given upstream gradients.

The same code runs the submission in a room and the reference (and mutants) in the judge; what it
needs arrives as CaseData, what it finds leaves as a Side, both plain data.
"""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field, fields

import torch

from ..results import UserProblem
from . import kit, wire
from .guards import dispatch_blocks_hold
from .params import build
from .tracer import OpTracer
from .usercode import Session, UserProblemError, seed_all
from ..i18n import t


@dataclass
class CaseData:
    """What one side needs to run one case."""
    name: str
    target: str
    dtype: torch.dtype
    init: dict | None = None            # constructor kwargs; None: target is a function
    device: str = "cpu"
    autocast: torch.dtype | None = None
    grad: bool = True
    train: bool = False
    deterministic: bool = True
    probe: str | None = None            # a probe function (probes/<id>.py or kit.BUILTIN) instead of a plain call
    probe_args: dict = field(default_factory=dict)
    check: bool = False                 # a check case: the probe's result is an observation, not an output
    output_names: tuple | None = None
    seed: int = 0
    inputs: dict = field(default_factory=dict)    # positional, in order; floats already in this side's dtype
    kwargs: dict = field(default_factory=dict)
    params: dict = field(default_factory=dict)    # the reference's parameters (its layout), this side's dtype
    upstream: dict = field(default_factory=dict)  # output name -> upstream gradient

    def to_wire(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_wire(cls, d: dict) -> "CaseData":
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


@dataclass
class Side:
    outs: list = field(default_factory=list)          # [(name, value)]
    grads: dict = field(default_factory=dict)         # name -> tensor | None
    problem: UserProblem | None = None
    ops: list = field(default_factory=list)
    ops_dropped: int = 0                              # op records the tracer did not keep (past its limit)
    peak_bytes: int | None = None                     # set by the judge only: measured from outside the room
    seconds: float = 0.0
    mutated: list = field(default_factory=list)
    nondeterministic: str | None = None
    adapted: str = ""
    mapping: dict = field(default_factory=dict)       # submission parameter -> plan over reference names
    weights: torch.Tensor | None = None               # the first softmax output, when traced
    weights_used: bool | None = None                  # multiplied on as it is (False: changed first)
    obs: object = None                                # what a check probe observed

    def to_wire(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["outs"] = [[n, kit.describe(v)] for n, v in self.outs]
        d["obs"] = kit.describe(self.obs)
        import json
        d["ops"] = json.dumps([o.to_wire() for o in self.ops])   # one string: decoded at C speed
        d["problem"] = None if self.problem is None else {
            "kind": self.problem.kind, "message": self.problem.message,
            "frames": [[f.file, f.line, f.func, f.code] for f in self.problem.frames]}
        return d


def flatten(out, names=None, prefix="out"):
    if isinstance(out, torch.Tensor) or out is None or isinstance(out, (bool, int, float, str)):
        return [(prefix, out)]
    if isinstance(out, (tuple, list)):
        res = []
        for i, v in enumerate(out):
            n = names[i] if names and i < len(names) else f"{prefix}[{i}]"
            res += flatten(v, None, n)
        return res
    if isinstance(out, dict):
        res = []
        for k, v in out.items():
            res += flatten(v, None, f"{prefix}[{k!r}]")
        return res
    return [(prefix, out)]


def _fresh(values: dict, device: str, grad: bool) -> dict:
    out = {}
    for k, v in values.items():
        if isinstance(v, torch.Tensor):
            v = v.detach().to(device).clone()
            if grad and v.is_floating_point():
                v.requires_grad_(True)
        out[k] = v
    return out


def run_side(mod, data: CaseData, *, session: Session | None, trace: bool, repeat: bool,
             probes=None) -> Side:
    """Run one case on one side. With a session (a submission), anything the code does becomes
    side.problem; without one (the reference, a mutant), exceptions propagate."""
    side = Side()
    user = session.user if session else contextlib.nullcontext
    tracer = OpTracer(capture="_softmax") if trace else None   # keeps the first attention weights too
    try:
        target = getattr(mod, data.target, None)
        if target is None:
            names = sorted(n for n in vars(mod) if not n.startswith("_") and callable(vars(mod)[n]))
            raise UserProblemError(UserProblem(
                "missing", t("room.missing_names", target=data.target, names=", ".join(names) or t("vet.nothing"))))
        probe_fn = None
        if data.probe:
            probe_fn = getattr(probes, data.probe, None) if probes is not None else None
            if probe_fn is None:
                probe_fn = kit.BUILTIN.get(data.probe)
            if probe_fn is None:
                raise LookupError(f"no probe called {data.probe!r}")
        impl = target
        if data.init is not None and not data.check:
            impl = build(mod, data, session, side, target)
        args = _fresh(data.inputs, data.device, data.grad and not data.check)
        kwargs = _fresh(data.kwargs, data.device, False)
        snapshot = {k: v.detach().clone() for k, v in {**args, **kwargs}.items() if isinstance(v, torch.Tensor)}
        amp = (torch.autocast(device_type=data.device, dtype=data.autocast)
               if data.autocast is not None else contextlib.nullcontext())

        def call():
            if probe_fn is not None:
                return probe_fn(kit.Probe(mod, data, impl, args, kwargs, session, side))
            return impl(*args.values(), **kwargs)

        t0 = time.perf_counter()
        # every line of submitted code runs inside the trace: the call, the parameters it lists, its
        # backward and the second run below. What the judge reads is copied out before that second run
        # (the code still holds the tensors it returned and could rewrite them there)
        params = None
        with user(), amp, (tracer if tracer else contextlib.nullcontext()):
            seed_all(data.seed)
            out = plain(call())
            if data.grad and not data.check and data.init is not None and isinstance(impl, torch.nn.Module):
                params = list(impl.named_parameters())
            if session is not None:
                _integrity(tracer)
        if data.check:
            side.obs = _copied(out)
            side.seconds = time.perf_counter() - t0
            return _finish(side, tracer)
        side.outs = flatten(out, data.output_names)
        for k, before in snapshot.items():
            now = {**args, **kwargs}[k]
            if now.shape != before.shape or not _same(now.detach(), before):
                side.mutated.append(k)
        if data.grad:
            _gradients(side, data, params, args, tracer, user)
        side.outs = [(n, _copied(v)) for n, v in side.outs]
        side.grads = {k: _copied(g) for k, g in side.grads.items()}
        side.seconds = time.perf_counter() - t0
        if repeat and data.deterministic and not data.train:
            if tracer:
                tracer.phase = "forward"
            with user(), torch.no_grad(), amp, (tracer if tracer else contextlib.nullcontext()):
                seed_all(data.seed + 1)
                again = flatten(plain(call()), data.output_names)
                if session is not None:
                    _integrity(tracer)
            for (n, a), (_, b) in zip(side.outs, again):
                if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape:
                    if not torch.equal(a.detach(), b.detach()) and not (
                            torch.isnan(a).any() and torch.isnan(b).any()):
                        side.nondeterministic = (f"two runs in eval mode gave different `{n}` "
                                                 f"(max difference {float((a.detach() - b.detach()).abs().max()):.3g})")
                        break
    except UserProblemError as exc:
        side.problem = exc.problem
    except BaseException as exc:  # noqa: BLE001 - the user's code may raise anything, SystemExit included
        if session is None:
            raise
        side.problem = session.problem(exc)
    return _finish(side, tracer)


_REQUIRES_GRAD = torch._C.TensorBase.requires_grad
_EXACT = (bool, int, float, complex, str, bytes, type(None), torch.dtype, torch.device)


def plain(value, depth: int = 0):
    """What the code returned, as data of the built-in types only, made while the tracer and the timer
    still run: every tensor a plain torch.Tensor (the same data and autograd history), a subclass of
    list, tuple, dict, str, int or float read by the built-in type's own methods, a dict key that is
    not a plain str or int named by its type, and any other object by its type name. After this no
    method of the submission's own runs when the room reads, copies or sends what it returned."""
    kind = type(value)
    if kind is torch.Tensor:
        return value
    if issubclass(kind, torch.Tensor):
        with torch._C.DisableTorchFunctionSubclass():
            return torch.Tensor.as_subclass(value, torch.Tensor)
    if kind in _EXACT:
        return value
    if issubclass(kind, float):
        return float.__float__(value)
    if issubclass(kind, int) and kind is not bool:
        return int.__index__(value)
    if issubclass(kind, str):
        return str.__str__(value)
    if depth > wire.MAX_DEPTH:
        return value if kind in (list, tuple, dict) else {"$object": kind.__name__}   # refused when sent
    if issubclass(kind, (list, tuple)):   # subclasses too (a namedtuple): as the plain container
        base = list if issubclass(kind, list) else tuple
        items = [plain(base.__getitem__(value, i), depth + 1) for i in range(base.__len__(value))]
        return items if base is list else tuple(items)
    if issubclass(kind, dict):
        return {_key(k): plain(v, depth + 1) for k, v in dict.items(value)}
    return {"$object": kind.__name__}


def _key(k):
    kind = type(k)
    if kind in (str, int, bool, float, type(None)):
        return k
    return plain(k) if issubclass(kind, (str, int, float)) else f"<{kind.__name__}>"


def _copied(value):
    """A copy of what the judge will read (tensors cloned, containers rebuilt), taken outside the code's
    reach: the code keeps the tensors it returned and may write into them later."""
    if type(value) is torch.Tensor:
        with torch._C.DisableTorchFunction():
            return value.detach().clone()
    if type(value) is list:
        return [_copied(v) for v in value]
    if type(value) is tuple:
        return tuple(_copied(v) for v in value)
    if type(value) is dict:
        return {k: _copied(v) for k, v in value.items()}
    return value


def _gradients(side: Side, data: CaseData, params: list | None, args: dict, tracer, user) -> None:
    """params: the module's (name, parameter) pairs, listed while the trace ran (None: a function)."""
    float_outs = [(n, v) for n, v in side.outs if isinstance(v, torch.Tensor) and v.is_floating_point()]
    wrt_names = [k for k, v in args.items() if isinstance(v, torch.Tensor) and v.requires_grad]
    wrt = [args[k] for k in wrt_names]
    pnames = []
    frozen = []
    if params is not None:
        plist = {n: p for n, p in params if type(n) is str and issubclass(type(p), torch.Tensor)}
        # every parameter is asked for its gradient: one the code froze (requires_grad False) has none
        # (read by the tensor's own field: a subclass's property would be the submission's code)
        needs = {n: bool(_REQUIRES_GRAD.__get__(p)) for n, p in plist.items()}
        pnames = [n for n in plist if needs[n]]
        frozen = [n for n in plist if not needs[n]]
        wrt += [plist[n] for n in pnames]
    diff_outs = [(n, v) for n, v in float_outs if v.requires_grad]
    if float_outs and not diff_outs:
        side.grads = {**{k: None for k in wrt_names}, **{f"param {n}": None for n in pnames + frozen}}
        return
    if not (diff_outs and wrt):
        side.grads = {f"param {n}": None for n in frozen}
        return
    upstream = []
    up = data.upstream
    for n, v in diff_outs:
        g = up.for_output(n, v) if hasattr(up, "for_output") else up.get(n)   # the judge's truth makes them
        if not isinstance(g, torch.Tensor) or tuple(g.shape) != tuple(v.shape):
            return  # a wrong shape: judged on the forward
        upstream.append(g.to(device=v.device, dtype=v.dtype))
    # sum(out * g) has gradient g with respect to out, exactly, in any dtype; a scalar root also
    # spares autograd's grad_outputs checks (which import sympy: 0.3 s cold)
    # (the grader's own steps run with gradients on, whatever global grad mode the code chose)
    with torch.enable_grad():
        root = sum((v * g).sum() for (_, v), g in zip(diff_outs, upstream))
        if tracer:
            tracer.phase = "backward"
        with user(), (tracer if tracer else contextlib.nullcontext()):
            grads = torch.autograd.grad(root, wrt, allow_unused=True)
    keys = wrt_names + [f"param {n}" for n in pnames]
    side.grads = {**dict(zip(keys, grads)), **{f"param {n}": None for n in frozen}}


def _integrity(tracer) -> None:
    """After user code ran: the op tracer still records and fused kernels still raise."""
    from torch.utils._python_dispatch import _get_current_dispatch_mode
    if tracer is not None and _get_current_dispatch_mode() is not tracer:
        raise UserProblemError(UserProblem("tampering", t("room.tracer_removed")))
    if not dispatch_blocks_hold():
        raise UserProblemError(UserProblem("tampering", t("room.unblocked")))


def _finish(side: Side, tracer) -> Side:
    if tracer:
        side.ops = tracer.ops
        side.ops_dropped = tracer.dropped
        side.weights = tracer.captured
        side.weights_used = tracer.captured_used
    return side


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal values, NaN in the same places counting as equal (an input may hold NaN on purpose)."""
    if torch.equal(a, b):
        return True
    if a.dtype != b.dtype or not a.is_floating_point():
        return False
    both = torch.isnan(a) & torch.isnan(b)
    return bool(((a == b) | both).all())
