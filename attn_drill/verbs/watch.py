"""`watch`: re-grade on every save, with one warm worker so a re-check never re-imports torch.

In a terminal the screen is redrawn from the top: a line per file, then the first screen of the
latest report (the verdict stays at the top, whatever the terminal's height). A save shows
"checking…" at once; a save while a check runs cancels that check and grades the new content; a
file that cannot run (a syntax error, a missing name) is reported without the worker, in a
fraction of a second. Keys: d details, r re-check, q quit. The screen follows a resize.

`loop(w, changes)` is the synchronous form (one grading after another) that tests drive with a
fake client and a list of saves; `Live` runs the same Watcher with threads for the terminal.
Each check is recorded in the workspace progress.
"""
from __future__ import annotations

import os
import queue
import random
import select
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Iterable

from .. import bank, render, rules
from ..client import JudgeClient
from ..errors import Cancelled, ToolError, UsageError
from ..i18n import t, tn
from ..progress import clock, rules as progress
from ..render import watching as view
from .check import resolve, static_report, typed_path
from .terminal import cbreak, ctrl_c


def _problem_file(path: Path, cwd: Path) -> str | None:
    """The problem id if `path` is <id>.py directly in `cwd`."""
    if path.suffix == ".py" and path.parent == cwd and path.stem in bank.ids():
        return path.stem
    return None


def changes_from_disk(folders: list[Path], wanted, stop: threading.Event | None = None) -> Iterable[set[Path]]:
    """Sets of changed files (only those `wanted(path)` accepts), from the OS file watcher."""
    import watchfiles

    def keep(_change, p: str) -> bool:
        return wanted(Path(p))

    # step: yield 50 ms after the last event of a save. The watcher blocks on OS events; once a second
    # it yields an empty set so the loop can catch a save made before the watcher was armed.
    for batch in watchfiles.watch(*folders, watch_filter=keep, debounce=300, step=50, recursive=False,
                                  raise_interrupt=False, yield_on_timeout=True, rust_timeout=1000,
                                  stop_event=stop):
        yield {Path(p) for _, p in batch}


def _signature(file: Path):
    try:
        st = file.stat()
        return st.st_mtime_ns, st.st_size
    except OSError:
        return None


class Watcher:
    """The state of one watch session: targets, seed, warm client, last reports, what is running."""

    def __init__(self, targets: list[tuple[str, Path]], seed: int, full: bool, lang: str, cwd: Path,
                 client, con=None, follow_new: bool = False, typed: str | None = ""):
        self.targets = {pid: file.resolve() for pid, file in targets}
        self.seed, self.full, self.lang, self.cwd = seed, full, lang, cwd.resolve()
        self.client = client
        self.con = con or render.console()
        self.follow_new = follow_new  # no id given: pick up problem files created while watching
        self.typed = typed if len(targets) == 1 else ""
        self.reports: dict = {}
        self.seconds: dict = {}       # pid -> seconds its last check took
        self.checking: set = set()    # pids being checked now
        self.graded_sig: dict = {}    # pid -> (mtime_ns, size) of the file when it was last graded
        self.latest: str | None = None
        self.count = 0
        self.checked_at: float | None = None   # when the latest check finished (attn_drill.progress.clock)
        self.started: dict = {}                # pid -> time.monotonic() its running check began
        self.limits = {pid: rules.time_limit(bank.get(pid), full) for pid in self.targets}
        self.details = False
        self.message = ""             # one line under the header: an error of the tool, a key's effect

    def wanted(self, path: Path) -> bool:
        path = path.resolve() if path.exists() else path.absolute()
        if path in self.targets.values():
            return True
        return self.follow_new and _problem_file(path, self.cwd) is not None

    def folders(self) -> list[Path]:
        return sorted({f.parent for f in self.targets.values()} | ({self.cwd} if self.follow_new else set()))

    def stale(self) -> list[str]:
        """Problems whose file changed since it was graded without an event reaching us."""
        return [pid for pid, file in self.targets.items()
                if pid not in self.checking and file.is_file() and self.graded_sig.get(pid) != _signature(file)]

    def on_change(self, paths: set[Path]) -> list[str]:
        if not paths:
            return self.stale()
        pids = []
        for p in paths:
            p = p.resolve() if p.exists() else p.absolute()
            pid = next((k for k, f in self.targets.items() if f == p), None)
            if pid is None and self.follow_new:
                pid = _problem_file(p, self.cwd)
                if pid:
                    self.targets[pid] = p
                    self.limits[pid] = rules.time_limit(bank.get(pid), self.full)
            if pid and pid not in pids:
                pids.append(pid)
        return pids

    # -- grading one file
    def grade_one(self, pid: str):
        """The report for pid's file now (None: the file is missing mid-save). Raises Cancelled."""
        file = self.targets[pid]
        if not file.is_file():
            return None
        self.graded_sig[pid] = _signature(file)
        self.started[pid] = time.monotonic()
        t0 = time.perf_counter()
        r = static_report(pid, file, self.seed, self.full, self.typed)   # no worker needed
        if r is None:
            r = self.client.grade(pid, str(file), self.seed, full=self.full, typed=self.typed,
                                  time_limit=rules.time_limit(bank.get(pid), self.full), shown=_shown(file))
        self.seconds[pid] = time.perf_counter() - t0
        return r

    def record(self, pid: str, r) -> None:
        self.reports[pid] = r
        self.latest = pid
        self.count += 1
        self.checked_at = clock.now()
        self.checking.discard(pid)
        self.started.pop(pid, None)
        try:
            progress.record_check(self.cwd, r)
        except OSError as exc:
            self.message = str(exc)

    def step(self, pids: list[str]) -> None:
        """Grade these now, one after the other, and draw (the synchronous form)."""
        graded = False
        for pid in pids:
            self.checking.add(pid)
            try:
                r = self.grade_one(pid)
            except (ToolError, UsageError) as exc:
                self.checking.discard(pid)
                self.message = t("watch.tool_error", error=str(exc).splitlines()[0] if str(exc) else exc)
                continue
            if r is None:
                self.checking.discard(pid)
                self.reports.pop(pid, None)
                continue
            self.record(pid, r)
            graded = True
        self.client.start()  # a worker killed by a hang respawns now, while the user edits
        if graded or not pids:
            self.draw()

    # -- the screen
    def screen(self, height: int | None = None):
        return view.watch_screen(self, height)

    def draw(self) -> None:
        con = self.con
        if not con.is_terminal:
            con.print(self.screen())
            return
        height = con.size.height
        with con.capture() as cap:
            con.print(self.screen(height))
        lines = cap.get().split("\n")
        if len(lines) > height - 1 and not self.details:   # d shows every line: the terminal scrolls
            lines = lines[: height - 2] + [t("watch.more_below")]
        con.clear()
        con.file.write("\n".join(lines).rstrip("\n") + "\n")
        con.file.flush()


class LinesWatcher(Watcher):
    """`watch --format lines`: each check as lines for an editor's background problem matcher, between
    a begin and an end line (render.lines.WATCH_BEGIN, WATCH_END); no screen, no keys."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fresh: list[str] = []

    def step(self, pids: list[str]) -> None:
        from ..render import lines
        files = [self.targets[p] for p in pids if p in self.targets and self.targets[p].is_file()]
        if files:
            lines.print_lines([lines.WATCH_BEGIN + " " + " ".join(_shown(f) for f in files)])
        super().step(pids)

    def record(self, pid: str, r) -> None:
        super().record(pid, r)
        self.fresh.append(pid)

    def draw(self) -> None:
        from ..render import lines
        from . import outputs
        if self.message:
            render.error(self.message)
            self.message = ""
        for pid in self.fresh:
            r = self.reports[pid]
            found = outputs.findings(r, self.targets[pid])
            lines.print_lines([f.line_text() for f in found] +
                              [f"{lines.WATCH_END} {r.file} {r.status.upper()} ({len(found)})"])
        self.fresh = []


def _shown(file: Path) -> str:
    try:
        return str(file.relative_to(Path.cwd()))
    except ValueError:
        return str(file)


def loop(w: Watcher, changes: Iterable[set[Path]]) -> int:
    """The synchronous form: first check, then one re-check per batch of saves. Ctrl-C ends it."""
    try:
        w.step(list(w.targets))
        for paths in changes:
            pids = w.on_change(paths)
            if pids:
                w.step(pids)
    except KeyboardInterrupt:
        pass
    render.say("\n" + tn("watch.stopped", w.count), "dim", w.con)
    return 0


class Live:
    """The terminal form: file events, keys, resizes and finished gradings meet in one queue; one
    grading thread works through what is due, and a newer save cancels the check it makes stale."""

    def __init__(self, w: Watcher):
        self.w = w
        self.events: queue.SimpleQueue = queue.SimpleQueue()  # put() is safe in a signal handler
        self.due: list[str] = []          # pids to grade, in order
        self.running: str | None = None
        self.lock = threading.Condition()
        self.stop = threading.Event()

    def grader(self) -> None:
        while not self.stop.is_set():
            with self.lock:
                while not self.due and not self.stop.is_set():
                    self.lock.wait(0.5)
                if self.stop.is_set():
                    return
                pid = self.running = self.due.pop(0)
            try:
                r = self.w.grade_one(pid)
                self.events.put(("done", pid, r))
            except Cancelled:
                self.events.put(("cancelled", pid, None))
            except (ToolError, UsageError, OSError) as exc:
                self.events.put(("error", pid, exc))
            finally:
                with self.lock:
                    self.running = None
                self.w.client.start()

    def want(self, pids: list[str]) -> None:
        """Grade these as soon as possible; a check of one of them in progress is stale: cancel it."""
        with self.lock:
            for pid in pids:
                if pid in self.due:
                    self.due.remove(pid)
                self.due.append(pid)
                self.w.checking.add(pid)
            if self.running in pids:
                self.w.client.cancel()
            self.lock.notify_all()

    def watcher(self, changes) -> None:
        for paths in changes:
            if self.stop.is_set():
                return
            self.events.put(("change", paths, None))

    def keys(self, fd: int) -> None:
        while not self.stop.is_set():
            ready, _, _ = select.select([fd], [], [], 0.3)
            if ready:
                ch = os.read(fd, 1).decode(errors="replace")
                if not ch:
                    return
                self.events.put(("key", ch, None))

    def run(self, changes) -> int:
        w = self.w
        fd = sys.stdin.fileno() if sys.stdin is not None and sys.stdin.isatty() else None
        old = None
        if fd is not None:
            old = cbreak(fd)
        previous = signal.signal(signal.SIGWINCH, lambda *_: self.events.put(("resize", None, None))) \
            if hasattr(signal, "SIGWINCH") and threading.current_thread() is threading.main_thread() else None
        threads = [threading.Thread(target=self.grader, daemon=True),
                   threading.Thread(target=self.watcher, args=(changes,), daemon=True)]
        if fd is not None:
            threads.append(threading.Thread(target=self.keys, args=(fd,), daemon=True))
        for th in threads:
            th.start()
        try:
            with ctrl_c(lambda: self.events.put(("key", "q", None))):  # Ctrl-C: stop between two draws
                self.want(list(w.targets))
                w.draw()                           # at once: the header and "checking…"
                while True:
                    try:
                        kind, a, b = self.events.get(timeout=1.0)
                    except queue.Empty:
                        if w.checking and not w.details:
                            w.draw()                   # the running check's seconds, against its limit
                        continue
                    if kind == "change":
                        pids = w.on_change(a)
                        if pids:
                            w.message = ""
                            self.want(pids)
                            w.draw()
                    elif kind == "done":
                        if b is None:
                            w.checking.discard(a)
                            w.reports.pop(a, None)
                        elif a not in self.due:        # a newer save of it is waiting: this one is stale
                            w.record(a, b)
                        w.draw()
                    elif kind == "cancelled":
                        pass                           # its newer grading is due already
                    elif kind == "error":
                        w.checking.discard(a)
                        w.message = t("watch.tool_error", error=str(b).splitlines()[0] if str(b) else b)
                        w.draw()
                    elif kind == "resize":
                        w.draw()
                    elif kind == "key":
                        ch = a.lower()
                        if ch == "q":
                            break
                        if ch == "d":
                            w.details = not w.details
                            w.draw()
                        elif ch == "r":
                            self.want(list(w.targets))
                            w.draw()
        except KeyboardInterrupt:
            pass
        finally:
            self.stop.set()
            with self.lock:
                self.lock.notify_all()
            if self.running:
                w.client.cancel()
            if old is not None:
                import termios
                termios.tcsetattr(fd, termios.TCSADRAIN, old)
            if previous is not None:
                signal.signal(signal.SIGWINCH, previous)
        render.say("\n" + tn("watch.stopped", w.count), "dim", w.con)
        return 0


def watch(pid: str | None, path: str | None, seed: int | None, full: bool, lang: str, cwd: Path,
          fmt: str = "text") -> int:
    client = JudgeClient().start()  # torch loads while the files are resolved
    try:
        targets = resolve(pid, path, cwd)
        seed = random.randrange(1_000_000) if seed is None else seed
        w = (LinesWatcher if fmt == "lines" else Watcher)(targets, seed, full, lang, cwd, client,
                                                          follow_new=pid is None, typed=typed_path(pid, path))
        stop = threading.Event()
        if fmt == "lines":
            return loop(w, changes_from_disk(w.folders(), w.wanted, stop))
        live = Live(w)
        live.stop = stop
        return live.run(changes_from_disk(w.folders(), w.wanted, stop))
    except KeyboardInterrupt:
        return 0
    finally:
        client.close()
