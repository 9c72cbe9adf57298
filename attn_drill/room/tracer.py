"""The op recorder: every aten op a submission runs, with its phase, dtypes and sizes."""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.autograd.forward_ad as _forward_ad
from torch.utils._python_dispatch import TorchDispatchMode


@dataclass
class OpRecord:
    name: str                         # e.g. "aten.softmax.default" / "aten._softmax.default"
    phase: str                        # "forward", "backward", or "autograd" (run by autograd inside the forward)
    in_dtypes: tuple                  # dtypes of tensor inputs, in order
    in_shapes: tuple
    out_shapes: tuple                 # shapes of tensor outputs
    out_numel: int                    # numel of the largest tensor output

    def to_wire(self) -> list:
        return [self.name, self.phase, [str(d).replace("torch.", "") for d in self.in_dtypes],
                [list(s) for s in self.in_shapes], [list(s) for s in self.out_shapes], self.out_numel]


class OpTracer(TorchDispatchMode):
    """Records every aten op run inside it (`with OpTracer() as t: ...; t.ops`), with its phase.

    An op that runs in the forward phase while autograd computes a derivative is recorded with phase
    "autograd": while the backward engine runs (torch.autograd.grad, .backward(), torch.func.grad and
    vjp inside the user's own forward) and while forward-mode AD is on (torch.func.jvp and jacfwd,
    torch.autograd.forward_ad). Past `limit` records the trace stops growing and `dropped` counts
    the rest: a rule on an incomplete trace cannot pass.
    """

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # never compiled; skipping would import torch._dynamo (about a second) on first use

    def __init__(self, phase: str = "forward", capture: str | None = None, limit: int = 200_000):
        super().__init__()
        self.ops: list[OpRecord] = []
        self.phase = phase
        self.capture = capture            # keep the output of the first forward op whose name has this
        self.captured: torch.Tensor | None = None
        # whether the captured output is what the code multiplies on (True), or is changed first by
        # another op (False: masked, renormalised, dropped out...); None: not known
        self.captured_used: bool | None = None
        self._aliases: set[int] = set()   # storages holding the captured output (views and casts of it)
        self.limit = limit
        self.dropped = 0

    def _follow(self, name: str, ins: list, outs: list) -> None:
        """The first op after the captured softmax that reads it (or a view, copy or cast of it)
        decides: a product uses it as it is, anything else changes it first."""
        if not any(_storage(t) in self._aliases for t in ins):
            return
        if name.startswith(PASS_ON):
            self._aliases |= {_storage(t) for t in outs}
        else:
            self.captured_used = name.startswith(PRODUCTS)

    def __torch_dispatch__(self, func, types_, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        phase = self.phase
        if phase == "forward" and (torch._C._current_graph_task_id() != -1 or _forward_ad._current_level >= 0):
            phase = "autograd"
        if len(self.ops) >= self.limit:
            self.dropped += 1
            return out
        ins = _tensors(args, [])
        if kwargs:
            _tensors(kwargs.values(), ins)
        outs = [out] if isinstance(out, torch.Tensor) else _tensors(out if isinstance(out, (list, tuple)) else (), [])
        if self._aliases and self.captured_used is None and phase == "forward":
            self._follow(str(func), ins, outs)
        if (self.capture and self.captured is None and phase == "forward" and outs
                and self.capture in str(func) and outs[0].dim() >= 2):
            self.captured = outs[0].detach().clone()
            self._aliases = {_storage(outs[0])}
        self.ops.append(OpRecord(
            name=str(func), phase=phase,
            in_dtypes=tuple(t.dtype for t in ins), in_shapes=tuple(tuple(t.shape) for t in ins),
            out_shapes=tuple(tuple(t.shape) for t in outs),
            out_numel=max((t.numel() for t in outs), default=0)))
        return out


# ops that pass the captured weights on unchanged (a view, a copy, a cast), and the products that use them
PASS_ON = ("aten.view", "aten._unsafe_view", "aten.expand", "aten.t.", "aten.transpose", "aten.permute",
           "aten.unsqueeze", "aten.squeeze", "aten.reshape", "aten._reshape_alias", "aten.alias", "aten.detach",
           "aten.clone", "aten._to_copy", "aten.contiguous", "aten.slice", "aten.select", "aten.as_strided",
           "aten.lift_fresh")
PRODUCTS = ("aten.bmm", "aten.mm", "aten.matmul", "aten.baddbmm", "aten.addmm", "aten.mv", "aten.dot")


def _storage(t: torch.Tensor) -> int:
    try:
        return t.untyped_storage().data_ptr()
    except RuntimeError:       # a tensor without storage
        return -1


def _tensors(values, into: list) -> list:
    """The tensors among values, also inside lists and tuples (aten arguments nest no deeper)."""
    for v in values:
        if isinstance(v, torch.Tensor):
            into.append(v)
        elif isinstance(v, (list, tuple)):
            _tensors(v, into)
    return into


class Largest(TorchDispatchMode):
    """The largest tensor any op allocates (views excluded), the FLOPs of the ops it runs (torch's
    FlopCounterMode formulas, without FlopCounterMode's dynamo import), and optionally every op's shapes."""

    NO_ALLOC = ("aten.view", "aten._unsafe_view", "aten.expand", "aten.t.", "aten.transpose", "aten.permute",
                "aten.detach", "aten.alias", "aten.as_strided", "aten.slice", "aten.select", "aten.unsqueeze",
                "aten.squeeze", "aten.split", "aten.unbind", "aten.chunk", "aten.narrow", "aten._reshape_alias",
                "aten.lift_fresh")

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False

    def __init__(self, record: bool = False):
        super().__init__()
        from torch.utils.flop_counter import flop_registry
        self.registry = flop_registry
        self.best = None
        self.flops = 0
        self.record = record
        self.ops: list[tuple[str, list, list]] = []

    def __torch_dispatch__(self, func, types_, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = str(func)
        count = self.registry.get(func._overloadpacket)
        if count is not None:
            self.flops += count(*args, **(kwargs or {}), out_val=out)
        outs = [out] if isinstance(out, torch.Tensor) else _tensors(out if isinstance(out, (list, tuple)) else (), [])
        if self.record:
            ins = [list(a.shape) for a in _tensors(list(args) + list((kwargs or {}).values()), [])]
            self.ops.append((name, ins, [list(o.shape) for o in outs]))
        if not name.startswith(self.NO_ALLOC):
            for o in outs:
                nbytes = o.numel() * o.element_size()
                if self.best is None or nbytes > self.best["bytes"]:
                    self.best = {"op": name, "shape": list(o.shape), "numel": o.numel(), "bytes": nbytes,
                                 "dtype": str(o.dtype).replace("torch.", "")}
        return out
