"""`grade`: grade a whole class. One folder per student holding `<id>.py` files.

Each student's files are copied into a scratch folder (re-copied before each problem; the originals
are never opened for writing). N threads each own one judge worker; the judge grades in rooms that,
where bubblewrap works, live in an OS sandbox around that student's scratch folder only (no
network, read-only system, private /tmp and /proc, no other student, no bank, no outputs); the
next student's sandbox is started (torch loading) while the current one is graded, and a student's
sandbox is ended, every process in it gone, before the next one of that thread starts. Without
bubblewrap the rooms are plain processes with an audit hook, and the output says so. A hang, crash,
os._exit or memory blow-up becomes that cell's grade and the batch goes on.

Outputs in --out: json/<student>/<problem>.json (exercism v3), junit.xml (a testsuite per student,
a testcase per problem), results.csv (one row per student and problem), summary.csv (student ×
problem), summary.json. With --shard i/n the file names carry the shard, e.g. junit-shard1of4.xml.
"""
from __future__ import annotations

import csv
import hashlib
import json
import os
import queue
import random
import shutil
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .. import bank, render
from ..i18n import t
from ..render import classroom as view
from rich.text import Text
from ..results import ERROR, FAIL, PASS, Report
from .. import sandbox as os_sandbox
from .check import UsageError

MAX_FILE_BYTES = 5 << 20      # files larger than this are not copied into the scratch folder
MAX_FOLDER_BYTES = 50 << 20   # nor anything once a student's copy reaches this size
SKIP_NAMES = {"__pycache__", ".git", ".attn-drill", ".ipynb_checkpoints"}

# the kinds of UserProblem that deserve their own word in a cell
OWN_WORD = ("timeout", "crash", "memory", "forbidden", "exception")


@dataclass
class Cell:
    """The grade of one student on one problem."""
    student: str
    problem: str
    outcome: str                 # pass | fail | error | exception | timeout | crash | memory | forbidden | missing
                                 # | tool-error
    status: str                  # the report's status (pass | fail | error); missing/tool-error: error
    cases_passed: int = 0
    cases_total: int = 0         # the cases that ran
    cases_skipped: int = 0       # not run here (CUDA cases on a machine without a GPU): never passed
    skipped_reason: str = ""
    seconds: float = 0.0
    message: str = ""
    diagnosis: str = ""
    replay: str = ""
    file: str = ""
    exercism: dict | None = field(default=None, repr=False)
    detail: str = ""             # longer text for the JUnit failure body


def parse_shard(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    try:
        i, n = (int(p) for p in text.split("/"))
    except ValueError:
        raise UsageError(t("grade.bad_shard", text=text)) from None
    if not (n >= 1 and 1 <= i <= n):
        raise UsageError(t("grade.bad_shard", text=text))
    return i, n


def students_of(root: Path) -> list[str]:
    """Student ids: the sub-folders of root, sorted; hidden folders and names starting with _ are skipped."""
    if not root.is_dir():
        raise UsageError(t("grade.not_folder", root=root))
    return sorted(p.name for p in root.iterdir()
                  if p.is_dir() and not p.is_symlink() and not p.name.startswith((".", "_")))


def shard_of(students: list[str], shard: tuple[int, int] | None) -> list[str]:
    """Round robin over the sorted ids: student k (from 0) goes to shard k % n + 1. Every student lands in
    exactly one shard, the shards differ in size by at most one, and the split depends only on the ids."""
    if shard is None:
        return list(students)
    i, n = shard
    return [s for k, s in enumerate(sorted(students)) if k % n == i - 1]


def problems_for(root: Path, students: list[str], wanted: list[str]) -> list[str]:
    if wanted:
        for pid in wanted:
            bank.get(pid)  # unknown ids: UnknownProblem with suggestions
        return list(dict.fromkeys(wanted))
    known = set(bank.ids())
    found = {p.stem for s in students for p in (root / s).glob("*.py") if p.stem in known}
    if not found:
        raise UsageError(t("grade.no_files", root=root))
    return sorted(found)


def copy_folder(src: Path, dst: Path) -> None:
    """Fill dst with a copy of src: regular files only (no symlinks), no caches, within size caps."""
    for old in dst.iterdir():
        if old.is_dir() and not old.is_symlink():
            shutil.rmtree(old, ignore_errors=True)
        else:
            old.unlink(missing_ok=True)
    total = 0
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_NAMES and not d.startswith(".")
                             and not os.path.islink(os.path.join(dirpath, d)))
        rel = Path(dirpath).relative_to(src)
        for name in sorted(filenames):
            p = Path(dirpath) / name
            if p.is_symlink() or not p.is_file():
                continue
            size = p.stat().st_size
            if size > MAX_FILE_BYTES or total + size > MAX_FOLDER_BYTES:
                continue
            total += size
            (dst / rel).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(p, dst / rel / name)


def _fingerprint(folder: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if p.is_file() and not p.is_symlink() and "__pycache__" not in p.parts:
            h.update(str(p.relative_to(folder)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def _cell(student: str, pid: str, report: Report, original: Path, scratch: Path, shown: str) -> Cell:
    first = report.first_failure()
    problem = report.problem_error or (first.problem if first is not None else None)
    kind = problem.kind if problem else ""
    outcome = kind if report.status != PASS and kind in OWN_WORD else report.status
    ran = [c for c in report.cases if c.status != "skip"]
    data = render.exercism(report)
    # the report may speak of the scratch copy (or its path inside the sandbox): point at the student's file
    text = json.dumps(data, ensure_ascii=False)
    for p in {str(scratch), os.path.realpath(scratch), os_sandbox.INSIDE}:
        text = text.replace(json.dumps(p)[1:-1], json.dumps(str(original.parent))[1:-1])
    data = json.loads(text)
    data["attn_drill"]["file"] = shown
    data["attn_drill"]["student"] = student
    replay = f"attn-drill check {pid} {shown} --seed {report.seed}"
    if first is not None and report.status != PASS:
        replay += f" --case {first.name}"
    if report.full:
        replay += " --full"
    data["attn_drill"]["replay"] = replay if report.status != PASS else None
    lines = [data["message"] or report.message]
    if first is not None and first.message and first.message not in lines[0]:
        lines.append(f"case {first.name} ({first.shapes}, {first.dtype}): {first.message}")
    if report.diagnosis:
        lines.append(f"looks like: {report.diagnosis.mistake}: {report.diagnosis.en}")
    if report.status != PASS:
        lines.append(f"replay: {replay}")
    message = data["message"] or report.message
    if first is not None and first.message and first.message not in message:
        message += f"; {first.name}: {first.message}"
    skipped = [c for c in report.cases if c.status == "skip"]
    return Cell(student, pid, outcome, report.status, sum(c.status == PASS for c in ran), len(ran),
                len(skipped), skipped[0].message if skipped else "", round(report.seconds, 3), message,
                report.diagnosis.mistake if report.diagnosis else "", replay if report.status != PASS else "",
                shown, data, "\n".join(lines))


class Batch:
    """Grades students on problems with N threads; each thread owns one judge worker."""

    def __init__(self, root: Path, problems: list[str], seed: int, full: bool, time_limit: float | None,
                 memory_gb: float | None, scratch: Path, on_done=None, sandboxed: bool = True,
                 hide: list[str] | None = None, on_start=None):
        self.root, self.problems, self.seed, self.full = root, problems, seed, full
        self.time_limit, self.memory_gb, self.scratch = time_limit, memory_gb, scratch
        self.on_done = on_done
        self.on_start = on_start
        self.sandboxed = sandboxed
        self.hide = list(hide or []) + [str(root), str(scratch)]     # other students, other scratch folders
        self.cells: dict[tuple[str, str], Cell] = {}
        self.warnings: list[str] = []
        self._lock = threading.Lock()
        self._count = 0

    def _folder(self) -> Path:
        with self._lock:
            self._count += 1
            folder = self.scratch / f"s{self._count}"
        folder.mkdir(parents=True)
        return folder

    def run(self, students: list[str], workers: int) -> None:
        todo: queue.Queue[str] = queue.Queue()
        for s in students:
            todo.put(s)
        threads = [threading.Thread(target=self._loop, args=(todo,), daemon=True)
                   for _ in range(max(1, min(workers, len(students))))]
        for th in threads:
            th.start()
        for th in threads:
            th.join()

    def _next(self, todo) -> str | None:
        while True:
            try:
                student = todo.get_nowait()
            except queue.Empty:
                return None
            if any((self.root / student / f"{p}.py").is_file() for p in self.problems):
                return student
            self.grade_student(student, None, None)  # nothing handed in: no worker needed

    def _loop(self, todo: "queue.Queue[str]") -> None:
        from ..worker import WorkerClient
        env = {"ATTN_DRILL_MEMORY_GB": str(self.memory_gb)} if self.memory_gb is not None else None
        client = WorkerClient(env=env).start()
        try:
            student = self._next(todo)
            folder = self._prepare(client) if student else None
            while student is not None:
                upcoming = self._next(todo)
                ready = self._prepare(client) if upcoming else None   # its torch loads while we grade
                try:
                    self.grade_student(student, client, folder)
                finally:
                    if self.sandboxed:
                        client.close_sandbox(folder)                  # every process of this student gone
                    shutil.rmtree(folder, ignore_errors=True)
                student, folder = upcoming, ready
        finally:
            client.close()

    def _prepare(self, client) -> Path:
        folder = self._folder()
        if self.sandboxed:
            client.prepare_sandbox(folder)
        return folder

    def grade_student(self, student: str, client, folder: Path | None) -> None:
        from ..worker import ToolError
        src = self.root / student
        before = _fingerprint(src)
        for pid in self.problems:
            original = src / f"{pid}.py"
            shown = _shown(original)
            if not original.is_file():
                cell = Cell(student, pid, "missing", ERROR, message=t("grade.missing", id=pid, student=student),
                            file=shown, detail=t("grade.missing_detail", id=pid, where=shown))
                cell.exercism = {"version": 3, "status": ERROR, "message": cell.message, "tests": [],
                                 "attn_drill": {"problem": pid, "student": student, "file": shown}}
            else:
                if self.on_start:
                    self.on_start(f"{student}/{pid}")
                copy_folder(src, folder)
                spec = bank.get(pid)
                limit = self.time_limit or spec.time_limit * (3 if self.full else 1)
                try:
                    report = client.grade(pid, str(folder / f"{pid}.py"), self.seed, full=self.full,
                                          time_limit=limit, shown=shown,
                                          sandbox=str(folder) if self.sandboxed else None,
                                          writable=None if self.sandboxed else [str(folder), tempfile.gettempdir()],
                                          hide=None if self.sandboxed else
                                          [h for h in self.hide if not str(folder).startswith(h + os.sep)])
                    cell = _cell(student, pid, report, original, folder, shown)
                except (ToolError, ValueError) as exc:
                    msg = t("grade.tool_error", error=exc)
                    cell = Cell(student, pid, "tool-error", ERROR, message=msg.splitlines()[0], file=shown,
                                detail=msg)
                    cell.exercism = {"version": 3, "status": ERROR, "message": msg, "tests": [],
                                     "attn_drill": {"problem": pid, "student": student, "file": shown}}
            with self._lock:
                self.cells[(student, pid)] = cell
            if self.on_done:
                self.on_done(cell)
        if _fingerprint(src) != before:
            with self._lock:
                self.warnings.append(t("grade.changed", student=student))


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path.resolve())


# ---------------------------------------------------------------- outputs
def _suffix(shard) -> str:
    return f"-shard{shard[0]}of{shard[1]}" if shard else ""


def write_junit(path: Path, students: list[str], problems: list[str], cells: dict, seed: int) -> None:
    suites = ET.Element("testsuites", name="attn-drill")
    totals = dict(tests=0, failures=0, errors=0, skipped=0, time=0.0)
    for s in students:
        row = [cells[(s, p)] for p in problems if (s, p) in cells]
        failures = sum(c.status == FAIL for c in row)
        errors = sum(c.status == ERROR for c in row)
        t = sum(c.seconds for c in row)
        skipped = [(c, case) for c in row for case in (c.exercism or {}).get("attn_drill", {}).get("skipped", [])]
        suite = ET.SubElement(suites, "testsuite", name=s, tests=str(len(row) + len(skipped)),
                              failures=str(failures), errors=str(errors), skipped=str(len(skipped)), time=f"{t:.3f}")
        props = ET.SubElement(suite, "properties")
        ET.SubElement(props, "property", name="seed", value=str(seed))
        for c in row:
            case = ET.SubElement(suite, "testcase", classname=s, name=c.problem, time=f"{c.seconds:.3f}",
                                 file=c.file)
            if c.status != PASS:
                tag = "failure" if c.status == FAIL else "error"
                el = ET.SubElement(case, tag, message=f"{c.outcome}: {c.message}"[:1000], type=c.outcome)
                el.text = c.detail
            out = (c.exercism or {}).get("attn_drill", {}).get("output")
            if out:
                ET.SubElement(case, "system-out").text = out
        for c, case in skipped:      # a case not run here is its own testcase, marked skipped
            el = ET.SubElement(suite, "testcase", classname=s, name=f"{c.problem}[{case['name']}]", time="0",
                               file=c.file)
            ET.SubElement(el, "skipped", message=case["reason"][:1000])
        for k, v in (("tests", len(row) + len(skipped)), ("failures", failures), ("errors", errors),
                     ("skipped", len(skipped)), ("time", t)):
            totals[k] += v
    for k, v in totals.items():
        suites.set(k, f"{v:.3f}" if k == "time" else str(v))
    tree = ET.ElementTree(suites)
    ET.indent(tree)
    tree.write(path, encoding="utf-8", xml_declaration=True)


def write_outputs(out: Path, students, problems, cells, seed, shard, meta) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    sfx = _suffix(shard)
    for (s, p), c in cells.items():
        folder = out / "json" / s
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{p}.json").write_text(json.dumps(c.exercism, indent=2, ensure_ascii=False) + "\n",
                                          encoding="utf-8")
    write_junit(out / f"junit{sfx}.xml", students, problems, cells, seed)
    cols = ["student", "problem", "outcome", "status", "cases_passed", "cases_total", "cases_skipped", "seconds",
            "diagnosis", "message", "replay"]
    with open(out / f"results{sfx}.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, cols, extrasaction="ignore")
        w.writeheader()
        for s in students:
            for p in problems:
                if (s, p) in cells:
                    w.writerow(asdict(cells[(s, p)]))
    with open(out / f"summary{sfx}.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["student", *problems, "passed"])
        for s in students:
            row = [cells[(s, p)].outcome if (s, p) in cells else "" for p in problems]
            w.writerow([s, *row, sum(o == "pass" for o in row)])
    summary = {**meta, "students": students, "problems": problems,
               "cells": [{k: v for k, v in asdict(cells[(s, p)]).items() if k not in ("exercism", "detail")}
                         for s in students for p in problems if (s, p) in cells]}
    (out / f"summary{sfx}.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n",
                                            encoding="utf-8")
    return summary


# ---------------------------------------------------------------- the verb
def isolation() -> tuple[bool, str]:
    """(sandboxed, what the output says about the isolation)."""
    ok, why = os_sandbox.available()
    if ok:
        return True, t("grade.sandboxed")
    return False, t("grade.not_sandboxed", why=why)


def grade(root: Path, problems: list[str], workers: int | None, shard_text: str | None, out: Path,
          seed: int | None, full: bool, time_limit: float | None, memory_gb: float | None,
          fail_under: float | None, as_json: bool, require_sandbox: bool = False) -> int:
    shard = parse_shard(shard_text)
    if shard and shard[1] > 1 and seed is None:
        raise UsageError(t("grade.shard_seed"))
    if time_limit is not None and time_limit <= 0:
        raise UsageError(t("grade.time_limit"))
    if workers is not None and workers < 1:
        raise UsageError(t("grade.workers"))
    if fail_under is not None and not 0 <= fail_under <= 100:
        raise UsageError(t("grade.fail_under"))
    root = root.resolve()
    everyone = students_of(root)
    if not everyone:
        raise UsageError(t("grade.no_students", root=root, name=root.name))
    problems = problems_for(root, everyone, problems)
    students = shard_of(everyone, shard)
    seed = random.randrange(1_000_000) if seed is None else seed
    workers = workers or max(1, os.cpu_count() or 1)
    sandboxed, isolation_note = isolation()
    if require_sandbox and not sandboxed:
        raise UsageError(t("grade.require_sandbox", why=os_sandbox.available()[1]))
    con = render.console(stderr=as_json)
    where = t("grade.shard", i=shard[0], n=shard[1]) if shard else ""
    con.print(view.grade_heading(len(students), len(everyone), where, problems,
                                 min(workers, max(1, len(students))), seed, full), soft_wrap=True)
    con.print(view.isolation_line(sandboxed, isolation_note), soft_wrap=True)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="attn-drill-grade-") as scratch, \
            view.GradeProgress(con, len(students) * len(problems)) as shown:
        batch = Batch(root, problems, seed, full, time_limit, memory_gb, Path(scratch), shown.finished,
                      sandboxed=sandboxed, hide=[str(out.resolve())], on_start=shown.started)
        batch.run(students, workers)
    seconds = time.perf_counter() - t0
    cells = batch.cells
    graded = [c for c in cells.values()]
    passed = sum(c.outcome == "pass" for c in graded)
    rate = 100.0 * passed / len(graded) if graded else 100.0
    meta = {"seed": seed, "full": full, "shard": f"{shard[0]}/{shard[1]}" if shard else None,
            "seconds": round(seconds, 2), "passed": passed, "graded": len(graded),
            "pass_rate": round(rate, 2), "warnings": batch.warnings,
            "tool_errors": sum(c.outcome == "tool-error" for c in graded),
            "sandbox": "bubblewrap" if sandboxed else None, "isolation": isolation_note,
            "cases_skipped": sum(c.cases_skipped for c in graded)}
    skip_note = ""
    if meta["cases_skipped"]:
        reason = next(c.skipped_reason for c in graded if c.cases_skipped)
        skip_note = t("grade.skipped", n=meta["cases_skipped"], reason=reason)
        batch.warnings.append(skip_note)
    summary = write_outputs(out, students, problems, cells, seed, shard, meta)
    if as_json:
        print(json.dumps(summary, indent=2, ensure_ascii=False))
    else:
        con.print(view.class_table(students, problems, cells, t("grade.title", passed=passed, n=len(graded),
                                                                 rate=f"{rate:.0f}", seed=seed, where=where),
                                   con.width))
        con.print(view.grade_footer(_shown(out), _suffix(shard), seconds), soft_wrap=True)
    err = render.console(stderr=True)
    for w in batch.warnings:
        err.print(Text(t("cli.warning") + " " + w, style="yellow"), soft_wrap=True)
    if meta["tool_errors"]:
        err.print(Text(t("cli.error") + " " + t("grade.tool_errors", n=meta["tool_errors"]), style="red"),
                  soft_wrap=True)
        return 2
    if fail_under is not None and rate < fail_under:
        err.print(Text(t("grade.under", rate=f"{rate:.1f}", limit=f"{fail_under:g}"), style="red"))
        return 1
    return 0
