"""A scripted month of practice on a fake clock (ATTN_DRILL_NOW): solving, re-drilling, quizzing and
planning give the due dates the FSRS scheduler gives for the ratings the rules promise. The
expected dates are computed here with the fsrs package directly, from the ratings the scenario
implies by the documented rules (not read back from the tool)."""
import json
import shutil
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from fsrs import Card, Rating, Scheduler
from typer.testing import CliRunner

from attn_drill.cli import app

ROOT = Path(__file__).resolve().parent.parent
runner = CliRunner()
T0 = datetime(2026, 12, 1, 9, 0, tzinfo=timezone.utc)
SCHED = Scheduler(desired_retention=0.9, learning_steps=(), relearning_steps=(), maximum_interval=180,
                  enable_fuzzing=False)


def at(dt: datetime) -> dict:
    return {"ATTN_DRILL_NOW": str(dt.timestamp()), "NO_COLOR": "1", "COLUMNS": "100", "ATTN_DRILL_LANG": "en"}


def cli(args, when, ok=(0,)):
    res = runner.invoke(app, args, env=at(when))
    assert res.exit_code in ok, res.output
    return res.output


def state(ws) -> dict:
    return json.loads((ws / ".attn-drill" / "state.json").read_text())


def expect(card: Card, rating: Rating, when: datetime) -> Card:
    return SCHED.review_card(card, rating, when)[0]


@pytest.fixture
def ws(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_month_of_practice(ws):
    # day 0: mhsa solved in 12 minutes of its 20, at the first check: good (not within half: not easy)
    cli(["new", "mhsa"], T0)
    shutil.copy(ROOT / "reference" / "mhsa.py", ws / "mhsa.py")
    t_pass = T0 + timedelta(minutes=12)
    out = cli(["check", "mhsa", "--seed", "1"], t_pass)
    assert "is in your re-drills now (rated good)" in out
    mhsa = expect(Card(), Rating.Good, t_pass)
    assert state(ws)["cards"]["mhsa"]["due"] == pytest.approx(mhsa.due.timestamp())

    # the day before it is due: not in today's list; on the day: first in it
    before = mhsa.due - timedelta(days=1)
    today = json.loads(cli(["today", "--json"], before))
    assert not [i for i in today["items"] if i["kind"] == "redrill"]
    assert today["next_due"]["id"] == "mhsa"
    day1 = mhsa.due.replace(hour=10, minute=0)
    today = json.loads(cli(["today", "--json"], day1))
    first = today["items"][0]
    assert first == {**first, "kind": "redrill", "id": "mhsa", "command": "attn-drill drill mhsa"}
    assert [i["id"] for i in today["items"] if i["kind"] == "new"] == ["split_heads", "causal"]   # curriculum order

    # the re-drill: a fresh stub in drills/, passed in 5 minutes at the first check, no hint: easy
    out = cli(["drill", "mhsa"], day1)
    drill = state(ws)["drills"]["mhsa"]
    assert drill["status"] == "open" and drill["file"].startswith(str(ws / "drills" / "mhsa-"))   # by its full path
    assert (ws / drill["file"]).read_text() != (ws / "mhsa.py").read_text()      # the earlier solution is not shown
    shutil.copy(ROOT / "reference" / "mhsa.py", ws / drill["file"])
    t_redrill = day1 + timedelta(minutes=5)
    out = cli(["check", "mhsa", drill["file"], "--seed", "2"], t_redrill)
    assert "re-drill of mhsa passed (rated easy)" in out
    mhsa = expect(mhsa, Rating.Easy, t_redrill)
    s = state(ws)
    assert s["drills"]["mhsa"] == {**s["drills"]["mhsa"], "status": "passed", "first_try": True, "rating": "easy",
                                   "checks": 1, "hints": 0}
    assert s["cards"]["mhsa"]["due"] == pytest.approx(mhsa.due.timestamp()) and s["cards"]["mhsa"]["from_memory"]

    # the follow-ups: two skipped (again), the two numbers right (good); 4 of mhsa's questions
    qt = day1 + timedelta(minutes=20)
    flops = 8 * 8 * 2048 * 1024 ** 2 + 4 * 8 * 2048 ** 2 * 1024      # the projections and the core, by hand
    scores = 4 * 32 * 4096 * 4096 * 2
    res = runner.invoke(app, ["quiz", "mhsa", "--answers", f"s,s,{flops},{scores}", "--json"], env=at(qt))
    assert res.exit_code == 1                                         # not all right
    results = json.loads(res.stdout[res.stdout.index("{"):])
    by_id = {r["id"]: r["right"] for r in results["results"]}
    assert by_id == {"why_sqrt_d": False, "padding_axis": False, "forward_flops": True, "scores_memory": True}
    cards = state(ws)["cards"]
    for qid, right in by_id.items():
        want = expect(Card(), Rating.Good if right else Rating.Again, qt)
        assert cards[f"mhsa/{qid}"]["due"] == pytest.approx(want.due.timestamp()), qid

    # the next morning: the two missed questions are due, the right ones are not
    next_day = qt + timedelta(days=1)
    today = json.loads(cli(["today", "--json"], next_day))
    quiz = [i for i in today["items"] if i["kind"] == "quiz"]
    assert quiz and quiz[0]["questions"] == {"mhsa": 2}

    # a re-drill given up: again
    cli(["new", "split_heads"], next_day)
    shutil.copy(ROOT / "reference" / "split_heads.py", ws / "split_heads.py")
    t_split = next_day + timedelta(minutes=3)
    cli(["check", "split_heads", "--seed", "3"], t_split)
    split = expect(Card(), Rating.Easy, t_split)                      # 3 of 10 minutes, first check
    assert state(ws)["cards"]["split_heads"]["due"] == pytest.approx(split.due.timestamp())
    t_drill = split.due + timedelta(hours=1)
    cli(["drill", "split_heads"], t_drill)
    t_give_up = t_drill + timedelta(minutes=30)
    out = cli(["drill", "split_heads", "--give-up"], t_give_up)
    split = expect(split, Rating.Again, t_give_up)
    assert state(ws)["cards"]["split_heads"]["due"] == pytest.approx(split.due.timestamp())

    # a hint during a re-drill counts in the drill and makes it hard
    t_again = split.due + timedelta(hours=2)
    cli(["drill", "split_heads"], t_again)
    cli(["hint", "split_heads"], t_again + timedelta(minutes=1))
    d = state(ws)["drills"]["split_heads"]
    assert d["hints"] == 1
    shutil.copy(ROOT / "reference" / "split_heads.py", ws / d["file"])
    t_hard = t_again + timedelta(minutes=4)
    assert "rated hard" in cli(["check", "split_heads", d["file"], "--seed", "4"], t_hard)
    split = expect(split, Rating.Hard, t_hard)
    assert state(ws)["cards"]["split_heads"]["due"] == pytest.approx(split.due.timestamp())

    # progress shows the retention; the plan is the same for the same state and day
    end = T0 + timedelta(days=30)
    prog = json.loads(cli(["progress", "--json"], end))
    assert prog["retention"]["tracked"] == 2 and prog["retention"]["from_memory"] == 1
    one = cli(["plan", "--days", "14", "--json"], end)
    assert one == cli(["plan", "--days", "14", "--json"], end)
    plan = json.loads(one)
    assert len(plan["plan"]) == 14
    firsts = [i["id"] for day in plan["plan"] for i in day["items"] if i["kind"] == "new"]
    order = [p for p in firsts]
    # prerequisites first: gqa after mhsa (passed), kv_cache after causal
    if "kv_cache" in order and "causal" in order:
        assert order.index("causal") < order.index("kv_cache")
    assert all(day["minutes"] <= 60 or len(day["items"]) == 1 for day in plan["plan"])
    md = cli(["plan", "--days", "3", "--markdown"], end)
    assert md.startswith("# study plan: 3 days") and "- [ ] " in md


@pytest.mark.parametrize("typed, value", [
    ("1024", 1024), ("1,024", 1024), ("1_024", 1024), ("6.4e9", 6.4e9), ("2**20", 2 ** 20), ("2^20", 2 ** 20),
    ("16 KiB", 16 * 1024), ("1.5k", 1500), ("2*32*4096*2", 2 * 32 * 4096 * 2),
    ("2 * 8 * 128 GiB", 2 * 8 * 128 * 2 ** 30),
    ("2*2**10", 2048), ("abc", None), ("", None), ("2**", None), ("3*", None), ("(-8)^0.5", None),
    ("-8^0.5", None), ("__import__('os')", None),
])
def test_a_number_is_read_as_a_person_types_it(typed, value):
    from attn_drill.bank.quiz import parse_number
    assert parse_number(typed) == value
