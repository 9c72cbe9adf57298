"""`hint`, `solution`, `reset` and `progress`: help when stuck, and the record of the work. No torch."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from .. import bank, render
from ..bank import curriculum
from ..bank.spec import DIFFICULTIES
from ..i18n import t, tn
from ..progress import clock, mocks, rules, schedule, store
from ..render import practice as view
from .scaffold import backup, refuse_folder, stub_text, write_stub


def _confirm(question: str, yes: bool, refuse: str) -> bool:
    """True when the user agreed (or passed --yes). Without a terminal to ask on, refuse (exit code 1)."""
    if yes:
        return True
    if not sys.stdin.isatty():
        render.say(refuse, "red", stderr=True)
        return False
    return render.confirm(question)


# ---------------------------------------------------------------- hint
def hint(pid: str, lang: str, show_all: bool, root: Path) -> int:
    spec = bank.get(pid)
    total = len(spec.hints)
    con = render.console()
    if show_all:
        seen = min(rules.hints_seen(root, pid), total)
        if seen == 0:
            render.say(t("hint.none_seen", id=pid), con=con)
            return 0
        for i in range(seen):
            con.print(view.hint_panel(spec, i, lang))
        render.say(t("hint.seen", seen=seen, total=total) + (t("hint.next_one", id=pid) if seen < total else ""),
                   "dim", con)
        return 0
    before, now = rules.record_hint(root, pid, total, render.warn)
    if now == before:
        render.say(t("hint.all_shown", n=total, id=pid), con=con)
        return 0
    con.print(view.hint_panel(spec, now - 1, lang))
    left = total - now
    render.say(tn("hint.more", left, id=pid) if left else t("hint.last", id=pid), "dim", con)
    return 0


# ---------------------------------------------------------------- solution
def solution(pid: str, yes: bool, root: Path) -> int:
    bank.get(pid)
    path = bank.reference_path(pid)
    status = rules.statuses(root).get(pid, "not started")
    if status != "passed":
        ok = _confirm(t("solution.ask", id=pid), yes, t("solution.refused", id=pid))
        if not ok:
            return 1
    rules.record_solution(root, pid, render.warn)
    code = bank.read_reference(pid)
    if not sys.stdout.isatty():          # piped or redirected: the plain file, runnable as it is
        render.plain(code)
        return 0
    con = render.console()
    render.say(t("solution.heading", id=pid, file=path.name), "bold", con)
    con.print(render.code(code))
    render.say(t("solution.save", id=pid), "dim", con)
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
            render.say(t("reset.already", file=target), con=con)
            return 0
        ok = _confirm(t("reset.ask", file=target), yes, t("reset.refused", file=target, id=pid))
        if not ok:
            return 1
        saved = backup(target)
        render.say(t("new.backup", file=saved), "yellow", con)
    write_stub(target, text)
    rules.record_reset(cwd, pid, render.warn)
    render.say(t("reset.done", file=target, id=pid), con=con)
    return 0


# ---------------------------------------------------------------- progress
def progress_data(root: Path) -> dict:
    data = store.load(None, render.warn)
    rows = []
    for spec in curriculum.order(bank.all_specs()):
        e = data["problems"].get(spec.id, {})
        rows.append({
            "id": spec.id, "title": spec.title.en, "title_zh": spec.title.zh, "difficulty": spec.difficulty,
            "tags": list(spec.tags), "status": e.get("status", "not started"), "attempts": e.get("attempts", 0),
            "first_pass": clock.iso(e.get("first_pass")), "time_to_pass": e.get("time_to_pass"),
            "best_time_to_pass": e.get("best_time_to_pass"),
            "best_seconds": e.get("best_seconds"), "last_check": clock.iso(e.get("last_check")),
            "hints_shown": e.get("hints_shown", 0), "hints_total": len(spec.hints),
            "solution_viewed": bool(e.get("solution_viewed", False)),
        })
    by_diff = {d: {"solved": 0, "total": 0} for d in DIFFICULTIES}
    by_tag: dict[str, dict] = {}
    for r in rows:
        solved = r["status"] == "passed"
        for bucket in [by_diff[r["difficulty"]]] + [by_tag.setdefault(tag, {"solved": 0, "total": 0})
                                                     for tag in r["tags"]]:
            bucket["total"] += 1
            bucket["solved"] += solved
    summary = {"solved": sum(r["status"] == "passed" for r in rows), "total": len(rows),
               "failing": sum(r["status"] == "failing" for r in rows),
               "by_difficulty": by_diff, "by_tag": dict(sorted(by_tag.items()))}
    return {"version": store.VERSION, "kept_in": str(store.home() / "state.json"), "problems": rows,
            "summary": summary,
            "retention": schedule.retention(data, clock.day_end(clock.now())),
            "mocks": [mocks.summary(m) for m in data["mocks"]]}


def progress(root: Path, as_json: bool, lang: str) -> int:
    render.emit(progress_data(root), as_json, lambda d, width: view.progress(d, lang, width))
    return 0

