"""Workspace progress in `.attn-drill/state.json` beside the user's files.

Versioned; every write is atomic (a temp file, fsync, rename) under an exclusive lock, so a kill at
any moment or two `check` runs at once never leave a half-written file. A damaged file is kept
aside as `state.json.damaged-<time>` and the tool carries on with a fresh state.

Layout (version 1):
    problems: {id: {status, attempts, started, first_pass, time_to_pass, best_time_to_pass,
                    attempt_start, best_seconds, last_check, hints_shown, solution_viewed}}
              started: first check or hint; time_to_pass: from then to the first pass;
              attempt_start: set by `reset`, so the next pass times a fresh solve;
              best_time_to_pass: the quickest solve (first, after a reset, or in a mock);
              best_seconds: the quickest passing grading run.
    mocks:    a list of mock interviews. In a mock's own folder the entry is the live one
              ({"active", "status", "problems": {id: {...}}, timing...}); in the workspace the mock
              was started from, a link to it ({"folder", "status", "problem_ids", "scorecard"}).
A check, hint or solution view inside the mock folder counts toward the mock while it runs; a hint
or solution view in the workspace of a running mock's problem counts too (through the link).
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
import time
from pathlib import Path

from .results import PASS, Report

VERSION = 1
FOLDER = ".attn-drill"


def _empty() -> dict:
    return {"version": VERSION, "problems": {}, "mocks": []}


def state_dir(root: Path) -> Path:
    return Path(root) / FOLDER


@contextlib.contextmanager
def _locked(root: Path):
    folder = state_dir(root)
    folder.mkdir(exist_ok=True)
    with open(folder / "lock", "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield folder
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _read(folder: Path, warn=None) -> dict:
    path = folder / "state.json"
    if not path.exists():
        return _empty()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or data.get("version") != VERSION or not isinstance(data.get("problems"), dict):
            raise ValueError("unknown format")
        data.setdefault("mocks", [])
        return data
    except (ValueError, OSError) as exc:
        stamp = time.strftime('%Y%m%d-%H%M%S')
        kept = path.with_name(f"state.json.damaged-{stamp}")
        n = 1
        while kept.exists():
            n += 1
            kept = path.with_name(f"state.json.damaged-{stamp}-{n}")
        with contextlib.suppress(OSError):
            os.replace(path, kept)
        if warn:
            warn(f"progress file was damaged ({exc}); kept a copy as {kept.name} and started afresh")
        return _empty()


def _write(folder: Path, data: dict) -> None:
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".state-", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=1, ensure_ascii=False)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, folder / "state.json")


def load(root: Path, warn=None) -> dict:
    folder = state_dir(root)
    if not folder.exists():
        return _empty()
    with _locked(root) as f:
        return _read(f, warn)


def update(root: Path, fn, warn=None):
    """Read-modify-write under the lock; fn(data) mutates data and may return a value."""
    with _locked(root) as folder:
        data = _read(folder, warn)
        value = fn(data)
        _write(folder, data)
        return value


def problem_entry(data: dict, pid: str) -> dict:
    entry = data["problems"].setdefault(pid, {})
    for key, default in (("status", "not started"), ("attempts", 0), ("first_pass", None),
                         ("time_to_pass", None), ("best_time_to_pass", None), ("attempt_start", None),
                         ("best_seconds", None), ("started", None),
                         ("hints_shown", 0), ("solution_viewed", False), ("last_check", None)):
        entry.setdefault(key, default)
    return entry


# ---------------------------------------------------------------- mock timing
def mock_elapsed(mock: dict, now: float | None = None) -> float:
    """Seconds of the mock used so far: closed segments plus the running one."""
    used = float(mock.get("elapsed", 0.0))
    if mock.get("segment_start") is not None:
        used += max(0.0, (now or time.time()) - mock["segment_start"])
    return used


def mock_left(mock: dict, now: float | None = None) -> float:
    return max(0.0, float(mock["seconds"]) - mock_elapsed(mock, now))


def active_mocks(data: dict, pid: str):
    """The live mock entries (in this folder) that include problem `pid`."""
    for mock in data["mocks"]:
        if mock.get("active") and isinstance(mock.get("problems"), dict) and pid in mock["problems"]:
            yield mock["problems"][pid]


def _linked_running(root: Path, data: dict, pid: str) -> list[Path]:
    return [Path(root) / m["folder"] for m in data["mocks"]
            if m.get("folder") and m.get("status") == "running" and pid in m.get("problem_ids", ())]


def statuses(root: Path) -> dict:
    try:
        data = load(root)
    except OSError:
        return {}
    return {pid: e.get("status", "not started") for pid, e in data["problems"].items()}


def record_check(root: Path, report: Report, warn=None) -> None:
    """Count an attempt; remember the first pass time and the best grading time."""
    def fn(data):
        e = problem_entry(data, report.problem)
        now = time.time()
        e["attempts"] += 1
        e["last_check"] = now
        e["started"] = e["started"] or now
        if report.status == PASS:
            e["status"] = "passed"
            if e["first_pass"] is None:
                e["first_pass"] = now
                e["time_to_pass"] = round(now - e["started"], 1)
                best_solve(e, e["time_to_pass"])
            elif e["attempt_start"] is not None:
                best_solve(e, round(now - e["attempt_start"], 1))
            e["attempt_start"] = None
            if e["best_seconds"] is None or report.seconds < e["best_seconds"]:
                e["best_seconds"] = round(report.seconds, 3)
        elif e["status"] != "passed":
            e["status"] = "failing"
        for mock in data["mocks"]:
            if mock.get("active") and report.problem in mock.get("problems", {}):
                m = mock["problems"][report.problem]
                m["checks"] = m.get("checks", 0) + 1
                m["last"] = report.status
                if report.status == PASS and m.get("passed_at") is None:
                    m["passed_at"] = now
                    m["passed_after"] = round(mock_elapsed(mock, now), 1)
    try:
        update(root, fn, warn)
    except OSError:
        pass  # a read-only folder must not stop grading


def best_solve(entry: dict, seconds: float | None) -> None:
    if seconds is not None and (entry.get("best_time_to_pass") is None or seconds < entry["best_time_to_pass"]):
        entry["best_time_to_pass"] = seconds


def record_new(root: Path, pid: str, warn=None) -> None:
    """A stub was written: the solve timer starts now (unless the problem was started before)."""
    def fn(data):
        e = problem_entry(data, pid)
        e["started"] = e["started"] or time.time()
    with contextlib.suppress(OSError):
        update(root, fn, warn)


def record_reset(root: Path, pid: str, warn=None) -> None:
    """The stub is back: the next pass times a fresh solve."""
    def fn(data):
        problem_entry(data, pid)["attempt_start"] = time.time()
    with contextlib.suppress(OSError):
        update(root, fn, warn)


def record_hint(root: Path, pid: str, total: int, warn=None) -> tuple[int, int]:
    """Reveal the next hint: returns (hints seen before, hints seen now), at most `total`."""
    def fn(data):
        e = problem_entry(data, pid)
        before = min(e["hints_shown"], total)
        e["hints_shown"] = min(before + 1, total)
        if e["hints_shown"] > before:
            e["started"] = e["started"] or time.time()
            for m in active_mocks(data, pid):
                m["hints"] = m.get("hints", 0) + 1
        return before, e["hints_shown"], _linked_running(root, data, pid)
    before, now, linked = update(root, fn, warn)
    if now > before:
        for folder in linked:
            _count_in_mock(folder, pid, "hints", warn)
    return before, now


def hints_seen(root: Path, pid: str) -> int:
    return load(root)["problems"].get(pid, {}).get("hints_shown", 0)


def record_solution(root: Path, pid: str, warn=None) -> None:
    def fn(data):
        problem_entry(data, pid)["solution_viewed"] = True
        for m in active_mocks(data, pid):
            m["solution_viewed"] = True
        return _linked_running(root, data, pid)
    for folder in update(root, fn, warn):
        _count_in_mock(folder, pid, "solution_viewed", warn)


def _count_in_mock(folder: Path, pid: str, what: str, warn=None) -> None:
    """Count a hint or a solution view against a mock that lives in another folder."""
    def fn(data):
        for m in active_mocks(data, pid):
            if what == "hints":
                m["hints"] = m.get("hints", 0) + 1
            else:
                m["solution_viewed"] = True
    if state_dir(folder).is_dir():
        with contextlib.suppress(OSError):
            update(folder, fn, warn)
