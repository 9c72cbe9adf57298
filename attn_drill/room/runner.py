"""A room's main loop: one grading of one file, then exit.

Requests (wire messages on the room's channel):
  {"op": "load", "path", "forbidden", "probes", "hidden", "writable", "budget", "folders", "source", "lang",
   "measured"}  install the audit hook, load the probe code and the user's file (or the given source);
        measured: the room's peak memory is measured, so freed memory goes back to the system at once
  {"op": "case", "data": CaseData, "trace", "repeat"}   run one side of one case
  {"op": "bench_build", "data", "threads"}, {"op": "bench_run", "inputs", "kwargs", "profile"}
                                                         `bench`: build once, then time one call per request
  {"op": "end"}                                          exit
Every reply carries what the code printed and warned since the last one. The time the room spends
working counts against the budget; when it runs out, faulthandler writes the stack to the
traceback pipe and ends the process, so the judge can point at the user's line.
"""
from __future__ import annotations

import faulthandler
import os
import sys
import time

from . import guards, wire
from .limits import give_back_freed_memory, limit_memory
from .side import CaseData, run_side
from .usercode import Compiler, Session, UserProblemError, VettedHelpers, load_module, load_source
from ..i18n import t

_REAL_EXIT = os._exit        # the room's own way out: never the traced one user code sees


class Runner:
    """The loop of one room: requests in, replies out, until the end."""

    def __init__(self, chan, tb):
        self.chan, self.tb = chan, tb
        self.session: Session | None = None
        self.module = None
        self.probes = None
        self.budget = 30.0
        self.used = 0.0

    def serve(self) -> None:
        while True:
            try:
                msg = wire.recv(self.chan)
            except (OSError, wire.WireError):
                break
            if not isinstance(msg, dict) or msg.get("op") in (None, "end"):
                break
            start = time.perf_counter()
            left = max(0.05, self.budget - self.used)
            faulthandler.dump_traceback_later(left, exit=True, file=self.tb)
            try:
                reply = self.handle(msg)
            except BaseException as exc:  # noqa: BLE001 - whatever state the user left behind
                reply = {"problem": self._problem(exc)}
            faulthandler.cancel_dump_traceback_later()
            self.used += time.perf_counter() - start
            reply["used"] = self.used
            if self.session is not None:
                reply["output"] = self.session.stdout.getvalue()
                reply["warnings"] = list(self.session.warnings)
            try:
                wire.send(self.chan, reply)
            except (OSError, wire.WireError) as exc:
                try:
                    wire.send(self.chan, {"problem": {"kind": "runner", "frames": [],
                                                      "message": t("room.cannot_return", why=exc)}})
                except (OSError, wire.WireError):
                    break

    def _problem(self, exc: BaseException) -> dict:
        p = self.session.problem(exc) if self.session else None
        message = p.message if p else f"{type(exc).__name__}: {exc}"
        return {"kind": "runner", "frames": [[f.file, f.line, f.func, f.code] for f in (p.frames if p else [])],
                "message": t("room.runner_stopped", message=message)}

    def handle(self, msg: dict) -> dict:
        op = msg.get("op")
        if op == "load":
            return self.load(msg)
        if op == "bench_build":
            return self.bench_build(msg)
        if op == "bench_run":
            return self.bench_run(msg)
        if op == "bench_sdpa":
            return self.bench_sdpa(msg)
        if op == "case":
            data = CaseData.from_wire(msg["data"])
            side = run_side(self.module, data, session=self.session, trace=bool(msg.get("trace")),
                            repeat=bool(msg.get("repeat")), probes=self.probes)
            return {"side": side.to_wire()}
        return {"problem": {"kind": "runner", "message": f"unknown request {op!r}", "frames": []}}

    # ------------------------------------------------------------ bench: the submission's side only
    def bench_build(self, msg: dict) -> dict:
        import torch

        from .params import build
        from .side import Side
        torch.set_num_threads(max(1, int(msg.get("threads") or 1)))
        data = CaseData.from_wire(msg["data"])
        self.bench_data, self.bench_side = data, Side()
        target = getattr(self.module, data.target, None)
        if target is None:
            return {"problem": {"kind": "missing", "frames": [],
                                "message": t("room.missing_names", target=data.target, names="?")}}
        try:
            self.bench_impl = build(self.module, data, self.session, self.bench_side) if data.init is not None \
                else target
            if data.init is not None:
                self.bench_impl.eval()
        except UserProblemError as exc:
            return {"problem": _wire_problem(exc.problem)}
        except BaseException as exc:  # noqa: BLE001
            return {"problem": _wire_problem(self.session.problem(exc))}
        return {"ok": True}

    def bench_run(self, msg: dict) -> dict:
        """One call on fresh inputs: its time (CUDA events on a GPU), or with profile: the largest
        intermediate tensor and the FLOPs of what it ran."""
        import torch

        from .kit import Probe, describe
        from .side import flatten, plain
        from .tracer import Largest
        data = self.bench_data
        args, kwargs = msg["inputs"], msg["kwargs"]
        probe_fn = (getattr(self.probes, data.probe, None) if self.probes is not None else None) if data.probe else None
        if data.probe and probe_fn is None:
            from . import kit
            probe_fn = kit.BUILTIN.get(data.probe)

        def call():
            if probe_fn is not None:
                return probe_fn(Probe(self.module, data, self.bench_impl, args, kwargs, self.session, self.bench_side))
            return self.bench_impl(*args.values(), **kwargs)
        try:
            with self.session.user(), torch.no_grad():
                if msg.get("profile"):
                    with Largest() as mode:
                        call()
                    return {"largest": mode.best, "flops": float(mode.flops)}
                for v in (*args.values(), *kwargs.values()):   # in cache before the clock starts
                    if isinstance(v, torch.Tensor):
                        v.sum()
                out, seconds = timed(call, data.device)
                out = plain(out)          # read by the built-in types' own methods from here on
        except BaseException as exc:  # noqa: BLE001
            return {"problem": _wire_problem(self.session.problem(exc))}
        return {"seconds": seconds, "outs": [[n, describe(v)] for n, v in flatten(out, data.output_names)]}

    def bench_sdpa(self, msg: dict) -> dict:
        """torch's fused attention on q, k, v (only in the reference's room: fused kernels are not
        blocked there), timed, or profiled."""
        import torch
        import torch.nn.functional as F

        from .tracer import Largest
        q, k, v = msg["q"], msg["k"], msg["v"]
        device = self.bench_data.device if getattr(self, "bench_data", None) else "cpu"
        with torch.no_grad():
            if msg.get("profile"):
                with Largest() as mode:
                    F.scaled_dot_product_attention(q, k, v, is_causal=bool(msg.get("causal")))
                return {"largest": mode.best, "flops": float(mode.flops)}
            for tensor in (q, k, v):
                tensor.sum()
            _, seconds = timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=bool(msg.get("causal"))),
                               device)
        return {"seconds": seconds}

    def load(self, msg: dict) -> dict:
        """Load the submission from the text the judge vetted (and its vetted helper files), with every
        guard in place first: the audit hook, the probes (trusted: loaded before the tripwires, so they
        keep the real entry points), the tripwires. A trusted room (bench's reference) gets none."""
        self.budget = float(msg.get("budget", 30.0))
        if msg.get("measured"):
            give_back_freed_memory()
        path = str(msg["path"])
        rules = msg.get("imports") or {}
        compiler = Compiler(None if msg.get("trusted") or "own_only" not in rules else rules["own_only"])
        helpers = VettedHelpers(msg.get("helpers") or {}, compiler)
        if not msg.get("trusted"):
            guards.install_audit_hook(list(msg.get("hidden") or []), msg.get("writable"),
                                      user_files=[path, *helpers.filenames],
                                      may_import=_import_rule(rules.get("allowed"), rules.get("refused")))
        if msg.get("probes"):
            self.probes = load_source(msg["probes"], "probes", filename=f"<probes/{msg.get('problem')}.py>")
        if not msg.get("trusted"):
            guards.install_tripwires(tuple(msg.get("forbidden") or ()))
        sys.meta_path.insert(0, helpers)
        self.session = Session(path, helpers.filenames)
        try:
            self.module = load_module(path, self.session, "submission", source=msg.get("source"), compiler=compiler)
        except UserProblemError as exc:
            return {"problem": _wire_problem(exc.problem)}
        except (OSError, UnicodeDecodeError) as exc:
            return {"problem": {"kind": "syntax", "message": t("vet.your_file", why=t("vet.unreadable", why=exc)),
                                "frames": []}}
        return {"ok": True}


def _import_rule(allowed, refused):
    """may_import(module) for the audit hook: a top-level module on the list, no refused or private
    part (None: no rule was sent, any import)."""
    if allowed is None:
        return None
    allowed, refused = frozenset(map(str, allowed)), tuple(map(str, refused or ()))

    def may_import(name: str) -> bool:
        parts = name.split(".")
        return parts[0] in allowed and not any(p.startswith("_") for p in parts[1:]) and \
            not any(name == r or name.startswith(r + ".") for r in refused)
    return may_import


def timed(fn, device: str):
    """fn() and its duration in seconds: CUDA events after a synchronize on a GPU, a perf counter on CPU."""
    import torch
    if device == "cuda":
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        out = fn()
        end.record()
        torch.cuda.synchronize()
        return out, start.elapsed_time(end) / 1e3
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def _wire_problem(p) -> dict:
    return {"kind": p.kind, "message": p.message, "frames": [[f.file, f.line, f.func, f.code] for f in p.frames]}


def main(chan, tb_fd: int, memory_gb: float) -> None:
    """Entry point of a freshly forked room. Never returns."""
    code = 0
    try:
        os.setsid()                                  # its own process group: killed as one
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)                     # C-level prints go nowhere near any protocol
        tb = os.fdopen(tb_fd, "w", buffering=1)
        faulthandler.enable(file=tb, all_threads=True)
        _trace_exits(tb)
        import torch

        limit_memory(torch, memory_gb)
        _prewarm()
        Runner(chan, tb).serve()
    except BaseException:  # noqa: BLE001
        code = 3
    _REAL_EXIT(code)


def _prewarm() -> None:
    """Before any request (a room is forked ahead of its grading): run the usual path once on dummy
    data, so this process's copy-on-write and first-use costs are paid while nobody waits. No user
    code has run yet; nothing of this survives into a grading but warm pages."""
    try:
        import torch

        from . import wire
        from .kit import describe
        from .side import CaseData, run_side
        from .tracer import OpTracer

        class _Tiny(torch.nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.proj = torch.nn.Linear(dim, dim, bias=False)

            def forward(self, x, mask=None):
                h = self.proj(x)
                s = h @ h.transpose(-2, -1) / 2.0
                if mask is not None:
                    s = s.masked_fill(mask.logical_not(), float("-inf"))
                return torch.softmax(s, dim=-1) @ h

        import types
        mod = types.SimpleNamespace(Tiny=_Tiny)
        for dtype in (torch.float64, torch.float32, torch.bfloat16):
            data = CaseData(name="warm", target="Tiny", dtype=dtype, init={"dim": 6},
                            inputs={"x": torch.randn(2, 5, 6, dtype=dtype)},
                            kwargs={"mask": torch.ones(5, 5, dtype=torch.bool).tril()},
                            params={"proj.weight": torch.randn(6, 6, dtype=dtype)},
                            upstream={"out": torch.randn(2, 5, 6, dtype=dtype)})
            side = run_side(mod, data, session=None, trace=dtype == torch.float32, repeat=True)
            wire.decode(wire.encode({"side": side.to_wire(), "d": describe(data.to_wire())}))
        with OpTracer():
            torch.zeros(1)
    except Exception:  # noqa: BLE001 - warming is an optimisation only
        pass


def _trace_exits(tb) -> None:
    """os._exit and os.abort from user code leave the stack in the traceback pipe first."""
    real_exit, real_abort = os._exit, os.abort

    def _exit(status=0):
        try:
            faulthandler.dump_traceback(file=tb, all_threads=False)
            tb.write(f"\nos._exit({status})\n")
            tb.flush()
        finally:                  # the judge may have stopped reading: the exit happens all the same
            real_exit(status)

    def abort():
        try:
            faulthandler.dump_traceback(file=tb, all_threads=False)
            tb.write("\nos.abort()\n")
            tb.flush()
        finally:
            real_abort()

    os._exit, os.abort = _exit, abort
