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

from rich.live import Live
from rich.text import Text

from .. import bank, render, state
from ..i18n import pick as in_lang, t, tn
from ..render import practice as view
from ..render.practice import duration
from ..results import PASS
from ..worker import ToolError
from .check import UsageError, grade_file
from .practice import mock_summary
from .scaffold import stub_text
from .terminal import cbreak, ctrl_c, ctrl_c_raises

HEARTBEAT_S = 5.0


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
        raise UsageError(t("mock.no_match"))
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
    raise UsageError(t("mock.too_many", base=base, parent=parent))


def _statements_md(pids: list[str], lang: str) -> str:
    parts = []
    for i, pid in enumerate(pids, 1):
        spec = bank.get(pid)
        parts.append(f"## {i}. {spec.title.get(lang)} (`{pid}.py`, {spec.difficulty}, ~{spec.minutes} min)\n\n"
                     f"{spec.statement.get(lang)}\n\n{t('show.interface', names=', '.join(spec.interface))}. "
                     f"{t('show.forbidden', names=', '.join(spec.all_forbidden))}.\n")
    return "\n".join(parts)


def start(count: int, minutes: float | None, seconds: float | None, difficulty: str | None, tag: str | None,
          chosen: list[str], seed: int | None, parent: Path, as_json: bool, lang: str, cwd: Path) -> int:
    seed = random.randrange(1_000_000) if seed is None else seed
    if count < 1:
        raise UsageError(t("mock.count_min"))
    pids = pick(count, difficulty, tag, chosen, seed, state.statuses(cwd))
    total = seconds if seconds is not None else \
        (minutes * 60 if minutes is not None else sum(bank.get(p).minutes for p in pids) * 60)
    if total <= 0:
        raise UsageError(t("mock.minutes_min"))
    for m in state.load(cwd)["mocks"]:
        if m.get("status") in ("running", "paused") and m.get("folder"):
            _ui(as_json).print(Text(t("mock.unfinished", id=m["id"]), style="yellow"), soft_wrap=True)
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
        raise UsageError(t("mock.none_paused"))
    m = open_[-1]
    if m.get("folder"):
        folder = (cwd / m["folder"]).resolve()
        if not state.state_dir(folder).is_dir():
            raise UsageError(t("mock.folder_gone", folder=folder))
        workspace = cwd
    else:
        folder, workspace = cwd, (cwd / m.get("workspace", "..")).resolve()
    live = _live(folder)
    return Session(folder, workspace, as_json, lang or live.get("lang", "en")).run(first=False)


def _live(folder: Path) -> dict:
    mocks = [m for m in state.load(folder)["mocks"] if isinstance(m.get("problems"), dict)]
    if not mocks:
        raise UsageError(t("mock.no_mock_in", folder=folder))
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


def outcome(r, untouched: bool = False) -> dict:
    """A report, as the mock's screen and scorecard keep it: status, one line, the named mistake, the replay."""
    from ..render.report import case_reason, summary_line
    first = r.first_failure()
    named = r.diagnosis or r.symptom
    msg = summary_line(r)
    if first is not None and r.status != PASS:
        msg = f"{first.name}: {case_reason(first) or msg}"
    return {"status": "not attempted" if untouched and r.status != PASS else r.status, "message": msg,
            "mistake": named.mistake if named else None,
            "why": in_lang(named.en, named.zh) if named else None,
            "replay": r.replay if r.status != PASS else None}


# ---------------------------------------------------------------- the running mock
class Session:
    def __init__(self, folder: Path, workspace: Path, as_json: bool, lang: str):
        self.folder, self.workspace, self.as_json, self.lang = folder.resolve(), workspace.resolve(), as_json, lang
        self.con = _ui(as_json)
        self.client = None
        self.checking: threading.Thread | None = None
        self.last: dict = {}          # pid -> one-line result of the latest in-mock check
        self.reports: dict = {}       # pid -> the latest Report (the key l shows it whole)
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
            raise UsageError(t("mock.missing_from", id=mid, folder=self.folder))
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
        self.con.print(Text(t("cli.warning") + " " + message, style="yellow"), soft_wrap=True)

    def _open_segment(self) -> None:
        now = time.time()
        mine = os.getpid()

        def fn(m):
            if m.get("status") == "finished":
                raise UsageError(t("mock.already_finished", id=m["id"]))
            if m.get("status") == "running" and m.get("segment_start") is not None:
                if m.get("pid") != mine and _alive(m.get("pid")) and now - m.get("heartbeat", 0) < 3 * HEARTBEAT_S:
                    raise UsageError(t("mock.running_elsewhere", id=m["id"], pid=m["pid"]))
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
        """Grade every mock file now, as `attn-drill check` in the folder does (so a check counts the same
        from the key and from another terminal); an untouched stub reads 'not attempted'."""
        out = {}
        client = self._client()
        for pid, file in self._files():
            if not file.is_file():
                out[pid] = {"status": "missing", "message": t("mock.file_missing", file=file.name)}
                continue
            untouched = file.read_text(encoding="utf-8", errors="replace") == stub_text(pid)
            spec = bank.get(pid)
            try:
                r = grade_file(client, pid, file, self.mock["seed"], time_limit=spec.time_limit, typed="")
            except (ToolError, ValueError) as exc:
                out[pid] = {"status": "error", "message": t("mock.grader_failed", error=str(exc)[:300])}
                continue
            if record:
                state.record_check(self.folder, r, self._warn)
            out[pid] = outcome(r, untouched)
            self.reports[pid] = r
        return out

    def _check_in_background(self) -> None:
        if self.checking and self.checking.is_alive():
            return

        def go():
            try:
                self.last = self._grade_all(record=True)
            except Exception as exc:  # noqa: BLE001 - shown on screen; the mock goes on
                self.notes.append(Text(t("mock.check_failed", error=exc), style="red"))
        for pid in self.mock["problems"]:
            self.last[pid] = {"status": "checking", "message": ""}
        self.checking = threading.Thread(target=go, daemon=True)
        self.checking.start()

    # -- screen
    def _screen(self):
        prompt = ""
        if self.asking_hint:
            prompt = t("mock.ask_hint", n=len(self.mock["problems"]))
        elif self.asking_finish:
            prompt = t("mock.ask_finish")
        return view.mock_screen(self.mock, self.last, state.mock_left(self.mock), prompt,
                                os.path.relpath(self.folder), self.con.width)

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
        elif ch == "l":
            self._last_report(live)
        elif ch == "u":
            self._followups(live)
        elif ch == "q":
            raise KeyboardInterrupt
        return None

    def _ready_followups(self) -> list[str]:
        """Problems passed in this mock whose follow-up questions were not asked yet."""
        from .quizzing import questions_of
        return [pid for pid, p in self.mock["problems"].items()
                if p.get("passed_at") and not p.get("followups_asked") and questions_of(pid)]

    def _followups(self, live) -> None:
        """The key u: the follow-up questions of a problem passed in the mock, inside its time; counted
        apart from the score (scorecard: follow-ups right of asked)."""
        from .quizzing import Answers, ask, questions_of
        ready = self._ready_followups()
        if not ready:
            live.console.print(Text(t("mock.no_followups"), style="yellow"))
            return
        pid = ready[0]
        live.stop()
        fd, old = getattr(self, "tty", (None, None))
        if fd is not None:                       # typed numbers need the terminal's own line editing
            import termios
            saved = termios.tcgetattr(fd)
            termios.tcsetattr(fd, termios.TCSADRAIN, old)
        right = asked = 0
        try:
            with ctrl_c_raises():                # Ctrl-C ends the questions, not the mock
                for q in questions_of(pid):
                    if state.mock_left(self.mock) <= 0:
                        break
                    res = ask(pid, q, self.mock["seed"], Answers(None), self.con, self.lang)
                    asked += 1
                    right += res["right"]
        except (KeyboardInterrupt, EOFError):
            pass
        finally:
            if fd is not None:
                termios.tcsetattr(fd, termios.TCSADRAIN, saved)
            self._update_mock(lambda m: m["problems"][pid].update(followups_asked=asked, followups_right=right))
            self.con.print(Text(t("mock.followups_done", id=pid, right=right, n=asked), style="cyan"))
            live.start()

    def _last_report(self, live) -> None:
        """The key l: the latest check's whole report of each problem, above the live panel."""
        from ..render import report as report_view
        if not self.reports:
            live.console.print(Text(t("mock.no_report"), style="yellow"))
            return
        for pid, r in self.reports.items():
            title = bank.get(pid).title.get(self.lang)
            live.console.print(report_view.first_screen(r, title, live.console.width, hint=False))
            if r.status != PASS:
                live.console.print(report_view.details(r, live.console.width))

    def _hint(self, pid: str, live) -> None:
        spec = bank.get(pid)
        before, now = state.record_hint(self.folder, pid, len(spec.hints), self._warn)
        if now == before:
            live.console.print(Text(t("mock.all_hints", n=len(spec.hints), id=pid), style="yellow"))
            for i in range(now):
                live.console.print(view.hint_panel(spec, i, self.lang))
        else:
            live.console.print(view.hint_panel(spec, now - 1, self.lang))
            live.console.print(Text(t("mock.hint_counts"), style="dim"))

    # -- main loop
    def run(self, first: bool) -> int:
        self._open_segment()
        try:
            if state.mock_left(self.mock) <= 0:
                return self._finish(t("mock.time_was_up"))
            return self._interact(first)
        except KeyboardInterrupt:
            return self._pause()
        finally:
            self._stop_client()

    def _interact(self, first: bool) -> int:
        m = self.mock
        con = self.con
        con.print(Text.assemble((t("mock.heading", id=m["id"]), "bold"), " ",
                                tn("mock.count", len(m["problems"]), time=duration(state.mock_left(m))) + " " +
                                (t("mock.on_clock") if first else t("mock.time_left")),
                                ("   " + t("report.seed", seed=m["seed"]), "dim")))
        self._print_statements()
        folder = os.path.relpath(self.folder)
        con.print(t("mock.edit", files=", ".join(f"{p}.py" for p in m["problems"]), folder=folder), soft_wrap=True)
        self._client()  # warm the grader while the user reads
        fd = sys.stdin.fileno() if sys.stdin and sys.stdin.isatty() else None
        if fd is None:      # no keys to read: say how the mock runs, and when it ends
            ends = time.strftime("%H:%M", time.localtime(time.time() + state.mock_left(m)))
            con.print(Text(t("mock.no_terminal", ends=ends, folder=folder), style="yellow"), soft_wrap=True)
        old = None
        if fd is not None:
            old = cbreak(fd)
        self.tty = (fd, old)
        reason = t("mock.time_up")
        interrupted = threading.Event()
        try:
            with ctrl_c(interrupted.set), \
                    Live(self._screen(), console=con, auto_refresh=False, transient=True) as live:
                last_beat = last_reload = time.monotonic()
                while True:
                    if interrupted.is_set():      # Ctrl-C: pause, from here, not halfway through a write
                        raise KeyboardInterrupt
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
                            reason = t("mock.finished_early")
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
            t("mock.from", folder=os.path.relpath(self.workspace))
        self.con.print(Text.assemble(("\n" + t("mock.paused") + " ", "bold yellow"),
                                     t("mock.paused_left", id=self.mock["id"], left=duration(left), where=where)),
                       soft_wrap=True)
        return 0

    # -- the end
    def _finish(self, reason: str) -> int:
        if self.checking and self.checking.is_alive():
            self.checking.join()
        self._close_segment("finished")  # stop the clock before grading
        self.con.print(Text("\n" + t("mock.grading_all", reason=reason), style="bold"))
        final = self._grade_all(record=False)
        now = time.time()

        def fn(m):
            for pid, p in m["problems"].items():
                p["final"] = final[pid]["status"]
                p["final_message"] = final[pid]["message"]
                p["final_mistake"] = final[pid].get("mistake")
                p["final_why"] = final[pid].get("why")
                p["final_replay"] = final[pid].get("replay")
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
            render.console().print(view.scorecard(card, render.console().width))
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
                     "mistake": p.get("final_mistake"), "why": p.get("final_why"), "replay": p.get("final_replay"),
                     "followups_asked": p.get("followups_asked", 0), "followups_right": p.get("followups_right", 0),
                     "time_to_green": p.get("passed_after") if passed else None, "checks": p.get("checks", 0),
                     "hints": p.get("hints", 0), "solution_viewed": bool(p.get("solution_viewed")),
                     "score": round(s, 2)})
    mean = score / max(len(rows), 1)
    verdict = next(word for limit, word in VERDICTS if mean >= limit)
    used = round(min(m["elapsed"], m["seconds"]), 1)
    return {"id": m["id"], "seed": m.get("seed"), "seconds": m["seconds"], "used": used,
            "problems": rows, "passed": sum(r["passed"] for r in rows), "hints": sum(r["hints"] for r in rows),
            "followups_asked": sum(r["followups_asked"] for r in rows),
            "followups_right": sum(r["followups_right"] for r in rows),
            "score": round(mean, 2), "verdict": verdict}


def history(cwd: Path, as_json: bool) -> int:
    """`mock --history`: the mock interviews recorded here."""
    mocks = [mock_summary(m) for m in state.load(cwd)["mocks"]]
    if as_json:
        print(json.dumps(mocks, indent=2, ensure_ascii=False))
    elif mocks:
        render.console().print(view.mock_history(mocks, render.console().width))
    else:
        render.console().print(t("mock.none_yet"))
    return 0
