"""The other forms a report takes, for `check` and `grade`: lines for editors (`--format lines`),
GitHub Actions annotations (when run there), and HTML pages (`--html FILE`).

What the render layer cannot know is found here: the line of the user's file that defines the
problem's interface (where a wrong value points, as it has no line of its own), the column of a
syntax error, and the student's own file in place of the scratch copy `grade` graded.
"""
from __future__ import annotations

import ast
import json
import os
from pathlib import Path

from .. import bank
from ..results import PASS, Report

ANNOTATE_ENV = "GITHUB_ACTIONS"


def in_github() -> bool:
    """Run by GitHub Actions: annotations are printed too."""
    return os.environ.get(ANNOTATE_ENV) == "true"


def home_line(file: Path, pid: str) -> int:
    """The line of the interface in the user's file: a class's `forward` (where the values are made),
    else the first name the problem asks for; 1 when the file cannot be read or parsed."""
    from ..bank import sources
    try:
        src = sources.read_regular(file)
        if src is None:
            return 1
        tree = ast.parse(src.removeprefix("\ufeff"))
        names = bank.get(pid).interface
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError, RecursionError, MemoryError):
        return 1        # a file nested past what the parser takes: its first line
    defs = {n.name: n for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))}
    for name in names:
        node = defs.get(name)
        if isinstance(node, ast.ClassDef):
            method = next((m for m in node.body
                           if isinstance(m, ast.FunctionDef) and m.name in ("forward", "__call__")), None)
            return (method or node).lineno
        if node is not None:
            return node.lineno
    return 1


def syntax_col(file: Path, r: Report) -> int | None:
    if r.problem_error is None or r.problem_error.kind != "syntax":
        return None
    from ..bank import sources
    try:
        err = sources.syntax_error(Path(file).read_text(encoding="utf-8"), str(file))
    except (OSError, UnicodeDecodeError):
        return None
    return err["col"] if err else None


def findings(r: Report, file: Path | None = None, path: str | None = None):
    """The report's findings (render.lines.Finding). file: the file graded, to read lines from (default the
    report's); path: how the lines name it (default the report's)."""
    from ..render import lines
    file = Path(file or r.file)
    return lines.findings(r, path or r.file, home_line(file, r.problem), syntax_col(file, r))


def print_lines(reports: list[Report]) -> None:
    from ..render import lines
    lines.print_lines([f.line_text() for r in reports for f in findings(r)])


def annotate_check(reports: list[Report], stderr: bool = False) -> None:
    from ..render import lines
    lines.print_lines([lines.annotation(f, f"attn-drill {r.problem}: {f.id}") for r in reports
                       for f in findings(r)], stderr=stderr)


def annotate_grade(cells: dict, kept: dict, stderr: bool = False) -> None:
    """One annotation per finding of every cell that did not pass, on the student's own file."""
    from ..render import lines
    out = []
    for (student, pid), c in cells.items():
        if c.outcome == "pass":
            continue
        title = f"{student}/{pid}: {c.outcome}"
        r = student_report(kept[(student, pid)]) if (student, pid) in kept else None
        found = findings(r, Path(c.file), c.file) if r is not None else []
        if not found:
            found = [lines.Finding(c.file, 1, 1, "error", " ".join((c.message or c.outcome).split()), c.outcome)]
        out += [lines.annotation(f, title) for f in found]
    lines.print_lines(out, stderr=stderr)


def student_report(kept: tuple) -> Report:
    """A report `grade` made on a scratch copy, speaking of the student's own file instead.
    kept: (report, the student's file, the scratch folder, the path as shown, the cell's replay)."""
    from ..judge import sandbox as os_sandbox
    report, original, scratch, shown, replay = kept
    text = json.dumps(report.to_dict(), ensure_ascii=False)
    for p in {str(scratch), os.path.realpath(scratch), os_sandbox.INSIDE}:
        text = text.replace(json.dumps(p)[1:-1], json.dumps(str(Path(original).parent))[1:-1])
    r = Report.from_dict(json.loads(text))
    r.file, r.where, r.replay = shown, shown, replay if r.status != PASS else ""
    return r


def _write(path: Path, text: str) -> None:
    path = Path(path)
    if path.parent and not path.parent.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_check_html(path: Path, reports: list[Report], lang: str) -> None:
    from ..render import html
    _write(path, html.check_page([(r, bank.get(r.problem).title.get(lang)) for r in reports]))


def write_class_html(path: Path, students: list[str], problems: list[str], cells: dict, kept: dict, title: str,
                     notes: list[str], lang: str) -> None:
    from ..render import html
    reports = {key: student_report(k) for key, k in kept.items()}
    titles = {p: bank.get(p).title.get(lang) for p in problems}
    _write(path, html.class_page(students, problems, cells, title, notes, reports, titles))
