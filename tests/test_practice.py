"""Progress state (atomic, concurrent, damaged files) and the help-when-stuck commands:
hint, solution, reset, progress. Runs on the fixture bank; no torch, no worker."""
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from attn_drill.progress import rules, store
from attn_drill.cli import app
from attn_drill.results import FAIL, PASS, Report

runner = CliRunner()
ENV = {"NO_COLOR": "1", "COLUMNS": "100"}


def invoke(args, **kw):
    return runner.invoke(app, args, env=ENV, catch_exceptions=False, **kw)


@pytest.fixture
def work(tmp_path, monkeypatch, fixture_bank):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _report(status=PASS, pid="attend", seconds=0.5):
    return Report(pid, f"{pid}.py", 0, status=status, seconds=seconds)


# ---------------------------------------------------------------- state
def test_record_check_counts_attempts_and_first_and_best_pass(tmp_path):
    rules.record_check(tmp_path, _report(FAIL))
    assert rules.statuses(tmp_path) == {"attend": "failing"}
    rules.record_check(tmp_path, _report(PASS, seconds=0.9))
    rules.record_check(tmp_path, _report(PASS, seconds=0.4))
    rules.record_check(tmp_path, _report(FAIL))  # a later failure does not undo a pass
    e = store.load()["problems"]["attend"]
    assert e["status"] == "passed" and e["attempts"] == 4
    assert e["first_pass"] is not None and e["time_to_pass"] is not None
    assert e["best_seconds"] == 0.4
    assert json.loads((tmp_path / ".attn-drill" / "state.json").read_text())["version"] == store.VERSION


def test_a_solve_after_reset_is_timed_for_the_best_time_to_pass(work):
    rules.record_check(work, _report(PASS))
    store.update(None, lambda d: d["problems"]["attend"].update(time_to_pass=100.0, best_time_to_pass=100.0))
    (work / "attend.py").write_text("done\n")
    assert invoke(["reset", "attend", "--yes"]).exit_code == 0
    store.update(None, lambda d: d["problems"]["attend"].update(attempt_start=time.time() - 5))
    rules.record_check(work, _report(FAIL))  # failing again after the pass keeps "passed"
    rules.record_check(work, _report(PASS))
    e = store.load()["problems"]["attend"]
    assert e["time_to_pass"] == 100.0 and 4 <= e["best_time_to_pass"] <= 30 and e["attempt_start"] is None


def _hammer(root: str, n: int) -> None:
    for _ in range(n):
        rules.record_check(Path(root), _report(FAIL))


def test_two_processes_updating_at_once_lose_nothing(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_hammer, args=(str(tmp_path), 40)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert store.load()["problems"]["attend"]["attempts"] == 80


WRITER = """
import sys, time
from pathlib import Path
from attn_drill.progress import rules, store
root = Path(sys.argv[1])
i = 0
print("ready", flush=True)
while True:
    i += 1
    store.update(None, lambda d: d["problems"].setdefault("x", {}).update(n=i, pad="y" * 20000))
"""


def test_a_kill_at_any_moment_leaves_a_readable_file(tmp_path):
    for delay in (0.05, 0.13, 0.31):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        warnings = []
        data = store.load(None, warnings.append)
        assert warnings == [] and data["problems"]["x"]["n"] >= 1
    assert not list((tmp_path / ".attn-drill").glob("state.json.damaged-*"))


@pytest.mark.parametrize("damage", ["{not json", '{"version": 99, "problems": {}}', "[]", ""])
def test_a_damaged_file_is_kept_aside_with_a_warning_and_work_goes_on(tmp_path, damage):
    folder = tmp_path / ".attn-drill"
    folder.mkdir()
    (folder / "state.json").write_text(damage)
    warnings = []
    assert store.load(None, warnings.append)["problems"] == {}
    assert len(warnings) == 1 and "damaged" in warnings[0]
    kept = list(folder.glob("state.json.damaged-*"))
    assert len(kept) == 1 and kept[0].read_text() == damage
    rules.record_check(tmp_path, _report(PASS))
    assert rules.statuses(tmp_path) == {"attend": "passed"}


def test_check_inside_a_running_mock_counts_toward_it_and_a_paused_one_does_not(tmp_path):
    now = time.time()
    folder = tmp_path / "mock-m"
    folder.mkdir()
    mock = {"id": "mock-m", "folder": str(folder), "active": True, "status": "running", "seconds": 600.0,
            "elapsed": 30.0, "segment_start": now - 10,
            "problems": {"attend": {"checks": 0, "hints": 0, "passed_at": None}}}
    store.update(None, lambda d: d["mocks"].append(mock))
    rules.record_check(folder, _report(FAIL))
    rules.record_check(tmp_path, _report(FAIL))           # the same problem, outside the mock's folder
    rules.record_check(folder, _report(PASS))
    data = store.load()
    m = data["mocks"][0]["problems"]["attend"]
    assert m["checks"] == 2 and m["last"] == PASS
    assert 39 <= m["passed_after"] <= 45  # 30 s before the pause + about 10 s in this segment
    e = data["problems"]["attend"]
    assert e["attempts"] == 3 and e["status"] == "passed" and e["time_to_pass"] == m["passed_after"]
    assert "attend" not in data["cards"]                  # the mock reviews its cards when it ends
    store.update(None, lambda d: d["mocks"][0].update(active=False, status="paused"))
    rules.record_check(folder, _report(PASS))
    assert store.load()["mocks"][0]["problems"]["attend"]["checks"] == 2


def test_a_hint_anywhere_counts_against_a_running_mock_of_that_problem_from_its_first(tmp_path):
    store.update(None, lambda d: d["problems"].setdefault("attend", {}).update(hints_shown=3))   # seen before
    live = {"id": "mock-1", "folder": str(tmp_path / "mock-1"), "active": True, "status": "running",
            "seconds": 60.0, "elapsed": 0.0, "segment_start": time.time(),
            "problems": {"attend": {"checks": 0, "hints": 0}}}
    store.update(None, lambda d: d["mocks"].append(live))
    assert rules.record_hint(tmp_path, "attend", 3) == (0, 1)     # a mock's hints count from its first
    rules.record_solution(tmp_path, "attend")
    m = store.load()["mocks"][0]["problems"]["attend"]
    assert m["hints"] == 1 and m["solution_viewed"] is True


def test_one_progress_wherever_the_user_practises(tmp_path, monkeypatch, fixture_bank):
    """A check in one folder and a hint in another feed the same record; `progress` says where it is."""
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    rules.record_check(tmp_path / "a", _report(PASS))
    monkeypatch.chdir(tmp_path / "b")
    res = invoke(["progress"])
    kept_in = str(tmp_path / ".attn-drill" / "state.json")
    assert "Solved 1 of 1" in res.output and kept_in in " ".join(res.output.split())


def test_a_folder_of_its_own_from_before_is_moved_into_the_users_progress(tmp_path, monkeypatch, fixture_bank):
    """Before one progress per user, each folder kept .attn-drill/state.json: the first command there
    merges it in (counts added, the first pass kept, a drill's file by its full path) and renames it."""
    old = tmp_path / "old"
    (old / ".attn-drill").mkdir(parents=True)
    (old / ".attn-drill" / "state.json").write_text(json.dumps({
        "version": 1, "problems": {"attend": {"status": "passed", "attempts": 4, "first_pass": 1000.0,
                                              "time_to_pass": 60.0, "best_time_to_pass": 60.0}},
        "mocks": [], "cards": {"attend": {"kind": "drill", "fsrs": {"card_id": 1, "state": 2, "due": "x"},
                                          "due": 2000.0, "last_review": 1000.0}},
        "drills": {"attend": {"file": "drills/attend-1.py", "started": 1500.0, "status": "open"}}}))
    rules.record_check(tmp_path, _report(FAIL))            # the user's own, before
    monkeypatch.chdir(old)
    res = invoke(["progress", "--json"])
    data = store.load()
    assert data["problems"]["attend"]["attempts"] == 5 and data["problems"]["attend"]["status"] == "passed"
    assert data["cards"]["attend"]["due"] == 2000.0
    assert data["drills"]["attend"]["file"] == str(old / "drills" / "attend-1.py")
    assert not (old / ".attn-drill" / "state.json").exists() and list((old / ".attn-drill").glob("state.json.moved-*"))
    assert "moved the progress" in res.output
    again = invoke(["progress", "--json"])                 # merged once
    assert "moved" not in again.output and store.load()["problems"]["attend"]["attempts"] == 5


# ---------------------------------------------------------------- hint
def test_hints_come_one_at_a_time_and_are_recorded(work):
    first = invoke(["hint", "attend"])
    assert first.exit_code == 0
    assert "hint 1 of 3" in first.output and "Scores first." in first.output and "2 more hints" in first.output
    second = invoke(["hint", "attend", "--lang", "zh"])
    assert "提示 2/3" in second.output and "除以 sqrt(D)" in second.output
    again = invoke(["hint", "attend", "--all"])
    assert "Scores first." in again.output and "Scale by sqrt(D)." in again.output
    assert "Softmax over keys." not in again.output and "2 of 3 hints seen" in again.output
    assert "the last hint" in invoke(["hint", "attend"]).output
    done = invoke(["hint", "attend"])
    assert done.exit_code == 0 and "All 3 hints" in done.output
    assert store.load()["problems"]["attend"]["hints_shown"] == 3


def test_hint_all_before_any_hint_and_unknown_problem(work):
    assert "No hints seen yet" in invoke(["hint", "attend", "--all"]).output
    res = invoke(["hint", "atend"])
    assert res.exit_code == 2 and "attend" in res.output


# ---------------------------------------------------------------- solution
def test_solution_before_passing_refuses_without_a_terminal_or_yes(work):
    res = invoke(["solution", "attend"])
    assert res.exit_code == 1 and "--yes" in res.output
    assert "def attend" not in res.output
    assert not store.load()["problems"].get("attend", {}).get("solution_viewed")


def test_solution_with_yes_is_shown_and_recorded(work):
    res = invoke(["solution", "attend", "--yes"])
    assert res.exit_code == 0
    assert "def attend(q, k, v, mask=None):" in res.output
    assert store.load()["problems"]["attend"]["solution_viewed"] is True


def test_solution_after_passing_needs_no_confirmation(work):
    rules.record_check(work, _report(PASS))
    res = invoke(["solution", "attend"])
    assert res.exit_code == 0 and "class Mixer" in res.output


# ---------------------------------------------------------------- reset
def test_reset_keeps_a_backup_and_restores_the_stub(work):
    from attn_drill.verbs.scaffold import stub_text
    (work / "attend.py").write_text("my work\n")
    refused = invoke(["reset", "attend"])
    assert refused.exit_code == 1 and (work / "attend.py").read_text() == "my work\n"
    res = invoke(["reset", "attend", "--yes"])
    assert res.exit_code == 0, res.output
    assert (work / "attend.py").read_text() == stub_text("attend")
    backups = list(work.glob("attend.py.*.bak"))
    assert len(backups) == 1 and backups[0].read_text() == "my work\n"
    assert "untouched" in invoke(["reset", "attend"]).output


def test_reset_writes_a_missing_file_without_asking(work):
    res = invoke(["reset", "attend", "sub/attend.py"])
    assert res.exit_code == 0 and (work / "sub" / "attend.py").is_file()


# ---------------------------------------------------------------- progress
def test_progress_table_summary_and_json(work):
    empty = invoke(["progress"])
    assert empty.exit_code == 0 and "Solved 0 of 1" in empty.output and "No mock interviews yet" in empty.output
    rules.record_check(work, _report(FAIL))
    rules.record_check(work, _report(PASS))
    invoke(["hint", "attend"])
    store.update(None, lambda d: d["mocks"].append(
        {"id": "mock-x", "folder": "mock-x", "status": "finished", "started": time.time(), "seconds": 600.0,
         "problem_ids": ["attend"], "scorecard": {"used": 300.0, "passed": 1, "hints": 0, "verdict": "strong pass"}}))
    res = invoke(["progress"])
    assert res.exit_code == 0
    row = next(line for line in res.output.splitlines() if line.startswith("attend"))
    assert "passed" in row and " 2 " in row and "1/3" in row
    assert "Solved 1 of 1" in res.output and "easy 1/1" in res.output and "fixture 1/1" in res.output
    assert "mock-x" in res.output and "strong pass" in res.output and "5:00 / 10:00" in res.output
    data = json.loads(invoke(["progress", "--json"]).output)
    assert data["summary"]["solved"] == 1 and data["summary"]["by_tag"]["fixture"] == {"solved": 1, "total": 1}
    p = data["problems"][0]
    assert (p["id"], p["status"], p["attempts"], p["hints_shown"]) == ("attend", "passed", 2, 1)
    assert data["mocks"][0]["verdict"] == "strong pass" and data["mocks"][0]["passed"] == 1


def test_progress_survives_a_damaged_file(work):
    (work / ".attn-drill").mkdir()
    (work / ".attn-drill" / "state.json").write_text("{broken")
    res = invoke(["progress"])
    assert res.exit_code == 0 and "damaged" in res.output and "Solved 0 of 1" in res.output


def test_new_commands_have_help_with_an_example():
    for name in ("hint", "solution", "reset", "progress", "watch", "mock"):
        res = invoke([name, "--help"])
        assert res.exit_code == 0 and "Example" in res.output, name
    assert "--seconds" not in invoke(["mock", "--help"]).output


def test_help_of_the_new_commands_does_not_import_torch():
    code = ("import sys\nfrom typer.testing import CliRunner\nfrom attn_drill.cli import app\n"
            "for c in ('hint', 'progress', 'watch', 'mock'):\n"
            "    assert CliRunner().invoke(app, [c, '--help']).exit_code == 0\n"
            "assert 'torch' not in sys.modules\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, **ENV))
    assert out.returncode == 0, out.stderr


def test_a_truncated_file_is_restored_from_its_last_good_copy_with_nothing_lost(tmp_path):
    for _ in range(3):
        rules.record_check(tmp_path, _report(FAIL))
    rules.record_check(tmp_path, _report(PASS))
    folder = tmp_path / ".attn-drill"
    good = store.load()
    assert (folder / "state.json.1").read_bytes() == (folder / "state.json").read_bytes()   # the last write
    raw = (folder / "state.json").read_bytes()
    (folder / "state.json").write_bytes(raw[: len(raw) // 3])             # cut short
    warnings = []
    assert store.load(None, warnings.append) == good
    assert len(warnings) == 1 and "restored its last good copy (state.json.1" in warnings[0]
    assert "ends in the middle, cut off after line" in warnings[0]
    kept = list(folder.glob("state.json.damaged-*"))
    assert len(kept) == 1 and kept[0].read_bytes() == raw[: len(raw) // 3]
    assert store.load() == good                                             # put back in its place
    (folder / "state.json.1").write_text("{broken")                        # the newest copy damaged too
    (folder / "state.json").write_text("[")
    assert store.load(None, lambda m: None)["problems"]["attend"]["attempts"] >= 3   # an older copy


def test_every_time_of_the_mock_and_the_progress_comes_from_the_clock():
    """One clock (attn_drill.progress.clock: the system's, or ATTN_DRILL_NOW): no module of the mock,
    the drills, the quiz or the progress reads the system clock itself (time.monotonic measures
    intervals only, and is allowed)."""
    import ast
    root = Path(__file__).resolve().parent.parent / "attn_drill"
    files = [root / "verbs" / f for f in ("mock.py", "drills.py", "quizzing.py", "practice.py", "scaffold.py",
                                          "watch.py")]
    files += [p for p in (root / "progress").glob("*.py") if p.name != "clock.py"]
    wrong = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            owner = node.func.value.id if isinstance(node.func.value, ast.Name) else ""
            name = node.func.attr
            reads = (owner == "time" and (name == "time" or name in ("localtime", "gmtime", "ctime") and not node.args
                                          or name == "strftime" and len(node.args) < 2)) or \
                (owner in ("datetime", "date") and name in ("now", "today", "utcnow"))
            if reads:
                wrong.append(f"{path.name}:{node.lineno}: {owner}.{name}")
    assert not wrong, wrong
