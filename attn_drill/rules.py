"""Rules the whole tool shares, each written once. No torch.

    time_limit(spec, full)     seconds one grading of one file may take
    memory_gb()                what a room may allocate on top of torch (ATTN_DRILL_MEMORY_GB)
    replay(pid, where, ...)    the command that grades a file again, exactly
    interpreter(code)          the command line of the tool's own Python processes (judge, zygote)
"""
from __future__ import annotations

import math
import os
import sys

from .errors import UsageError

FULL_FACTOR = 3                  # --full runs the larger random cases: three times the time
MEMORY_ENV = "ATTN_DRILL_MEMORY_GB"
DEFAULT_MEMORY_GB = 6.0


def time_limit(spec, full: bool = False, override: float | None = None) -> float:
    """The time limit of one grading: `override` (--time-limit) or the spec's, three times with --full."""
    return float(override) if override else spec.time_limit * (FULL_FACTOR if full else 1)


def bench_time_limit(spec, max_seconds: float, override: float | None = None) -> float:
    """The time limit of one `bench`: `override`, else the spec's and twice the seconds it may time."""
    return float(override) if override is not None else spec.time_limit + max_seconds * 2


def memory_gb(value: str | float | None = None) -> float:
    """Gigabytes a room may allocate on top of what torch maps: `value`, else $ATTN_DRILL_MEMORY_GB, else 6."""
    raw = value if value is not None else os.environ.get(MEMORY_ENV, "").strip() or DEFAULT_MEMORY_GB
    try:
        gb = float(raw)
    except (TypeError, ValueError):
        raise UsageError(f"{MEMORY_ENV}={raw!r} is not a number of gigabytes, e.g. {MEMORY_ENV}=6") from None
    if not (math.isfinite(gb) and gb > 0):
        raise UsageError(f"{MEMORY_ENV}={raw!r}: the memory limit must be a positive number of gigabytes")
    return gb


JUDGE_ALLOWANCE_GB = 3.0   # the judge's own work on top of what it may receive: references, memos


def judge_memory_gb() -> float:
    """Gigabytes the judge may allocate on top of what torch maps: a room's limit (it holds what a
    room sends, capped per case by attn_drill.judge.untrusted) plus its own allowance."""
    return memory_gb() + JUDGE_ALLOWANCE_GB


def replay(pid: str, where: str, seed: int, full: bool = False, case: str | None = None) -> str:
    """The command that grades this file again with the same cases: `where` is the path as the user
    typed it ("" for the default ./<id>.py)."""
    from .results import printable
    where = printable(where)
    return (f"attn-drill check {pid}{' ' + where if where else ''} --seed {seed}"
            + (f" --case {case}" if case else "") + (" --full" if full else ""))


def interpreter(code: str) -> list[str]:
    """`python -I -c code`: an isolated interpreter (no current directory or script folder on
    sys.path, no PYTHON* variables), so no file beside the user's code can stand in for a module the
    tool imports. This package comes first (the same code as this process runs); what this process
    could import from beyond the installation (the user site, the PYTHONPATH it started with) comes
    after everything installed; the current folder never does."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cwd = os.path.realpath(os.getcwd())
    extra = [p for p in sys.path[1:] if p and os.path.isabs(p) and os.path.realpath(p) not in (cwd, here)]
    boot = (f"import sys; sys.path.insert(0, {here!r}); "
            f"sys.path.extend(p for p in {list(dict.fromkeys(extra))!r} if p not in sys.path); {code}")
    return [sys.executable, "-I", "-X", "faulthandler", "-u", "-c", boot]
