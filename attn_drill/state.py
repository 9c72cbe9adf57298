"""Workspace progress in `.attn-drill/state.json` beside the user's files.

Versioned; every write is atomic (a temp file, fsync, rename) under an exclusive lock, so a kill at
any moment or two `check` runs at once never leave a half-written file. The whole file is checked
against SCHEMA on every read; nothing in it can stop a command, and nothing of it is lost:
  - a file that cannot be used at all (not JSON, not a mapping, another version, unreadable, a folder
    in its place) is kept aside as `state.json.damaged-<time>` and the tool carries on afresh;
  - an entry of the wrong type is dropped, or a field reset to its default, the rest is kept, and
    the original file is copied to `state.json.damaged-<time>` first;
  - where nothing can be written (a read-only folder, `.attn-drill` a file that cannot be moved),
    the command still runs and its result is shown; progress is just not saved.
Each of these says so in one line (warn, by default on stderr) naming the file and the kept copy.

Layout (version 1), as SCHEMA checks it:
    problems: {id: {status, attempts, started, first_pass, time_to_pass, best_time_to_pass,
                    attempt_start, best_seconds, last_check, hints_shown, solution_viewed}}
              started: first check or hint; time_to_pass: from then to the first pass;
              attempt_start: set by `reset`, so the next pass times a fresh solve;
              best_time_to_pass: the quickest solve (first, after a reset, or in a mock);
              best_seconds: the quickest passing grading run.
    mocks:    a list of mock interviews. In a mock's own folder the entry is the live one
              ({"active", "status", "problems": {id: {...}}, timing...}); in the workspace the mock
              was started from, a link to it ({"folder", "status", "problem_ids", "scorecard"}).
    cards:    {id or id/question: {kind, fsrs, due, reviews, lapses, last_rating, from_memory}}: when to
              re-drill a problem or ask a follow-up again (attn_drill.schedule).
    drills:   {id: {file, started, status, checks, hints, solution_viewed, passed_at, first_try,
                    rating}}: the latest re-drill from memory of a problem (`attn-drill drill`).
A check, hint or solution view inside the mock folder counts toward the mock while it runs; a hint
or solution view in the workspace of a running mock's problem counts too (through the link). A
check of an open re-drill's file, a hint or a solution view of its problem count toward the drill.
All times come from attn_drill.clock (the system clock, or ATTN_DRILL_NOW).
"""
from __future__ import annotations

import contextlib
import copy
import fcntl
import json
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import clock
from .i18n import t
from .results import PASS, Report

VERSION = 1
FOLDER = ".attn-drill"


# ---------------------------------------------------------------- the schema, as data
@dataclass(frozen=True)
class Field:
    rule: Any                 # a name in KINDS, or a Record / ListOf / MapOf
    default: Any = None       # what a missing or bad value becomes (copied) ...
    keep: bool = False        # ... unless keep: then a bad value is removed and a missing one stays missing
    required: bool = False    # missing or bad: the whole entry is dropped


@dataclass(frozen=True)
class Record:
    what: str                                   # for the warning: "a problem record"
    fields: dict[str, Field]
    when: tuple = ()          # (key, {name: Field}): more fields for an entry that has that key


@dataclass(frozen=True)
class ListOf:
    item: Any


@dataclass(frozen=True)
class MapOf:
    item: Any
    key: str = "pid"


MAX_COUNT = 10 ** 9
MAX_EPOCH = 1e11          # about the year 5000: time.localtime still works
MAX_SECONDS = 1e10
_ID = re.compile(r"[a-z][a-z0-9_]*")
_CARD = re.compile(r"[a-z][a-z0-9_]*(/[a-z0-9_]+)?")


def _int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _num(lo: float, hi: float, above: bool = False):
    """A finite number in [lo, hi] (or (lo, hi]); comparisons reject NaN and inf by themselves."""
    return lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and (lo < v if above else lo <= v) \
        and v <= hi


def _text(v) -> bool:
    if not isinstance(v, str) or len(v) > 100_000:
        return False
    try:
        v.encode("utf-8")         # a lone surrogate (JSON "\ud800") could not be printed or saved
    except UnicodeEncodeError:
        return False
    return True


def _opt(test):
    return lambda v: v is None or test(v)


KINDS = {  # name: (test, what it should be)
    "version": (lambda v: _int(v) and v == VERSION, f"{VERSION}"),
    "pid": (lambda v: isinstance(v, str) and _ID.fullmatch(v) is not None, "a problem id"),
    "count": (lambda v: _int(v) and 0 <= v <= MAX_COUNT, "a whole number >= 0"),
    "time": (_num(0, MAX_EPOCH), "a time in seconds since 1970"),
    "time?": (_opt(_num(0, MAX_EPOCH)), "a time in seconds since 1970, or null"),
    "seconds": (_num(0, MAX_SECONDS), "a number of seconds >= 0"),
    "seconds?": (_opt(_num(0, MAX_SECONDS)), "a number of seconds >= 0, or null"),
    "length": (_num(0, MAX_SECONDS, above=True), "a number of seconds > 0"),
    "score": (_num(0, 1), "a score from 0 to 1"),
    "seed": (lambda v: _int(v) and abs(v) < 2 ** 63, "a whole number"),
    "seed?": (lambda v: v is None or _int(v) and abs(v) < 2 ** 63, "a whole number, or null"),
    "process?": (lambda v: v is None or _int(v) and 0 < v < 2 ** 31, "a process id, or null"),
    "flag": (lambda v: isinstance(v, bool), "true or false"),
    "text": (_text, "a text"),
    "text?": (_opt(_text), "a text, or null"),
    "path": (lambda v: _text(v) and v != "" and "\0" not in v, "a folder path"),
    "lang": (lambda v: v in ("en", "zh"), "en or zh"),
    "status": (lambda v: v in ("not started", "failing", "passed"), "not started, failing or passed"),
    "mock status": (lambda v: v in ("running", "paused", "finished"), "running, paused or finished"),
    "card": (lambda v: isinstance(v, str) and _CARD.fullmatch(v) is not None, "a card id (<id> or <id>/<question>)"),
    "card kind": (lambda v: v in ("drill", "quiz"), "drill or quiz"),
    "rating": (lambda v: v in ("again", "hard", "good", "easy"), "again, hard, good or easy"),
    "rating?": (lambda v: v is None or v in ("again", "hard", "good", "easy"), "again, hard, good, easy or null"),
    "drill status": (lambda v: v in ("open", "passed", "given up"), "open, passed or given up"),
    "number?": (lambda v: v is None or _num(-1e12, 1e12)(v), "a number, or null"),
}

PROBLEM = Record("a problem record", {
    "status": Field("status", "not started"),
    "attempts": Field("count", 0),
    "started": Field("time?"),             # first check or hint
    "first_pass": Field("time?"),
    "time_to_pass": Field("seconds?"),     # from started to the first pass
    "best_time_to_pass": Field("seconds?"),
    "attempt_start": Field("time?"),       # set by reset: the next pass times a fresh solve
    "best_seconds": Field("seconds?"),     # the quickest passing grading run
    "last_check": Field("time?"),
    "hints_shown": Field("count", 0),
    "solution_viewed": Field("flag", False),
})

MOCK_PROBLEM = Record("a mock's problem record", {  # one problem of a live mock
    "checks": Field("count", 0),
    "hints": Field("count", 0),
    "solution_viewed": Field("flag", False),
    "passed_at": Field("time?"),
    "passed_after": Field("seconds?"),     # mock time used when it first passed
    "last": Field("text?"),                # the latest check's status
    "final": Field("text?", keep=True),    # at the bell
    "final_message": Field("text", keep=True),
    "final_mistake": Field("text?", keep=True),  # the named mistake at the bell, its reason, the replay
    "final_why": Field("text?", keep=True),
    "final_replay": Field("text?", keep=True),
    "followups_asked": Field("count", 0),        # follow-up questions asked after it passed (key u)
    "followups_right": Field("count", 0),
})

SCORE_ROW = Record("a scorecard row", {
    "id": Field("pid", required=True),
    "passed": Field("flag", False),
    "result": Field("text?"),
    "message": Field("text", ""),
    "time_to_green": Field("seconds?"),
    "checks": Field("count", 0),
    "hints": Field("count", 0),
    "solution_viewed": Field("flag", False),
    "score": Field("score", 0.0),
    "mistake": Field("text?"),
    "why": Field("text?"),
    "replay": Field("text?"),
    "followups_asked": Field("count", 0),
    "followups_right": Field("count", 0),
})

SCORECARD = Record("a scorecard", {
    "id": Field("text", keep=True), "seed": Field("seed?", keep=True),
    "seconds": Field("seconds", keep=True), "used": Field("seconds", keep=True),
    "problems": Field(ListOf(SCORE_ROW), []),
    "passed": Field("count", keep=True), "hints": Field("count", keep=True),
    "score": Field("score", keep=True), "verdict": Field("text", keep=True),
    "followups_asked": Field("count", 0), "followups_right": Field("count", 0),
})

MOCK = Record("a mock interview", {
    "id": Field("text", required=True),
    "status": Field("mock status", keep=True),
    "started": Field("time", keep=True),
    "seconds": Field("length", keep=True),
    "elapsed": Field("seconds", keep=True),     # seconds of the closed segments
    "segment_start": Field("time?", keep=True),  # when the running segment began
    "seed": Field("seed?", keep=True),
    "scorecard": Field(SCORECARD, keep=True),
}, when=(
    ("problems", {   # the live record, in the mock's own folder
        "problems": Field(MapOf(MOCK_PROBLEM), required=True),
        "seconds": Field("length", required=True),
        "elapsed": Field("seconds", 0.0),
        "segment_start": Field("time?"),
        "seed": Field("seed", 0),
        "active": Field("flag", False),
        "heartbeat": Field("time", keep=True),
        "finished": Field("time?"),
        "pid": Field("process?"),
        "lang": Field("lang", "en"),
        "workspace": Field("path", keep=True),  # the workspace it was started from, relative to the mock
    }),
    ("folder", {     # the link, in the workspace the mock was started from
        "folder": Field("path", required=True),
        "problem_ids": Field(ListOf("pid"), []),
    }),
))

FSRS_CARD = Record("a scheduler card", {   # fsrs.Card.to_dict()
    "card_id": Field("seed", required=True),
    "state": Field("count", required=True),
    "step": Field("seed?"),
    "stability": Field("number?"),
    "difficulty": Field("number?"),
    "due": Field("text", required=True),
    "last_review": Field("text?"),
})

CARD = Record("a review card", {            # attn_drill.schedule
    "kind": Field("card kind", required=True),
    "fsrs": Field(FSRS_CARD, required=True),
    "due": Field("time", required=True),
    "reviews": Field("count", 0),
    "lapses": Field("count", 0),
    "last_rating": Field("rating?"),
    "last_review": Field("time?"),
    "from_memory": Field("flag", False),     # a re-drill passed without hints or the solution
})

DRILL = Record("a re-drill", {              # attn-drill drill <id>: a fresh file, from memory
    "file": Field("path", required=True),
    "started": Field("time", required=True),
    "status": Field("drill status", "open"),
    "checks": Field("count", 0),
    "hints": Field("count", 0),
    "solution_viewed": Field("flag", False),
    "passed_at": Field("time?"),
    "first_try": Field("flag", False),
    "rating": Field("rating?"),
})

SCHEMA = Record("the progress file", {
    "version": Field("version", required=True),
    "problems": Field(MapOf(PROBLEM), {}),
    "mocks": Field(ListOf(MOCK), []),
    "cards": Field(MapOf(CARD, key="card"), {}),
    "drills": Field(MapOf(DRILL), {}),
})


class Bad:
    """Why a value cannot be kept."""

    def __init__(self, why: str):
        self.why = why


def _seen(v) -> str:
    try:
        s = json.dumps(v)
    except (TypeError, ValueError, RecursionError):
        s = type(v).__name__
    return s if len(s) <= 40 else s[:37] + "..."


def _what(rule) -> str:
    if isinstance(rule, str):
        return KINDS[rule][1]
    return rule.what if isinstance(rule, Record) else "a list" if isinstance(rule, ListOf) else "a mapping"


def check(value, rule, where: str = "", notes: list | None = None):
    """`value` as `rule` allows it, or Bad. Bad parts inside are dropped or reset, one line each in notes;
    keys the schema does not name are kept as they are. Missing fields get their defaults (no note)."""
    notes = [] if notes is None else notes

    def at(key) -> str:
        return f"{where}.{key}" if where else str(key)
    if isinstance(rule, str):
        return value if KINDS[rule][0](value) else Bad(f"{_seen(value)} is not {_what(rule)}")
    if isinstance(rule, ListOf):
        if not isinstance(value, list):
            return Bad(f"{_seen(value)} is not a list")
        out = []
        for i, item in enumerate(value):
            got = check(item, rule.item, f"{where}[{i}]", notes)
            if isinstance(got, Bad):
                notes.append(f"{where}[{i}]: {got.why} (dropped)")
            else:
                out.append(got)
        return out
    if isinstance(rule, MapOf):
        if not isinstance(value, dict):
            return Bad(f"{_seen(value)} is not a mapping")
        out = {}
        for key, item in value.items():
            got = check(item, rule.item, at(key), notes) if KINDS[rule.key][0](key) else \
                Bad(f"the key {_seen(key)} is not {_what(rule.key)}")
            if isinstance(got, Bad):
                notes.append(f"{at(key)}: {got.why} (dropped)")
            else:
                out[key] = got
        return out
    if not isinstance(value, dict):
        return Bad(f"{_seen(value)} is not {rule.what}")
    fields = dict(rule.fields)
    for key, more in rule.when:
        if key in value:
            fields.update(more)
    out, mine = dict(value), []
    for name, f in fields.items():
        got = check(value[name], f.rule, at(name), mine) if name in value else None
        if not isinstance(got, Bad) and name in value:
            out[name] = got
            continue
        if f.required:
            return Bad(f"its {name!r} " + (got.why if got else "is missing"))
        if got is None and f.keep:
            continue
        if got is None:
            out[name] = copy.deepcopy(f.default)
        elif f.keep:
            del out[name]
            mine.append(f"{at(name)}: {got.why} (removed)")
        else:
            out[name] = copy.deepcopy(f.default)
            mine.append(f"{at(name)}: {got.why} (reset to {_seen(f.default)})")
    notes += mine
    return out


def _empty() -> dict:
    return {"version": VERSION, "problems": {}, "mocks": [], "cards": {}, "drills": {}}


def state_dir(root: Path) -> Path:
    return Path(root) / FOLDER


# ---------------------------------------------------------------- warnings
_SAID: set = set()


def _stderr(message: str) -> None:
    print(f"{t('cli.warning')} {message}", file=sys.stderr, flush=True)


def _sayer(warn):
    """warn (default: a line on stderr), saying each thing about each file once per process."""
    out = warn or _stderr

    def say(message: str, about: Path) -> None:
        key = (str(Path(about).absolute()), message)
        if key not in _SAID:
            _SAID.add(key)
            out(message)
    return say


def _shown(path: Path) -> str:
    path = Path(path)
    try:
        return str(path.absolute().relative_to(Path.cwd()))
    except (ValueError, OSError):
        return str(path)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return "it is not UTF-8 text"
    if isinstance(exc, json.JSONDecodeError):
        return f"it is not valid JSON: {exc.msg} at line {exc.lineno}"
    if isinstance(exc, IsADirectoryError):
        return "it is a folder, not a file"
    if isinstance(exc, RecursionError):
        return "it is nested too deeply to read"
    if isinstance(exc, OSError):
        return f"it cannot be read: {exc.strerror or exc}"
    return f"it cannot be read as JSON: {exc}"


def _free_name(path: Path) -> Path:
    stamp = time.strftime('%Y%m%d-%H%M%S')
    kept = path.with_name(f"{path.name}.damaged-{stamp}")
    n = 1
    while kept.exists() or kept.is_symlink():
        n += 1
        kept = path.with_name(f"{path.name}.damaged-{stamp}-{n}")
    return kept


def _set_aside(path: Path, why: str, say) -> bool:
    """Move a file (or folder) that cannot be used out of the way; True when it moved."""
    kept = _free_name(path)
    try:
        os.rename(path, kept)
    except OSError as exc:
        say(t("state.damaged_stuck", file=_shown(path), why=why, error=exc.strerror), path)
        return False
    say(t("state.damaged", file=_shown(path), why=why, kept=_shown(kept)), path)
    return True


# ---------------------------------------------------------------- reading and writing
def _folder(root: Path, create: bool, say) -> Path | None:
    """The state folder; None where there is none (and, with create, none can be made)."""
    folder = state_dir(root)
    if folder.is_dir():
        return folder
    if folder.exists() or folder.is_symlink():   # a file (or a dangling link) where the folder belongs
        kept = _free_name(folder)
        try:
            os.rename(folder, kept)
        except OSError as exc:
            say(t("state.folder_is_file_stuck", folder=_shown(folder), error=exc.strerror), folder)
            return None
        say(t("state.folder_was_file", folder=_shown(folder), kept=_shown(kept)), folder)
    if not create:
        return None
    try:
        folder.mkdir()
    except FileExistsError:
        if folder.is_dir():
            return folder                        # another process made it just now
        say(t("state.no_folder", folder=_shown(folder)), folder)
        return None
    except OSError as exc:
        say(t("state.cannot_create", folder=_shown(folder), error=exc.strerror), folder)
        return None
    return folder


@contextlib.contextmanager
def _locked(folder: Path):
    """An exclusive lock on the folder; without one where it cannot be taken (a read-only folder):
    reads go on, and a write that fails says so itself."""
    try:
        fh = open(folder / "lock", "a+")
    except OSError:
        fh = None
    try:
        if fh is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(fh, fcntl.LOCK_EX)
        yield folder
    finally:
        if fh is not None:
            fh.close()   # releases the lock


def _read(folder: Path, say) -> tuple[dict, bool]:
    """The state in `folder` as SCHEMA allows it, and whether it may be written back."""
    path = folder / "state.json"
    if not path.exists() and not path.is_symlink():
        return _empty(), True
    try:
        raw = path.read_bytes()
        data = json.loads(raw.decode("utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        return _empty(), _set_aside(path, _reason(exc), say)
    if not isinstance(data, dict):
        return _empty(), _set_aside(path, f"it holds {_seen(data)}, not a mapping", say)
    if not KINDS["version"][0](data.get("version")):
        found = "no version" if "version" not in data else f"version {_seen(data['version'])}"
        return _empty(), _set_aside(path, f"it has {found}; this attn-drill reads version {VERSION}", say)
    notes: list[str] = []
    data = check(data, SCHEMA, "", notes)
    if not notes:
        return data, True
    listed = "; ".join(notes[:3]) + (f"; and {len(notes) - 3} more" if len(notes) > 3 else "")
    kept = _free_name(path)
    try:
        with open(kept, "xb") as fh:
            fh.write(raw)
    except OSError as exc:
        say(t("state.entries_stuck", file=_shown(path), listed=listed, error=exc.strerror), path)
        return data, False
    say(t("state.entries", file=_shown(path), listed=listed, kept=_shown(kept)), path)
    with contextlib.suppress(OSError):
        _write(folder, data)
    return data, True


def _write(folder: Path, data: dict) -> None:
    try:
        try:
            blob = json.dumps(data, indent=1, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:   # a lone surrogate in a key the schema does not name
            blob = json.dumps(data, indent=1).encode("ascii")
    except (ValueError, RecursionError) as exc:
        raise OSError(f"the progress cannot be written as JSON ({exc})") from None
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".state-", suffix=".json")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(blob)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, folder / "state.json")
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def load(root: Path, warn=None) -> dict:
    """The progress in `root` (a fresh one where there is none or it cannot be used); never raises."""
    say = _sayer(warn)
    folder = _folder(root, False, say)
    if folder is None:
        return _empty()
    with _locked(folder):
        return _read(folder, say)[0]


def update(root: Path, fn, warn=None):
    """Read-modify-write under the lock; fn(data) mutates data and may return a value.

    What fn raises propagates; a state that cannot be saved (a read-only folder...) is said once by
    warn and fn still runs, on what could be read."""
    say = _sayer(warn)
    folder = _folder(root, True, say)
    if folder is None:
        return fn(_empty())
    with _locked(folder):
        data, savable = _read(folder, say)
        value = fn(data)
        if savable:
            try:
                _write(folder, data)
            except OSError as exc:
                say(t("state.cannot_save", folder=_shown(folder), error=exc.strerror or exc), folder)
        return value


def problem_entry(data: dict, pid: str) -> dict:
    entry = data["problems"].setdefault(pid, {})
    for name, f in PROBLEM.fields.items():
        entry.setdefault(name, copy.deepcopy(f.default))
    return entry


# ---------------------------------------------------------------- mock timing
def mock_elapsed(mock: dict, now: float | None = None) -> float:
    """Seconds of the mock used so far: closed segments plus the running one."""
    used = float(mock.get("elapsed", 0.0))
    if mock.get("segment_start") is not None:
        used += max(0.0, (now or clock.now()) - mock["segment_start"])
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
    data = load(root)
    return {pid: e.get("status", "not started") for pid, e in data["problems"].items()}


def record_check(root: Path, report: Report, warn=None) -> dict | None:
    """Count an attempt; remember the first pass time and the best grading time. Returns what a pass
    scheduled ({"drill": True when it ended a re-drill, "rating", "due"}), or None."""
    def fn(data):
        e = problem_entry(data, report.problem)
        now = clock.now()
        e["attempts"] += 1
        e["last_check"] = now
        e["started"] = e["started"] or now
        if report.status == PASS:
            e["status"] = "passed"
            if e["first_pass"] is None:
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
        drilled = _drill_checked(root, data, report, now)
        if not drilled and report.status == PASS:
            _first_solve_card(data, report.problem, e, now)
        card = (data.get("cards") or {}).get(report.problem)
        scheduled = None
        if report.status == PASS and isinstance(card, dict) and card.get("last_review") == now:
            scheduled = {"drill": drilled, "rating": card.get("last_rating"), "due": card.get("due")}
        for mock in data["mocks"]:
            if mock.get("active") and report.problem in mock.get("problems", {}):
                m = mock["problems"][report.problem]
                m["checks"] = m.get("checks", 0) + 1
                m["last"] = report.status
                if report.status == PASS and m.get("passed_at") is None:
                    m["passed_at"] = now
                    m["passed_after"] = round(mock_elapsed(mock, now), 1)
        return scheduled
    return update(root, fn, warn)   # a read-only folder says so and does not stop grading


def _minutes(pid: str) -> float:
    try:
        from . import bank
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


def _same_file(root: Path, a: str, b: str) -> bool:
    try:
        return (Path(root) / a).resolve() == (Path(root) / b).resolve()
    except (OSError, ValueError):
        return False


def _drill_checked(root: Path, data: dict, report: Report, now: float) -> bool:
    """A check of an open re-drill's file: counted in the drill; a pass ends it and reviews the card."""
    d = open_drill(data, report.problem)
    if d is None or not _same_file(root, report.file, d["file"]):
        return False
    d["checks"] = d.get("checks", 0) + 1
    if report.status == PASS:
        end_drill(data, report.problem, d, now, passed=True)
    return True


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


def best_solve(entry: dict, seconds: float | None) -> None:
    if seconds is not None and (entry.get("best_time_to_pass") is None or seconds < entry["best_time_to_pass"]):
        entry["best_time_to_pass"] = seconds


def record_new(root: Path, pid: str, warn=None) -> None:
    """A stub was written: the solve timer starts now (unless the problem was started before)."""
    def fn(data):
        e = problem_entry(data, pid)
        e["started"] = e["started"] or clock.now()
    update(root, fn, warn)


def record_reset(root: Path, pid: str, warn=None) -> None:
    """The stub is back: the next pass times a fresh solve."""
    def fn(data):
        problem_entry(data, pid)["attempt_start"] = clock.now()
    update(root, fn, warn)


def record_hint(root: Path, pid: str, total: int, warn=None) -> tuple[int, int]:
    """Reveal the next hint: returns (hints seen before, hints seen now), at most `total`."""
    def fn(data):
        e = problem_entry(data, pid)
        d = open_drill(data, pid)
        if d is not None:               # a re-drill counts its own hints, from the first
            before = min(d.get("hints", 0), total)
            d["hints"] = min(before + 1, total)
            return before, d["hints"], []
        before = min(e["hints_shown"], total)
        e["hints_shown"] = min(before + 1, total)
        if e["hints_shown"] > before:
            e["started"] = e["started"] or clock.now()
            for m in active_mocks(data, pid):
                m["hints"] = m.get("hints", 0) + 1
        return before, e["hints_shown"], _linked_running(root, data, pid)
    before, now, linked = update(root, fn, warn)
    if now > before:
        for folder in linked:
            _count_in_mock(folder, pid, "hints", warn)
    return before, now


def hints_seen(root: Path, pid: str) -> int:
    data = load(root)
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
        update(folder, fn, warn)
