"""`hint`, `solution`, `reset` and `progress`: help when stuck, and the record of the work. No torch."""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from rich.syntax import Syntax
from rich.text import Text

from .. import bank, curriculum, render, state
from ..i18n import t, tn
from ..render import practice as view
from ..spec import DIFFICULTIES
from .scaffold import backup, refuse_folder, stub_text, write_stub

def _warn(message: str) -> None:
    render.console(stderr=True).print(Text(t("cli.warning") + " " + message, style="yellow"), soft_wrap=True)


def _confirm(question: str, yes: bool, refuse: str) -> bool:
    """True when the user agreed (or passed --yes). Without a terminal to ask on, refuse (exit code 1)."""
    if yes:
        return True
    if not sys.stdin.isatty():
        render.console(stderr=True).print(Text(refuse, style="red"), soft_wrap=True)
        return False
    from rich.prompt import Confirm
    return Confirm.ask(question, default=False, console=render.console(stderr=True))


# ---------------------------------------------------------------- hint
def hint(pid: str, lang: str, show_all: bool, root: Path) -> int:
    spec = bank.get(pid)
    total = len(spec.hints)
    con = render.console()
    if show_all:
        seen = min(state.hints_seen(root, pid), total)
        if seen == 0:
            con.print(t("hint.none_seen", id=pid), soft_wrap=True)
            return 0
        for i in range(seen):
            con.print(view.hint_panel(spec, i, lang))
        con.print(Text(t("hint.seen", seen=seen, total=total) +
                       (t("hint.next_one", id=pid) if seen < total else ""), style="dim"))
        return 0
    before, now = state.record_hint(root, pid, total, _warn)
    if now == before:
        con.print(t("hint.all_shown", n=total, id=pid), soft_wrap=True)
        return 0
    con.print(view.hint_panel(spec, now - 1, lang))
    left = total - now
    con.print(Text(tn("hint.more", left, id=pid) if left else t("hint.last", id=pid), style="dim"))
    return 0


# ---------------------------------------------------------------- solution
def solution(pid: str, yes: bool, root: Path) -> int:
    bank.get(pid)
    path = bank.reference_path(pid)
    status = state.statuses(root).get(pid, "not started")
    if status != "passed":
        ok = _confirm(t("solution.ask", id=pid), yes, t("solution.refused", id=pid))
        if not ok:
            return 1
    state.record_solution(root, pid, _warn)
    code = bank.read_reference(pid)
    if not sys.stdout.isatty():          # piped or redirected: the plain file, runnable as it is
        sys.stdout.write(code if code.endswith("\n") else code + "\n")
        sys.stdout.flush()
        return 0
    con = render.console()
    con.print(Text(t("solution.heading", id=pid, file=path.name), style="bold"))
    con.print(Syntax(code, "python", line_numbers=True, word_wrap=True, theme="ansi_dark",
                     background_color="default"))
    con.print(Text(t("solution.save", id=pid), style="dim"), soft_wrap=True)
    return 0


# ---------------------------------------------------------------- reset
def reset(pid: str, path: Path | None, yes: bool, cwd: Path) -> int:
    bank.get(pid)
    target = Path(os.path.relpath(path or cwd / f"{pid}.py"))
    text = stub_text(pid)
    con = render.console()
    refuse_folder(target, pid)
    if target.exists():
        try:
            same = target.read_text(encoding="utf-8", errors="replace") == text
        except OSError:
            same = False   # unreadable: its backup below says why, and nothing is replaced
        if same:
            con.print(t("reset.already", file=target), soft_wrap=True)
            return 0
        ok = _confirm(t("reset.ask", file=target), yes, t("reset.refused", file=target, id=pid))
        if not ok:
            return 1
        saved = backup(target)
        con.print(Text(t("new.backup", file=saved), style="yellow"), soft_wrap=True)
    write_stub(target, text)
    state.record_reset(cwd, pid, _warn)
    con.print(t("reset.done", file=target, id=pid), soft_wrap=True)
    return 0


# ---------------------------------------------------------------- progress
def _iso(t) -> str | None:
    return None if t is None else time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(t))


def _date(t) -> str:
    return "" if t is None else time.strftime("%m-%d %H:%M", time.localtime(t))


def progress_data(root: Path) -> dict:
    data = state.load(root, _warn)
    rows = []
    for spec in curriculum.order(bank.all_specs()):
        e = data["problems"].get(spec.id, {})
        rows.append({
            "id": spec.id, "title": spec.title.en, "title_zh": spec.title.zh, "difficulty": spec.difficulty,
            "tags": list(spec.tags), "status": e.get("status", "not started"), "attempts": e.get("attempts", 0),
            "first_pass": _iso(e.get("first_pass")), "time_to_pass": e.get("time_to_pass"),
            "best_time_to_pass": e.get("best_time_to_pass"),
            "best_seconds": e.get("best_seconds"), "last_check": _iso(e.get("last_check")),
            "hints_shown": e.get("hints_shown", 0), "hints_total": len(spec.hints),
            "solution_viewed": bool(e.get("solution_viewed", False)),
        })
    by_diff = {d: {"solved": 0, "total": 0} for d in DIFFICULTIES}
    by_tag: dict[str, dict] = {}
    for r in rows:
        solved = r["status"] == "passed"
        for bucket in [by_diff[r["difficulty"]]] + [by_tag.setdefault(t, {"solved": 0, "total": 0})
                                                     for t in r["tags"]]:
            bucket["total"] += 1
            bucket["solved"] += solved
    summary = {"solved": sum(r["status"] == "passed" for r in rows), "total": len(rows),
               "failing": sum(r["status"] == "failing" for r in rows),
               "by_difficulty": by_diff, "by_tag": dict(sorted(by_tag.items()))}
    from .. import clock, schedule
    return {"version": state.VERSION, "problems": rows, "summary": summary,
            "retention": schedule.retention(data, clock.day_end(clock.now())),
            "mocks": [mock_summary(m) for m in data["mocks"]]}


def mock_summary(m: dict) -> dict:
    """One mock interview, in the same shape whether read from its folder or from a link to it."""
    card = m.get("scorecard") or {}
    live = m.get("problems") if isinstance(m.get("problems"), dict) else None
    ids = m.get("problem_ids") or list((live or {}).keys())
    passed, hints = card.get("passed"), card.get("hints")
    if not card and live:  # a mock still going, read in its own folder
        passed = sum(bool(p.get("passed_at")) for p in live.values())
        hints = sum(p.get("hints", 0) for p in live.values())
    used = card.get("used", state.mock_elapsed(m) if "elapsed" in m else None)
    return {"id": m.get("id"), "folder": m.get("folder"), "status": m.get("status"),
            "started": _iso(m.get("started")), "seconds": m.get("seconds"), "used": used, "problems": ids,
            "passed": passed, "hints": hints, "verdict": card.get("verdict"), "score": card.get("score")}


def progress(root: Path, as_json: bool, lang: str) -> int:
    render.emit(progress_data(root), as_json, lambda d, width: view.progress(d, lang, width))
    return 0


def _epoch(iso: str | None):
    return None if iso is None else time.mktime(time.strptime(iso[:19], "%Y-%m-%dT%H:%M:%S"))
