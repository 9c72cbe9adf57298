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

Nothing finished is lost: every grade is appended to --out's journal (.grade-journal.jsonl) as it
arrives. Ctrl-C stops the batch between two grades (the gradings in flight are cancelled), writes
the outputs of what finished, marked interrupted, and says how to continue: `--resume` reads the
journal, grades only what is left with the same seed, problems and options (a student whose folder
changed since is graded again), and writes the whole class, as an uninterrupted run would have.
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
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from .. import bank, render, rules
from ..client import JudgeClient
from ..errors import Cancelled, ToolError, UsageError
from ..i18n import lang, t
from ..judge import sandbox as os_sandbox
from ..render import classroom as view
from ..results import ERROR, FAIL, PASS, Report, printable
from . import outputs
from .scratch import MAX_FILE_BYTES, copy_folder
from .terminal import ctrl_c

JOURNAL = ".grade-journal.jsonl"      # in --out: the grades finished so far, one JSON line each

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


FINGERPRINT_READ = 4 << 20      # a file's bytes enter the fingerprint up to this size; past it, its size and time


def _fingerprint(folder: Path) -> str:
    """What a student's folder holds, to tell whether grading changed it: each file's name (any bytes a
    file system allows), size and modification time, and the contents of the files of ordinary size."""
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        try:
            if p.is_symlink() or not p.is_file() or "__pycache__" in p.parts:
                continue
            st = p.stat()
            h.update(os.fsencode(p.relative_to(folder)) + b"\0" + f"{st.st_size}:{st.st_mtime_ns}".encode())
            if st.st_size <= FINGERPRINT_READ:
                with open(p, "rb") as f:
                    h.update(f.read(FINGERPRINT_READ + 1))
        except OSError:
            h.update(b"unreadable:" + os.fsencode(p.relative_to(folder)))
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
    replay = rules.replay(pid, shown, report.seed, report.full,
                          first.name if first is not None and report.status != PASS else None)
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
    """Grades students on problems, one student per task on a pool of judges. A judge's next
    scratch folder (and its OS sandbox, loading torch) is made ready while it grades the current one."""

    def __init__(self, root: Path, problems: list[str], seed: int, full: bool, time_limit: float | None,
                 memory_gb: float | None, scratch: Path, on_done=None, sandboxed: bool = True,
                 hide: list[str] | None = None, on_start=None, done: dict | None = None):
        self.root, self.problems, self.seed, self.full = root, problems, seed, full
        self.time_limit, self.memory_gb, self.scratch = time_limit, memory_gb, scratch
        self.on_done = on_done
        self.on_start = on_start
        self.sandboxed = sandboxed
        # without an OS sandbox: other students, every scratch folder but the student's own (writable),
        # the system's temporary folder (other gradings' copies)
        self.hide = list(hide or []) + [str(root), str(scratch), tempfile.gettempdir()]
        self.cells: dict[tuple[str, str], Cell] = dict(done or {})  # a resumed batch starts with what finished
        self.kept: dict[tuple[str, str], tuple] = {}   # the reports, for the HTML page and annotations (outputs.py)
        self.warnings: list[str] = []
        self.stop = threading.Event()        # Ctrl-C: no new grade starts, the ones in flight are dropped
        self._lock = threading.Lock()
        self._count = 0

    def left(self, students: list[str]) -> int:
        return sum((s, p) not in self.cells for s in students for p in self.problems)

    def _folder(self) -> Path:
        with self._lock:
            self._count += 1
            folder = self.scratch / f"s{self._count}"
        folder.mkdir(parents=True)
        return folder

    def _handed_in(self, student: str) -> bool:
        return any((self.root / student / f"{p}.py").is_file() for p in self.problems)

    def run(self, students: list[str], workers: int) -> None:
        students = [s for s in students if any((s, p) not in self.cells for p in self.problems)]
        todo = [s for s in students if self._handed_in(s)]
        for s in students:
            if s not in todo:
                self.grade_student(s, None, None)      # nothing handed in: no judge needed
        if not todo:
            return
        judges: queue.SimpleQueue = queue.SimpleQueue()   # (client, its next folder, made ready)
        started = []
        try:
            try:
                for _ in range(max(1, min(workers, len(todo)))):
                    if self.stop.is_set():
                        return
                    client = JudgeClient(memory_gb=self.memory_gb).start()
                    started.append(client)
                    judges.put((client, self._prepare(client)))
            except (ToolError, UsageError, Cancelled, OSError):
                if self.stop.is_set() or self.stop.wait(0.5):   # Ctrl-C while the judges were starting
                    return
                raise
            left = [len(todo)]

            def task(student: str) -> None:
                if self.stop.is_set():
                    return
                client, folder = judges.get()
                ready = None
                try:
                    folder = folder or self._prepare(client)
                    with self._lock:
                        left[0] -= 1
                        more = left[0] >= len(started) and not self.stop.is_set()
                    ready = self._prepare(client) if more else None   # its torch loads while we grade
                    try:
                        self.grade_student(student, client, folder)
                    finally:
                        self._dispose(client, folder)
                except Exception:  # noqa: BLE001 - stopping: a judge cancelled or gone is no fault
                    if not self.stop.is_set():
                        raise
                finally:
                    judges.put((client, ready))
            with ThreadPoolExecutor(max_workers=len(started)) as pool:
                pending = {pool.submit(task, s) for s in todo}
                cancelled = False
                while pending:
                    finished, pending = wait(pending, timeout=0.2, return_when=FIRST_EXCEPTION)
                    for future in finished:
                        if not future.cancelled():
                            future.result()
                    if self.stop.is_set() and not cancelled:
                        cancelled = True
                        for future in pending:
                            future.cancel()
                        for client in started:        # the gradings in flight end now; dropped
                            client.cancel()
        finally:
            while not judges.empty():
                client, folder = judges.get()
                if folder is not None:
                    self._dispose(client, folder)
            for client in started:
                client.close()

    def _prepare(self, client) -> Path:
        folder = self._folder()
        if self.sandboxed:
            client.prepare_sandbox(folder)
        return folder

    def _dispose(self, client, folder: Path) -> None:
        if self.sandboxed:
            try:
                client.close_sandbox(folder)              # every process of this student gone
            except (ToolError, UsageError, Cancelled, OSError):
                if not self.stop.is_set():
                    raise
        shutil.rmtree(folder, ignore_errors=True)

    def grade_student(self, student: str, client, folder: Path | None) -> None:
        src = self.root / student
        before = _fingerprint(src)
        for pid in self.problems:
            if (student, pid) in self.cells:
                continue                                   # finished before the interruption
            if self.stop.is_set():
                return
            original = src / f"{pid}.py"
            shown = _shown(original)
            if not original.is_file() and not original.is_symlink():
                cell = _error_cell(student, pid, "missing", t("grade.missing", id=pid, student=student), shown,
                                   t("grade.missing_detail", id=pid, where=shown))
            else:
                if self.on_start:
                    self.on_start(f"{student}/{pid}")
                cell = self._grade_one(student, pid, client, folder, original, shown)
                if cell is None:
                    return                                 # cut short by Ctrl-C: no grade
            with self._lock:
                if self.stop.is_set() and cell.outcome == "tool-error":
                    return
                self.cells[(student, pid)] = cell
            if self.on_done:
                self.on_done(cell, before)
        if _fingerprint(src) != before:
            with self._lock:
                self.warnings.append(t("grade.changed", student=student))

    def _grade_one(self, student: str, pid: str, client, folder: Path, original: Path,
                   shown: str) -> Cell | None:
        skipped = copy_folder(original.parent, folder)   # read-only in the sandbox: nothing there can change it
        if self.sandboxed:
            client.scrub_sandbox(folder)      # every process of the student ended, and their folder copied afresh
        if original.name in skipped:          # a link, or too large: not graded, and said so
            why = t(f"grade.skipped_{skipped[original.name]}", file=shown, mib=MAX_FILE_BYTES >> 20)
            return _error_cell(student, pid, "error", why, shown, why)
        limit = rules.time_limit(bank.get(pid), self.full, self.time_limit)
        try:
            report = client.grade(pid, str(folder / f"{pid}.py"), self.seed, full=self.full, time_limit=limit,
                                  shown=shown, sandbox=str(folder) if self.sandboxed else None,
                                  writable=None if self.sandboxed else [str(folder)],
                                  hide=None if self.sandboxed else self.hide)
            cell = _cell(student, pid, report, original, folder, shown)
            with self._lock:
                self.kept[(student, pid)] = (report, original, str(folder), shown, cell.replay)
            return cell
        except (ToolError, UsageError, Cancelled) as exc:
            # Ctrl-C reaches the judges too: a grade cut short by it is no grade, and is dropped
            if self.stop.is_set() or isinstance(exc, Cancelled) or self.stop.wait(0.5):
                return None
            msg = t("grade.tool_error", error=exc)
            return _error_cell(student, pid, "tool-error", msg.splitlines()[0], shown, msg)


def _error_cell(student: str, pid: str, outcome: str, message: str, shown: str, detail: str) -> Cell:
    cell = Cell(student, pid, outcome, ERROR, message=message, file=shown, detail=detail)
    cell.exercism = {"version": 3, "status": ERROR, "message": detail, "tests": [],
                     "attn_drill": {"problem": pid, "student": student, "file": shown}}
    return cell


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path.resolve())


# ---------------------------------------------------------------- outputs
def _suffix(shard) -> str:
    return f"-shard{shard[0]}of{shard[1]}" if shard else ""


def write_junit(path: Path, students: list[str], problems: list[str], cells: dict, seed: int) -> None:
    x = printable       # no control character may reach the XML (it would not be XML any more)
    suites = ET.Element("testsuites", name="attn-drill")
    totals = dict(tests=0, failures=0, errors=0, skipped=0, time=0.0)
    for s in students:
        row = [cells[(s, p)] for p in problems if (s, p) in cells]
        failures = sum(c.status == FAIL for c in row)
        errors = sum(c.status == ERROR for c in row)
        t = sum(c.seconds for c in row)
        skipped = [(c, case) for c in row for case in (c.exercism or {}).get("attn_drill", {}).get("skipped", [])]
        suite = ET.SubElement(suites, "testsuite", name=x(s), tests=str(len(row) + len(skipped)),
                              failures=str(failures), errors=str(errors), skipped=str(len(skipped)), time=f"{t:.3f}")
        props = ET.SubElement(suite, "properties")
        ET.SubElement(props, "property", name="seed", value=str(seed))
        for c in row:
            case = ET.SubElement(suite, "testcase", classname=x(s), name=c.problem, time=f"{c.seconds:.3f}",
                                 file=x(c.file))
            if c.status != PASS:
                tag = "failure" if c.status == FAIL else "error"
                el = ET.SubElement(case, tag, message=x(f"{c.outcome}: {c.message}"[:1000]), type=c.outcome)
                el.text = x(c.detail)
            out = (c.exercism or {}).get("attn_drill", {}).get("output")
            if out:
                ET.SubElement(case, "system-out").text = x(out)
        for c, case in skipped:      # a case not run here is its own testcase, marked skipped
            el = ET.SubElement(suite, "testcase", classname=x(s), name=f"{c.problem}[{case['name']}]", time="0",
                               file=x(c.file))
            ET.SubElement(el, "skipped", message=x(case["reason"][:1000]))
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
def isolation(no_sandbox: bool = False) -> tuple[bool, str]:
    """(sandboxed, what the output says about the isolation). Without an OS sandbox and without
    --no-sandbox, grading is refused."""
    ok, why = os_sandbox.available()
    if ok and not no_sandbox:
        return True, t("grade.sandboxed")
    if not no_sandbox:
        raise UsageError(t("grade.require_sandbox", why=why))
    return False, t("grade.not_sandboxed", why=why or "--no-sandbox")


# ---------------------------------------------------------------- the journal, and --resume
class Journal:
    """--out's record of the grades finished so far: a line of options, then one line per grade, each
    appended (and flushed) as it arrives, so Ctrl-C or a kill loses at most the grades in flight."""

    def __init__(self, out: Path):
        self.path = out / JOURNAL
        self._lock = threading.Lock()
        self._fh = None

    def start(self, meta: dict, kept: list[dict]) -> None:
        """A fresh journal holding `meta` and the lines `kept` (a resumed run's finished grades)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(json.dumps({"journal": 1, "meta": meta}, ensure_ascii=False) + "\n")
            for line in kept:
                fh.write(json.dumps(line, ensure_ascii=False) + "\n")
        os.replace(tmp, self.path)
        self._fh = open(self.path, "a", encoding="utf-8")

    def add(self, cell: Cell, fingerprint: str) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.write(json.dumps({"cell": asdict(cell), "fingerprint": fingerprint}, ensure_ascii=False)
                               + "\n")
                self._fh.flush()

    def close(self, remove: bool) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None
        if remove:
            self.path.unlink(missing_ok=True)

    def read(self) -> tuple[dict, list[dict]]:
        """(the options, the finished grades); UsageError when there is nothing to resume."""
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
            head = json.loads(lines[0])
            meta = head["meta"]
        except (OSError, ValueError, IndexError, KeyError, TypeError):
            raise UsageError(t("grade.nothing_to_resume", out=_shown(self.path.parent))) from None
        done = []
        names = {f.name for f in fields(Cell)}
        for line in lines[1:]:
            try:
                item = json.loads(line)
                item["cell"] = Cell(**{k: v for k, v in item["cell"].items() if k in names})
            except (ValueError, KeyError, TypeError):
                continue                   # a line cut by a kill: that grade is done again
            done.append(item)
        return meta, done


def _resumed(journal: Journal, root: Path, problems: list[str], shard_text, seed, full: bool,
             time_limit, warn) -> tuple[dict, dict]:
    """The options of the interrupted run (what the command line gives must agree) and its finished
    grades still valid: {(student, problem): Cell}."""
    meta, done = journal.read()
    given = {"root": str(root), "problems": problems or None, "shard": shard_text, "seed": seed,
             "full": full or None, "time_limit": time_limit}
    differ = [k for k, v in given.items() if v is not None and v != meta.get(k)]
    if differ:
        raise UsageError(t("grade.resume_differs", out=_shown(journal.path.parent), options=", ".join(
            f"{k} {meta.get(k)!r}" for k in differ)))
    cells, changed = {}, set()
    for item in done:
        c = item["cell"]
        folder = root / c.student
        if not folder.is_dir() or _fingerprint(folder) != item.get("fingerprint"):
            changed.add(c.student)
            continue
        cells[(c.student, c.problem)] = c
    for student in sorted(changed):
        warn(t("grade.resume_changed", student=student))
    return meta, cells


def grade(root: Path, problems: list[str], workers: int | None, shard_text: str | None, out: Path,
          seed: int | None, full: bool, time_limit: float | None, memory_gb: float | None,
          fail_under: float | None, as_json: bool, no_sandbox: bool = False, resume: bool = False,
          html: Path | None = None) -> int:
    if time_limit is not None and time_limit <= 0:
        raise UsageError(t("grade.time_limit"))
    if workers is not None and workers < 1:
        raise UsageError(t("grade.workers"))
    if fail_under is not None and not 0 <= fail_under <= 100:
        raise UsageError(t("grade.fail_under"))
    root = root.resolve()
    journal = Journal(out)
    done: dict = {}
    if resume:
        meta, done = _resumed(journal, root, problems, shard_text, seed, full, time_limit, render.warn)
        problems, shard_text, seed = meta["problems"], meta["shard"], meta["seed"]
        full, time_limit = bool(meta["full"]), meta["time_limit"]
    shard = parse_shard(shard_text)
    if shard and shard[1] > 1 and seed is None:
        raise UsageError(t("grade.shard_seed"))
    everyone = students_of(root)
    if not everyone:
        raise UsageError(t("grade.no_students", root=root, name=root.name))
    problems = problems_for(root, everyone, problems)
    students = shard_of(everyone, shard)
    seed = random.randrange(1_000_000) if seed is None else seed
    workers = workers or max(1, os.cpu_count() or 1)
    sandboxed, isolation_note = isolation(no_sandbox)
    con = render.console(stderr=as_json)
    where = t("grade.shard", i=shard[0], n=shard[1]) if shard else ""
    con.print(view.grade_heading(len(students), len(everyone), where, problems,
                                 min(workers, max(1, len(students))), seed, full))
    con.print(view.isolation_line(sandboxed, isolation_note))
    if not resume and (out / JOURNAL).is_file():
        render.say(t("grade.restarted", out=_shown(out)), "yellow", con)
    meta = {"root": str(root), "problems": problems, "shard": shard_text, "seed": seed, "full": full,
            "time_limit": time_limit}
    journal.start(meta, [{"cell": asdict(c), "fingerprint": _fingerprint(root / c.student)} for c in done.values()])
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="attn-drill-grade-") as scratch:
        batch = Batch(root, problems, seed, full, time_limit, memory_gb, Path(scratch), None,
                      sandboxed=sandboxed, hide=[str(out.resolve())], done=done)
        left = batch.left(students)
        if done:
            render.say(t("grade.resuming", done=len(students) * len(problems) - left,
                         n=len(students) * len(problems)), "dim", con)

        def interrupted():
            if batch.stop.is_set():
                raise KeyboardInterrupt           # a second Ctrl-C: stop now
            batch.stop.set()
        with view.GradeProgress(con, left) as shown, ctrl_c(interrupted):
            def finished(cell, fingerprint):
                journal.add(cell, fingerprint)
                shown.finished(cell)
            batch.on_done, batch.on_start = finished, shown.started
            batch.run(students, workers)
    seconds = time.perf_counter() - t0
    stopped = batch.stop.is_set()
    journal.close(remove=not stopped)
    cells = batch.cells
    graded = [c for c in cells.values()]
    passed = sum(c.outcome == "pass" for c in graded)
    rate = 100.0 * passed / len(graded) if graded else 100.0
    meta = {"seed": seed, "full": full, "shard": f"{shard[0]}/{shard[1]}" if shard else None,
            "seconds": round(seconds, 2), "passed": passed, "graded": len(graded),
            "pass_rate": round(rate, 2), "warnings": batch.warnings,
            "tool_errors": sum(c.outcome == "tool-error" for c in graded),
            "sandbox": "bubblewrap" if sandboxed else None, "isolation": isolation_note,
            "cases_skipped": sum(c.cases_skipped for c in graded),
            "interrupted": stopped, "left": batch.left(students)}
    skip_note = ""
    if meta["cases_skipped"]:
        reason = next(c.skipped_reason for c in graded if c.cases_skipped)
        skip_note = t("grade.skipped", n=meta["cases_skipped"], reason=reason)
        batch.warnings.append(skip_note)
    summary = write_outputs(out, students, problems, cells, seed, shard, meta)
    title = t("grade.title", passed=passed, n=len(graded), rate=f"{rate:.0f}", seed=seed, where=where)
    if html is not None:
        outputs.write_class_html(html, students, problems, cells, batch.kept, title,
                                 [isolation_note, *batch.warnings], lang())
    if as_json:
        render.print_json(summary)
    else:
        con.print(view.class_table(students, problems, cells, title, con.width))
        con.print(view.grade_footer(_shown(out), _suffix(shard), seconds))
        if outputs.in_github():
            outputs.annotate_grade(cells, batch.kept)
    if html is not None:
        render.say(t("html.wrote", path=html), "dim", stderr=as_json)
    for w in batch.warnings:
        render.warn(w)
    if stopped:
        again = f"attn-drill grade {_shown(root)}" + ("" if _shown(out) == "grades" else f" --out {_shown(out)}") + \
            " --resume"
        render.say(t("grade.interrupted", done=len(graded), n=len(students) * len(problems), out=_shown(out),
                     command=again), "yellow", stderr=True)
        return 130
    if meta["tool_errors"]:
        render.error(t("grade.tool_errors", n=meta["tool_errors"]))
        return 2
    if fail_under is not None and rate < fail_under:
        render.say(t("grade.under", rate=f"{rate:.1f}", limit=f"{fail_under:g}"), "red", stderr=True)
        return 1
    return 0
