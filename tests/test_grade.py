"""`attn-drill grade`: sharding, copying, usage errors, and one batch over a fixture class where every
student fails in a different way (tests/fixtures/class/)."""
import csv
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from attn_drill.cli import app
from attn_drill.errors import UsageError
from attn_drill.verbs.grade import _fingerprint, parse_shard, shard_of, students_of
from attn_drill.verbs.scratch import copy_folder

CLASS = Path(__file__).resolve().parent / "fixtures" / "class"
ENV = {"NO_COLOR": "1", "COLUMNS": "100"}
runner = CliRunner()


def test_parse_shard():
    assert parse_shard(None) is None
    assert parse_shard("2/4") == (2, 4)
    for bad in ("0/4", "5/4", "1", "a/b", "1/0"):
        with pytest.raises(UsageError, match="--shard"):
            parse_shard(bad)


@pytest.mark.parametrize("n", [1, 2, 3, 7])
def test_shards_partition_the_class(n):
    students = [f"s{i:02d}" for i in range(17)]
    shards = [shard_of(list(reversed(students)), (i, n)) for i in range(1, n + 1)]
    flat = [s for sh in shards for s in sh]
    assert sorted(flat) == students                                 # everyone exactly once
    assert max(map(len, shards)) - min(map(len, shards)) <= 1       # balanced
    assert shards == [shard_of(students, (i, n)) for i in range(1, n + 1)]  # independent of input order


def test_students_skip_hidden_and_underscore(tmp_path):
    for name in ("bob", "alice", ".git", "_instructor"):
        (tmp_path / name).mkdir()
    (tmp_path / "notes.txt").write_text("x")
    assert students_of(tmp_path) == ["alice", "bob"]


def test_copy_skips_symlinks_caches_and_huge_files(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "pkg" / "__pycache__").mkdir(parents=True)
    dst.mkdir()
    (dst / "stale.py").write_text("left from the previous student")
    (src / "mhsa.py").write_text("x = 1\n")
    (src / "pkg" / "helper.py").write_text("y = 2\n")
    (src / "pkg" / "__pycache__" / "helper.pyc").write_bytes(b"\0")
    (src / "link.py").symlink_to(src / "mhsa.py")
    (src / "big.bin").write_bytes(b"\0" * (6 << 20))
    copy_folder(src, dst)
    assert sorted(str(p.relative_to(dst)) for p in dst.rglob("*") if p.is_file()) == ["mhsa.py", "pkg/helper.py"]


def test_help_has_an_example():
    res = runner.invoke(app, ["grade", "--help"], env=ENV)
    assert res.exit_code == 0
    assert "attn-drill grade submissions/" in res.output and "--shard" in res.output


@pytest.mark.parametrize("args, needle", [
    (["--shard", "3/2", "--seed", "1"], "--shard takes i/n"),
    (["--shard", "1/2"], "give --seed too"),
    (["--time-limit", "0"], "--time-limit"),
    (["--problems", "nosuchproblem"], "No problem called"),
])
def test_usage_errors_exit_2(args, needle, tmp_path):
    res = runner.invoke(app, ["grade", str(CLASS), "--out", str(tmp_path), *args], env=ENV)
    assert res.exit_code == 2, res.output
    assert needle in res.output


def test_missing_folder_exits_2(tmp_path):
    res = runner.invoke(app, ["grade", str(tmp_path / "nope")], env=ENV)
    assert res.exit_code == 2 and "is not a folder" in res.output


def test_empty_shard_completes_with_exit_0(tmp_path):
    (tmp_path / "class" / "only").mkdir(parents=True)
    (tmp_path / "class" / "only" / "mhsa.py").write_text("raise SystemExit\n")
    out = tmp_path / "out"
    res = runner.invoke(app, ["grade", str(tmp_path / "class"), "--shard", "2/2", "--seed", "3", "--out", str(out),
                              "--json"], env=ENV)
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "summary-shard2of2.json").read_text())
    assert summary["students"] == [] and summary["shard"] == "2/2" and summary["seed"] == 3
    assert ET.parse(out / "junit-shard2of2.xml").getroot().get("tests") == "0"


@pytest.mark.slow
@pytest.mark.xdist_group("fixture_class")
def test_a_class_of_broken_submissions(graded_class):
    """One command grades everyone; nothing a student does stops the batch or touches the originals."""
    res, out, _, before = graded_class
    # grading completed; 1 of 8 pass, under --fail-under 50
    assert res.exit_code == 1, res.output
    assert "under --fail-under 50" in res.output
    outcome = {(r["student"]): r for r in csv.DictReader(open(out / "results.csv", encoding="utf-8"))}
    assert {s: r["outcome"] for s, r in outcome.items()} == {
        "alice": "pass", "bob": "fail", "carol": "exception", "dave": "timeout", "erin": "crash",
        "frank": "memory", "grace": "error", "heidi": "missing"}
    assert outcome["bob"]["diagnosis"] == "softmax_query_axis"
    replay = outcome["bob"]["replay"]
    assert replay.startswith("attn-drill check mhsa ") and "bob/mhsa.py --seed 1 --case " in replay
    assert outcome["alice"]["cases_passed"] == outcome["alice"]["cases_total"] != "0"
    assert "forgot to finish this" in outcome["carol"]["message"]
    assert "Segmentation fault" in outcome["erin"]["message"] and "mhsa.py:19" in outcome["erin"]["message"]
    assert "writing" in outcome["grace"]["message"] and "not allowed" in outcome["grace"]["message"]

    # exercism v3 per submission, pointing at the student's own file, never the scratch copy
    alice = json.loads((out / "json" / "alice" / "mhsa.json").read_text())
    assert alice["version"] == 3 and alice["status"] == "pass"
    ran = alice["tests"]           # CUDA-only cases do not run on CPU: listed apart, never as passed
    assert len(ran) == int(outcome["alice"]["cases_total"]) and all(t["status"] == "pass" for t in ran)
    skipped = alice["attn_drill"]["skipped"]
    assert skipped and all("CUDA" in s["reason"] for s in skipped)
    assert not {s["name"] for s in skipped} & {t["name"] for t in ran}
    assert int(outcome["alice"]["cases_skipped"]) == len(skipped)
    assert alice["attn_drill"]["file"].endswith("class/alice/mhsa.py") and alice["attn_drill"]["student"] == "alice"
    bob = json.loads((out / "json" / "bob" / "mhsa.json").read_text())
    assert bob["status"] == "fail" and "attn-drill-grade" not in json.dumps(bob)
    assert any(t["status"] == "fail" and "softmax_query_axis" in (t["message"] or "") for t in bob["tests"])
    assert json.loads((out / "json" / "heidi" / "mhsa.json").read_text())["status"] == "error"

    # JUnit: a testsuite per student, a testcase per problem, failures and errors with messages
    root = ET.parse(out / "junit.xml").getroot()
    n_skipped = int(root.get("skipped"))
    assert n_skipped >= len(skipped)       # each case not run is a testcase of its own, marked skipped
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == (str(8 + n_skipped), "5", "2")
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert sorted(suites) == ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi"]
    assert suites["alice"].find("testcase").find("failure") is None
    alice_skips = [t for t in suites["alice"].iter("testcase") if t.find("skipped") is not None]
    assert [t.get("name") for t in alice_skips] == [f"mhsa[{s['name']}]" for s in skipped]
    dave = suites["dave"].find("testcase")
    assert dave.get("name") == "mhsa" and dave.find("failure").get("type") == "timeout"
    assert "looks like: softmax_query_axis" in suites["bob"].find("testcase").find("failure").text
    assert suites["grace"].find("testcase").find("error") is not None

    # the student × problem summary, in the CSV and on screen
    rows = list(csv.reader(open(out / "summary.csv", encoding="utf-8")))
    assert rows[0] == ["student", "mhsa", "passed"] and ["alice", "pass", "1"] in rows
    assert "1 of 8 pass" in res.output and "timeout" in res.output

    # isolation: the originals are untouched and nothing escaped the scratch folders
    assert _fingerprint(CLASS) == before
    assert not (CLASS / "grace" / "notes.txt").exists()
    assert not (CLASS / "grace_was_here.txt").exists() and not (CLASS.parent / "grace_was_here.txt").exists()


def _rows(out):
    """results.csv without the timings (which differ from run to run)."""
    return [{k: v for k, v in r.items() if k != "seconds"} for r in csv.DictReader(open(out / "results.csv",
                                                                                        encoding="utf-8"))]


def _grade(args, stop_after: int | None = None):
    """`attn-drill grade ARGS` in its own process group; with stop_after, Ctrl-C (SIGINT to the group, as
    a terminal sends it) once that many grades are printed. (exit code, output)."""
    import os
    import re
    import signal
    import subprocess
    import sys
    p = subprocess.Popen([sys.executable, "-m", "attn_drill", "grade", *args], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, env=dict(os.environ, **ENV), start_new_session=True)
    seen = []
    for line in p.stdout:
        seen.append(line)
        if stop_after and sum(bool(re.match(r"(PASS|FAIL|ERROR|exception|missing)\s", x)) for x in seen) >= stop_after:
            os.killpg(p.pid, signal.SIGINT)
            stop_after = None
    return p.wait(timeout=300), "".join(seen)


@pytest.mark.slow
def test_grade_interrupted_writes_what_finished_and_resume_gives_the_uninterrupted_results(tmp_path):
    """Ctrl-C at 2 of 4 grades: exit 130, the two finished grades written (marked interrupted), and how
    to continue; --resume grades only the other two, with the same seed: the same results as one run."""
    import shutil
    cls = tmp_path / "class"
    for who in ("alice", "bob", "carol", "heidi"):
        shutil.copytree(CLASS / who, cls / who)
    common = ["--seed", "5", "--workers", "1", "--time-limit", "20"]
    rc, whole = _grade([str(cls), "--out", str(tmp_path / "whole"), *common])
    assert rc == 0, whole

    part = tmp_path / "part"
    rc, first = _grade([str(cls), "--out", str(part), *common], stop_after=2)
    assert rc == 130, first
    assert "interrupted:" in first and "--resume" in first and "Traceback" not in first
    done = _rows(part)
    assert 2 <= len(done) < 4 and json.loads((part / "summary.json").read_text())["interrupted"] is True
    assert all(r in _rows(tmp_path / "whole") for r in done)             # what finished is what a run gives

    rc, second = _grade([str(cls), "--out", str(part), "--resume", "--workers", "1"])
    assert rc == 0, second
    assert f"resuming: {len(done)} of 4 grades were finished before" in " ".join(second.split())
    graded_again = [line for line in second.splitlines() if line.startswith(("PASS", "FAIL", "ERROR", "exception",
                                                                             "missing"))]
    assert len(graded_again) == 4 - len(done)                            # only the rest
    assert _rows(part) == _rows(tmp_path / "whole")
    assert json.loads((part / "summary.json").read_text())["interrupted"] is False
    assert not (part / ".grade-journal.jsonl").exists()
    res = runner.invoke(app, ["grade", str(cls), "--out", str(part), "--resume"], env=ENV)
    assert res.exit_code == 2 and "no interrupted grading to resume" in res.output
