"""The timing behind `attn-drill bench`: the judge's `bench` operation (attn_drill.judge.server).

The submission runs in a room (attn_drill.room) and times its own calls there. The reference and torch's fused
`F.scaled_dot_product_attention` are timed in a second room of their own, forked from a second
zygote of the same making but without the kernel blocks, so both sides run in processes of the
same history (allocator, caches), in turn, on the same inputs. The reference's room is trusted (it
runs only the reference) and is never the submission's. What it times, on the same sizes: the
submission, the reference (both in the bench dtype, with the reference's parameters copied into the
submission) and the fused SDPA on the q/k/v shapes of the reference's attention core. The sizes come from the spec:

    settings:
      bench:                                  # every key optional except inputs
        target: MultiHeadSelfAttention        # default: the first interface name
        init: {hidden_dim: 512, num_heads: 8, dropout: 0.0}   # constructor kwargs (module problems)
        inputs: {x: [4, 256, 512]}            # positional float inputs as shapes (randn)
        kwargs: {}                            # keyword inputs: {shape: [...]} for randn, else literal
        dtype: float32                        # default float32
        sdpa: {q: [4, 8, 256, 64], k: [...], v: [...], is_causal: false}

Without a `bench` section the grader's largest case (by input elements) is timed, in float32 when the
case is float64. Without `sdpa` the q/k/v shapes are read off the reference's op trace: the softmax,
the matmul that made its input and the matmul that consumes it. No softmax: no SDPA column.

Each timed run gets fresh inputs, and every output of every timed run is compared with the
reference's output on the same inputs, so a cached answer cannot win. Runs repeat, in a shuffled
order, until the relative standard error of each median is under 2% or the time cap is reached.
On CUDA the runs are timed with CUDA events after torch.cuda.synchronize() (that path is untested).
"""
from __future__ import annotations

import math
import random
import statistics
import time
from pathlib import Path

TARGET_RSE = 0.02
WARMUP = 3
MIN_RUNS = 5
MAX_RUNS = 500
TOLERANCE = {"float64": 1e-9, "float32": 2e-4, "bfloat16": 3e-2, "float16": 1e-2}


class BenchProblem(Exception):
    """Something about the submission (not the tool) stops the benchmark: exit 1."""


def _numel(shape) -> int:
    return math.prod(int(s) for s in shape)


def sdpa_shapes(ops) -> dict | None:
    """q, k, v shapes of the attention core, from (name, in_shapes, out_shapes) records."""
    for i, (name, ins, outs) in enumerate(ops):
        if "softmax" not in name or "backward" in name or not ins or len(ins[0]) < 2:
            continue
        s = ins[0]
        *lead, lq, lk = s
        n = _numel(s)
        before = next((o for o in reversed(ops[:i]) if o[0].startswith(("aten.bmm", "aten.mm", "aten.baddbmm"))
                       and o[2] and _numel(o[2][0]) == n), None)
        after = next((o for o in ops[i + 1:] if o[0].startswith(("aten.bmm", "aten.mm"))
                      and o[1] and _numel(o[1][0]) == n), None)
        if before is None or after is None:
            return None
        a, b = before[1][-2], before[1][-1]   # (.., Lq, D) @ (.., D, Lk)
        d, dv = a[-1], after[1][1][-1]        # weights (.., Lq, Lk) @ v (.., Lk, Dv)
        if a[-2] != lq or b[-1] != lk:
            return None
        return {"q": [*lead, lq, d], "k": [*lead, lk, d], "v": [*lead, lk, dv], "is_causal": False}
    return None


def run(req, rooms, trusted) -> dict:
    """The timing result of a protocol.Bench request; BenchProblem for the submission's faults.
    `rooms`: the zygote of the submission's room; `trusted`: one whose rooms keep torch's fused kernels
    (the reference and SDPA are timed there)."""
    bench = None
    try:
        bench = Bench(req, rooms, trusted)
        return bench.run()
    finally:
        for room in (getattr(bench, "room", None), getattr(bench, "ref_room", None)):
            if room is not None:
                room.close()


class Bench:
    def __init__(self, req, rooms, trusted):
        import torch

        from .. import bank
        from ..room.usercode import load_module
        self.torch = torch
        self.req = req
        self.spec = bank.get(req.problem)
        self.path = str(Path(req.path).resolve())
        want = req.device or "auto"
        if want == "cuda" and not torch.cuda.is_available():
            raise BenchProblem("--device cuda, but this machine has no CUDA device")
        self.device = "cuda" if want == "cuda" or (want == "auto" and torch.cuda.is_available()) else "cpu"
        self.seed = int(req.seed)
        from ..bank import sources
        self.vetting = sources.vet_tree(Path(self.path), self.spec, load=True)
        if self.vetting.problem is not None:
            raise BenchProblem(_where(self.vetting.problem))
        self.src = self.vetting.src
        self.ref_mod = load_module(str(bank.reference_path(self.spec.id)), None, "reference")
        probe_path = bank.probe_path(self.spec.id)
        self.probe_source = probe_path.read_text(encoding="utf-8") if probe_path.is_file() else None
        self.probes = None
        if self.probe_source:
            from ..room.usercode import load_source
            self.probes = load_source(self.probe_source, "probes", filename=str(probe_path))
        self._plan()
        self._open_room(rooms, trusted, float(req.time_limit), int(req.threads or 1))

    # ------------------------------------------------------------ what to run
    def _plan(self) -> None:
        torch = self.torch
        conf = self.spec.settings.get("bench")
        self.probe, self.probe_args = None, {}
        if isinstance(conf, dict) and conf.get("inputs"):
            self.target = conf.get("target", self.spec.interface[0])
            self.init = conf.get("init")
            self.dtype = getattr(torch, conf.get("dtype", "float32"))
            self.shapes = {k: list(v) for k, v in conf["inputs"].items()}
            self.base_inputs = {k: torch.randn(*v, dtype=torch.float64) for k, v in self.shapes.items()}
            self.base_kwargs = {k: (torch.randn(*v["shape"], dtype=torch.float64)
                                    if isinstance(v, dict) and "shape" in v else v)
                                for k, v in (conf.get("kwargs") or {}).items()}
            self.source = "settings.bench in the spec"
            self.sdpa = conf.get("sdpa")
        else:
            from .. import bank
            from ..bank.api import Ctx, case_seed
            from ..room.usercode import load_module
            grader = load_module(str(bank.grader_path(self.spec.id)), None, "grader")
            cases = [c for c in grader.cases(Ctx(self.seed, full=True, settings=self.spec.settings))
                     if not c.is_check and c.device == "cpu"]
            if not cases:
                raise BenchProblem(f"{self.spec.id} has no cases with inputs to time (a figure, formula or "
                                   f"test problem); bench times problems that compute attention")

            def size(c):
                return sum(v.numel() for v in {**c.inputs, **c.kwargs}.values() if isinstance(v, torch.Tensor))
            case = max(cases, key=size)
            case.seed = case_seed(self.seed, case.name)
            self.target, self.init = case.target, case.init
            self.probe, self.probe_args = case.probe, dict(case.probe_args)
            self.dtype = torch.float32 if case.dtype == torch.float64 else case.dtype
            self.base_inputs, self.base_kwargs = dict(case.inputs), dict(case.kwargs)
            self.shapes = {k: list(v.shape) for k, v in case.inputs.items() if isinstance(v, torch.Tensor)}
            self.source = (f"the grader's largest case '{case.name}' (add settings.bench to "
                           f"problems/{self.spec.id}.yaml for typical sizes)")
            self.sdpa = None
        self.ref_impl = self._build_ref()
        if self.sdpa is None:
            from ..room.tracer import Largest
            mode = Largest(record=True)
            args, kwargs = self.fresh(0)
            with torch.no_grad(), mode:
                self._call_ref(args, kwargs)
            self.sdpa = sdpa_shapes(mode.ops)
            self.sdpa_source = "read off the reference's op trace" if self.sdpa else None
        else:
            self.sdpa_source = "settings.bench.sdpa"

    def _data(self, params: dict):
        from ..room.side import CaseData
        return CaseData(name="bench", target=self.target, dtype=self.dtype, init=self.init, device=self.device,
                        grad=False, probe=self.probe, probe_args=self.probe_args, seed=self.seed, params=params)

    def _build_ref(self):
        from ..room.usercode import seed_all
        target = getattr(self.ref_mod, self.target)
        if self.init is None:
            self.ref_data = self._data({})
            return target
        seed_all(self.seed)
        ref = target(**self.init).to(device=self.device, dtype=self.dtype).eval()
        self.ref_data = self._data({n: p.detach() for n, p in ref.named_parameters()})
        return ref

    def _call_ref(self, args, kwargs):
        if self.probe:
            from ..room import kit
            from ..room.side import Side
            fn = getattr(self.probes, self.probe, None) if self.probes is not None else None
            fn = fn or kit.BUILTIN[self.probe]
            return fn(kit.Probe(self.ref_mod, self.ref_data, self.ref_impl, args, kwargs, None, Side()))
        return self.ref_impl(*args.values(), **kwargs)

    def _open_room(self, rooms, trusted, time_limit: float, threads: int) -> None:
        from .. import bank
        from ..bank import policy, sources
        from .rooms import RoomFailure
        from .sandbox import hidden_from
        self.room = rooms.open(preload=policy.imported_modules(self.src), warm=False)
        self.room.budget, self.room.path = time_limit, self.path
        ref_path = bank.reference_path(self.spec.id)
        self.ref_room = trusted.open(preload=policy.imported_modules(sources.read(ref_path)), warm=False)
        self.ref_room.budget, self.ref_room.path = time_limit + 600.0, str(ref_path)
        try:
            from .engine import load_request
            reply = self.room.call(load_request(self.spec, self.vetting, self.path, self.probe_source,
                                                hidden_from(self.path), None, time_limit))
        except RoomFailure as exc:
            raise BenchProblem(_where(exc.problem)) from None
        self._check(reply)
        self.ref_room.call({"op": "load", "path": str(ref_path), "problem": self.spec.id, "forbidden": [],
                            "trusted": True,
                            "probes": self.probe_source, "source": sources.read(ref_path), "hidden": [],
                            "budget": self.ref_room.budget})
        build = {"op": "bench_build", "data": self.ref_data.to_wire(), "threads": threads}
        self._ask(build)
        self._ask_ref(build)

    def _ask(self, msg: dict) -> dict:
        from .rooms import RoomFailure
        try:
            reply = self.room.call(msg)
        except RoomFailure as exc:
            raise BenchProblem(_where(exc.problem)) from None
        return self._check(reply)

    def _ask_ref(self, msg: dict) -> dict:
        reply = self.ref_room.call(msg)
        if reply.get("problem"):
            raise RuntimeError(f"the reference failed in its timing room: {reply['problem']}")
        return reply

    @staticmethod
    def _check(reply: dict) -> dict:
        from . import untrusted
        if not isinstance(reply, dict):
            raise BenchProblem(untrusted.problem({"kind": "runner", "message": "an unreadable reply"}).message)
        if reply.get("problem"):
            raise BenchProblem(_where(untrusted.problem(reply["problem"])))
        return reply

    def fresh(self, i: int):
        """New inputs for run i: float tensors redrawn with the same shape and scale; masks kept."""
        torch = self.torch
        gen = torch.Generator().manual_seed(self.seed * 1_000_003 + i)

        def redraw(v):
            if isinstance(v, torch.Tensor):
                if v.is_floating_point():
                    scale = float(v.double().std()) if v.numel() > 1 else 1.0
                    v = torch.randn(v.shape, generator=gen, dtype=torch.float64) * (scale or 1.0)
                    return v.to(device=self.device, dtype=self.dtype)
                return v.to(self.device)
            return v
        return ({k: redraw(v) for k, v in self.base_inputs.items()},
                {k: redraw(v) for k, v in self.base_kwargs.items()})

    def sdpa_inputs(self, i: int):
        torch = self.torch
        gen = torch.Generator().manual_seed(self.seed * 7_000_003 + i)
        return [torch.randn(self.sdpa[n], generator=gen, dtype=torch.float32).to(self.device, self.dtype)
                for n in ("q", "k", "v")]

    # ------------------------------------------------------------ timing
    def _verify(self, sub_outs, ref_outs, run: int) -> float:
        torch = self.torch
        worst = 0.0
        s_list, r_list = sub_outs, ref_outs
        if len(s_list) != len(r_list):
            raise BenchProblem(f"timed run {run}: your code returned {len(s_list)} output(s), the reference "
                               f"{len(r_list)}; run attn-drill check {self.spec.id} first")
        tol = TOLERANCE.get(str(self.dtype).replace("torch.", ""), 1e-2)
        for (name, s), (_, r) in zip(s_list, r_list):
            if not isinstance(r, torch.Tensor):
                continue
            if not isinstance(s, torch.Tensor) or tuple(s.shape) != tuple(r.shape):
                got = list(s.shape) if isinstance(s, torch.Tensor) else "not a tensor"
                raise BenchProblem(f"timed run {run}: `{name}` is {got}, expected {list(r.shape)}; run "
                                   f"attn-drill check {self.spec.id} first")
            if not r.is_floating_point():
                if not torch.equal(s.cpu(), r.cpu()):
                    raise BenchProblem(f"timed run {run}: `{name}` differs from the reference")
                continue
            a, b = s.detach().double().cpu(), r.detach().double().cpu()
            ok = torch.isfinite(b)
            if not torch.equal(torch.isfinite(a) & ok, ok):
                raise BenchProblem(f"timed run {run}: `{name}` has NaN/inf where the reference is finite")
            err = float((a[ok] - b[ok]).norm() / (b[ok].norm() + 1e-30)) if ok.any() else 0.0
            if err > tol:
                raise BenchProblem(f"timed run {run}: `{name}` differs from the reference on fresh inputs "
                                   f"(relative error {err:.3g} > {tol:g}); a cached or wrong answer? Run "
                                   f"attn-drill check {self.spec.id} first")
            worst = max(worst, err)
        return worst

    def run(self) -> dict:
        from . import untrusted
        torch = self.torch
        causal = bool(self.sdpa and self.sdpa.get("is_causal"))
        series = {"submission": [], "reference": []}
        if self.sdpa:
            series["sdpa"] = []
        worst, runs, stopped = 0.0, 0, "time cap"
        rng = random.Random(self.seed)
        cap = float(self.req.max_seconds)
        t_start = time.perf_counter()
        with torch.no_grad():
            for i in range(WARMUP + MAX_RUNS):
                args, kwargs = self.fresh(i + 1)
                order = list(series)
                rng.shuffle(order)
                outs = {}
                for who in order:
                    if who == "sdpa":
                        q, k, v = self.sdpa_inputs(i)
                        t = float(self._ask_ref({"op": "bench_sdpa", "q": q, "k": k, "v": v, "causal": causal})
                                  ["seconds"])
                    elif who == "submission":
                        reply = self._ask({"op": "bench_run", "inputs": args, "kwargs": kwargs})
                        try:
                            t, outs[who] = untrusted.bench_timing(reply)
                        except untrusted.Unreadable as exc:
                            raise BenchProblem(str(exc)) from None
                    else:
                        reply = self._ask_ref({"op": "bench_run", "inputs": args, "kwargs": kwargs})
                        outs[who], t = reply["outs"], float(reply["seconds"])
                    if i >= WARMUP:
                        series[who].append(t)
                worst = max(worst, self._verify(outs["submission"], outs["reference"], i + 1))
                runs = i + 1 - WARMUP
                if runs >= MIN_RUNS and all(_rse(v) < TARGET_RSE for v in series.values()):
                    stopped = "spread under 2%"
                    break
                if time.perf_counter() - t_start > cap and runs >= 3:
                    break
        return self._result(series, runs, worst, stopped, time.perf_counter() - t_start)

    def _profile(self, who: str) -> tuple[dict | None, float | None, float | None]:
        """Largest intermediate tensor and FLOPs of one untimed run (in each side's own room)."""
        from . import untrusted
        args, kwargs = self.fresh(0)
        if who == "submission":
            reply = self._ask({"op": "bench_run", "inputs": args, "kwargs": kwargs, "profile": True})
            try:
                largest, flops = untrusted.bench_profile(reply)
            except untrusted.Unreadable as exc:
                raise BenchProblem(str(exc)) from None
            return largest, flops or None, None
        elif who == "reference":
            reply = self._ask_ref({"op": "bench_run", "inputs": args, "kwargs": kwargs, "profile": True})
        else:
            q, k, v = self.sdpa_inputs(0)
            reply = self._ask_ref({"op": "bench_sdpa", "q": q, "k": k, "v": v, "profile": True,
                                   "causal": bool(self.sdpa.get("is_causal"))})
        flops = float(reply.get("flops") or 0) or None
        if who == "sdpa" and not flops:  # no flop formula for this backend's kernel: count it
            lead = _numel(self.sdpa["q"][:-2])
            lq, d = self.sdpa["q"][-2:]
            lk, dv = self.sdpa["k"][-2], self.sdpa["v"][-1]
            flops = 2.0 * lead * lq * lk * (d + dv)
        return reply.get("largest"), flops, None

    def _result(self, series, runs, worst, stopped, seconds) -> dict:
        flops = {}
        out = {"problem": self.spec.id, "file": self.path, "device": self.device,
               "dtype": str(self.dtype).replace("torch.", ""), "sizes": self.source, "inputs": self.shapes,
               "sdpa_shapes": self.sdpa, "sdpa_from": self.sdpa_source, "runs": runs, "warmup": WARMUP,
               "stopped": stopped, "seconds": round(seconds, 2), "verified_runs": runs + WARMUP,
               "max_rel_error": worst, "threads": self.torch.get_num_threads(), "series": {}}
        for who, times in series.items():
            largest, fl, peak = self._profile(who)
            flops[who] = fl
            out["series"][who] = {"median_ms": statistics.median(times) * 1e3, "rse_pct": 100 * _rse(times),
                                  "min_ms": min(times) * 1e3, "q1_ms": _q(times, 0.25) * 1e3,
                                  "q3_ms": _q(times, 0.75) * 1e3, "largest": largest, "cuda_peak_bytes": peak}
        work = flops.get("reference")
        for who, s in out["series"].items():
            f = flops.get("sdpa") if who == "sdpa" else work
            s["flops"] = f                      # the work: the reference's FLOPs (SDPA's for SDPA)
            s["flops_counted"] = flops.get(who)  # what this implementation's own matmuls did
            s["gflops_per_s"] = (f / (s["median_ms"] / 1e3) / 1e9) if f else None
        ratios = {}
        for other in ("reference", "sdpa"):
            if other in series:
                per_run = [a / b for a, b in zip(series["submission"], series[other])]
                ratios[other] = {"median": statistics.median(per_run), "q1": _q(per_run, 0.25),
                                 "q3": _q(per_run, 0.75),
                                 "of_medians": statistics.median(series["submission"]) /
                                 statistics.median(series[other])}
        out["ratios"] = ratios
        return out


def _rse(v: list[float]) -> float:
    if len(v) < 2:
        return float("inf")
    return statistics.stdev(v) / math.sqrt(len(v)) / statistics.mean(v)


def _q(v: list[float], p: float) -> float:
    s = sorted(v)
    x = p * (len(s) - 1)
    lo = int(x)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (x - lo)


def _where(problem) -> str:
    fr = problem.frames[-1] if problem.frames else None
    return problem.message + (f" ({fr.file}:{fr.line} in {fr.func})" if fr else "")
