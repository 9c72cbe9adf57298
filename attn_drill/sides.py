"""One side of a case: the reference in float64, the reference in the case dtype, or a submission,
built with the same parameters and inputs, run (traced for submissions), with its gradients."""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field

import torch

from .api import Case, OpTracer as Tracer, case_seed
from .params import InterfaceError, adapt
from .results import UserProblem
from .usercode import Session, UserProblemError

@dataclass
class Side:
    outs: list = field(default_factory=list)          # [(name, value)]
    grads: dict = field(default_factory=dict)         # name -> tensor | None
    problem: UserProblem | None = None
    ops: list = field(default_factory=list)
    seconds: float = 0.0
    mutated: list = field(default_factory=list)
    nondeterministic: str | None = None
    adapted: str = ""
    weights: torch.Tensor | None = None                # the first softmax output, when traced


def _flatten(out, names=None, prefix="out"):
    if isinstance(out, torch.Tensor) or out is None or isinstance(out, (bool, int, float, str)):
        return [(prefix, out)]
    if isinstance(out, (tuple, list)):
        res = []
        for i, v in enumerate(out):
            n = names[i] if names and i < len(names) else f"{prefix}[{i}]"
            res += _flatten(v, None, n)
        return res
    if isinstance(out, dict):
        res = []
        for k, v in out.items():
            res += _flatten(v, None, f"{prefix}[{k!r}]")
        return res
    return [(prefix, out)]


def _cast(values: dict, dtype, device, grad: bool, truth: bool = False) -> dict:
    out = {}
    for k, v in values.items():
        if isinstance(v, torch.Tensor):
            if v.is_floating_point():
                v = v.to(device=device, dtype=dtype)
                if truth:
                    v = v.to(torch.float64)
                v = v.detach().clone().requires_grad_(grad)
            else:
                v = v.to(device).clone()
        out[k] = v
    return out


class Prepared:
    """Inputs, parameters and upstream gradients of one case, shared by every side."""

    def __init__(self, case: Case, ref_mod):
        self.case = case
        dev = case.device
        d = case.dtype
        self.ref_params: dict[str, torch.Tensor] = {}
        if case.init is not None:
            torch.manual_seed(case.seed)
            base = getattr(ref_mod, case.target)(**case.init)
            self.ref_params = {n: p.detach().to(torch.float64) for n, p in base.named_parameters()}
        self.params_low = {n: p.to(device=dev, dtype=d) for n, p in self.ref_params.items()}
        self.params_truth = {n: p.to(torch.float64) for n, p in self.params_low.items()}
        self.upstream: dict[str, torch.Tensor] = {}

    def inputs(self, truth: bool):
        c = self.case
        args = _cast(c.inputs, c.dtype, c.device, c.grad, truth)
        kwargs = _cast(c.kwargs, c.dtype, c.device, False, truth)
        return args, kwargs

    def grad_for(self, name: str, like: torch.Tensor, truth: bool) -> torch.Tensor | None:
        """The upstream gradient for output `name`; None when `like` has another shape than the truth's."""
        if name in self.upstream and tuple(self.upstream[name].shape) != tuple(like.shape):
            return None
        if name not in self.upstream:
            gen = torch.Generator().manual_seed(case_seed(self.case.seed, "upstream:" + name))
            g = torch.randn(tuple(like.shape), generator=gen, dtype=torch.float64)
            self.upstream[name] = g.to(self.case.dtype if self.case.dtype.is_floating_point else torch.float32)
        g = self.upstream[name]
        return g.to(device=like.device, dtype=torch.float64 if truth else like.dtype)


def run_side(mod, prep: Prepared, *, truth: bool, session: Session | None, trace: bool,
             repeat: bool) -> Side:
    case = prep.case
    side = Side()
    user = session.user if session else contextlib.nullcontext
    dtype = torch.float64 if truth else case.dtype
    tracer = Tracer(capture="_softmax") if trace else None   # keeps the first attention weights too
    try:
        target = getattr(mod, case.target, None)
        if target is None:
            names = sorted(n for n in vars(mod) if not n.startswith("_") and callable(vars(mod)[n]))
            raise UserProblemError(UserProblem(
                "missing", f"your file defines no `{case.target}`; it defines: {', '.join(names) or 'nothing'}. "
                           f"Keep the names from the stub."))
        impl = target
        mapping = {}
        if case.init is not None:
            with user():
                torch.manual_seed(case.seed)
                impl = target(**case.init)
            if not isinstance(impl, torch.nn.Module):
                raise UserProblemError(UserProblem(
                    "interface", f"`{case.target}(...)` built a {type(impl).__name__}, not a torch.nn.Module"))
            impl.to(device=case.device, dtype=dtype)
            sub_params = dict(impl.named_parameters())
            try:
                mapping, side.adapted = adapt(prep.ref_params, {n: tuple(p.shape) for n, p in sub_params.items()})
            except InterfaceError as exc:
                raise UserProblemError(UserProblem("interface", str(exc))) from None
            src = prep.params_truth if truth else prep.params_low
            with torch.no_grad():
                for name, fn in mapping.items():
                    sub_params[name].copy_(fn(src))
            impl.train(case.train)
        args, kwargs = prep.inputs(truth)
        snapshot = {k: v.detach().clone() for k, v in {**args, **kwargs}.items() if isinstance(v, torch.Tensor)}
        amp = (torch.autocast(device_type=case.device, dtype=case.autocast)
               if case.autocast is not None and not truth else contextlib.nullcontext())

        def call():
            if case.run is not None:
                return case.run(impl, *args.values(), **kwargs)
            return impl(*args.values(), **kwargs)

        t0 = time.perf_counter()
        with user(), amp, (tracer if tracer else contextlib.nullcontext()):
            torch.manual_seed(case.seed)
            out = call()
        side.outs = _flatten(out, case.output_names)
        for k, before in snapshot.items():
            now = {**args, **kwargs}[k]
            if now.shape != before.shape or not torch.equal(now.detach(), before):
                side.mutated.append(k)
        if case.grad:
            float_outs = [(n, v) for n, v in side.outs
                          if isinstance(v, torch.Tensor) and v.is_floating_point()]
            wrt_names = [k for k, v in args.items() if isinstance(v, torch.Tensor) and v.requires_grad]
            wrt = [args[k] for k in wrt_names]
            pnames = []
            if case.init is not None:
                plist = dict(impl.named_parameters())
                pnames = [n for n in plist if plist[n].requires_grad]
                wrt += [plist[n] for n in pnames]
            diff_outs = [(n, v) for n, v in float_outs if v.requires_grad]
            if float_outs and not diff_outs:
                side.grads = {**{k: None for k in wrt_names}, **{f"param {n}": None for n in pnames}}
            elif diff_outs and wrt:
                upstream = [prep.grad_for(n, v, truth) for n, v in diff_outs]
                if all(g is not None for g in upstream):  # else a wrong shape, judged on the forward
                    # sum(out * g) has gradient g with respect to out, exactly, in any dtype; a scalar
                    # root also spares autograd's grad_outputs checks (which import sympy: 0.3 s cold)
                    root = sum((v * g).sum() for (_, v), g in zip(diff_outs, upstream))
                    if tracer:
                        tracer.phase = "backward"
                    with user(), (tracer if tracer else contextlib.nullcontext()):
                        grads = torch.autograd.grad(root, wrt, allow_unused=True)
                    keys = wrt_names + [f"param {n}" for n in pnames]
                    side.grads = dict(zip(keys, grads))
        side.seconds = time.perf_counter() - t0
        if repeat and case.deterministic and not case.train:
            with user(), torch.no_grad(), amp:
                torch.manual_seed(case.seed + 1)
                again = _flatten(call(), case.output_names)
            for (n, a), (_, b) in zip(side.outs, again):
                if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape:
                    if not torch.equal(a.detach(), b.detach()) and not (
                            torch.isnan(a).any() and torch.isnan(b).any()):
                        side.nondeterministic = (f"two runs in eval mode gave different `{n}` "
                                                 f"(max difference {float((a.detach() - b.detach()).abs().max()):.3g})")
                        break
        side.mapping = mapping
    except UserProblemError as exc:
        side.problem = exc.problem
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - the user's code may raise anything
        if session is None:
            raise
        side.problem = session.problem(exc)
    if tracer:
        side.ops = tracer.ops
        side.weights = tracer.captured
    return side


# ---------------------------------------------------------------- judging a case
