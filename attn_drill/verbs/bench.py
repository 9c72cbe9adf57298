"""`bench`: time a solution against the reference and torch's fused SDPA (the judge's `bench`
operation does the work, in rooms: attn_drill.judge.timing).

torch is never imported by the CLI; the timing runs in a judge started for it, with the problem's
time limit and the rooms' memory limit; a hang or crash there is reported as the submission's problem.
"""
from __future__ import annotations

from pathlib import Path

from .. import bank, render, rules
from ..client import BenchFailed, JudgeClient
from ..errors import UsageError
from ..i18n import t
from ..render import classroom as view
from .check import resolve


def measure(problem: str, path: str | None, seed: int, device: str, max_seconds: float,
            time_limit: float | None, cwd: Path, threads: int = 1) -> dict:
    """The timing result; BenchFailed for the submission's faults."""
    if max_seconds <= 0:
        raise UsageError("--max-seconds must be positive")
    [(pid, file)] = resolve(problem, path, cwd)
    spec = bank.get(pid)
    limit = rules.bench_time_limit(spec, max_seconds, time_limit)
    with JudgeClient() as client:
        return client.bench(pid, file.resolve(), seed=seed, device=device, max_seconds=max_seconds,
                            time_limit=limit, threads=threads)


def bench(problem: str, path: str | None, seed: int, device: str, max_seconds: float, time_limit: float | None,
          threads: int, as_json: bool) -> int:
    con = render.console()
    err = render.console(stderr=True)
    try:
        # the measuring phase: a spinner with the elapsed time on stderr (a terminal only)
        with render.spinner(err, t("bench.measuring", s=f"{max_seconds * 3 + 5:.0f}")):
            r = measure(problem, path, seed, device, max_seconds, time_limit, Path.cwd(), threads)
    except BenchFailed as exc:
        if as_json:
            render.print_json({"ok": False, "problem": problem, "error": str(exc)})
        else:
            render.say(t("bench.cannot") + " " + str(exc), "red", err)
        return 1
    if as_json:
        render.print_json({"ok": True, **r})
        return 0
    con.print(view.bench(r, con.width))
    return 0
