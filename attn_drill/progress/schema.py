"""The layout of the progress file (`state.json` in attn_drill.progress.store.home()), as data, and the
checker that reads a file by it (attn_drill.progress.store calls it on every read).

Version 1:
    problems: {id: {status, attempts, started, first_pass, time_to_pass, best_time_to_pass,
                    attempt_start, best_seconds, last_check, hints_shown, solution_viewed}}
              started: first check or hint; time_to_pass: from then to the first pass;
              attempt_start: set by `reset`, so the next pass times a fresh solve;
              best_time_to_pass: the quickest solve (first, after a reset, or in a mock);
              best_seconds: the quickest passing grading run.
    mocks:    a list of mock interviews, each {"id", "folder" (its files, a full path), "active",
              "status", "problems": {id: {...}}, timing..., "scorecard"}; older files also hold links
              ({"folder", "status", "problem_ids", "scorecard"}) to a record kept in the mock's folder.
    cards:    {id or id/question: {kind, fsrs, due, reviews, lapses, last_rating, from_memory}}: when to
              re-drill a problem or ask a follow-up again (attn_drill.progress.schedule).
    drills:   {id: {file, started, status, checks, hints, solution_viewed, passed_at, first_try,
                    rating}}: the latest re-drill from memory of a problem (`attn-drill drill`).
A value of the wrong type is dropped, or reset to its default, and said in one note; keys the
schema does not name are kept as they are. No torch.
"""
from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from typing import Any

VERSION = 1


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
    "final_mistake": Field("text?", keep=True),  # the named mistake at the bell, its title, reason, replay
    "final_title": Field("text?", keep=True),
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
    "title": Field("text?"),
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
        "reviewed": Field("flag", False),       # its end reviewed the cards of its problems
        "note": Field("text?"),                 # why these problems (the minutes, the level)
    }),
    ("folder", {     # the folder of its files (before one progress per user: a link to it)
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
