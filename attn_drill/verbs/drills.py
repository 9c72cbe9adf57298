"""`drill`, `today` and `plan`: practice that sticks (re-drills from memory, scheduled by FSRS;
what to do today; a day-by-day plan). No torch: they read the specs and the workspace state."""
from __future__ import annotations

import copy
import time
from pathlib import Path

from .. import bank, render
from ..bank import curriculum
from ..errors import UsageError
from ..i18n import t
from ..progress import clock, rules, schedule, store
from ..render import practice as view
from .scaffold import stub_text, write_stub

DRILLS = "drills"             # the folder re-drills are written into, beside the user's files
NEW_PER_DAY = 2               # new problems `today` suggests
QUIZ_MINUTES = 1.5            # a follow-up question, answered and read


# ---------------------------------------------------------------- drill
def drill(pid: str, give_up: bool, root: Path) -> int:
    """Start a re-drill from memory (a fresh stub in drills/, your earlier file not shown), or give one up."""
    spec = bank.get(pid)
    con = render.console()
    now = clock.now()
    data = store.load(None, render.warn)
    open_ = rules.open_drill(data, pid)
    if give_up:
        if open_ is None:
            raise UsageError(t("drill.none_open", id=pid))

        def end(d):
            return rules.end_drill(d, pid, d["drills"][pid], now, passed=False)
        rating = store.update(None, end, render.warn)
        render.say(t("drill.given_up", id=pid, rating=t(f"rating.{rating}")), con=con)
        return 0
    if open_ is not None:
        render.say(t("drill.already_open", id=pid, file=shown(open_["file"], root)), con=con)
        return 0
    stamp = time.strftime("%Y%m%d-%H%M", time.localtime(now))
    path = root / DRILLS / f"{pid}-{stamp}.py"
    n = 1
    while path.exists():
        n += 1
        path = root / DRILLS / f"{pid}-{stamp}-{n}.py"
    write_stub(path, stub_text(pid))
    full = str(path.resolve())

    def start(d):
        d.setdefault("drills", {})[pid] = {"file": full, "started": now, "status": "open", "checks": 0, "hints": 0,
                                           "solution_viewed": False, "passed_at": None, "first_try": False,
                                           "rating": None}
    store.update(None, start, render.warn)
    render.say(t("drill.started", id=pid, file=shown(full, root), minutes=spec.minutes), con=con)
    return 0


def shown(file: str, root: Path) -> str:
    """A file as a command typed in `root` names it: relative when it is below, else its full path."""
    try:
        return str(Path(file).resolve().relative_to(Path(root).resolve()))
    except (ValueError, OSError):
        return str(file)


# ---------------------------------------------------------------- today
def _minutes_for_drill(spec) -> int:
    return max(5, round(spec.minutes * 0.75))


def today_data(root: Path) -> dict:
    now = clock.now()
    end = clock.day_end(now)
    data = store.load(None, render.warn)
    specs = {s.id: s for s in bank.all_specs()}
    items = []
    for pid, d in sorted((data.get("drills") or {}).items()):
        if isinstance(d, dict) and d.get("status") == "open" and pid in specs:
            items.append({"kind": "open", "id": pid, "minutes": _minutes_for_drill(specs[pid]),
                          "command": f"attn-drill check {pid} {shown(d['file'], root)}", "since": d["started"]})
    open_ids = {i["id"] for i in items}
    for cid, c in schedule.due_cards(data, end, kind="drill"):
        if cid in specs and cid not in open_ids:
            items.append({"kind": "redrill", "id": cid, "minutes": _minutes_for_drill(specs[cid]),
                          "command": f"attn-drill drill {cid}", "due": c["due"],
                          "overdue_days": max(0, int((clock.day_end(now) - 86399 - c["due"]) // 86400) + 1)
                          if c["due"] < end - 86399 else 0})
    quiz = {}
    for cid, c in schedule.due_cards(data, end, kind="quiz"):
        pid = cid.split("/")[0]
        if pid in specs:
            quiz[pid] = quiz.get(pid, 0) + 1
    if quiz:
        n = sum(quiz.values())
        items.append({"kind": "quiz", "id": None, "minutes": max(2, round(n * QUIZ_MINUTES)), "questions": quiz,
                      "command": "attn-drill quiz --due"})
    statuses = {pid: e.get("status") for pid, e in data["problems"].items()}
    passed = {pid for pid, st in statuses.items() if st == "passed"}
    fresh = []
    for s in curriculum.order(list(specs.values())):
        if statuses.get(s.id, "not started") == "not started" and all(a in passed or a not in specs for a in s.after):
            fresh.append(s)
        if len(fresh) == NEW_PER_DAY:
            break
    for s in fresh:
        items.append({"kind": "new", "id": s.id, "minutes": s.minutes, "command": f"attn-drill new {s.id}"})
    upcoming = sorted((c["due"], cid) for cid, c in (data.get("cards") or {}).items()
                      if isinstance(c, dict) and c.get("kind") == "drill" and c.get("due", 0) > end)
    return {"date": clock.local_day(now), "items": items, "minutes": sum(i["minutes"] for i in items),
            "next_due": ({"id": upcoming[0][1], "date": clock.local_day(upcoming[0][0])} if upcoming else None),
            "retention": schedule.retention(data, end), "scheduler": schedule.parameters()}


def today(root: Path, as_json: bool, lang: str) -> int:
    render.emit(today_data(root), as_json, lambda d, width: view.today(d, lang, width))
    return 0


# ---------------------------------------------------------------- plan
def plan_data(root: Path, days: int, hours: float, tags: list[str]) -> dict:
    """A day-by-day plan: each day's due re-drills and questions first, then new problems in curriculum
    order (prerequisites first), within the day's minutes. Reviews are projected with the scheduler,
    as if each planned item went well (good). Deterministic for the same state and date."""
    if days < 1 or days > 366:
        raise UsageError(t("plan.days"))
    if not 0 < hours <= 16:
        raise UsageError(t("plan.hours"))
    now = clock.now()
    data = store.load(None, render.warn)
    specs = {s.id: s for s in bank.all_specs()}
    wanted = list(specs.values())
    for tag in tags:
        hits, near = curriculum.match_tag(tag, wanted)
        if not hits:
            raise UsageError(t("list.no_tag", tag=tag) + (t("list.near", tags=", ".join(near)) if near else ""))
        wanted = hits
    wanted_ids = {s.id for s in wanted}
    sim = {"cards": copy.deepcopy(data.get("cards") or {})}       # a copy the projection may change
    passed = {pid for pid, e in data["problems"].items() if e.get("status") == "passed"}
    planned_new: set = set()
    todo = [s for s in curriculum.order(list(specs.values()))
            if s.id in wanted_ids and s.id not in passed]
    budget = round(hours * 60)
    start_day = clock.day_end(now)
    out_days = []
    for k in range(days):
        end = start_day + 86400 * k
        noon = end - 12 * 3600
        items, used = [], 0
        for cid, c in schedule.due_cards(sim, end, kind="drill"):
            if cid not in specs:
                continue
            m = _minutes_for_drill(specs[cid])
            if items and used + m > budget:
                break       # what does not fit moves to the next day
            items.append({"kind": "redrill", "id": cid, "minutes": m})
            used += m
            schedule.review(sim, cid, "drill", "good", max(noon, c["due"]))
        due_q = [cid for cid, _ in schedule.due_cards(sim, end, kind="quiz") if cid.split("/")[0] in specs]
        if due_q and used < budget:
            m = max(2, round(len(due_q) * QUIZ_MINUTES))
            items.append({"kind": "quiz", "id": None, "minutes": m, "questions": len(due_q)})
            used += m
            for cid in due_q:
                schedule.review(sim, cid, "quiz", "good", noon)
        while todo:
            ready = next((s for s in todo if all(a in passed or a in planned_new or a not in specs for a in s.after)),
                         None)
            if ready is None or (items and used + ready.minutes > budget):
                break
            todo.remove(ready)
            planned_new.add(ready.id)
            items.append({"kind": "new", "id": ready.id, "minutes": ready.minutes})
            used += ready.minutes
            schedule.review(sim, ready.id, "drill", "good", noon)
        out_days.append({"day": k + 1, "date": clock.local_day(noon), "items": items, "minutes": used})
    return {"from": clock.local_day(now), "days": days, "hours_per_day": hours, "tags": tags,
            "plan": out_days, "not_planned": [s.id for s in todo]}


def plan(root: Path, days: int, hours: float, tags: list[str], markdown: bool, as_json: bool, lang: str) -> int:
    d = plan_data(root, days, hours, tags)
    if markdown and not as_json:
        render.plain(view.plan_markdown(d, lang))
    else:
        render.emit(d, as_json, lambda d, width: view.plan_table(d, lang, width))
    return 0
