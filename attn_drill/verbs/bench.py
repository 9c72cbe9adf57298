"""`bench`: time a solution against the reference and torch's fused SDPA (attn_drill.timing does the work).

The timing runs in its own process (torch is never imported by the CLI), with the problem's time
limit and the worker's memory limit; a hang or crash there is reported as the submission's problem.
"""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.text import Text

from .. import bank, render
from ..i18n import t
from ..render import classroom as view
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
        at = t("room.was_at", file=frames[-1].file, line=frames[-1].line, func=frames[-1].func) if frames else ""
        if code is None or "Timeout" in dump:
            raise BenchFailed(t("room.timeout", s=f"{limit:.0f}") + " (--time-limit)" + at)
        raise BenchFailed(t("bench.crashed", code=code) + at)
    answer = json.loads(line)
    if answer.get("ok"):
        return answer["result"]
    if answer.get("user"):
        raise BenchFailed(answer["error"])
    if answer.get("usage"):
        raise ValueError(answer["error"])
    raise ToolError(answer.get("traceback") or answer.get("error"))


def bench(problem: str, path: str | None, seed: int, device: str, max_seconds: float, time_limit: float | None,
          threads: int, as_json: bool) -> int:
    con = render.console()
    err = render.console(stderr=True)
    try:
        # the measuring phase: a spinner with the elapsed time on stderr (a terminal only)
        with err.status(t("bench.measuring", s=f"{max_seconds * 3 + 5:.0f}")) if err.is_terminal else \
                contextlib.nullcontext():
            r = measure(problem, path, seed, device, max_seconds, time_limit, Path.cwd(), threads)
    except BenchFailed as exc:
        if as_json:
            print(json.dumps({"ok": False, "problem": problem, "error": str(exc)}, indent=2))
        else:
            err.print(Text.assemble((t("bench.cannot") + " ", "red"), str(exc)), soft_wrap=True)
        return 1
    if as_json:
        print(json.dumps({"ok": True, **r}, indent=2))
        return 0
    con.print(view.bench(r, con.width))
    return 0
