"""Watch mode and the timed mock interview.

The fast tests drive the watch loop and the mock's bookkeeping with a fake grading client; the slow
ones drive the real `attn-drill` command in a terminal (pexpect) on the fixture bank."""
import io
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console

from attn_drill.errors import UsageError
from attn_drill.progress import mocks, store
from attn_drill.results import ERROR, FAIL, PASS, Report
from attn_drill.verbs import mock as mock_verb
from attn_drill.verbs.watch import Watcher, loop

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SUBMISSIONS = FIXTURES / "submissions"
REFERENCE = FIXTURES / "bank" / "reference" / "attend.py"


class FakeClient:
    """Grades by looking at the file: a syntax error is an ERROR, the reference passes."""

    def __init__(self):
        self.calls = []
        self.starts = 0

    def start(self):
        self.starts += 1
        return self

    def grade(self, problem, path, seed, *, full=False, case=None, time_limit=30.0, **_):
        self.calls.append((problem, Path(path).name, seed))
        text = Path(path).read_text()
        try:
            compile(text, path, "exec")
        except SyntaxError as exc:
            return Report(problem, path, seed, status=ERROR, message=f"your file does not parse: {exc.msg}")
        status = PASS if text == REFERENCE.read_text() else FAIL
        return Report(problem, path, seed, status=status, message="" if status == PASS else "wrong numbers")


def _console():
    return Console(file=io.StringIO(), width=100, color_system=None)


# ---------------------------------------------------------------- watch (fast)
def test_watch_regrades_each_save_with_one_client_and_one_seed(tmp_path, fixture_bank):
    file = tmp_path / "attend.py"
    shutil.copy(SUBMISSIONS / "attend_wrong.py", file)
    client, con = FakeClient(), _console()
    w = Watcher([("attend", file)], 1234, False, "en", tmp_path, client, con=con)

    def saves():
        file.write_text("def attend(q, k, v:\n")          # half-typed: a syntax error
        yield {file}
        yield {tmp_path / "notes.py"}                      # not watched: no re-check
        shutil.copy(REFERENCE, file)
        yield {file}
        raise KeyboardInterrupt                            # Ctrl-C

    assert loop(w, saves()) == 0
    # the syntax error is reported without the worker: only the two runnable saves reach it
    assert [c[2] for c in client.calls] == [1234, 1234]
    out = con.file.getvalue()
    assert "SyntaxError" in out and "PASS" in out and "check #3" in out
    assert "stopped watching after 3 checks" in out
    e = store.load()["problems"]["attend"]
    assert e["attempts"] == 3 and e["status"] == "passed"


def test_watch_without_an_id_follows_problem_files_created_later(tmp_path, fixture_bank):
    client, con = FakeClient(), _console()
    w = Watcher([], 7, False, "en", tmp_path, client, con=con, follow_new=True)
    assert w.wanted(tmp_path / "attend.py") and not w.wanted(tmp_path / "other.py")
    assert not w.wanted(tmp_path / ".attn-drill" / "state.json")

    def saves():
        shutil.copy(REFERENCE, tmp_path / "attend.py")
        yield {tmp_path / "attend.py"}

    assert loop(w, saves()) == 0
    assert client.calls == [("attend", "attend.py", 7)]


def test_watch_skips_a_file_that_is_missing_mid_save(tmp_path, fixture_bank):
    file = tmp_path / "attend.py"
    shutil.copy(REFERENCE, file)
    client, con = FakeClient(), _console()
    w = Watcher([("attend", file)], 1, False, "en", tmp_path, client, con=con)

    def saves():
        file.unlink()
        yield {file}
        shutil.copy(REFERENCE, file)
        yield {file}

    loop(w, saves())
    assert len(client.calls) == 2  # the first check and the one after the file came back


# ---------------------------------------------------------------- mock bookkeeping (fast)
class _Spec:
    def __init__(self, pid, difficulty="easy", minutes=20):
        self.id, self.tags, self.difficulty, self.minutes = pid, ("t",), difficulty, minutes


def _bank(monkeypatch, specs):
    from attn_drill import bank
    by_id = {s.id: s for s in specs}
    monkeypatch.setattr(bank, "all_specs", lambda: list(specs))
    monkeypatch.setattr(bank, "ids", lambda: list(by_id))
    monkeypatch.setattr(bank, "get", lambda pid: by_id[pid])


def test_pick_is_deterministic_and_puts_unsolved_first(monkeypatch):
    _bank(monkeypatch, [_Spec(i) for i in "abcde"])
    solved = {"a": "passed", "b": "passed", "c": "failing"}
    one, _ = mock_verb.pick(3, None, None, [], 42, solved)
    assert one == mock_verb.pick(3, None, None, [], 42, solved)[0]
    assert set(one) == {"c", "d", "e"}
    assert set(mock_verb.pick(5, None, None, [], 42, solved)[0][3:]) == {"a", "b"}
    with pytest.raises(UsageError, match="no problem matches"):
        mock_verb.pick(2, None, "nope", [], 1, {})


def test_pick_fits_the_minutes_and_the_users_level_and_says_why(monkeypatch):
    """One easy problem passed: easy and medium ones, no hard ones, as many as fit in --minutes."""
    _bank(monkeypatch, [_Spec("e1", "easy", 15), _Spec("e2", "easy", 20), _Spec("m1", "medium", 25),
                        _Spec("m2", "medium", 30), _Spec("h1", "hard", 45), _Spec("h2", "hard", 40)])
    solved = {"e1": "passed"}
    for seed in range(20):
        pids, note = mock_verb.pick(2, None, None, [], seed, solved, minutes=45)
        assert not {"h1", "h2"} & set(pids), pids
        assert sum(mock_verb.bank.get(p).minutes for p in pids) <= 45
        assert "your level" in note
    pids, note = mock_verb.pick(3, None, None, [], 1, solved, minutes=30)
    assert len(pids) == 1 and "only 1 problem fits in 30 min" in note
    pids, note = mock_verb.pick(2, "hard", None, [], 1, solved, minutes=30)
    assert len(pids) == 1 and "no problem at this level fits in 30 min" in note and "h2" in note
    assert mock_verb.pick(2, None, None, [], 1, {})[0] and "not passed one yet" in mock_verb.pick(2, None, None, [],
                                                                                                  1, {})[1]


def test_mock_folders_are_never_reused(tmp_path):
    first, second = mock_verb.make_folder(tmp_path), mock_verb.make_folder(tmp_path)
    assert first != second and first.name.startswith("mock-") and second.name.endswith("-2")


def test_scorecard_counts_hints_and_solution_views_against_the_mock():
    m = {"id": "m", "seconds": 600.0, "elapsed": 610.0, "problems": {
        "a": {"final": PASS, "passed_after": 100.0, "checks": 3, "hints": 0},
        "b": {"final": PASS, "passed_after": 400.0, "checks": 5, "hints": 2},
        "c": {"final": PASS, "passed_after": 500.0, "checks": 1, "hints": 0, "solution_viewed": True},
        "d": {"final": FAIL, "checks": 2, "hints": 1}}}
    card = mocks.scorecard(m)
    assert [p["score"] for p in card["problems"]] == [1.0, 0.5, 0.0, 0.0]
    assert card["passed"] == 3 and card["hints"] == 3 and card["used"] == 600.0
    assert card["problems"][3]["time_to_green"] is None
    assert (card["score"], card["verdict"]) == (0.38, "borderline")  # mean of the scores: 0.375
    m["problems"]["d"].update(final=PASS, passed_after=590.0, hints=0)
    assert mocks.scorecard(m)["verdict"] == "pass"
    m["problems"]["c"]["solution_viewed"] = False
    m["problems"]["b"]["hints"] = 0
    assert mocks.scorecard(m)["verdict"] == "strong pass"


def test_resuming_a_mock_whose_process_died_counts_time_up_to_its_last_heartbeat(tmp_path, fixture_bank):
    now = time.time()
    live = {"id": "mock-x", "folder": str(tmp_path), "active": True, "status": "running", "seconds": 300.0,
            "elapsed": 20.0, "segment_start": now - 100, "heartbeat": now - 60, "pid": 999_999_999, "seed": 1,
            "problems": {"attend": {"checks": 0, "hints": 0}}}
    store.update(None, lambda d: d["mocks"].append(live))
    s = mock_verb.Interview(tmp_path, False, "en", mid="mock-x")
    s._open_segment()
    assert 59 <= s.mock["elapsed"] <= 61          # 20 before + 40 up to the last heartbeat
    assert s.mock["pid"] == os.getpid() and s.mock["status"] == "running"
    s._close_segment("paused")
    m = store.load()["mocks"][0]
    assert m["status"] == "paused" and not m["active"] and 60 <= m["elapsed"] <= 62


def test_a_mock_running_in_another_terminal_is_not_resumed_twice(tmp_path, fixture_bank):
    live = {"id": "mock-y", "folder": str(tmp_path), "active": True, "status": "running", "seconds": 300.0,
            "elapsed": 0.0, "segment_start": time.time(), "heartbeat": time.time(), "pid": os.getppid(), "seed": 1,
            "problems": {"attend": {}}}
    store.update(None, lambda d: d["mocks"].append(live))
    with pytest.raises(UsageError, match="another terminal"):
        mock_verb.Interview(tmp_path, False, "en", mid="mock-y")._open_segment()


def test_mock_keys_hint_picks_a_problem_and_finish_asks_first(tmp_path, fixture_bank):
    live = {"id": "mock-k", "folder": str(tmp_path), "active": True, "status": "running", "seconds": 300.0,
            "elapsed": 0.0, "segment_start": time.time(), "seed": 1,
            "problems": {"attend": {"hints": 0}, "other": {"hints": 0}}}
    store.update(None, lambda d: d["mocks"].append(live))
    s = mock_verb.Interview(tmp_path, False, "en", mid="mock-k")
    s.mock = store.load()["mocks"][0]

    class Live:
        console = _console()
    screen = Live()
    assert s._key("h", screen) is None and s.asking_hint
    assert "hint for which problem? press 1-2" in _text(s._screen())
    s._key("1", screen)
    assert "hint 1 of 3" in screen.console.file.getvalue() and not s.asking_hint
    assert store.load()["mocks"][0]["problems"]["attend"]["hints"] == 1
    assert s._key("h", screen) is None and s._key("x", screen) is None  # cancelled
    assert store.load()["problems"]["attend"]["hints_shown"] == 1
    assert s._key("f", screen) is None and s._key("n", screen) is None
    assert s._key("f", screen) is None and s._key("y", screen) == "finish"
    assert "5:00 left" in _text(s._screen()) or "4:59 left" in _text(s._screen())


def _text(renderable) -> str:
    con = _console()
    con.print(renderable)
    return con.file.getvalue()


def test_mock_history_and_resume_without_a_mock(tmp_path, monkeypatch, fixture_bank):
    from typer.testing import CliRunner
    from attn_drill.cli import app
    monkeypatch.chdir(tmp_path)
    env = {"NO_COLOR": "1", "COLUMNS": "100"}
    res = CliRunner().invoke(app, ["mock", "--resume"], env=env)
    assert res.exit_code == 2 and "no paused mock" in res.output
    assert json.loads(CliRunner().invoke(app, ["mock", "--history", "--json"], env=env).output) == []


# ---------------------------------------------------------------- the real terminal program (slow)
CLOCK = re.compile(r"(\d+:\d\d) left")


def _spawn(args, cwd, timeout=90):
    pexpect = pytest.importorskip("pexpect")
    env = dict(os.environ, NO_COLOR="1", COLUMNS="100", TERM="xterm", ATTN_DRILL_BANK=str(FIXTURES / "bank"))
    exe = shutil.which("attn-drill") or sys.executable
    argv = args if exe != sys.executable else ["-m", "attn_drill"] + args
    # codec_errors: a Ctrl-C lets the terminal driver drop pending output, maybe half a character
    child = pexpect.spawn(exe, argv, cwd=str(cwd), env=env, encoding="utf-8", codec_errors="replace",
                          timeout=timeout, dimensions=(50, 100))
    child.logfile_read = io.StringIO()
    return child


def _finish(child) -> int:
    import pexpect
    child.expect(pexpect.EOF)
    child.close()
    return child.exitstatus


def _seconds(clock: str) -> int:
    m, s = clock.split(":")
    return int(m) * 60 + int(s)


@pytest.mark.slow
def test_watch_in_a_terminal_survives_a_syntax_error_and_exits_cleanly(tmp_path):
    shutil.copy(REFERENCE, tmp_path / "attend.py")
    child = _spawn(["watch", "attend", "--seed", "5"], tmp_path)
    child.expect("PASS")
    time.sleep(0.3)  # a save before the watcher is armed is caught too (see Watcher.stale)
    (tmp_path / "attend.py").write_text(REFERENCE.read_text() + "\ndef broken(:\n")
    child.expect("SyntaxError")
    shutil.copy(REFERENCE, tmp_path / "attend.py")
    child.expect("check #3")
    child.expect("PASS")
    child.sendintr()
    assert _finish(child) == 0
    assert "stopped watching after 3 checks" in child.logfile_read.getvalue()
    assert store.load()["problems"]["attend"]["attempts"] == 3


@pytest.mark.slow
def test_mock_in_a_terminal_countdown_check_pass_and_scorecard(tmp_path):
    child = _spawn(["mock", "--count", "1", "--minutes", "10", "--seed", "3", "--json"], tmp_path)
    child.expect(CLOCK)
    first = child.match.group(1)
    child.expect(CLOCK)
    while child.match.group(1) == first:
        child.expect(CLOCK)
    assert _seconds(child.match.group(1)) < _seconds(first)  # the countdown runs
    folder = next(tmp_path.glob("mock-*"))
    assert (folder / "attend.py").is_file() and (folder / "MOCK.md").is_file()
    shutil.copy(REFERENCE, folder / "attend.py")  # the candidate solves it in their editor
    child.send("c")
    child.expect(r"PASS .*\(green at")
    child.send("h")
    child.expect("hint 1 of 3")
    child.send("f")
    child.expect("press y to confirm")
    child.send("y")
    child.expect("finished early")
    assert _finish(child) == 0
    out = child.logfile_read.getvalue()
    card = json.loads(out[re.search(r'\{\s*"id"', out).start():].replace("\r\n", "\n"))
    p = card["problems"][0]
    assert (p["id"], p["passed"], p["checks"], p["hints"]) == ("attend", True, 1, 1)
    assert p["time_to_green"] is not None and card["verdict"] == "pass"
    mock = store.load()["mocks"][0]
    assert mock["status"] == "finished" and mock["scorecard"]["passed"] == 1
    e = store.load()["problems"]["attend"]
    assert e["status"] == "passed" and e["best_time_to_pass"] == p["time_to_green"]
    assert store.load()["cards"]["attend"]["kind"] == "drill"     # the mock's pass is a card of the practice


@pytest.mark.slow
def test_mock_in_a_terminal_pauses_resumes_and_times_out(tmp_path):
    child = _spawn(["mock", "--problem", "attend", "--minutes", "0.15", "--seed", "1"], tmp_path)
    child.expect(CLOCK)
    time.sleep(1.2)
    child.sendintr()
    child.expect("paused")
    child.expect("mock --resume")
    assert _finish(child) == 0
    live = store.load()["mocks"][0]          # one record, in the user's progress
    assert live["status"] == "paused" and not live["active"] and Path(live["folder"]).parent == tmp_path
    assert 0 < live["elapsed"] < 9          # the clock ran, and stopped at the pause (9 s is the whole mock)

    child = _spawn(["mock", "--resume"], tmp_path)
    child.expect(CLOCK)
    assert _seconds(child.match.group(1)) <= 9 - int(live["elapsed"]) + 1
    child.expect("time is up", timeout=30)
    child.expect("scorecard")
    assert _finish(child) == 1  # the stub was never touched
    out = child.logfile_read.getvalue()
    assert "not attempted" in out and "verdict" in out and "no pass" in out
    live = store.load()["mocks"][0]
    assert live["status"] == "finished" and live["scorecard"]["used"] == 9.0


def test_watch_d_shows_every_row_of_the_details_and_a_running_check_its_time(tmp_path, fixture_bank):
    from attn_drill.results import CaseResult
    file = tmp_path / "attend.py"
    shutil.copy(REFERENCE, file)
    con = Console(file=io.StringIO(), width=80, height=24, force_terminal=True, color_system=None)
    w = Watcher([("attend", file)], 1, False, "en", tmp_path, FakeClient(), con=con)
    cases = [CaseResult(f"case_{i:02d}_fp32", FAIL, "x 2×3×4", "float32", forward=FAIL, max_error=0.5, allowed=1e-5,
                        message="wrong numbers") for i in range(14)]
    w.record("attend", Report("attend", "attend.py", 1, status=FAIL, message="14 of 14 cases failed", cases=cases))
    w.draw()
    first_screen = con.file.getvalue()
    assert len(first_screen.splitlines()) <= 24 and "case_13_fp32 " not in first_screen   # the first screen
    con.file.seek(0)
    con.file.truncate()
    w.details = True                                       # d: the whole table, whatever the height
    w.draw()
    out = con.file.getvalue()
    assert all(f"case_{i:02d}_fp32" in out for i in range(14)) and "more with d" not in out
    w.checking.add("attend")
    w.started["attend"] = time.monotonic() - 12
    text = _text(w.screen(24))
    assert re.search(r"checking attend\.py… 1[23] s \(limit 20 s\)", text), text
    at = w.checked_at
    first, second = _text(w.screen(24)), (time.sleep(1.1), _text(w.screen(24)))[1]
    assert re.search(r"check #1 at \S+", first) and re.search(r"check #1 at \S+", first).group() in second
    assert w.checked_at == at                              # the header shows when the check was, not now
