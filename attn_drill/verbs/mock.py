"""`mock`: a timed mock interview in a fresh folder, with a live countdown and a scorecard.

Where the state lives: the mock's own folder holds the live record (`<mock>/.attn-drill/state.json`,
one entry in `mocks` with `active` while the clock runs), so `attn-drill check` run inside that folder
from another terminal counts toward the mock through `state.record_check`. The workspace the mock was
started from keeps a link (`folder`, `status`, `problem_ids`) and, at the end, the scorecard, which
`progress` lists. Passes made in a mock also mark the problem passed in the workspace.

Timing: `elapsed` holds the seconds of finished segments; `segment_start` the wall time the running
segment began; `heartbeat` is refreshed every few seconds so a mock whose process was killed resumes
with the time it really had left. Ctrl-C pauses (closes the segment); `--resume` opens a new one.
"""
from __future__ import annotations

import json
import os
import random
import select
import sys
import threading
import time
from pathlib import Path

from rich.console import Group
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from .. import bank, render, state
from ..results import PASS
from ..worker import ToolError
from .check import UsageError, grade_file
from .practice import duration, mock_table, mock_summary
from .scaffold import stub_text

HEARTBEAT_S = 5.0
KEYS = "keys: [bold]c[/bold] check all · [bold]h[/bold] hint · [bold]s[/bold] statements · " \
       "[bold]f[/bold] finish now · [bold]Ctrl-C[/bold] pause"


# ---------------------------------------------------------------- choosing and scaffolding
def pick(count: int, difficulty: str | None, tag: str | None, chosen: list[str], seed: int,
         statuses: dict) -> list[str]:
    """Unsolved problems first, then solved ones; shuffled by `seed` within each group."""
    if chosen:
        for pid in chosen:
            bank.get(pid)  # unknown ids raise with suggestions
        return list(dict.fromkeys(chosen))
    specs = [s for s in bank.all_specs() if (not tag or tag in s.tags) and
             (not difficulty or s.difficulty == difficulty)]
    if not specs:
        raise UsageError("no problem matches those filters; see them with: attn-drill list")
    rng = random.Random(seed)
    unsolved = [s.id for s in specs if statuses.get(s.id) != "passed"]
    solved = [s.id for s in specs if statuses.get(s.id) == "passed"]
    rng.shuffle(unsolved)
    rng.shuffle(solved)
    return (unsolved + solved)[:count]


def make_folder(parent: Path) -> Path:
    """A fresh mock-YYYYmmdd-HHMM folder; never an existing one."""
    parent.mkdir(parents=True, exist_ok=True)
    base = f"mock-{time.strftime('%Y%m%d-%H%M')}"
    for n in range(1, 1000):
        folder = parent / (base if n == 1 else f"{base}-{n}")
        try:
            folder.mkdir()
            return folder
        except FileExistsError:
            continue
    raise UsageError(f"too many mock folders named {base}-* in {parent}")


def _statements_md(pids: list[str], lang: str) -> str:
    parts = []
    for i, pid in enumerate(pids, 1):
        spec = bank.get(pid)
        parts.append(f"## {i}. {spec.title.get(lang)} (`{pid}.py`, {spec.difficulty}, ~{spec.minutes} min)\n\n"
                     f"{spec.statement.get(lang)}\n\nInterface: {', '.join(spec.interface)}. "
                     f"Forbidden: {', '.join(spec.all_forbidden)}.\n")
    return "\n".join(parts)


def start(count: int, minutes: float | None, seconds: float | None, difficulty: str | None, tag: str | None,
          chosen: list[str], seed: int | None, parent: Path, as_json: bool, lang: str, cwd: Path) -> int:
    seed = random.randrange(1_000_000) if seed is None else seed
    if count < 1:
        raise UsageError("--count must be at least 1")
    pids = pick(count, difficulty, tag, chosen, seed, state.statuses(cwd))
    total = seconds if seconds is not None else \
        (minutes * 60 if minutes is not None else sum(bank.get(p).minutes for p in pids) * 60)
    if total <= 0:
        raise UsageError("the mock needs some time: --minutes must be more than 0")
    for m in state.load(cwd)["mocks"]:
        if m.get("status") in ("running", "paused") and m.get("folder"):
            _ui(as_json).print(f"[yellow]note:[/yellow] mock {m['id']} is unfinished; "
                               f"continue it with: attn-drill mock --resume")
    folder = make_folder(parent)
    for pid in pids:
        (folder / f"{pid}.py").write_text(stub_text(pid), encoding="utf-8")
    (folder / "MOCK.md").write_text(f"# Mock interview {folder.name}\n\n" + _statements_md(pids, lang),
                                    encoding="utf-8")
    now = time.time()
    live = {"id": folder.name, "active": False, "status": "paused", "seed": seed, "seconds": float(total),
            "elapsed": 0.0, "segment_start": None, "heartbeat": now, "started": now, "finished": None,
            "pid": None, "lang": lang, "workspace": os.path.relpath(cwd.resolve(), folder.resolve()),
            "problems": {pid: {"checks": 0, "hints": 0, "solution_viewed": False, "passed_at": None,
                               "passed_after": None, "last": None} for pid in pids}}
    state.update(folder, lambda d: d["mocks"].append(live))
    link = {"id": folder.name, "folder": os.path.relpath(folder.resolve(), cwd.resolve()), "status": "paused",
            "started": now, "seconds": float(total), "elapsed": 0.0, "problem_ids": pids, "seed": seed}
    state.update(cwd, lambda d: d["mocks"].append(link))
    return Session(folder, cwd, as_json, lang).run(first=True)


def resume(as_json: bool, lang: str | None, cwd: Path) -> int:
    """Continue the latest unfinished mock: from the workspace (through its link) or from inside its folder."""
    data = state.load(cwd)
    open_ = [m for m in data["mocks"] if m.get("status") in ("running", "paused")]
    if not open_:
        raise UsageError("no paused mock interview here; start one with: attn-drill mock")
    m = open_[-1]
    if m.get("folder"):
        folder = (cwd / m["folder"]).resolve()
        if not state.state_dir(folder).is_dir():
            raise UsageError(f"the mock folder {folder} is gone; start a new one with: attn-drill mock")
        workspace = cwd
    else:
        folder, workspace = cwd, (cwd / m.get("workspace", "..")).resolve()
    live = _live(folder)
    return Session(folder, workspace, as_json, lang or live.get("lang", "en")).run(first=False)


def _live(folder: Path) -> dict:
    mocks = [m for m in state.load(folder)["mocks"] if isinstance(m.get("problems"), dict)]
    if not mocks:
        raise UsageError(f"{folder} holds no mock interview")
    return mocks[-1]


def _ui(as_json: bool):
    """With --json the scorecard owns stdout: the interactive screen goes to stderr."""
    return render.console(stderr=as_json)


def _alive(pid) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False


# ---------------------------------------------------------------- the running mock
class Session:
    def __init__(self, folder: Path, workspace: Path, as_json: bool, lang: str):
        self.folder, self.workspace, self.as_json, self.lang = folder.resolve(), workspace.resolve(), as_json, lang
        self.con = _ui(as_json)
        self.client = None
        self.checking: threading.Thread | None = None
        self.last: dict = {}          # pid -> one-line result of the latest in-mock check
        self.notes: list = []         # renderables to print above the live screen
        self.asking_hint = False
        self.asking_finish = False
        self.mock: dict = {}

    # -- state
    def _update_mock(self, fn):
        mid = self.mock["id"]

        def apply(d):
            for m in d["mocks"]:
                if m.get("id") == mid and isinstance(m.get("problems"), dict):
                    fn(m)
                    return dict(m)
            raise UsageError(f"the mock {mid} is missing from {self.folder}")
        self.mock = state.update(self.folder, apply, self._warn)
        return self.mock

    def _update_link(self, fn) -> None:
        def apply(d):
            for m in d["mocks"]:
                if m.get("folder") and (self.workspace / m["folder"]).resolve() == self.folder:
                    fn(m)
        if self.workspace != self.folder and state.state_dir(self.workspace).is_dir():
            try:
                state.update(self.workspace, apply, self._warn)
            except OSError:
                pass

    def _warn(self, message: str) -> None:
        self.con.print(f"[yellow]warning:[/yellow] {message}")

    def _open_segment(self) -> None:
        now = time.time()
        mine = os.getpid()

        def fn(m):
            if m.get("status") == "finished":
                raise UsageError(f"the mock {m['id']} is already finished; start another: attn-drill mock")
            if m.get("status") == "running" and m.get("segment_start") is not None:
                if m.get("pid") != mine and _alive(m.get("pid")) and now - m.get("heartbeat", 0) < 3 * HEARTBEAT_S:
                    raise UsageError(f"the mock {m['id']} is running in another terminal (process {m['pid']})")
                # its process died without pausing: count the time up to its last heartbeat
                m["elapsed"] = m.get("elapsed", 0.0) + max(0.0, m.get("heartbeat", now) - m["segment_start"])
            m.update(status="running", active=True, segment_start=now, heartbeat=now, pid=mine)
        self.mock = {"id": _live(self.folder)["id"]}
        self._update_mock(fn)
        self._update_link(lambda link: link.update(status="running"))

    def _close_segment(self, status: str) -> None:
        now = time.time()

        def fn(m):
            m["elapsed"] = round(state.mock_elapsed(m, now), 2)
            m.update(segment_start=None, heartbeat=now, active=False, status=status, pid=None)
        self._update_mock(fn)
        self._update_link(lambda link: link.update(status=status, elapsed=self.mock["elapsed"]))

    # -- grading
    def _client(self):
        if self.client is None:
            from ..worker import WorkerClient
            self.client = WorkerClient().start()
        return self.client

    def _stop_client(self) -> None:
        c, self.client = self.client, None
        if c is None:
            return
        if c.proc is not None and not getattr(c, "_ready", True) and c.proc.poll() is None:
            c.proc.kill()  # still importing torch: no need to wait for it to answer
        c.close()

    def _files(self) -> list[tuple[str, Path]]:
        return [(pid, self.folder / f"{pid}.py") for pid in self.mock["problems"]]

    def _grade_all(self, record: bool) -> dict:
        """Grade every mock file now; an untouched stub is 'not attempted' without grading."""
        out = {}
        client = self._client()
        for pid, file in self._files():
            if not file.is_file():
                out[pid] = {"status": "missing", "message": f"{file.name} is missing"}
                continue
            if file.read_text(encoding="utf-8", errors="replace") == stub_text(pid):
                out[pid] = {"status": "not attempted", "message": "the stub is untouched"}
                continue
            spec = bank.get(pid)
            try:
                r = grade_file(client, pid, file, self.mock["seed"], time_limit=spec.time_limit)
            except (ToolError, ValueError) as exc:
                out[pid] = {"status": "error", "message": f"the grader failed (not your code): {exc}"[:300]}
                continue
            if record:
                state.record_check(self.folder, r, self._warn)
            first = r.first_failure()
            msg = r.message if r.status != PASS else f"{len(r.cases)} cases pass"
            if first is not None and first.message:
                msg = f"{first.name}: {first.message}"
            out[pid] = {"status": r.status, "message": msg.splitlines()[0] if msg else ""}
        return out

    def _check_in_background(self) -> None:
        if self.checking and self.checking.is_alive():
            return

        def go():
            try:
                self.last = self._grade_all(record=True)
            except Exception as exc:  # noqa: BLE001 - shown on screen; the mock goes on
                self.notes.append(Text(f"check failed: {exc}", style="red"))
        for pid in self.mock["problems"]:
            self.last[pid] = {"status": "checking", "message": ""}
        self.checking = threading.Thread(target=go, daemon=True)
        self.checking.start()

    # -- screen
    def _screen(self) -> Panel:
        m = self.mock
        left = state.mock_left(m)
        t = Table(box=None, pad_edge=False, expand=False)
        for col in ("#", "problem", "file", "checks", "hints", "last check"):
            t.add_column(col, no_wrap=col != "last check")
        for i, (pid, p) in enumerate(m["problems"].items(), 1):
            last = self.last.get(pid) or ({"status": p["last"], "message": ""} if p.get("last") else None)
            if last is None:
                cell = Text("-", style="dim")
            else:
                st = last["status"]
                style = "green" if st == PASS else ("yellow" if st in ("checking", "not attempted") else "red")
                cell = Text.assemble((st.upper() if st in ("pass", "fail", "error") else st, style),
                                     f"  {last['message']}"[:70])
            if p.get("passed_at"):
                cell.append(f"  (green at {duration(p['passed_after'])})", style="green")
            t.add_row(str(i), pid, f"{pid}.py", str(p.get("checks", 0)), str(p.get("hints", 0)), cell)
        clock = Text.assemble(("⏱ ", ""), (f"{duration(left)} left", "bold red" if left < 60 else "bold"),
                              f" of {duration(m['seconds'])}")
        prompt = Text("")
        if self.asking_hint:
            prompt = Text(f"hint for which problem? press 1-{len(m['problems'])} (any other key cancels)",
                          style="bold cyan")
        elif self.asking_finish:
            prompt = Text("finish now and grade? press y to confirm, any other key to go on", style="bold cyan")
        return Panel(Group(clock, t, Text.from_markup(KEYS), prompt), title=f"mock {m['id']}",
                     subtitle=f"edit the files in {os.path.relpath(self.folder)}", border_style="cyan")

    def _print_statements(self) -> None:
        pids = list(self.mock["problems"])
        self.con.print(render.markdown(_statements_md(pids, self.lang)))

    # -- keys
    def _key(self, ch: str, live) -> str | None:
        """Handle one key; returns 'finish' to end the mock now."""
        if self.asking_hint:
            self.asking_hint = False
            pids = list(self.mock["problems"])
            if ch.isdigit() and 1 <= int(ch) <= len(pids):
                self._hint(pids[int(ch) - 1], live)
            return None
        if self.asking_finish:
            self.asking_finish = False
            return "finish" if ch.lower() == "y" else None
        ch = ch.lower()
        if ch == "c":
            self._check_in_background()
        elif ch == "h":
            if len(self.mock["problems"]) == 1:
                self._hint(next(iter(self.mock["problems"])), live)
            else:
                self.asking_hint = True
        elif ch == "s":
            live.console.print(render.markdown(_statements_md(list(self.mock["problems"]), self.lang)))
        elif ch == "f":
            self.asking_finish = True
        elif ch == "q":
            raise KeyboardInterrupt
        return None

    def _hint(self, pid: str, live) -> None:
        from .practice import _hint_panel
        spec = bank.get(pid)
        before, now = state.record_hint(self.folder, pid, len(spec.hints), self._warn)
        if now == before:
            live.console.print(Text(f"all {len(spec.hints)} hints for {pid} are shown already", style="yellow"))
            for i in range(now):
                live.console.print(_hint_panel(spec, i, self.lang))
        else:
            live.console.print(_hint_panel(spec, now - 1, self.lang))
            live.console.print(Text("this hint counts against the mock", style="dim"))

    # -- main loop
    def run(self, first: bool) -> int:
        self._open_segment()
        try:
            if state.mock_left(self.mock) <= 0:
                return self._finish("time was already up")
            return self._interact(first)
        except KeyboardInterrupt:
            return self._pause()
        finally:
            self._stop_client()

    def _interact(self, first: bool) -> int:
        m = self.mock
        con = self.con
        con.print(Text.assemble(("mock interview ", "bold"), (m["id"], "bold cyan"),
                                f": {len(m['problems'])} problem{'s' if len(m['problems']) != 1 else ''}, "
                                f"{duration(state.mock_left(m))} " + ("on the clock" if first else "left"),
                                ("   seed ", "dim"), str(m["seed"])))
        self._print_statements()
        con.print(Text.assemble(("Edit ", ""), (", ".join(f"{p}.py" for p in m["problems"]), "bold"),
                                f" in {os.path.relpath(self.folder)} with your editor. Check from here (c), or "
                                f"in another terminal: cd {os.path.relpath(self.folder)} && attn-drill check"))
        self._client()  # warm the grader while the user reads
        fd = sys.stdin.fileno() if sys.stdin and sys.stdin.isatty() else None
        old = None
        if fd is not None:
            import termios
            import tty
            old = termios.tcgetattr(fd)
            tty.setcbreak(fd)
        reason = "time is up"
        try:
            with Live(self._screen(), console=con, auto_refresh=False, transient=True) as live:
                last_beat = last_reload = time.monotonic()
                while True:
                    while self.notes:
                        live.console.print(self.notes.pop(0))
                    tick = time.monotonic()
                    if tick - last_beat >= HEARTBEAT_S:  # also reloads: checks from other terminals show
                        self._update_mock(lambda mm: mm.update(heartbeat=time.time()))
                        last_beat = last_reload = tick
                    elif tick - last_reload >= 1.0:
                        self._reload()
                        last_reload = tick
                    live.update(self._screen(), refresh=True)
                    if state.mock_left(self.mock) <= 0:
                        break
                    if fd is None:
                        time.sleep(0.25)
                        continue
                    ready, _, _ = select.select([fd], [], [], 0.25)
                    if ready:
                        ch = os.read(fd, 1).decode(errors="replace")
                        if self._key(ch, live) == "finish":
                            reason = "finished early"
                            break
        finally:
            if old is not None:
                import termios
                termios.tcsetattr(fd, termios.TCSADRAIN, old)
        return self._finish(reason)

    def _reload(self) -> None:
        """Pick up checks and hints recorded by other terminals."""
        mid = self.mock["id"]
        for m in state.load(self.folder)["mocks"]:
            if m.get("id") == mid and isinstance(m.get("problems"), dict):
                self.mock = m
                return

    def _pause(self) -> int:
        self._close_segment("paused")
        left = state.mock_left(self.mock)
        where = "" if self.workspace == Path.cwd().resolve() or self.folder == Path.cwd().resolve() else \
            f" (from {os.path.relpath(self.workspace)})"
        self.con.print(Text.assemble(("\npaused ", "bold yellow"), f"{self.mock['id']} with {duration(left)} left. "
                                     f"Continue with: attn-drill mock --resume{where}"))
        return 0

    # -- the end
    def _finish(self, reason: str) -> int:
        if self.checking and self.checking.is_alive():
            self.checking.join()
        self._close_segment("finished")  # stop the clock before grading
        self.con.print(Text(f"\n{reason}: grading everything…", style="bold"))
        final = self._grade_all(record=False)
        now = time.time()

        def fn(m):
            for pid, p in m["problems"].items():
                p["final"] = final[pid]["status"]
                p["final_message"] = final[pid]["message"]
                if final[pid]["status"] == PASS and p.get("passed_at") is None:
                    p["passed_at"], p["passed_after"] = now, round(min(m["elapsed"], m["seconds"]), 1)  # at the bell
            m["finished"] = now
            m["scorecard"] = scorecard(m)
        self._update_mock(fn)
        card = self.mock["scorecard"]
        self._update_link(lambda link: link.update(status="finished", elapsed=self.mock["elapsed"], scorecard=card))
        self._propagate(card)
        if self.as_json:
            print(json.dumps(card, indent=2, ensure_ascii=False))
        else:
            render.console().print(scorecard_view(card))
        return 0 if card["passed"] == len(card["problems"]) else 1

    def _propagate(self, card: dict) -> None:
        """A problem passed in the mock counts as passed in the workspace too."""
        if self.workspace == self.folder or not state.state_dir(self.workspace).is_dir():
            return
        passed = {p["id"]: p["time_to_green"] for p in card["problems"] if p["passed"]}
        if not passed:
            return

        def fn(d):
            for pid, seconds in passed.items():
                e = state.problem_entry(d, pid)
                e["status"] = "passed"
                e["first_pass"] = e["first_pass"] or time.time()
                state.best_solve(e, seconds)
        try:
            state.update(self.workspace, fn, self._warn)
        except OSError:
            pass


# ---------------------------------------------------------------- scorecard
VERDICTS = ((0.9, "strong pass"), (0.6, "pass"), (0.3, "borderline"), (-1.0, "no pass"))


def scorecard(m: dict) -> dict:
    """Per problem: passed, time to green, checks, hints; overall score and verdict.

    A problem scores 1 when it passes at the end, less 0.25 for each hint (at least 0.25), and 0 if
    its solution was viewed during the mock. The verdict reads the mean score.
    """
    rows, score = [], 0.0
    for pid, p in m["problems"].items():
        passed = p.get("final") == PASS
        s = 0.0 if not passed or p.get("solution_viewed") else max(0.25, 1.0 - 0.25 * p.get("hints", 0))
        score += s
        rows.append({"id": pid, "passed": passed, "result": p.get("final"), "message": p.get("final_message", ""),
                     "time_to_green": p.get("passed_after") if passed else None, "checks": p.get("checks", 0),
                     "hints": p.get("hints", 0), "solution_viewed": bool(p.get("solution_viewed")),
                     "score": round(s, 2)})
    mean = score / max(len(rows), 1)
    verdict = next(word for limit, word in VERDICTS if mean >= limit)
    used = round(min(m["elapsed"], m["seconds"]), 1)
    return {"id": m["id"], "seed": m.get("seed"), "seconds": m["seconds"], "used": used,
            "problems": rows, "passed": sum(r["passed"] for r in rows), "hints": sum(r["hints"] for r in rows),
            "score": round(mean, 2), "verdict": verdict}


def scorecard_view(card: dict) -> Group:
    t = Table(title=f"scorecard · {card['id']}", title_justify="left")
    for col in ("problem", "result", "time to green", "checks", "hints", "score"):
        t.add_column(col, no_wrap=True, justify="right" if col in ("checks", "hints", "score") else "left")
    for r in card["problems"]:
        res = r["result"] or "-"
        word = {"pass": "PASS", "fail": "FAIL", "error": "ERROR"}.get(res, res)
        cell = Text(word, style="green" if r["passed"] else ("yellow" if res == "not attempted" else "red"))
        if r["solution_viewed"]:
            cell.append(" (solution viewed)", style="yellow")
        t.add_row(r["id"], cell, duration(r["time_to_green"]) or "-", str(r["checks"]), str(r["hints"]),
                  f"{r['score']:.2f}")
    style = "bold green" if card["verdict"] in ("strong pass", "pass") else "bold red"
    summary = Text.assemble(("verdict: ", "bold"), (card["verdict"], style),
                            f"   {card['passed']} of {len(card['problems'])} passed · {card['hints']} hints · "
                            f"time used {duration(card['used'])} of {duration(card['seconds'])} · "
                            f"score {card['score']:.2f}")
    fails = [Text(f"  {r['id']}: {r['message']}", style="dim") for r in card["problems"]
             if not r["passed"] and r["message"]]
    return Group(t, *fails, summary)


def history(cwd: Path, as_json: bool) -> int:
    """`mock --history`: the mock interviews recorded here."""
    mocks = [mock_summary(m) for m in state.load(cwd)["mocks"]]
    if as_json:
        print(json.dumps(mocks, indent=2, ensure_ascii=False))
    elif mocks:
        render.console().print(mock_table(mocks))
    else:
        render.console().print("No mock interviews here yet: attn-drill mock")
    return 0
