"""`watch`: re-grade on every save, with one warm worker so a re-check never re-imports torch.

The loop takes its file-change events and its grading client as arguments, so tests can drive it
without a file watcher or torch. Each check is recorded in the workspace progress.
"""
from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Iterable

from rich.text import Text

from .. import bank, render, state
from ..results import PASS
from ..worker import ToolError
from .check import resolve


def _problem_file(path: Path, cwd: Path) -> str | None:
    """The problem id if `path` is <id>.py directly in `cwd`."""
    if path.suffix == ".py" and path.parent == cwd and path.stem in bank.ids():
        return path.stem
    return None


def changes_from_disk(folders: list[Path], wanted) -> Iterable[set[Path]]:
    """Sets of changed files (only those `wanted(path)` accepts), from the OS file watcher."""
    import watchfiles

    def keep(_change, p: str) -> bool:
        return wanted(Path(p))

    # step: yield 50 ms after the last event of a save. The watcher blocks on OS events; once a second
    # it yields an empty set so the loop can catch a save made before the watcher was armed.
    for batch in watchfiles.watch(*folders, watch_filter=keep, debounce=800, step=50, recursive=False,
                                  raise_interrupt=True, yield_on_timeout=True, rust_timeout=1000):
        yield {Path(p) for _, p in batch}


def _signature(file: Path):
    try:
        st = file.stat()
        return st.st_mtime_ns, st.st_size
    except OSError:
        return None


class Watcher:
    """The state of one watch session: targets, seed, warm client, last reports."""

    def __init__(self, targets: list[tuple[str, Path]], seed: int, full: bool, lang: str, cwd: Path,
                 client, con=None, follow_new: bool = False):
        self.targets = {pid: file.resolve() for pid, file in targets}
        self.seed, self.full, self.lang, self.cwd = seed, full, lang, cwd.resolve()
        self.client = client
        self.con = con or render.console()
        self.follow_new = follow_new  # no id given: pick up problem files created while watching
        self.reports: dict = {}
        self.graded_sig: dict = {}  # pid -> (mtime_ns, size) of the file when it was last graded
        self.count = 0

    def wanted(self, path: Path) -> bool:
        path = path.resolve() if path.exists() else path.absolute()
        if path in self.targets.values():
            return True
        return self.follow_new and _problem_file(path, self.cwd) is not None

    def folders(self) -> list[Path]:
        return sorted({f.parent for f in self.targets.values()} | ({self.cwd} if self.follow_new else set()))

    def grade(self, pids: list[str]) -> list[str]:
        """Grade these problems; returns those graded (a file mid-save may be missing)."""
        done = []
        for pid in pids:
            file = self.targets[pid]
            if not file.is_file():
                self.reports.pop(pid, None)
                continue
            spec = bank.get(pid)
            self.graded_sig[pid] = _signature(file)
            self.reports[pid] = self.client.grade(pid, str(file), self.seed, full=self.full,
                                                  time_limit=spec.time_limit * (3 if self.full else 1))
            state.record_check(self.cwd, self.reports[pid])
            done.append(pid)
        self.client.start()  # a worker killed by a hang respawns now, while the user edits
        return done

    def stale(self) -> list[str]:
        """Problems whose file changed since it was graded without an event reaching us."""
        return [pid for pid, file in self.targets.items()
                if file.is_file() and self.graded_sig.get(pid) != _signature(file)]

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
            if pid and pid not in pids:
                pids.append(pid)
        return pids

    def show(self, graded: list[str], seconds: float) -> None:
        con = self.con
        if con.is_terminal:
            con.clear()
        self.count += 1
        files = ", ".join(f.name for f in self.targets.values())
        con.print(Text.assemble(("watching ", "dim"), (files, "bold"),
                                f"   seed {self.seed}   check #{self.count} at {time.strftime('%H:%M:%S')} "
                                f"({seconds:.1f} s)", ("   save to re-check · Ctrl-C to stop", "dim")))
        for pid in graded:
            con.print(render.report(self.reports[pid], bank.get(pid).title.get(self.lang), self.lang))
        others = [pid for pid in self.reports if pid not in graded]
        for pid in others:
            r = self.reports[pid]
            con.print(Text.assemble(("PASS" if r.status == PASS else r.status.upper(),
                                     "green" if r.status == PASS else "red"), f"  {pid}  (unchanged)"))
        missing = [pid for pid in self.targets if pid not in self.reports]
        for pid in missing:
            con.print(Text(f"waiting for {self.targets[pid].name} to be saved", style="yellow"))

    def step(self, pids: list[str]) -> None:
        t0 = time.perf_counter()
        try:
            graded = self.grade(pids)
        except (ToolError, ValueError) as exc:
            self.con.print(f"[red]error:[/red] {exc}\n[dim]still watching; save again to retry[/dim]")
            return
        if graded or not pids:
            self.show(graded, time.perf_counter() - t0)


def loop(w: Watcher, changes: Iterable[set[Path]]) -> int:
    """First check, then one re-check per batch of saves. Ctrl-C ends it with exit 0."""
    try:
        w.step(list(w.targets))
        for paths in changes:
            pids = w.on_change(paths)
            if pids:
                w.step(pids)
    except KeyboardInterrupt:
        pass
    w.con.print(Text(f"\nstopped watching after {w.count} check{'s' if w.count != 1 else ''}", style="dim"))
    return 0


def watch(pid: str | None, path: str | None, seed: int | None, full: bool, lang: str, cwd: Path) -> int:
    from ..worker import WorkerClient
    client = WorkerClient().start()  # torch loads while the files are resolved
    try:
        targets = resolve(pid, path, cwd)
        seed = random.randrange(1_000_000) if seed is None else seed
        w = Watcher(targets, seed, full, lang, cwd, client, follow_new=pid is None)
        return loop(w, changes_from_disk(w.folders(), w.wanted))
    except KeyboardInterrupt:
        return 0
    finally:
        client.close()
