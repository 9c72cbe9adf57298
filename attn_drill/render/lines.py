"""A report as lines for other programs: editors' problem matchers, grep, CI.

    path:line:col: error: message [id]          one line per finding (`check --format lines`)
    ::error file=path,line=N,col=C,title=…::…   a GitHub Actions annotation per finding (in CI)

A finding is the file's own problem (it does not parse, is refused, times out...), a rule the file
breaks (a forbidden or a missing API), the exception the cases raised (grouped by the line that raised
it), or the wrong values (the first such case, with how many more); notes are warnings. The line is
the user's own line where the failure points at one (the innermost frame of their code, a syntax
error's line and column), else the line where their interface is defined (`home`). The id is the
named mistake when one matched, else the kind of the finding. Each message is one line. No rich.
"""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

from ..i18n import t
from ..results import ERROR, FAIL, SKIP, Report
from .report import case_reason, one_line

# what editors, CI and the tests match; the id is the last bracketed word of the line
LINE_RE = re.compile(r"^(?P<path>.+?):(?P<line>\d+):(?P<col>\d+): (?P<severity>error|warning): "
                     r"(?P<message>.*) \[(?P<id>[\w.-]+)\]$")
MAX_MESSAGE = 600
# `watch --format lines` puts each check between these (an editor's background problem matcher waits for them)
WATCH_BEGIN = "attn-drill watch: checking"
WATCH_END = "attn-drill watch: checked"


@dataclass
class Finding:
    path: str
    line: int
    col: int
    severity: str        # error | warning
    message: str
    id: str

    def line_text(self) -> str:
        return f"{self.path}:{self.line}:{self.col}: {self.severity}: {self.message} [{self.id}]"


def _one(text: str) -> str:
    text = one_line(text)
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 1] + "…"


def _where(path: str, frame_file: str) -> str:
    """The path of a frame's file as the report names its own: frames carry a file name only."""
    if not frame_file or frame_file == Path(path).name:
        return path
    parent = Path(path).parent
    return frame_file if str(parent) in ("", ".") else str(parent / frame_file)


def findings(r: Report, path: str | None = None, home: int = 1, col: int | None = None) -> list[Finding]:
    """The findings of a report. path: the file as the user names it (default the report's);
    home: the line of the user's interface; col: the column of a syntax error, where known."""
    path = path or r.file
    home = max(1, int(home or 1))
    out: list[Finding] = []

    def at(frames) -> tuple[str, int]:
        fr = frames[-1] if frames else None
        if fr is None or not fr.line:
            return path, home
        return _where(path, fr.file), int(fr.line)

    p = r.problem_error
    if p is not None:
        where, line = at(p.frames)
        kind = r.diagnosis.mistake if r.diagnosis else p.kind or "error"
        out.append(Finding(where, line, max(1, col or 1) if p.kind == "syntax" else 1, "error", _one(p.message),
                           kind))
    for f in r.findings:
        if f.get("line"):
            out.append(Finding(path, int(f["line"]), 1, "error", _one(f["message"]), "forbidden"))
        else:
            out.append(Finding(path, home, 1, "error", _one(f["message"]), "required"))
    ran = [c for c in r.cases if c.status != SKIP]
    failed = [c for c in ran if c.status in (FAIL, ERROR)]
    raised: dict[tuple, list] = {}
    wrong = []
    for c in failed:
        if c.problem is not None and not (p is not None and c.problem.message == p.message):
            where, line = at(c.problem.frames)
            # one finding per place and kind: the same line raising with each case's own shapes is one mistake
            raised.setdefault((where, line, c.problem.kind), []).append(c)
        elif c.problem is None:
            wrong.append(c)
    ruled = {(path, int(f["line"])) for f in r.findings if f.get("line")}
    for (where, line, kind), cases in raised.items():
        if kind == "forbidden" and (where, line) in ruled:
            continue                    # the forbidden call the scan found, caught again as it ran: one finding
        message = one_line(cases[0].problem.message) + t("lines.cases", k=len(cases), n=len(ran), case=cases[0].name)
        out.append(Finding(where, line, 1, "error", _one(message), kind or "exception"))
    if wrong:
        c = wrong[0]
        named = r.diagnosis or r.symptom
        kind = named.mistake if named else ("wrong-gradient" if c.forward != FAIL and c.gradient == FAIL
                                            else "wrong-output")
        out.append(Finding(path, home, 1, "error", _one(case_reason(c) + t("lines.cases", k=len(wrong), n=len(ran),
                                                                          case=c.name)), kind))
    for w in r.warnings:
        out.append(Finding(path, home, 1, "warning", _one(w), "note"))
    return out


# ---------------------------------------------------------------- GitHub Actions
def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _prop(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(f: Finding, title: str) -> str:
    """A workflow command that GitHub shows as an annotation on that line of that file."""
    kind = "error" if f.severity == "error" else "warning"
    return (f"::{kind} file={_prop(f.path)},line={f.line},col={f.col},title={_prop(title)}::"
            f"{_data(f.message)} [{f.id}]")


def print_lines(lines: list[str], stderr: bool = False) -> None:
    """Lines for another program, exactly as they are."""
    stream = sys.stderr if stderr else sys.stdout
    for line in lines:
        stream.write(line + "\n")
    stream.flush()
