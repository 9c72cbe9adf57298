"""Helpers for probe files (probes/<id>.py): code that drives a submission in ways a plain call does
not (prefill then decode, a figure to inspect, a unit test to run), beside it in the room.

A probe is a function `probe(p: Probe)`; it runs on the submission (in the room) and on the
reference (in the judge) alike. Its return value is either the outputs the engine judges as usual
(a `probe=` case), or observations that the grader's `check` function judges (a `check=` case).
Probe files are shown to the submission's process: they hold no answers, only ways to ask.
"""
from __future__ import annotations

import contextlib
import math

import torch

from .params import build
from .usercode import seed_all


class Probe:
    """What a probe function sees."""

    def __init__(self, module, data, impl, inputs: dict, kwargs: dict, session, side):
        self.module = module          # the loaded file: the submission's or the reference's
        self.target = getattr(module, data.target)
        self.impl = impl              # the built module (reference parameters copied in) or the function
        self.inputs = inputs          # positional inputs, in this side's dtype
        self.kwargs = kwargs
        self.args = dict(data.probe_args or {})
        self.init = data.init
        self.dtype = data.dtype
        self.device = data.device
        self.seed = data.seed
        self._data, self._session, self._side = data, session, side

    def build(self, target=None, init: dict | None = None, params: bool = True):
        """A fresh instance of the target (or another class of the file) built with `init` (default:
        the case's), with the reference's parameters copied in when `params` is true."""
        data = self._data
        if not params:
            seed_all(data.seed)
            m = (target or self.target)(**(data.init if init is None else init))
            return m.to(device=data.device, dtype=data.dtype).train(data.train)
        return build(self.module, data, self._session, self._side, target=target, init=init)

    def generator(self, salt: int = 0) -> torch.Generator:
        return torch.Generator().manual_seed(self.seed + salt)


class TinyLM:
    """The decode problems' model: one causal attention layer over learned token and position
    embeddings, with a KV cache, built from weights a case gives. weights: tok_emb (V, E), pos_emb
    (max_len, E), qkv (3E, E), out (E, E), lm_head (V, E), and lm_bias (V,) where the problem has one.
    Each call is recorded as [length, start_pos] in `log`, a list the probe keeps and the model holds
    under a private name: the submission, which is handed the model, can neither read nor edit it."""

    def __init__(self, weights: dict, num_heads: int, dtype=torch.float64, log: list | None = None):
        self.w = {n: t.to(dtype) for n, t in weights.items()}
        self.num_heads = num_heads
        self.max_len = self.w["pos_emb"].shape[0]
        self.k_cache = self.v_cache = None
        self.length = 0
        self._log = [] if log is None else log

    def init_cache(self, batch_size: int) -> None:
        E = self.w["tok_emb"].shape[1]
        H = self.num_heads
        shape = (batch_size, H, self.max_len, E // H)
        self.k_cache = torch.zeros(shape, dtype=self.w["tok_emb"].dtype)
        self.v_cache = torch.zeros(shape, dtype=self.w["tok_emb"].dtype)
        self.length = 0

    def __call__(self, input_ids: torch.Tensor, start_pos: int) -> torch.Tensor:
        w = self.w
        B, L = input_ids.shape
        E = w["tok_emb"].shape[1]
        H = self.num_heads
        D = E // H
        self._log.append([int(L), int(start_pos)])
        if self.k_cache is None or self.k_cache.shape[0] != B:
            raise RuntimeError(f"call model.init_cache({B}) before the first model call")
        if start_pos + L > self.max_len:
            raise ValueError(f"positions {start_pos}..{start_pos + L - 1} do not fit in max_len={self.max_len}")
        pos = torch.arange(start_pos, start_pos + L)
        x = w["tok_emb"][input_ids] + w["pos_emb"][pos]                      # (B, L, E)
        q, k, v = (x @ w["qkv"].T).split(E, dim=-1)                         # 3 x (B, L, E)
        q = q.view(B, L, H, D).transpose(1, 2)                              # (B, H, L, D)
        self.k_cache[:, :, start_pos:start_pos + L] = k.view(B, L, H, D).transpose(1, 2)
        self.v_cache[:, :, start_pos:start_pos + L] = v.view(B, L, H, D).transpose(1, 2)
        end = start_pos + L
        keys, values = self.k_cache[:, :, :end], self.v_cache[:, :, :end]   # (B, H, end, D)
        scores = q @ keys.transpose(-2, -1) / math.sqrt(D)                  # (B, H, L, end)
        keep = torch.ones(L, end, dtype=torch.bool).tril(diagonal=start_pos)
        scores = scores.masked_fill(~keep, float("-inf"))
        att = torch.softmax(scores, dim=-1) @ values                        # (B, H, L, D)
        x = x + att.transpose(1, 2).reshape(B, L, E) @ w["out"].T           # (B, L, E)
        logits = x @ w["lm_head"].T                                          # (B, L, V)
        return logits + w["lm_bias"] if "lm_bias" in w else logits


# ---------------------------------------------------------------- built-in probes
def let_through(name: str, code, cls: type) -> None:
    """torch's `code` may call the forbidden entry point `name` for an object of exactly the probe's
    class `cls` (attn_drill.room.guards.let_through)."""
    from .guards import let_through as allow
    allow(name, code, cls)


def calls(p: Probe):
    """Call the target (or `p.args["attr"]` of it) once per entry of `p.args["calls"]`, each
    {"args": [...], "kwargs": {...}}; returns the list of results."""
    fn = p.target
    attr = p.args.get("attr")
    if attr:
        fn = getattr(fn, attr)
    return [describe(fn(*c.get("args", []), **c.get("kwargs", {}))) for c in p.args["calls"]]


def decode(p: Probe):
    """The KV-cache driver: `init_cache(B, max_len[, device])`, then forward on consecutive chunks of x
    at start positions 0, n0, n0+n1, ... (p.args["schedule"] lists the chunk lengths), and a full
    forward from a fresh cache. Returns (incremental, full_forward)."""
    return decode_schedule(p.impl, p.inputs["x"], p.args["schedule"], p.args["max_len"])


def decode_schedule(module, x: torch.Tensor, schedule, max_len: int, seq_dim: int = 1):
    B, L = x.shape[0], x.shape[seq_dim]
    if sum(schedule) != L:
        raise ValueError(f"grader: schedule {schedule} does not cover {L} positions")
    module.init_cache(B, max_len, x.device)
    outs, pos = [], 0
    for n in schedule:
        outs.append(module(x.narrow(seq_dim, pos, n), pos))
        pos += n
    incremental = torch.cat(outs, dim=seq_dim)
    module.init_cache(B, max_len, x.device)
    full = module(x, 0)
    return incremental, full


def decode_state(p: Probe):
    """The KV-cache driver without the full pass: after the schedule, the module's attributes named in
    p.args["attrs"] (e.g. k_cache, v_cache, head_dim), as they are."""
    m = p.build()
    x = p.inputs["x"]
    with torch.no_grad():
        m.init_cache(x.shape[0], p.args["max_len"], x.device)
        pos = 0
        for n in p.args["schedule"]:
            m(x[:, pos:pos + n], pos)
            pos += n
    return {a: describe(getattr(m, a, None)) for a in p.args["attrs"]}


def decode_overflow(p: Probe):
    """Writes at the cache's edge: filling it exactly to max_len (a prefill of max_len - 2, then 2),
    then one token at start_pos = max_len, then 3 at max_len - 1. Each: {"value": "ok"} or the error."""
    m = p.build()
    x = p.inputs["x"]
    B, max_len = x.shape[0], p.args["max_len"]
    steps = []
    with torch.no_grad():
        m.init_cache(B, max_len, x.device)

        def fill():
            m(x[:, :max_len - 2], 0)
            m(x[:, max_len - 2:max_len], max_len - 2)
            return "ok"
        steps.append(attempt(fill))
        for start, n in ((max_len, 1), (max_len - 1, 3)):
            m.init_cache(B, max_len, x.device)
            m(x[:, :start], 0)
            r = attempt(m, x[:, :n], start)
            steps.append({"value": "ok"} if "value" in r else r)
    return steps


def decode_reinit(p: Probe):
    """`decode`, after another sequence ran on a cache of a smaller batch and max_len: a second
    init_cache must start afresh with the new sizes. Returns (incremental, full_forward)."""
    x = p.inputs["x"]
    first = max(1, min(x.shape[1], p.args["max_len"]) // 2)
    p.impl.init_cache(1, first, x.device)
    p.impl(x[:1, :first], 0)
    return decode_schedule(p.impl, x, p.args["schedule"], p.args["max_len"])


BUILTIN = {"calls": calls, "decode": decode, "decode_state": decode_state, "decode_overflow": decode_overflow,
           "decode_reinit": decode_reinit}


# ---------------------------------------------------------------- observing
def attempt(fn, *args, **kwargs) -> dict:
    """Run fn; {"value": result} or {"error": type name, "message": text} (for checks that expect errors)."""
    try:
        return {"value": fn(*args, **kwargs)}
    except Exception as exc:  # noqa: BLE001 - the observation is the error itself
        return {"error": type(exc).__name__, "message": str(exc)[:500]}


def describe(value, depth: int = 0):
    """A value as data the wire can carry: tensors, numbers, strings, bytes, dtypes as they are (also
    inside lists, tuples and dicts); anything else as {"$object": its type name}."""
    if isinstance(value, (torch.Tensor, bool, int, float, complex, str, bytes, type(None), torch.dtype,
                          torch.device)):
        return value
    if isinstance(value, (list, tuple)) and depth < 8:
        return type(value)(describe(v, depth + 1) for v in value)
    if isinstance(value, dict) and depth < 8:
        return {(k if isinstance(k, (str, int)) else str(k)): describe(v, depth + 1) for k, v in value.items()}
    return {"$object": type(value).__name__}


def type_name(value) -> str:
    """The type of a value as the submission returned it (an opaque object keeps its own name)."""
    if isinstance(value, dict) and set(value) == {"$object"}:
        return str(value["$object"])
    return type(value).__name__


def describe_figure(fig, ticks: bool = True) -> dict:
    """A matplotlib Figure as data: its axes (images, titles, labels, tick labels, visibility).
    Tick labels may need the figure drawn (costly): ticks=False leaves them out."""
    from matplotlib.figure import Figure
    if not isinstance(fig, Figure):
        return {"type": type(fig).__name__}
    axes = []
    drawn = False
    for ax in fig.axes:
        def tick_texts(axis):
            nonlocal drawn
            if not ticks:
                return []
            labels = ax.get_xticklabels() if axis == "x" else ax.get_yticklabels()
            texts = [t.get_text() for t in labels]
            if not any(texts) and not drawn:          # some formatters fill the texts only on draw
                from matplotlib.backends.backend_agg import FigureCanvasAgg
                FigureCanvasAgg(fig).draw()
                drawn = True
                labels = ax.get_xticklabels() if axis == "x" else ax.get_yticklabels()
                texts = [t.get_text() for t in labels]
            return [str(t) for t in texts][:200]
        images = []
        for im in ax.images[:4]:
            arr = im.get_array()
            try:
                images.append(torch.tensor(_as_float_list(arr), dtype=torch.float64))
            except (TypeError, ValueError):
                images.append(None)
        axes.append({"images": images, "label": str(ax.get_label()), "title": str(ax.get_title()),
                     "xlabel": str(ax.get_xlabel()),
                     "ylabel": str(ax.get_ylabel()), "xticks": tick_texts("x"), "yticks": tick_texts("y"),
                     "visible": bool(ax.get_visible()), "axison": bool(ax.axison),
                     "has_data": bool(ax.images or ax.collections or ax.lines or ax.patches[1:])})
    sup = fig._suptitle.get_text() if getattr(fig, "_suptitle", None) else ""
    return {"type": "Figure", "axes": axes, "suptitle": str(sup)}


def _as_float_list(arr):
    import numpy as np
    a = np.ma.filled(np.asarray(arr, dtype=np.float64), math.nan) if hasattr(arr, "mask") else \
        np.asarray(arr, dtype=np.float64)
    if a.ndim > 3 or a.size > 1 << 20:
        raise ValueError("image too large")
    return a.tolist()


@contextlib.contextmanager
def torch_calls():
    """Records the torch functions called inside (name, shapes of tensor arguments): sees nn.Linear,
    @, matmul and einsum before they are decomposed."""
    from torch.overrides import TorchFunctionMode

    class Calls(TorchFunctionMode):
        def __init__(self):
            super().__init__()
            self.calls = []

        def __torch_function__(self, func, types, args=(), kwargs=None):
            flat = []
            for a in list(args) + list((kwargs or {}).values()):
                flat.extend(a if isinstance(a, (list, tuple)) else [a])
            name = getattr(func, "__name__", str(func))
            self.calls.append([name, [list(a.shape) for a in flat if isinstance(a, torch.Tensor)]])
            return func(*args, **(kwargs or {}))

    with Calls() as mode:
        yield mode
