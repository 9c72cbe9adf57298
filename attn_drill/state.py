"""Workspace progress in `.attn-drill/state.json` beside the user's files.

Versioned; every write is atomic (a temp file, fsync, rename) under an exclusive lock, so a kill at
any moment or two `check` runs at once never leave a half-written file. A damaged file is kept
aside as `state.json.damaged-<time>` and the tool carries on with a fresh state.
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
        kept = path.with_name(f"state.json.damaged-{time.strftime('%Y%m%d-%H%M%S')}")
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
    return data["problems"].setdefault(pid, {
        "status": "not started", "attempts": 0, "first_pass": None, "best_seconds": None,
        "started": None, "hints_shown": 0, "solution_viewed": False, "last_check": None})


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
            if e["best_seconds"] is None or report.seconds < e["best_seconds"]:
                e["best_seconds"] = round(report.seconds, 3)
        elif e["status"] != "passed":
            e["status"] = "failing"
        for mock in data["mocks"]:
            if mock.get("active") and report.problem in mock.get("problems", {}):
                m = mock["problems"][report.problem]
                m["checks"] = m.get("checks", 0) + 1
                if report.status == PASS and m.get("passed_at") is None:
                    m["passed_at"] = now
    try:
        update(root, fn, warn)
    except OSError:
        pass  # a read-only folder must not stop grading
