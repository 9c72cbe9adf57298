"""The progress rules: what a check, a hint, a solution view, a reset, a re-drill and a mock
interview change in the user's record (the record itself, one per user: attn_drill.progress.store).

A check of a file in a running mock's folder counts toward the mock; a hint or a solution view of a
running mock's problem counts against it, wherever it is asked. A check of an open re-drill's file,
a hint or a solution view of its problem count toward the drill. A mock's end (end_mock) reviews the
cards of its problems as a re-drill does, so a mock, a drill and a check all feed the same cards.
All times come from attn_drill.progress.clock (the system clock, or ATTN_DRILL_NOW). No torch.
"""
from __future__ import annotations

import copy
from pathlib import Path

from ..results import PASS, Report
from . import clock, mocks
from .schema import PROBLEM
from .store import load, update


def problem_entry(data: dict, pid: str) -> dict:
    entry = data["problems"].setdefault(pid, {})
    for name, f in PROBLEM.fields.items():
        entry.setdefault(name, copy.deepcopy(f.default))
    return entry


# ---------------------------------------------------------------- mocks
def active_mocks(data: dict, pid: str):
    """The problem records of the running mocks that include problem `pid`."""
    for mock in data["mocks"]:
        if mock.get("active") and isinstance(mock.get("problems"), dict) and pid in mock["problems"]:
            yield mock["problems"][pid]


def _same_folder(a, b) -> bool:
    try:
        return Path(a).resolve() == Path(b).resolve()
    except (OSError, ValueError, TypeError):
        return False


def mock_of(data: dict, pid: str, file: Path):
    """The running mock whose folder holds `file` and that includes `pid`, or None."""
    for mock in data["mocks"]:
        if mock.get("active") and isinstance(mock.get("problems"), dict) and pid in mock["problems"] \
                and mock.get("folder") and _same_folder(Path(file).parent, mock["folder"]):
            return mock
    return None


def statuses(root: Path | None = None) -> dict:
    data = load()
    return {pid: e.get("status", "not started") for pid, e in data["problems"].items()}


# ---------------------------------------------------------------- a check
def record_check(root: Path, report: Report, warn=None, file: Path | None = None) -> dict | None:
    """Count an attempt; remember the first pass time and the best grading time. `root`: the folder the
    check ran in (report.file is relative to it), or `file`, the file itself. Returns what a pass
    scheduled ({"drill": True when it ended a re-drill, "rating", "due"}), or None."""
    file = Path(file) if file is not None else Path(root) / report.file

    def fn(data):
        e = problem_entry(data, report.problem)
        now = clock.now()
        mock = mock_of(data, report.problem, file)
        e["attempts"] += 1
        e["last_check"] = now
        e["started"] = e["started"] or now
        if mock is not None:
            m = mock["problems"][report.problem]
            m["checks"] = m.get("checks", 0) + 1
            m["last"] = report.status
            if report.status == PASS and m.get("passed_at") is None:
                m["passed_at"] = now
                m["passed_after"] = round(mocks.elapsed(mock, now), 1)
        if report.status == PASS:
            e["status"] = "passed"
            if mock is not None:                           # solved in the mock: timed by the mock's clock
                m = mock["problems"][report.problem]
                if e["first_pass"] is None:
                    e["first_pass"], e["time_to_pass"] = now, m["passed_after"]
                best_solve(e, m["passed_after"])
            elif e["first_pass"] is None:
                e["first_pass"] = now
                e["time_to_pass"] = round(max(0.0, now - e["started"]), 1)   # a clock set back: 0
                best_solve(e, e["time_to_pass"])
            elif e["attempt_start"] is not None:
                best_solve(e, round(max(0.0, now - e["attempt_start"]), 1))
            e["attempt_start"] = None
            if e["best_seconds"] is None or report.seconds < e["best_seconds"]:
                e["best_seconds"] = round(report.seconds, 3)
        elif e["status"] != "passed":
            e["status"] = "failing"
        drilled = _drill_checked(data, report, file, now)
        if not drilled and mock is None and report.status == PASS:   # a mock reviews its cards at the end
            _first_solve_card(data, report.problem, e, now)
        card = (data.get("cards") or {}).get(report.problem)
        if report.status == PASS and isinstance(card, dict) and card.get("last_review") == now:
            return {"drill": drilled, "rating": card.get("last_rating"), "due": card.get("due")}
        return None
    return update(None, fn, warn)   # a read-only folder says so and does not stop grading


def _minutes(pid: str) -> float:
    try:
        from .. import bank
        return float(bank.get(pid).minutes)
    except Exception:  # noqa: BLE001 - a damaged spec must not stop the record
        return 30.0


def _first_solve_card(data: dict, pid: str, e: dict, now: float) -> None:
    """A problem passed for the first time becomes a card: its first re-drill is scheduled from how the solve went."""
    if pid in data.setdefault("cards", {}):
        return
    from . import schedule
    rating = schedule.rate_solve(e.get("time_to_pass"), _minutes(pid), e.get("hints_shown", 0),
                                 e.get("solution_viewed", False), first_try=e.get("attempts", 0) == 1)
    schedule.review(data, pid, "drill", rating, now)


def open_drill(data: dict, pid: str) -> dict | None:
    d = (data.get("drills") or {}).get(pid)
    return d if isinstance(d, dict) and d.get("status") == "open" else None


def _drill_checked(data: dict, report: Report, file: Path, now: float) -> bool:
    """A check of an open re-drill's file: counted in the drill; a pass ends it and reviews the card."""
    d = open_drill(data, report.problem)
    if d is None or not _same_file(file, d["file"]):
        return False
    d["checks"] = d.get("checks", 0) + 1
    if report.status == PASS:
        end_drill(data, report.problem, d, now, passed=True)
    return True


def _same_file(a, b) -> bool:
    return _same_folder(a, b)


def end_drill(data: dict, pid: str, d: dict, now: float, passed: bool) -> str:
    """Close a re-drill (passed, given up, or its solution viewed) and review its card; the rating."""
    from . import schedule
    d["first_try"] = passed and d.get("checks", 0) == 1
    if passed:
        d["passed_at"] = now
    seconds = now - d["started"] if passed else None
    rating = schedule.rate_solve(seconds, _minutes(pid), d.get("hints", 0), d.get("solution_viewed", False),
                                 d["first_try"], gave_up=not passed)
    d["status"], d["rating"] = ("passed" if passed else "given up"), rating
    card = schedule.review(data, pid, "drill", rating, now)
    if passed and not d.get("hints") and not d.get("solution_viewed"):
        card["from_memory"] = True
    return rating


def end_mock(data: dict, mock: dict, now: float) -> dict:
    """A finished mock in the user's record: each problem passed at the bell is passed (and timed by
    the mock's clock); each problem's card is reviewed as a re-drill is, from how it went in the mock
    (time to green against the estimate, hints, solution viewed, passed at the first check); a problem
    attempted and not passed that was a card already lapses (again). Once per mock.
    {pid: {"rating", "due"}} of the cards it reviewed."""
    from . import schedule
    if mock.get("reviewed"):
        return {}
    mock["reviewed"] = True
    ratings = {}
    for pid, p in mock["problems"].items():
        e = problem_entry(data, pid)
        card = (data.get("cards") or {}).get(pid)
        if p.get("final") == PASS:
            seconds = p.get("passed_after")
            e["status"] = "passed"
            if e["first_pass"] is None:
                e["first_pass"], e["time_to_pass"] = now, seconds
            best_solve(e, seconds)
            e["started"] = e["started"] or mock.get("started") or now
            rating = schedule.rate_solve(seconds, _minutes(pid), p.get("hints", 0), p.get("solution_viewed", False),
                                         first_try=p.get("checks", 0) <= 1)
            reviewed = schedule.review(data, pid, "drill", rating, now)
            if card is not None and not p.get("hints") and not p.get("solution_viewed"):
                reviewed["from_memory"] = True          # solved before, and again now from memory
            ratings[pid] = {"rating": rating, "due": reviewed["due"]}
        elif card is not None and p.get("final") not in (None, "not attempted", "missing"):
            reviewed = schedule.review(data, pid, "drill", "again", now)
            ratings[pid] = {"rating": "again", "due": reviewed["due"]}
    return ratings


def best_solve(entry: dict, seconds: float | None) -> None:
    if seconds is not None and (entry.get("best_time_to_pass") is None or seconds < entry["best_time_to_pass"]):
        entry["best_time_to_pass"] = seconds


# ---------------------------------------------------------------- new, reset, hints, solutions
def record_new(root: Path, pid: str, warn=None) -> None:
    """A stub was written: the solve timer starts now (unless the problem was started before)."""
    def fn(data):
        e = problem_entry(data, pid)
        e["started"] = e["started"] or clock.now()
    update(None, fn, warn)


def record_reset(root: Path, pid: str, warn=None) -> None:
    """The stub is back: the next pass times a fresh solve."""
    def fn(data):
        problem_entry(data, pid)["attempt_start"] = clock.now()
    update(None, fn, warn)


def record_hint(root: Path, pid: str, total: int, warn=None) -> tuple[int, int]:
    """Reveal the next hint: returns (hints seen before, hints seen now), at most `total`."""
    def fn(data):
        e = problem_entry(data, pid)
        d = open_drill(data, pid)
        if d is not None:               # a re-drill counts its own hints, from the first
            before = min(d.get("hints", 0), total)
            d["hints"] = min(before + 1, total)
            return before, d["hints"]
        running = list(active_mocks(data, pid))
        if running:                     # a mock counts its own hints too, from the first
            before = min(max(m.get("hints", 0) for m in running), total)
            for m in running:
                m["hints"] = min(before + 1, total)
            e["hints_shown"] = max(e["hints_shown"], min(before + 1, total))
            e["started"] = e["started"] or clock.now()
            return before, min(before + 1, total)
        before = min(e["hints_shown"], total)
        e["hints_shown"] = min(before + 1, total)
        if e["hints_shown"] > before:
            e["started"] = e["started"] or clock.now()
        return before, e["hints_shown"]
    return update(None, fn, warn)


def hints_seen(root: Path, pid: str) -> int:
    data = load()
    d = open_drill(data, pid)
    return d.get("hints", 0) if d is not None else data["problems"].get(pid, {}).get("hints_shown", 0)


def record_solution(root: Path, pid: str, warn=None) -> None:
    def fn(data):
        problem_entry(data, pid)["solution_viewed"] = True
        d = open_drill(data, pid)
        if d is not None:               # a re-drill whose solution is viewed is over: again
            d["solution_viewed"] = True
            end_drill(data, pid, d, clock.now(), passed=False)
        for m in active_mocks(data, pid):
            m["solution_viewed"] = True
    update(None, fn, warn)
