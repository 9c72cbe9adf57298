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

from attn_drill import state
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
    state.record_check(tmp_path, _report(FAIL))
    assert state.statuses(tmp_path) == {"attend": "failing"}
    state.record_check(tmp_path, _report(PASS, seconds=0.9))
    state.record_check(tmp_path, _report(PASS, seconds=0.4))
    state.record_check(tmp_path, _report(FAIL))  # a later failure does not undo a pass
    e = state.load(tmp_path)["problems"]["attend"]
    assert e["status"] == "passed" and e["attempts"] == 4
    assert e["first_pass"] is not None and e["time_to_pass"] is not None
    assert e["best_seconds"] == 0.4
    assert json.loads((tmp_path / ".attn-drill" / "state.json").read_text())["version"] == state.VERSION


def test_a_solve_after_reset_is_timed_for_the_best_time_to_pass(work):
    state.record_check(work, _report(PASS))
    state.update(work, lambda d: d["problems"]["attend"].update(time_to_pass=100.0, best_time_to_pass=100.0))
    (work / "attend.py").write_text("done\n")
    assert invoke(["reset", "attend", "--yes"]).exit_code == 0
    state.update(work, lambda d: d["problems"]["attend"].update(attempt_start=time.time() - 5))
    state.record_check(work, _report(FAIL))  # failing again after the pass keeps "passed"
    state.record_check(work, _report(PASS))
    e = state.load(work)["problems"]["attend"]
    assert e["time_to_pass"] == 100.0 and 4 <= e["best_time_to_pass"] <= 30 and e["attempt_start"] is None


def _hammer(root: str, n: int) -> None:
    for _ in range(n):
        state.record_check(Path(root), _report(FAIL))


def test_two_processes_updating_at_once_lose_nothing(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_hammer, args=(str(tmp_path), 40)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert state.load(tmp_path)["problems"]["attend"]["attempts"] == 80


WRITER = """
import sys, time
from pathlib import Path
from attn_drill import state
root = Path(sys.argv[1])
i = 0
print("ready", flush=True)
while True:
    i += 1
    state.update(root, lambda d: d["problems"].setdefault("x", {}).update(n=i, pad="y" * 20000))
"""


def test_a_kill_at_any_moment_leaves_a_readable_file(tmp_path):
    for delay in (0.05, 0.13, 0.31):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        warnings = []
        data = state.load(tmp_path, warnings.append)
        assert warnings == [] and data["problems"]["x"]["n"] >= 1
    assert not list((tmp_path / ".attn-drill").glob("state.json.damaged-*"))


@pytest.mark.parametrize("damage", ["{not json", '{"version": 99, "problems": {}}', "[]", ""])
def test_a_damaged_file_is_kept_aside_with_a_warning_and_work_goes_on(tmp_path, damage):
    folder = tmp_path / ".attn-drill"
    folder.mkdir()
    (folder / "state.json").write_text(damage)
    warnings = []
    assert state.load(tmp_path, warnings.append)["problems"] == {}
    assert len(warnings) == 1 and "damaged" in warnings[0]
    kept = list(folder.glob("state.json.damaged-*"))
    assert len(kept) == 1 and kept[0].read_text() == damage
    state.record_check(tmp_path, _report(PASS))
    assert state.statuses(tmp_path) == {"attend": "passed"}


def test_check_inside_a_running_mock_counts_toward_it_and_a_paused_one_does_not(tmp_path):
    now = time.time()
    mock = {"id": "m", "active": True, "status": "running", "seconds": 600.0, "elapsed": 30.0,
            "segment_start": now - 10, "problems": {"attend": {"checks": 0, "hints": 0, "passed_at": None}}}
    state.update(tmp_path, lambda d: d["mocks"].append(mock))
    state.record_check(tmp_path, _report(FAIL))
    state.record_check(tmp_path, _report(PASS))
    m = state.load(tmp_path)["mocks"][0]["problems"]["attend"]
    assert m["checks"] == 2 and m["last"] == PASS
    assert 39 <= m["passed_after"] <= 45  # 30 s before the pause + about 10 s in this segment
    state.update(tmp_path, lambda d: d["mocks"][0].update(active=False, status="paused"))
    state.record_check(tmp_path, _report(PASS))
    assert state.load(tmp_path)["mocks"][0]["problems"]["attend"]["checks"] == 2


def test_a_hint_in_the_workspace_counts_against_a_running_mock_of_that_problem(tmp_path):
    mock_dir = tmp_path / "mock-1"
    mock_dir.mkdir()
    live = {"id": "mock-1", "active": True, "status": "running", "seconds": 60.0, "elapsed": 0.0,
            "segment_start": time.time(), "problems": {"attend": {"checks": 0, "hints": 0}}}
    state.update(mock_dir, lambda d: d["mocks"].append(live))
    state.update(tmp_path, lambda d: d["mocks"].append(
        {"id": "mock-1", "folder": "mock-1", "status": "running", "problem_ids": ["attend"]}))
    assert state.record_hint(tmp_path, "attend", 3) == (0, 1)
    state.record_solution(tmp_path, "attend")
    m = state.load(mock_dir)["mocks"][0]["problems"]["attend"]
    assert m["hints"] == 1 and m["solution_viewed"] is True


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
    assert state.load(work)["problems"]["attend"]["hints_shown"] == 3


def test_hint_all_before_any_hint_and_unknown_problem(work):
    assert "No hints seen yet" in invoke(["hint", "attend", "--all"]).output
    res = invoke(["hint", "atend"])
    assert res.exit_code == 2 and "attend" in res.output


# ---------------------------------------------------------------- solution
def test_solution_before_passing_refuses_without_a_terminal_or_yes(work):
    res = invoke(["solution", "attend"])
    assert res.exit_code == 1 and "--yes" in res.output
    assert "def attend" not in res.output
    assert not state.load(work)["problems"].get("attend", {}).get("solution_viewed")


def test_solution_with_yes_is_shown_and_recorded(work):
    res = invoke(["solution", "attend", "--yes"])
    assert res.exit_code == 0
    assert "def attend(q, k, v, mask=None):" in res.output
    assert state.load(work)["problems"]["attend"]["solution_viewed"] is True


def test_solution_after_passing_needs_no_confirmation(work):
    state.record_check(work, _report(PASS))
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
    state.record_check(work, _report(FAIL))
    state.record_check(work, _report(PASS))
    invoke(["hint", "attend"])
    state.update(work, lambda d: d["mocks"].append(
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
