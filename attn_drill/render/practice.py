"""What the practice commands show: list, show, hints, progress, mock interviews, today, plan, quiz."""
from __future__ import annotations

from rich.console import Console
from rich.text import Text

from ..i18n import has, t, tn
from ..results import PASS
from .base import print_command


def after_check(con: Console, results: list[tuple[str, str]], nxt: str | None, scheduled: dict = None) -> None:
    """Below the reports: the count over several files, what a pass scheduled, what to do next."""
    from .. import clock
    for pid, sch in (scheduled or {}).items():
        if sch and sch.get("due"):
            key = "check.drill_done" if sch.get("drill") else "check.scheduled"
            con.print(Text(t(key, id=pid, rating=sch["rating"], date=clock.local_day(sch["due"])), style="cyan"),
                      soft_wrap=True)
    if len(results) > 1:
        passed = sum(st == PASS for _, st in results)
        con.print(Text(t("check.total", passed=passed, total=len(results)), style="bold"))
    if nxt:
        print_command(con, f"attn-drill show {nxt}  ·  attn-drill new {nxt}", t("check.next") + " ")


# ---------------------------------------------------------------- list and show
STATUS_STYLE = {"passed": "green", "failing": "red", "not started": "dim"}


def status_word(status: str) -> str:
    return t(f"status.{status.replace(' ', '_')}") if status in STATUS_STYLE else status


def problem_table(rows: list[dict], lang: str, width: int):
    from rich import box
    from .base import fitted_table
    cols = [{"name": t("list.id"), "drop": 0}, {"name": t("list.title"), "drop": 0, "wrap": True, "min": 12},
            {"name": t("list.level"), "drop": 3}, {"name": t("list.kind"), "drop": 4},
            {"name": t("list.tags"), "drop": 2, "fold": True, "min": 14},
            {"name": t("list.minutes"), "drop": 5, "justify": "right"}, {"name": t("list.status"), "drop": 0}]
    body = [[r["id"], r["title_zh"] if lang == "zh" else r["title"], t(f"level.{r['difficulty']}"), r["kind"],
             ", ".join(r["tags"]), str(r["minutes"]),
             Text(status_word(r["status"]), style=STATUS_STYLE.get(r["status"], ""))] for r in rows]
    table = fitted_table(cols, body, width, title=t("list.heading", n=len(rows)), title_justify="left",
                         box=box.SIMPLE_HEAD, pad_edge=False)
    return table


def statement(spec, lang: str):
    from rich.console import Group
    from .base import markdown
    parts = [Text.assemble((f"{spec.id}: {spec.title.get(lang)}", "bold"),
                           (f"  [{t('level.' + spec.difficulty)}, ~{spec.minutes} {t('unit.min')}, "
                            f"{', '.join(spec.tags)}]", "dim")),
             markdown(spec.statement.get(lang)),
             Text(t("show.interface", names=", ".join(spec.interface)), style="cyan"),
             Text(t("show.forbidden", names=", ".join(spec.all_forbidden)), style="dim")]
    if spec.required:
        parts.append(Text(t("show.required", names=", ".join(r.api for r in spec.required)), style="dim"))
    parts.append(Text(t("show.next", n=len(spec.hints), id=spec.id), style="dim"))
    return Group(*parts)


# ---------------------------------------------------------------- mock interviews
def duration(seconds) -> str:
    """12:05 or 1:02:05; '' when unknown."""
    if seconds is None:
        return ""
    s = int(round(seconds))
    h, rem = divmod(s, 3600)
    return f"{h}:{rem // 60:02d}:{rem % 60:02d}" if h else f"{rem // 60}:{rem % 60:02d}"


def outcome_word(st: str) -> str:
    words = {PASS: "verdict.pass", "fail": "verdict.fail", "error": "verdict.error", "checking": "mock.checking",
             "not attempted": "mock.not_attempted", "missing": "mock.missing"}
    return t(words[st]) if st in words else st


def _outcome_style(st: str) -> str:
    return "green" if st == PASS else ("yellow" if st in ("checking", "not attempted") else "red")


def mock_screen(m: dict, last: dict, left: float, prompt: str, folder: str, width: int):
    """The live panel of a running mock: the clock, a row per problem, the keys."""
    from rich.console import Group
    from rich.panel import Panel
    from rich.table import Table
    from .base import clip
    inner = max(30, width - 4)
    tab = Table(box=None, pad_edge=False, expand=False, show_edge=False)
    for col in ("#", t("mock.problem"), t("mock.checks"), t("mock.hints")):
        tab.add_column(col, no_wrap=True)
    rows = []
    for i, (pid, p) in enumerate(m["problems"].items(), 1):
        tab.add_row(str(i), pid, str(p.get("checks", 0)), str(p.get("hints", 0)))
        got = last.get(pid) or ({"status": p["last"], "message": ""} if p.get("last") else None)
        if got is None:
            rows.append(Text(f"  {i}. {pid}: " + t("mock.no_check_yet"), style="dim"))
            continue
        st = got["status"]
        line = Text.assemble(f"  {i}. ", (f"{outcome_word(st)}", _outcome_style(st)))
        if p.get("passed_at"):
            line.append("  " + t("mock.green_at", at=duration(p["passed_after"])), style="green")
        rows.append(line)
        if got.get("message") and st not in (PASS, "checking"):
            rows.append(Text("     " + clip(got["message"], inner - 5, 2), style="dim"))
        if got.get("mistake"):
            rows.append(Text("     " + clip(t("mock.looks_like", id=got["mistake"], why=got.get("why") or ""),
                                           inner - 5, 2), style="magenta"))
    clock = Text.assemble(("⏱ ", ""), (t("mock.left", left=duration(left)), "bold red" if left < 60 else "bold"),
                          " " + t("mock.of", total=duration(m["seconds"])))
    ready = [pid for pid, p in m["problems"].items() if p.get("passed_at") and not p.get("followups_asked")]
    parts = [clock, tab, *rows, Text(clip(t("mock.keys"), inner, 2), style="dim")]
    if ready:
        parts.append(Text(clip(t("mock.followups_ready", ids=", ".join(ready)), inner, 2), style="bold cyan"))
    if prompt:
        parts.append(Text(prompt, style="bold cyan"))
    return Panel(Group(*parts), title=t("mock.title", id=m["id"]), title_align="left",
                 subtitle=clip(t("mock.edit_in", folder=folder), inner, 1), border_style="cyan")


def scorecard(card: dict, width: int):
    """The end of a mock: a row per problem, the named mistake and replay of each failure, the score explained."""
    from rich import box
    from rich.console import Group
    from .base import clip, fitted_table
    cols = [{"name": t("mock.problem"), "drop": 0}, {"name": t("mock.result"), "drop": 0},
            {"name": t("mock.time_to_green"), "drop": 2}, {"name": t("mock.checks"), "drop": 3, "justify": "right"},
            {"name": t("mock.hints"), "drop": 0, "justify": "right"},
            {"name": t("mock.score"), "drop": 0, "justify": "right"}]
    body = []
    for r in card["problems"]:
        res = r["result"] or "-"
        cell = Text(outcome_word(res), style=_outcome_style(res) if not r["passed"] else "green")
        if r["solution_viewed"]:
            cell.append(" " + t("mock.solution_viewed"), style="yellow")
        body.append([r["id"], cell, duration(r["time_to_green"]) or "-", str(r["checks"]), str(r["hints"]),
                     f"{r['score']:.2f}"])
    table = fitted_table(cols, body, width, title=t("mock.scorecard", id=card["id"]), title_justify="left",
                         box=box.SIMPLE_HEAD)
    inner = max(30, width - 2)
    parts = [table]
    for r in card["problems"]:
        if r["passed"]:
            continue
        if r.get("message"):
            parts.append(Text(clip(f"  {r['id']}: {r['message']}", inner, 2), style="dim"))
        if r.get("mistake"):
            parts.append(Text(clip("    " + t("mock.looks_like", id=r["mistake"], why=r.get("why") or ""), inner, 2),
                              style="magenta"))
        if r.get("replay"):
            parts.append(Text.assemble(("    " + t("report.replay"), "dim"), (r["replay"], "bold"), no_wrap=True,
                                       overflow="ignore"))
    good = card["verdict"] in ("strong pass", "pass")
    parts.append(Text.assemble((t("mock.verdict") + " ", "bold"),
                               (t("mock.v." + card["verdict"].replace(" ", "_")), "bold green" if good else "bold red"),
                               "   " + t("mock.summary", passed=card["passed"], total=len(card["problems"]),
                                         hints=card["hints"], used=duration(card["used"]),
                                         seconds=duration(card["seconds"]), score=f"{card['score']:.2f}")))
    if card.get("followups_asked"):
        per = ", ".join(f"{r['id']} {r['followups_right']}/{r['followups_asked']}" for r in card["problems"]
                        if r.get("followups_asked"))
        parts.append(Text(t("mock.followups_card", right=card["followups_right"], n=card["followups_asked"],
                            per=per), style="cyan"))
    parts.append(Text(clip(t("mock.how_scored"), inner, 4), style="dim"))
    return Group(*parts)


def mock_history(mocks: list[dict], width: int):
    from rich import box
    from .base import fitted_table
    cols = [{"name": t("mock.started"), "drop": 3}, {"name": t("mock.mock"), "drop": 0},
            {"name": t("mock.problems"), "drop": 1, "wrap": True, "min": 10},
            {"name": t("mock.time"), "drop": 2}, {"name": t("mock.passed"), "drop": 0},
            {"name": t("mock.hints"), "drop": 4, "justify": "right"},
            {"name": t("mock.score"), "drop": 0, "justify": "right"}, {"name": t("mock.verdict_col"), "drop": 0}]
    body = []
    for m in mocks:
        passed = "" if m["passed"] is None else f"{m['passed']}/{len(m['problems'])}"
        verdict = m["verdict"] or m["status"] or ""
        key = "mock.v." + verdict.replace(" ", "_")
        body.append([(m.get("started") or "")[5:16].replace("T", " "), m["id"] or "", ", ".join(m["problems"]),
                     f"{duration(m['used'] or 0)} / {duration(m['seconds'] or 0)}", passed,
                     "" if m["hints"] is None else str(m["hints"]),
                     "" if m.get("score") is None else f"{m['score']:.2f}",
                     t(key) if has(key) else verdict])
    return fitted_table(cols, body, width, title=t("mock.history"), title_justify="left", box=box.SIMPLE_HEAD)


# ---------------------------------------------------------------- hints and progress
def hint_panel(spec, i: int, lang: str):
    from rich.panel import Panel
    from .base import markdown
    return Panel(markdown(spec.hints[i].get(lang)), title=t("hint.title", i=i + 1, n=len(spec.hints), id=spec.id),
                 title_align="left", border_style="cyan", expand=True)


def progress(d: dict, lang: str, width: int):
    """`progress`: a row per problem, the summary by level and tag, the mock interviews."""
    from rich import box
    from rich.console import Group
    from .base import fitted_table
    cols = [{"name": t("list.id"), "drop": 0}, {"name": t("list.level"), "drop": 4},
            {"name": t("list.status"), "drop": 0}, {"name": t("progress.checks"), "drop": 5, "justify": "right"},
            {"name": t("progress.first_pass"), "drop": 6}, {"name": t("progress.to_pass"), "drop": 3, "justify": "right"},
            {"name": t("progress.best"), "drop": 2, "justify": "right"},
            {"name": t("progress.hints"), "drop": 1, "justify": "right"}, {"name": t("progress.solution"), "drop": 1}]
    body = []
    for r in d["problems"]:
        body.append([r["id"], t(f"level.{r['difficulty']}"), Text(status_word(r["status"]),
                                                                  style=STATUS_STYLE.get(r["status"], "")),
                     str(r["attempts"] or ""), (r["first_pass"] or "")[5:16].replace("T", " "),
                     duration(r["time_to_pass"]), duration(r["best_time_to_pass"]),
                     f"{r['hints_shown']}/{r['hints_total']}" if r["hints_shown"] else "",
                     Text(t("progress.viewed"), style="yellow") if r["solution_viewed"] else ""])
    parts = [fitted_table(cols, body, width, title=t("progress.title"), title_justify="left", box=box.SIMPLE_HEAD,
                          pad_edge=False, show_edge=False)]
    s = d["summary"]
    levels = " · ".join(f"{t('level.' + k)} {v['solved']}/{v['total']}" for k, v in s["by_difficulty"].items()
                        if v["total"])
    parts.append(Text.assemble((t("progress.solved") + " ", "bold"),
                               (t("progress.of", solved=s["solved"], total=s["total"]), "bold green"),
                               f"  ({levels})" + (" · " + t("progress.failing", n=s["failing"]) if s["failing"] else "")))
    tags = Text(t("progress.by_tag") + " ", style="bold")
    for i, (tag, v) in enumerate(s["by_tag"].items()):
        tags.append(("" if i == 0 else " · ") + tag + " ", style="")
        tags.append(f"{v['solved']}/{v['total']}", style="green" if v["solved"] == v["total"] else "")
    parts.append(tags)
    if d.get("retention"):
        parts.append(retention_line(d["retention"]))
    parts.append(mock_history(d["mocks"], width) if d["mocks"] else Text(t("progress.no_mocks"), style="dim"))
    return Group(*parts)


def retention_line(r: dict) -> Text:
    return Text.assemble((t("progress.retention") + " ", "bold"),
                         t("progress.retention_counts", due=r["due"], overdue=r["overdue"], memory=r["from_memory"],
                           tracked=r["tracked"]))


# ---------------------------------------------------------------- re-drills, today, plan
def drill_started(pid: str, file: str, minutes: int) -> Text:
    return Text(t("drill.started", id=pid, file=file, minutes=minutes))


def _item_line(item: dict, lang: str) -> Text:
    kind = item["kind"]
    label = t(f"today.kind.{kind}")
    what = item["id"] or tn("today.questions", sum(item.get("questions", {}).values())
                            if isinstance(item.get("questions"), dict) else item.get("questions", 0))
    extra = ""
    if kind == "redrill" and item.get("overdue_days"):
        extra = " " + t("today.overdue", n=item["overdue_days"])
    if kind == "quiz" and isinstance(item.get("questions"), dict):
        extra = " (" + ", ".join(f"{p} {n}" for p, n in item["questions"].items()) + ")"
    line = Text.assemble((f"  {label:<10}", "bold cyan" if kind != "new" else "bold"), (what, "bold"),
                         (extra, "yellow" if kind == "redrill" else "dim"),
                         (f"  ~{item['minutes']} {t('unit.min')}", "dim"))
    if item.get("command"):
        line.append("\n" + " " * 12)
        line.append(item["command"], style="")
    return line


def today(d: dict, lang: str, width: int):
    from rich.console import Group
    parts = [Text(t("today.heading", date=d["date"], minutes=d["minutes"]), style="bold")]
    if not d["items"]:
        parts.append(Text(t("today.nothing"), style="green"))
    for item in d["items"]:
        parts.append(_item_line(item, lang))
    if d.get("next_due"):
        parts.append(Text(t("today.next_due", id=d["next_due"]["id"], date=d["next_due"]["date"]), style="dim"))
    parts.append(retention_line(d["retention"]))
    parts.append(Text(t("today.how"), style="dim"))
    return Group(*parts)


def _plan_cell(item: dict) -> str:
    if item["kind"] == "quiz":
        return tn("plan.quiz", item["questions"])
    return t(f"plan.{item['kind']}", id=item["id"])


def plan_table(d: dict, lang: str, width: int):
    from rich import box
    from rich.console import Group
    from .base import fitted_table
    cols = [{"name": t("plan.day"), "drop": 0, "justify": "right"}, {"name": t("plan.date"), "drop": 2},
            {"name": t("plan.work"), "drop": 0, "wrap": True, "min": 20},
            {"name": t("list.minutes"), "drop": 1, "justify": "right"}]
    body = [[str(day["day"]), day["date"][5:], "; ".join(_plan_cell(i) for i in day["items"]) or t("plan.free"),
             str(day["minutes"])] for day in d["plan"]]
    parts = [fitted_table(cols, body, width, title=t("plan.title", days=d["days"], hours=f"{d['hours_per_day']:g}"),
                          title_justify="left", box=box.SIMPLE_HEAD)]
    if d["not_planned"]:
        parts.append(Text(t("plan.left", n=len(d["not_planned"]), ids=", ".join(d["not_planned"][:8]) +
                            (" …" if len(d["not_planned"]) > 8 else "")), style="dim"))
    parts.append(Text(t("plan.how"), style="dim"))
    return Group(*parts)


def plan_markdown(d: dict, lang: str) -> str:
    """The plan for a notes app: a heading, then a checklist per day."""
    hours = f"{d['hours_per_day']:g}"
    lines = [f"# {t('plan.title', days=d['days'], hours=hours)}", ""]
    for day in d["plan"]:
        lines.append(f"## {t('plan.day_heading', day=day['day'], date=day['date'], minutes=day['minutes'])}")
        lines.append("")
        for item in day["items"] or []:
            cmd = {"new": f"attn-drill new {item['id']}", "redrill": f"attn-drill drill {item['id']}",
                   "quiz": "attn-drill quiz --due"}[item["kind"]]
            lines.append(f"- [ ] {_plan_cell(item)} (~{item['minutes']} {t('unit.min')}): `{cmd}`")
        if not day["items"]:
            lines.append(f"- {t('plan.free')}")
        lines.append("")
    if d["not_planned"]:
        lines.append(t("plan.left", n=len(d["not_planned"]), ids=", ".join(d["not_planned"])))
        lines.append("")
    lines.append(f"_{t('plan.how')}_")
    return "\n".join(lines)


# ---------------------------------------------------------------- quiz
def quiz_progress(i: int, n: int) -> Text:
    return Text(t("quiz.progress", i=i, n=n), style="dim")


def question(pid: str, q, lang: str):
    from rich.panel import Panel
    from ..i18n import pick
    return Panel(Text(pick(q.en, q.zh)), title=t("quiz.title", id=pid), title_align="left", border_style="cyan")


def choices(texts: list[str], at: int | None):
    """The choices, numbered, each wrapped under its own text (a hanging indent)."""
    from rich.console import Group
    from rich.table import Table
    tab = Table(box=None, show_header=False, pad_edge=False, padding=(0, 1))
    tab.add_column(no_wrap=True)
    tab.add_column(ratio=1)
    for i, text in enumerate(texts):
        mark = "›" if at == i else " "
        tab.add_row(Text(f"{mark} {i + 1}.", style="bold cyan" if at == i else "bold"),
                    Text(text, style="bold" if at == i else ""))
    return Group(tab, Text(t("quiz.keys"), style="dim")) if at is not None else tab


def feedback(right: bool, skipped: bool, answer: str, explain: str, where: str | None, lang: str,
             got=None, width: int = 80) -> Text:
    from .base import wrap
    out = Text()
    if right:
        out.append(t("quiz.right") + "\n", style="bold green")
    else:
        out.append(t("quiz.skipped") if skipped else t("quiz.wrong"), style="bold red")
        out.append(wrap(t("quiz.answer", answer=answer), width) + "\n")
    out.append(wrap(explain, width) + "\n")
    if where:
        out.append(t("quiz.see", where=where) + "\n", style="dim")
    return out


def quiz_summary(right: int, n: int) -> Text:
    return Text(t("quiz.summary", right=right, n=n), style="bold green" if right == n else "bold")
