"""`check`: grade the user's files in the judge, record the attempts, and render the reports."""
from __future__ import annotations

import os
import random
import tempfile
from pathlib import Path

from .. import bank, render, rules
from ..client import JudgeClient
from ..errors import UsageError
from ..i18n import t
from ..progress import rules as progress
from ..results import PASS, Report
from . import outputs
from .scratch import MAX_FILE_BYTES, copy_folder


def resolve(pid: str | None, path: str | None, cwd: Path) -> list[tuple[str, Path]]:
    """Which (problem, file) pairs to grade."""
    if pid is None:
        found = [(p, cwd / f"{p}.py") for p in bank.ids() if (cwd / f"{p}.py").is_file()]
        if not found:
            raise UsageError(f"no problem files in {cwd}; start one with: attn-drill new mhsa")
        return found
    if path is None and pid.endswith(".py"):
        path, pid = pid, Path(pid).stem
    bank.get(pid)  # unknown ids raise UnknownProblem with suggestions
    file = Path(path) if path else Path(f"{pid}.py")
    if not file.is_absolute():
        file = cwd / file if path is None else file
    if file.is_dir():
        raise UsageError(t("check.is_folder", file=file, example=file / (pid + ".py")))
    if file.exists() and not file.is_file():
        raise UsageError(t("check.not_regular", file=file))
    if not file.is_file():
        raise UsageError(t("check.no_file", file=file, id=pid) + (f" --dir {file.parent}" if path else ""))
    return [(pid, file)]


def someone_elses(file: Path) -> bool:
    """A file owned by another user: graded in the OS sandbox, like `grade` does."""
    try:
        return Path(file).stat().st_uid != os.getuid()
    except (OSError, AttributeError):
        return False


def grade_file(client: JudgeClient, pid: str, file: Path, seed: int, *, full: bool = False,
               case: str | None = None, sandbox: bool | None = None, time_limit: float | None = None,
               typed: str | None = None) -> Report:
    """Grade one file. sandbox: True always in the OS sandbox (a copy of its folder), False never,
    None when the file is someone else's. Without bubblewrap, sandbox=True is refused."""
    from ..judge import sandbox as os_sandbox
    limit = rules.time_limit(bank.get(pid), full, time_limit)
    file = Path(file).resolve()
    if sandbox is None:
        sandbox = someone_elses(file) and os_sandbox.available()[0]
    if not sandbox:
        return client.grade(pid, str(file), seed, full=full, case=case, time_limit=limit, typed=typed,
                            shown=_shown(file))
    ok, why = os_sandbox.available()
    if not ok:
        raise UsageError(f"--sandbox: {why}")
    with tempfile.TemporaryDirectory(prefix="attn-drill-sandbox-") as scratch:
        skipped = copy_folder(file.parent, Path(scratch))
        if file.name in skipped:
            raise UsageError(t(f"grade.skipped_{skipped[file.name]}", file=file, mib=MAX_FILE_BYTES >> 20))
        try:
            return client.grade(pid, str(Path(scratch) / file.name), seed, full=full, case=case, time_limit=limit,
                                sandbox=scratch, shown=_shown(file), typed=typed)
        finally:
            client.close_sandbox(scratch)


def _shown(file: Path) -> str:
    try:
        return str(file.relative_to(Path.cwd()))
    except ValueError:
        return str(file)


def typed_path(pid: str | None, path: str | None) -> str | None:
    """How the user named the file: the path they typed, or "" for the default ./<id>.py."""
    if pid is None:
        return ""
    if path is None and pid.endswith(".py"):
        return pid
    return path if path is not None else ""


def static_report(pid: str, file: Path, seed: int, full: bool = False, typed: str | None = None) -> Report | None:
    """The report for a file that cannot run at all (unreadable, a syntax error, refused, no interface),
    known in a fraction of a second without torch; None when it has to be graded."""
    from ..bank import sources
    from ..results import ERROR
    _, problem, message = sources.vet(Path(file), bank.get(pid))
    if problem is None:
        return None
    shown = _shown(Path(file).resolve())
    where = typed if typed is not None else shown
    return Report(pid, shown, seed, status=ERROR, message=message, problem_error=problem, full=full,
                  replay=rules.replay(pid, where, seed, full), where=where)


def run(targets, seed: int | None, full: bool, case: str | None, client: JudgeClient,
        sandbox: bool | None = None, typed: str | None = None) -> list[Report]:
    """Grade each (problem, file). typed: how the user named the file, for the replay commands."""
    seed = random.randrange(1_000_000) if seed is None else seed
    if len(targets) > 1:
        typed = ""
    reports = [static_report(pid, file, seed, full, typed) for pid, file in targets]
    return [r or grade_file(client, pid, file, seed, full=full, case=case, sandbox=sandbox, typed=typed)
            for r, (pid, file) in zip(reports, targets)]


def check(problem: str | None, path: str | None, seed: int | None, full: bool, case: str | None, verbose: bool,
          as_json: bool, lang: str, sandbox: bool | None, cwd: Path, fmt: str = "text",
          html: Path | None = None) -> int:
    """The verb: grade, record each attempt in the workspace progress, show the reports (fmt: text, json,
    lines or github), and write them as an HTML page when asked."""
    if as_json and fmt not in ("text", "json"):
        raise UsageError(t("check.two_formats", fmt=fmt))
    fmt = "json" if as_json else fmt
    client = JudgeClient().start()      # torch starts loading while the files are read and vetted
    try:
        targets = resolve(problem, path, cwd)
        reports = run(targets, seed, full, case, client, sandbox, typed_path(problem, path))
    finally:
        client.close()
    scheduled = {r.problem: progress.record_check(cwd, r) for r in reports}
    code = show(reports, fmt == "json", lang, progress.statuses(cwd), verbose, scheduled, fmt)
    if html is not None:
        outputs.write_check_html(html, reports, lang)
        render.say(t("html.wrote", path=html), "dim", stderr=fmt != "text")
    return code


def next_problem(statuses: dict, done: set[str]) -> str | None:
    """The first problem in the bank's order that is not passed yet."""
    for spec in sorted(bank.all_specs(), key=lambda s: (s.seed_section or 99, s.id)):
        if spec.id not in done and statuses.get(spec.id) != "passed":
            return spec.id
    return None


def show(reports: list[Report], as_json: bool, lang: str, statuses: dict | None = None,
         verbose: bool = False, scheduled: dict | None = None, fmt: str = "text") -> int:
    """Print the reports: each one's first screen (and its details with --verbose), or the JSON, or
    one line per finding (lines), or GitHub annotations (github; also after the screens when run there)."""
    if fmt in ("lines", "github"):
        (outputs.print_lines if fmt == "lines" else outputs.annotate_check)(reports)
    elif as_json:
        data = [render.exercism(r) for r in reports]
        render.print_json(data[0] if len(data) == 1 else data)
    else:
        from ..render import practice, report as view
        con = render.console()
        for r in reports:
            title = bank.get(r.problem).title.get(lang)
            more = None if verbose or r.status == PASS else details_command(r)
            con.print(view.first_screen(r, title, con.width, details_cmd=more))
            if verbose:
                con.print(view.details(r, con.width))
        nxt = None
        if statuses is not None and all(r.status == PASS for r in reports):
            nxt = next_problem(statuses, {r.problem for r in reports})
        practice.after_check(con, [(r.problem, r.status) for r in reports], nxt, scheduled or {})
        if outputs.in_github():
            outputs.annotate_check(reports)
    return 0 if all(r.status == PASS for r in reports) else 1


def details_command(r: Report) -> str:
    """The command that shows this report again with its details (every case, so no --case)."""
    return rules.replay(r.problem, r.where, r.seed, r.full) + " --verbose"
