"""`check --format lines` and the GitHub annotations: one line per finding, `path:line:col: error:
message [id]`, read back by a regex for every kind of failure (an exception, wrong values, a rule:
a forbidden API, a missing required API, a refused import; a syntax error, a timeout), pointing at
the user's own line where the failure has one."""
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from attn_drill.bank import sources
from attn_drill.cli import app
from attn_drill.render import lines
from attn_drill.results import CaseResult, Frame, Report, UserProblem
from attn_drill.verbs import check, outputs

ROOT = Path(__file__).resolve().parent.parent
CLASS = ROOT / "tests" / "fixtures" / "class"
# what an editor's problem matcher (docs/editors.md) and grep see; the same pattern as render.lines.LINE_RE
LINE = re.compile(r"^(?P<path>[^:\n]+):(?P<line>\d+):(?P<col>\d+): (?P<severity>error|warning): "
                  r"(?P<message>.+) \[(?P<id>[\w.-]+)\]$")
ENV = {"NO_COLOR": "1", "COLUMNS": "100"}
runner = CliRunner()


def _findings(judge, pid: str, file: Path, **kw):
    kw.setdefault("time_limit", 20)
    r = check.grade_file(judge, pid, file, 1, **kw) if not kw.pop("static", False) else \
        check.static_report(pid, file, 1)
    out = [f.line_text() for f in outputs.findings(r, file, file.name)]
    parsed = [LINE.match(line) for line in out]
    assert out and all(parsed), out
    return r, [m.groupdict() for m in parsed]


def _line_of(file: Path, text: str) -> int:
    return next(i for i, line in enumerate(file.read_text().splitlines(), 1) if text in line)


def _ref(tmp_path: Path, pid: str, old: str = "", new: str = "", name: str | None = None) -> Path:
    src = (ROOT / "reference" / f"{pid}.py").read_text()
    if old:
        assert old in src
        src = src.replace(old, new)
    f = tmp_path / (name or f"{pid}.py")
    f.write_text(src)
    return f


def test_an_exception_points_at_the_line_that_raised(judge, tmp_path):
    f = tmp_path / "mhsa.py"
    f.write_text((CLASS / "carol" / "mhsa.py").read_text())
    r, found = _findings(judge, "mhsa", f)
    assert [(x["path"], int(x["line"]), x["severity"], x["id"]) for x in found] == \
        [("mhsa.py", _line_of(f, "forgot to finish"), "error", "exception")]
    assert found[0]["message"].startswith("RuntimeError: forgot to finish this")


def test_wrong_values_point_at_forward_and_name_the_mistake(judge, tmp_path):
    f = tmp_path / "mhsa.py"
    f.write_text((CLASS / "bob" / "mhsa.py").read_text())
    r, found = _findings(judge, "mhsa", f)
    assert len(found) == 1
    x = found[0]
    assert int(x["line"]) == _line_of(f, "def forward") and x["id"] == "softmax_query_axis"
    assert "differ" in x["message"] and r.first_failure().name in x["message"]


def test_a_forbidden_api_is_a_rule_on_its_line(judge, tmp_path):
    f = _ref(tmp_path, "mhsa", "torch.softmax(scores, dim=-1)",
             "torch.nn.functional.scaled_dot_product_attention(q, k, v)")
    r, found = _findings(judge, "mhsa", f)
    rule = [x for x in found if x["id"] == "forbidden"]
    assert rule and int(rule[0]["line"]) == _line_of(f, "scaled_dot_product_attention")
    assert "scaled_dot_product_attention" in rule[0]["message"]


def test_a_missing_required_api_is_a_rule(judge, tmp_path):
    f = _ref(tmp_path, "causal", "return torch.tril(ones)",
             "return (torch.arange(seq_len, device=device)[:, None] >= torch.arange(seq_len, device=device)).float()")
    r, found = _findings(judge, "causal", f)
    rule = [x for x in found if x["id"] == "required"]
    assert rule and "torch.tril" in rule[0]["message"]
    assert int(rule[0]["line"]) == _line_of(f, "def generate_causal_mask")     # the first name of the interface


def test_a_refused_import_and_a_syntax_error_are_found_without_grading(judge, tmp_path):
    f = _ref(tmp_path, "mhsa", "import math\n", "import math\nimport subprocess\n")
    _, found = _findings(judge, "mhsa", f, static=True)
    assert [(int(x["line"]), x["id"]) for x in found] == [(_line_of(f, "import subprocess"), "refused")]
    f.write_text(BROKEN)
    _, found = _findings(judge, "mhsa", f, static=True)
    assert [(int(x["line"]), int(x["col"]), x["id"]) for x in found] == [(*_where_python_says(), "syntax")]


@pytest.mark.slow
def test_a_timeout_points_at_the_loop(judge, tmp_path):
    f = tmp_path / "mhsa.py"
    f.write_text((CLASS / "dave" / "mhsa.py").read_text())
    _, found = _findings(judge, "mhsa", f, time_limit=3)
    assert [x["id"] for x in found] == ["timeout"]
    assert "timed out" in found[0]["message"]


def test_frames_in_a_helper_file_and_notes():
    r = Report("mhsa", "work/mhsa.py", 3, status="fail", warnings=["float32-level error\nin a float64 case"],
               cases=[CaseResult("a", "fail", problem=UserProblem("exception", "ValueError: bad\nshape",
                                                                  [Frame("mhsa.py", 9, "forward"),
                                                                   Frame("helpers.py", 4, "split")])),
                      CaseResult("b", "fail", problem=UserProblem("exception", "ValueError: bad\nshape",
                                                                  [Frame("helpers.py", 4, "split")])),
                      CaseResult("c", "pass")],
               diagnosis=None)
    out = [f.line_text() for f in lines.findings(r, home=7)]
    assert out == ["work/helpers.py:4:1: error: ValueError: bad shape (in 2 of 3 cases; first a) [exception]",
                   "work/mhsa.py:7:1: warning: float32-level error in a float64 case [note]"]
    assert all(lines.LINE_RE.match(x) for x in out)


def test_github_annotations_escape_what_would_end_them():
    f = lines.Finding("a,b:c.py", 3, 1, "error", "100% wrong\nreally", "x")
    assert lines.annotation(f, "t: 1, 2") == "::error file=a%2Cb%3Ac.py,line=3,col=1,title=t%3A 1%2C 2::" \
                                             "100%25 wrong%0Areally [x]"


BROKEN = "import torch\n\n\ndef f(x:\n    return x\n"


def _where_python_says() -> tuple[int, int]:
    err = sources.syntax_error(BROKEN, "mhsa.py")
    return err["line"], err["col"]


def test_the_cli_prints_only_lines_and_exits_as_check(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mhsa.py").write_text(BROKEN)
    line, col = _where_python_says()
    res = runner.invoke(app, ["check", "mhsa", "--format", "lines", "--seed", "1"], env=ENV)
    assert res.exit_code == 1, res.output
    out = res.stdout.splitlines()
    assert len(out) == 1 and out[0].startswith(f"mhsa.py:{line}:{col}: error: SyntaxError: ") and LINE.match(out[0])
    res = runner.invoke(app, ["check", "mhsa", "--format", "github", "--seed", "1"], env=ENV)
    assert res.exit_code == 1
    assert res.stdout.startswith(f"::error file=mhsa.py,line={line},col={col},title=attn-drill mhsa%3A syntax::")
    res = runner.invoke(app, ["check", "mhsa", "--format", "lines", "--json"], env=ENV)
    assert res.exit_code == 2 and "--format json" in res.output


def test_annotations_follow_the_report_under_github_actions(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mhsa.py").write_text(BROKEN)
    line, col = _where_python_says()
    plain = runner.invoke(app, ["check", "mhsa", "--seed", "1"], env=ENV)
    assert "::error" not in plain.stdout and "ERROR" in plain.stdout
    ci = runner.invoke(app, ["check", "mhsa", "--seed", "1"], env={**ENV, "GITHUB_ACTIONS": "true"})
    assert ci.exit_code == 1 and "ERROR" in ci.stdout
    assert ci.stdout.rstrip().splitlines()[-1].startswith(f"::error file=mhsa.py,line={line},col={col},")


def test_watch_prints_each_check_between_a_begin_and_an_end_line(judge, tmp_path, monkeypatch, capsys):
    from attn_drill.verbs.watch import LinesWatcher, loop
    monkeypatch.chdir(tmp_path)
    f = tmp_path / "mhsa.py"
    f.write_text((CLASS / "bob" / "mhsa.py").read_text())

    def saves():
        f.write_text((CLASS / "carol" / "mhsa.py").read_text())
        yield {f}
    w = LinesWatcher([("mhsa", f)], 1, False, "en", tmp_path, judge)
    assert loop(w, saves()) == 0
    out = capsys.readouterr().out.splitlines()
    checks = [i for i, line in enumerate(out) if line.startswith(lines.WATCH_BEGIN)]
    assert len(checks) == 2 and out[checks[0]] == f"{lines.WATCH_BEGIN} mhsa.py"
    first, second = out[checks[0] + 1:checks[1]], out[checks[1] + 1:]
    assert [LINE.match(x)["id"] for x in first[:-1]] == ["softmax_query_axis"]
    assert first[-1] == f"{lines.WATCH_END} mhsa.py FAIL (1)"
    assert LINE.match(second[0])["id"] == "exception" and second[1] == f"{lines.WATCH_END} mhsa.py FAIL (1)"


@pytest.mark.slow
def test_grade_annotates_each_student_file_under_github_actions(tmp_path):
    for who, src in (("alice", ROOT / "reference" / "mhsa.py"), ("bob", CLASS / "carol" / "mhsa.py")):
        (tmp_path / "class" / who).mkdir(parents=True)
        (tmp_path / "class" / who / "mhsa.py").write_text(src.read_text())
    res = runner.invoke(app, ["grade", str(tmp_path / "class"), "--seed", "1", "--workers", "1", "--out",
                              str(tmp_path / "grades")], env={**ENV, "GITHUB_ACTIONS": "true"})
    assert res.exit_code == 0, res.output
    notes = [x for x in res.stdout.splitlines() if x.startswith("::")]
    line = _line_of(tmp_path / "class" / "bob" / "mhsa.py", "forgot to finish")
    assert len(notes) == 1 and notes[0].startswith("::error file=") and "bob/mhsa.py" in notes[0]
    assert f",line={line},col=1,title=bob/mhsa%3A exception::RuntimeError: forgot to finish this" in notes[0]


def test_the_documented_vs_code_matcher_reads_these_lines():
    """docs/editors.md's tasks.json: its pattern reads every kind of line, its background patterns
    the watch's begin and end lines (the JSON is read from the page, so the page stays right)."""
    import json
    text = (ROOT / "docs" / "editors.md").read_text(encoding="utf-8")
    tasks = json.loads(re.search(r"```json\n(.*?)```", text, re.S).group(1))["tasks"]
    samples = ["gqa.py:39:1: error: `out`: 336 of 336 elements (100.0%) differ; greatest difference 0.609 at "
               "(0, 5, 2) (in 8 of 11 cases; first q8_kv2_fp64) [kv_heads_tiled]",
               "work/helpers.py:4:1: error: ValueError: bad [x] shape (in 2 of 3 cases; first a) [exception]",
               "mhsa.py:7:1: warning: float32-level error in a float64 case [note]",
               "sub dir/gqa.py:4:12: error: SyntaxError: '(' was never closed [syntax]"]
    for task in tasks:
        m = task["problemMatcher"]
        pattern = re.compile(m["pattern"]["regexp"])
        for line in samples:
            got = pattern.match(line)
            want = LINE.match(line)
            assert got and want, line
            fields = {k: got.group(m["pattern"][k]) for k in ("file", "line", "column", "severity", "message", "code")}
            assert fields == {"file": want["path"], "line": want["line"], "column": want["col"],
                              "severity": want["severity"], "message": want["message"], "code": want["id"]}
        if task.get("isBackground"):
            assert task["args"][:1] == ["watch"] and "lines" in task["args"]
            assert re.match(m["background"]["beginsPattern"], f"{lines.WATCH_BEGIN} gqa.py")
            assert re.match(m["background"]["endsPattern"], f"{lines.WATCH_END} gqa.py FAIL (1)")
            assert not re.match(m["background"]["endsPattern"], f"{lines.WATCH_BEGIN} gqa.py")
