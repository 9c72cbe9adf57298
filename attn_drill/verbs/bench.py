"""`bench`: time a solution against the reference and torch's fused SDPA (attn_drill.timing does the work).

The timing runs in its own process (torch is never imported by the CLI), with the problem's time
limit and the worker's memory limit; a hang or crash there is reported as the submission's problem.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.table import Table
from rich.text import Text

from .. import bank, render
from ..worker import ToolError, _frames_from_dump
from .check import resolve

IMPORT_ALLOWANCE = 90.0  # seconds for starting Python and importing torch on a busy machine


class BenchFailed(Exception):
    """The submission could not be timed (it crashed, hung or gave a wrong answer)."""


def measure(problem: str, path: str | None, seed: int, device: str, max_seconds: float,
            time_limit: float | None, cwd: Path, threads: int = 1) -> dict:
    """Run the timing process and return its result dict; BenchFailed for the submission's faults."""
    if max_seconds <= 0:
        raise ValueError("--max-seconds must be positive")
    [(pid, file)] = resolve(problem, path, cwd)
    spec = bank.get(pid)
    limit = time_limit if time_limit is not None else spec.time_limit + max_seconds * 2
    req = {"problem": pid, "path": str(file.resolve()), "seed": seed, "device": device,
           "max_seconds": max_seconds, "time_limit": limit, "threads": threads}
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONFAULTHANDLER="1")
    with tempfile.TemporaryFile("w+") as err:
        try:
            proc = subprocess.run([sys.executable, "-m", "attn_drill.timing"], input=json.dumps(req) + "\n",
                                  stdout=subprocess.PIPE, stderr=err, text=True, env=env, cwd=cwd,
                                  timeout=limit + IMPORT_ALLOWANCE)
            out, code = proc.stdout, proc.returncode
        except subprocess.TimeoutExpired:
            out, code = "", None
        err.seek(0)
        dump = err.read()
    line = out.strip().splitlines()[-1] if out.strip() else ""
    if not line:
        frames = _frames_from_dump(dump, file)
        at = f" It was at {frames[-1].file}:{frames[-1].line} in {frames[-1].func}." if frames else ""
        if code is None or "Timeout" in dump:
            raise BenchFailed(f"timed out after {limit:.0f} s (--time-limit): an infinite loop, or far too "
                              f"much work for these sizes?{at}")
        raise BenchFailed(f"your code crashed the timing process (exit code {code}); os._exit, a segfault, "
                          f"or running out of memory?{at}")
    answer = json.loads(line)
    if answer.get("ok"):
        return answer["result"]
    if answer.get("user"):
        raise BenchFailed(answer["error"])
    if answer.get("usage"):
        raise ValueError(answer["error"])
    raise ToolError(answer.get("traceback") or answer.get("error"))


def _ms(x: float) -> str:
    return f"{x:.3f} ms" if x < 10 else f"{x:.1f} ms"


def _bytes(n) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def table(r: dict) -> Table:
    shapes = ", ".join(f"{k} {'×'.join(map(str, v))}" for k, v in r["inputs"].items())
    t = Table(title=f"bench {r['problem']}  {r['dtype']} on {r['device']} ({r['threads']} threads)  {shapes}",
              title_justify="left", caption=f"sizes from {r['sizes']}; {r['runs']} timed runs after "
                                            f"{r['warmup']} warm-ups, stopped on {r['stopped']}; every run's "
                                            f"output re-checked (worst relative error {r['max_rel_error']:.1e})",
              caption_justify="left")
    for col, just in (("", "left"), ("median", "right"), ("±", "right"), ("yours ÷ this", "right"),
                      ("GFLOP/s", "right"), ("largest tensor", "left")):
        t.add_column(col, justify=just, no_wrap=col != "largest tensor")
    names = {"submission": "yours", "reference": "reference", "sdpa": "SDPA core"}
    for who, s in r["series"].items():
        ratio = r["ratios"].get(who)
        rtext = f"{ratio['median']:.2f}× ({ratio['q1']:.2f}–{ratio['q3']:.2f})" if ratio else ""
        big = s["largest"]
        big_text = f"{_bytes(big['bytes'])} {'×'.join(map(str, big['shape']))} ({big['op'].split('.')[1]})" \
            if big else "-"
        if s.get("cuda_peak_bytes") is not None:
            big_text += f"; CUDA peak {_bytes(s['cuda_peak_bytes'])}"
        t.add_row(Text(names[who], style="bold" if who == "submission" else ""), _ms(s["median_ms"]),
                  f"{s['rse_pct']:.1f}%", rtext, f"{s['gflops_per_s']:.2f}" if s["gflops_per_s"] else "-",
                  big_text)
    return t


def bench(problem: str, path: str | None, seed: int, device: str, max_seconds: float, time_limit: float | None,
          threads: int, as_json: bool) -> int:
    try:
        r = measure(problem, path, seed, device, max_seconds, time_limit, Path.cwd(), threads)
    except BenchFailed as exc:
        if as_json:
            print(json.dumps({"ok": False, "problem": problem, "error": str(exc)}, indent=2))
        else:
            render.console(stderr=True).print(f"[red]cannot time this solution:[/red] {exc}")
        return 1
    if as_json:
        print(json.dumps({"ok": True, **r}, indent=2))
        return 0
    con = render.console()
    con.print(table(r))
    sub = r["series"]["submission"]["largest"]
    ref = r["series"]["reference"]["largest"]
    if sub and ref and sub["bytes"] < ref["bytes"]:
        con.print(Text(f"your largest intermediate is {ref['bytes'] / max(sub['bytes'], 1):.1f}× smaller than "
                       f"the reference's", style="green"))
    if "sdpa" not in r["series"]:
        con.print(Text("no SDPA column: no attention core (softmax between two matmuls) was found in the "
                       "reference; add settings.bench.sdpa to the spec to compare", style="dim"))
    if r["device"] == "cpu":
        con.print(Text("CPU timings; on a GPU (--device cuda) runs are timed with CUDA events", style="dim"))
    return 0
