"""`hint`, `solution`, `reset` and `progress`: help when stuck, and the record of the work. No torch."""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from rich import box
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from .. import bank, render, source, state
from ..spec import DIFFICULTIES
from .scaffold import backup, stub_text

STATUS_STYLE = {"passed": "green", "failing": "red", "not started": "dim"}


def _warn(message: str) -> None:
    render.console(stderr=True).print(f"[yellow]warning:[/yellow] {message}")


def _confirm(question: str, yes: bool, refuse: str) -> bool:
    """True when the user agreed (or passed --yes). Without a terminal to ask on, refuse."""
    if yes:
        return True
    if not sys.stdin.isatty():
        render.console(stderr=True).print(f"[red]{refuse}[/red]")
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
            con.print(f"No hints seen yet for {pid}. The first one: attn-drill hint {pid}")
            return 0
        for i in range(seen):
            con.print(_hint_panel(spec, i, lang))
        more = f"; the next one: attn-drill hint {pid}" if seen < total else ""
        con.print(Text(f"{seen} of {total} hints seen{more}", style="dim"))
        return 0
    before, now = state.record_hint(root, pid, total, _warn)
    if now == before:
        con.print(f"All {total} hints for {pid} are already shown (attn-drill hint {pid} --all to read them "
                  f"again). Still stuck? The reference: attn-drill solution {pid}")
        return 0
    con.print(_hint_panel(spec, now - 1, lang))
    left = total - now
    con.print(Text(f"{left} more hint{'s' if left != 1 else ''}: attn-drill hint {pid}" if left else
                   f"that was the last hint; the reference: attn-drill solution {pid}", style="dim"))
    return 0


def _hint_panel(spec, i: int, lang: str) -> Panel:
    title = f"hint {i + 1} of {len(spec.hints)} · {spec.id}" if lang != "zh" else \
        f"提示 {i + 1}/{len(spec.hints)} · {spec.id}"
    return Panel(render.markdown(spec.hints[i].get(lang)), title=title, title_align="left",
                 border_style="cyan", expand=True)


# ---------------------------------------------------------------- solution
def solution(pid: str, yes: bool, root: Path) -> int:
    bank.get(pid)
    path = bank.reference_path(pid)
    status = state.statuses(root).get(pid, "not started")
    if status != "passed":
        ok = _confirm(f"You have not passed {pid} yet. Show the reference solution (recorded in your progress)?",
                      yes, f"{pid} is not passed yet: showing its solution needs confirmation. "
                           f"Run it in a terminal, or add --yes: attn-drill solution {pid} --yes")
        if not ok:
            return 1
    state.record_solution(root, pid, _warn)
    con = render.console()
    con.print(Text(f"reference solution: {pid} ({path.name})", style="bold"))
    con.print(Syntax(source.read(path), "python", line_numbers=True, word_wrap=True,
                     theme="ansi_dark", background_color="default"))
    return 0


# ---------------------------------------------------------------- reset
def reset(pid: str, path: Path | None, yes: bool, cwd: Path) -> int:
    bank.get(pid)
    target = Path(os.path.relpath(path or cwd / f"{pid}.py"))
    text = stub_text(pid)
    con = render.console()
    if target.exists():
        if target.read_text(encoding="utf-8", errors="replace") == text:
            con.print(f"{target} is already the untouched stub; nothing to do.")
            return 0
        ok = _confirm(f"Replace your {target} with the stub? (a backup of your file is kept)", yes,
                      f"resetting {target} needs confirmation; run it in a terminal, or add --yes: "
                      f"attn-drill reset {pid} --yes")
        if not ok:
            return 1
        saved = backup(target)
        con.print(f"[yellow]kept a backup of your file:[/yellow] {saved}")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    state.record_reset(cwd, pid, _warn)
    con.print(f"restored the stub in [bold]{target}[/bold]; grade it with: attn-drill check {pid}")
    return 0


# ---------------------------------------------------------------- progress
def _iso(t) -> str | None:
    return None if t is None else time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(t))


def _date(t) -> str:
    return "" if t is None else time.strftime("%m-%d %H:%M", time.localtime(t))


def duration(seconds) -> str:
    """12:05 or 1:02:05; '' when unknown."""
    if seconds is None:
        return ""
    s = int(round(seconds))
    h, rem = divmod(s, 3600)
    return f"{h}:{rem // 60:02d}:{rem % 60:02d}" if h else f"{rem // 60}:{rem % 60:02d}"


def progress_data(root: Path) -> dict:
    data = state.load(root, _warn)
    rows = []
    for spec in bank.all_specs():
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
    return {"version": state.VERSION, "problems": rows, "summary": summary,
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
            "passed": passed, "hints": hints, "verdict": card.get("verdict")}


def progress(root: Path, as_json: bool, lang: str) -> int:
    d = progress_data(root)
    if as_json:
        print(json.dumps(d, indent=2, ensure_ascii=False))
        return 0
    con = render.console()
    t = Table(title="progress", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False,
              padding=(0, 1), collapse_padding=True)
    # to pass: the first solve's time; best: the quickest solve (after a reset or in a mock)
    wide = con.width >= 100   # the date of the first pass only where it fits
    cols = ("id", "level", "status", "checks") + (("first pass",) if wide else ()) + ("to pass", "best", "hints",
                                                                                     "sol.")
    for col in cols:
        t.add_column(col, no_wrap=True, min_width=len(col),
                     justify="right" if col in ("checks", "to pass", "best", "hints") else "left")
    for r in d["problems"]:
        row = [r["id"], r["difficulty"], Text(r["status"], style=STATUS_STYLE.get(r["status"])),
               str(r["attempts"] or "")] + ([_date(_epoch(r["first_pass"]))] if wide else []) + [
               duration(r["time_to_pass"]), duration(r["best_time_to_pass"]),
               f"{r['hints_shown']}/{r['hints_total']}" if r["hints_shown"] else "",
               Text("viewed", style="yellow") if r["solution_viewed"] else ""]
        t.add_row(*row)
    con.print(t)
    s = d["summary"]
    levels = " · ".join(f"{k} {v['solved']}/{v['total']}" for k, v in s["by_difficulty"].items() if v["total"])
    con.print(Text.assemble(("Solved ", "bold"), (f"{s['solved']} of {s['total']}", "bold green"),
                            f"  ({levels})" + (f" · {s['failing']} failing" if s["failing"] else "")))
    tags = Text("By tag: ", style="bold")
    for i, (tag, v) in enumerate(s["by_tag"].items()):
        tags.append(("" if i == 0 else " · ") + tag + " ", style="")
        tags.append(f"{v['solved']}/{v['total']}", style="green" if v["solved"] == v["total"] else "")
    con.print(tags)
    if d["mocks"]:
        con.print(mock_table(d["mocks"]))
    else:
        con.print(Text("No mock interviews yet: attn-drill mock", style="dim"))
    return 0


def _epoch(iso: str | None):
    return None if iso is None else time.mktime(time.strptime(iso[:19], "%Y-%m-%dT%H:%M:%S"))


def mock_table(mocks: list[dict]) -> Table:
    t = Table(title="mock interviews", title_justify="left")
    for col in ("started", "mock", "problems", "time", "passed", "hints", "verdict"):
        t.add_column(col, no_wrap=col != "problems")
    for m in mocks:
        passed = "" if m["passed"] is None else f"{m['passed']}/{len(m['problems'])}"
        verdict = m["verdict"] or (m["status"] or "")
        t.add_row(_date(_epoch(m["started"])), m["id"] or "", ", ".join(m["problems"]),
                  f"{duration(m['used'] or 0)} / {duration(m['seconds'] or 0)}", passed,
                  "" if m["hints"] is None else str(m["hints"]), verdict)
    return t
