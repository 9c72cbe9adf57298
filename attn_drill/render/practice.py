"""What the practice commands show: list, show, hints, progress, mock interviews, today, plan, quiz."""
from __future__ import annotations

from rich.console import Console
from rich.text import Text

from ..i18n import has, t, tn
from ..results import PASS
from .base import Command, Para, pad, say


def rating_word(rating: str) -> str:
    """again, hard, good, easy: FSRS's ratings, in the user's language."""
    return t(f"rating.{rating}") if has(f"rating.{rating}") else rating


def after_check(con: Console, results: list[tuple[str, str]], nxt: str | None, scheduled: dict = None) -> None:
    """Below the reports: the count over several files, what a pass scheduled, what to do next."""
    from ..progress import clock
    for pid, sch in (scheduled or {}).items():
        if sch and sch.get("due"):
            key = "check.drill_done" if sch.get("drill") else "check.scheduled"
            say(t(key, id=pid, rating=rating_word(sch["rating"]), date=clock.local_day(sch["due"])), "cyan", con)
    if len(results) > 1:
        passed = sum(st == PASS for _, st in results)
        con.print(Text(t("check.total", passed=passed, total=len(results)), style="bold"))
    if nxt:
        con.print(Para(f"{t('check.next')} attn-drill show {nxt} · attn-drill new {nxt}", "dim"))


# ---------------------------------------------------------------- list and show
STATUS_STYLE = {"passed": "green", "failing": "red", "not started": "dim"}


def status_word(status: str) -> str:
    return t(f"status.{status.replace(' ', '_')}") if status in STATUS_STYLE else status


def problem_table(rows: list[dict], lang: str, width: int):
    from rich import box
    from .base import fitted_table
    # what goes first when the screen is narrow: the tags (long), the kind, then the minutes and the
    # level; a title wraps between words, never inside one
    cols = [{"name": t("list.id"), "drop": 0}, {"name": t("list.title"), "drop": 0, "wrap": True, "min": 12},
            {"name": t("list.level"), "drop": 2}, {"name": t("list.kind"), "drop": 4},
            {"name": t("list.tags"), "drop": 5, "wrap": True, "min": 14},
            {"name": t("list.minutes"), "drop": 3, "justify": "right"}, {"name": t("list.status"), "drop": 0}]
    body = [[r["id"], r["title_zh"] if lang == "zh" else r["title"], t(f"level.{r['difficulty']}"), r["kind"],
             t("join.list").join(r["tags"]), str(r["minutes"]),
             Text(status_word(r["status"]), style=STATUS_STYLE.get(r["status"], ""))] for r in rows]
    table = fitted_table(cols, body, width, title=t("list.heading", n=len(rows)), title_justify="left",
                         box=box.SIMPLE_HEAD, pad_edge=False)
    return table


def statement(spec, lang: str):
    from rich.console import Group
    from .base import markdown
    sep = t("join.list")
    parts = [Para(t("show.heading", id=spec.id, title=spec.title.get(lang), level=t("level." + spec.difficulty),
                    minutes=spec.minutes, tags=sep.join(spec.tags)), "bold"),
             markdown(spec.statement.get(lang)),
             Para(t("show.interface", names=sep.join(spec.interface)), "cyan"),
             Para(t("show.forbidden", names=sep.join(spec.all_forbidden)), "dim")]
    if spec.required:
        parts.append(Para(t("show.required", names=sep.join(r.api for r in spec.required)), "dim"))
    parts.append(Para(t("show.next", n=len(spec.hints), id=spec.id), "dim"))
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


def mock_heading(mid: str, what: str, seed: int) -> Text:
    return Text.assemble((t("mock.heading", id=mid), "bold"), " ", what, ("   " + t("report.seed", seed=seed), "dim"))


def mock_paused(text: str) -> Text:
    return Text.assemble(("\n" + t("mock.paused") + " ", "bold yellow"), text)


def mock_screen(m: dict, last: dict, left: float, prompt: str, folder: str, width: int,
                followups: dict | None = None):
    """The live panel of a running mock: the clock, a row per problem (its last check, the mistake it
    looks like, its follow-ups), the keys."""
    from rich.console import Group
    from rich.panel import Panel
    from rich.table import Table
    from .base import clip
    inner = max(30, width - 4)
    followups = followups or {}
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
        if followups.get(pid):
            line.append("  " + t("mock.followups_row", result=followups[pid]), style="cyan")
        rows.append(line)
        if got.get("message") and st not in (PASS, "checking"):
            rows.append(Para(got["message"], "dim", indent=5, max_lines=2))
        if got.get("mistake"):
            rows.append(Para(t("mock.looks_like", id=got.get("title") or got["mistake"], why=got.get("why") or ""),
                             "magenta", indent=5, max_lines=2))
    clock = Text.assemble(("⏱ ", ""), (t("mock.left", left=duration(left)), "bold red" if left < 60 else "bold"),
                          " " + t("mock.of", total=duration(m["seconds"])))
    ready = [pid for pid, p in m["problems"].items() if p.get("passed_at") and not p.get("followups_asked")]
    parts = [clock, tab, *rows, Para(t("mock.keys"), "dim")]
    if ready:
        parts.append(Para(t("mock.followups_ready", ids=t("join.list").join(ready)), "bold cyan"))
    if prompt:
        parts.append(Para(prompt, "bold cyan"))
    return Panel(Group(*parts), title=t("mock.title", id=m["id"]), title_align="left",
                 subtitle=clip(t("mock.edit_in", folder=folder), inner, 1), border_style="cyan")


def scorecard(card: dict, width: int):
    """The end of a mock: a row per problem, the named mistake and replay of each failure, the score explained."""
    from rich import box
    from rich.console import Group
    from .base import fitted_table
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
    parts = [table]
    for r in card["problems"]:
        if r["passed"]:
            continue
        if r.get("message"):
            parts.append(Para(f"{r['id']}: {r['message']}", "dim", indent=2, hang=4, max_lines=2))
        if r.get("mistake"):
            parts.append(Para(t("mock.looks_like", id=r.get("title") or r["mistake"], why=r.get("why") or ""),
                              "magenta", indent=4, max_lines=2))
        if r.get("replay"):
            parts.append(Command(r["replay"], t("report.replay"), indent=4))
    good = card["verdict"] in ("strong pass", "pass")
    parts.append(Text.assemble((t("mock.verdict") + " ", "bold"),
                               (t("mock.v." + card["verdict"].replace(" ", "_")), "bold green" if good else "bold red"),
                               "   " + t("mock.summary", passed=card["passed"], total=len(card["problems"]),
                                         hints=card["hints"], used=duration(card["used"]),
                                         seconds=duration(card["seconds"]), score=f"{card['score']:.2f}")))
    if card.get("followups_asked"):
        per = t("join.list").join(f"{r['id']} {r['followups_right']}/{r['followups_asked']}" for r in card["problems"]
                                  if r.get("followups_asked"))
        parts.append(Para(t("mock.followups_card", right=card["followups_right"], n=card["followups_asked"],
                            per=per), "cyan"))
    from ..progress import clock
    for pid, rev in (card.get("reviewed") or {}).items():     # what the mock did to the re-drills
        parts.append(Para(t("mock.reviewed", id=pid, rating=rating_word(rev["rating"]),
                            date=clock.local_day(rev["due"])), "cyan"))
    parts.append(Para(t("mock.how_scored"), "dim", max_lines=4))
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
        body.append([(m.get("started") or "")[5:16].replace("T", " "), m["id"] or "",
                     t("join.list").join(m["problems"]),
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
            {"name": t("progress.first_pass"), "drop": 6},
            {"name": t("progress.to_pass"), "drop": 3, "justify": "right"},
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
                               f"  ({levels})" + (" · " + t("progress.failing", n=s["failing"])
                                                  if s["failing"] else "")))
    started = [(tag, v) for tag, v in s["by_tag"].items() if v["solved"]]
    rest = len(s["by_tag"]) - len(started)
    if started:         # the tags with something solved; the others counted, not listed
        text = t("progress.by_tag") + " " + " · ".join(f"{tag} {v['solved']}/{v['total']}" for tag, v in started)
        if rest:
            text += " · " + tn("progress.other_tags", rest)
    else:
        text = t("progress.by_tag") + " " + tn("progress.no_tag_yet", rest)
    parts.append(Para(text))
    if d.get("retention"):
        parts.append(retention_line(d["retention"]))
    parts.append(mock_history(d["mocks"], width) if d["mocks"] else Text(t("progress.no_mocks"), style="dim"))
    if d.get("kept_in"):
        parts.append(Para(t("progress.kept_in", file=d["kept_in"]), "dim"))
    return Group(*parts)


def retention_line(r: dict) -> Para:
    return Para(t("progress.retention") + " " + t("progress.retention_counts", due=r["due"], overdue=r["overdue"],
                                                    memory=r["from_memory"], tracked=r["tracked"]))


# ---------------------------------------------------------------- re-drills, today, plan
LABEL_CELLS = 10       # the label column of `today`, in terminal cells (a CJK character takes two)


def _item_line(item: dict, lang: str) -> list:
    kind = item["kind"]
    label = t(f"today.kind.{kind}")
    what = item["id"] or tn("today.questions", sum(item.get("questions", {}).values())
                            if isinstance(item.get("questions"), dict) else item.get("questions", 0))
    extra = ""
    if kind == "redrill" and item.get("overdue_days"):
        extra = " " + t("today.overdue", n=item["overdue_days"])
    if kind == "quiz" and isinstance(item.get("questions"), dict):
        extra = t("today.per_problem", counts=t("join.list").join(f"{p} {n}" for p, n in item["questions"].items()))
    line = Text.assemble(("  " + pad(label, LABEL_CELLS), "bold cyan" if kind != "new" else "bold"), (what, "bold"),
                         (extra, "yellow" if kind == "redrill" else "dim"),
                         ("  " + t("today.minutes", n=item["minutes"]), "dim"))
    out = [line]
    if item.get("command"):
        out.append(Command(item["command"], indent=2 + LABEL_CELLS, style=""))
    return out


def today(d: dict, lang: str, width: int):
    from rich.console import Group
    parts = [Para(t("today.heading", date=d["date"], minutes=d["minutes"]), "bold")]
    if not d["items"]:
        parts.append(Para(t("today.nothing"), "green"))
    for item in d["items"]:
        parts += _item_line(item, lang)
    if d.get("next_due"):
        parts.append(Para(t("today.next_due", id=d["next_due"]["id"], date=d["next_due"]["date"]), "dim"))
    parts.append(retention_line(d["retention"]))
    parts.append(Para(t("today.how", again=rating_word("again"), hard=rating_word("hard"), good=rating_word("good"),
                        easy=rating_word("easy")), "dim"))
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
    body = [[str(day["day"]), day["date"][5:], t("report.join").join(_plan_cell(i) for i in day["items"]) or
             t("plan.free"), str(day["minutes"])] for day in d["plan"]]
    parts = [fitted_table(cols, body, width, title=t("plan.title", days=d["days"], hours=f"{d['hours_per_day']:g}"),
                          title_justify="left", box=box.SIMPLE_HEAD)]
    if d["not_planned"]:
        parts.append(Para(t("plan.left", n=len(d["not_planned"]), ids=t("join.list").join(d["not_planned"][:8]) +
                            ("…" if len(d["not_planned"]) > 8 else "")), "dim"))
    parts.append(Para(t("plan.how"), "dim"))
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
            lines.append("- [ ] " + t("plan.md_item", what=_plan_cell(item), minutes=item["minutes"], command=cmd))
        if not day["items"]:
            lines.append(f"- {t('plan.free')}")
        lines.append("")
    if d["not_planned"]:
        lines.append(t("plan.left", n=len(d["not_planned"]), ids=t("join.list").join(d["not_planned"])))
        lines.append("")
    lines.append(f"_{t('plan.how')}_")
    return "\n".join(lines)


# ---------------------------------------------------------------- quiz
def quiz_progress(i: int, n: int) -> Text:
    return Text(t("quiz.progress", i=i, n=n), style="dim")


def question(pid: str, q, lang: str):
    from rich.panel import Panel
    from ..i18n import pick
    return Panel(Para(pick(q.en, q.zh)), title=t("quiz.title", id=pid), title_align="left", border_style="cyan")


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
                    Para(text, "bold" if at == i else ""))
    return Group(tab, Text(t("quiz.keys"), style="dim")) if at is not None else tab


def number(value) -> str:
    """A number written one way, whatever the language: whole numbers grouped by thousands (274,877,906,944),
    others with six significant digits."""
    v = float(value)
    if v.is_integer() and abs(v) < 1e18:
        return f"{int(v):,}"
    return f"{v:.6g}"


def number_with_unit(value, unit: str) -> str:
    """274,877,906,944 FLOPs (2^38): the number, its unit, and the power of two it is, when it is one."""
    text = f"{number(value)} {unit}".strip()
    v = float(value)
    if v.is_integer() and v >= 1024 and int(v) & (int(v) - 1) == 0:
        text += f" (2^{int(v).bit_length() - 1})"
    return text


def unreadable(message: str) -> Text:
    return Para(message, "yellow")


def feedback(right: bool, skipped: bool, answer: str, explain: str, where: str | None, lang: str,
             got: str | None = None, width: int = 80):
    from rich.console import Group
    parts = []
    if right:
        parts.append(Text(t("quiz.right"), style="bold green"))
    else:
        head = t("quiz.skipped") if skipped else t("quiz.wrong")
        if got is not None:
            head += t("quiz.you_said", got=got)
        parts.append(Para(head + t("quiz.answer", answer=answer), "bold red"))
    parts.append(Para(explain))
    if where:
        parts.append(Para(t("quiz.see", where=where), "dim"))
    parts.append(Text(""))
    return Group(*parts)


def quiz_summary(right: int, n: int, unread: int = 0) -> Para:
    text = t("quiz.summary", right=right, n=n)
    if unread:
        text += " " + tn("quiz.not_rated", unread)
    return Para(text, "bold green" if right == n else "bold")
