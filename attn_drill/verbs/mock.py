"""`mock`: a timed mock interview in a fresh folder, with a live countdown and a scorecard (its
clock and scoring rules: attn_drill.progress.mocks).

Where it is kept: in the user's one progress (attn_drill.progress.store.home()), as an entry of
`mocks` naming its folder; `attn-drill check` run in that folder from another terminal counts toward
it (attn_drill.progress.rules.record_check). At the end, its passes, its time to green and its hints
review the problems' cards as a re-drill does (rules.end_mock), and every follow-up answered reviews
its question's card, so `today`, `plan` and `progress` see the mock wherever the user practises.

The pick: unsolved problems first, at the user's level (up to one step above the hardest passed),
as many as fit in --minutes by their estimates; when they cannot, it says why.

Ctrl-C pauses (closes the segment); `--resume` opens a new one. Every time comes from
attn_drill.progress.clock, so a mock under a set clock (ATTN_DRILL_NOW) reads one clock only.
"""
from __future__ import annotations

import os
import random
import select
import sys
import threading
import time
from pathlib import Path

from .. import bank, render, rules
from ..bank.spec import DIFFICULTIES
from ..client import JudgeClient
from ..errors import ToolError, UsageError
from ..i18n import pick as in_lang, t, tn
from ..progress import clock, mocks, store
from ..progress import rules as progress
from ..render import practice as view
from ..render.practice import duration
from ..results import PASS
from .check import grade_file, static_report
from .scaffold import stub_text
from .terminal import cbreak, ctrl_c, ctrl_c_raises

HEARTBEAT_S = 5.0


# ---------------------------------------------------------------- choosing and scaffolding
def level_of(statuses: dict) -> list[str]:
    """The difficulties a mock picks from: up to one step above the hardest problem passed (easy
    when none is)."""
    passed = [bank.get(pid).difficulty for pid, st in statuses.items() if st == "passed" and pid in bank.ids()]
    top = max((DIFFICULTIES.index(d) for d in passed), default=-1)
    return list(DIFFICULTIES[: min(len(DIFFICULTIES), top + 2)])


def pick(count: int, difficulty: str | None, tag: str | None, chosen: list[str], seed: int,
         statuses: dict, minutes: float | None = None) -> tuple[list[str], str]:
    """(problems, why these when it is not plain): unsolved first, then solved, shuffled by `seed`
    within each group; at the user's level unless --difficulty says otherwise; as many as fit in
    `minutes` by their estimates."""
    if chosen:
        for pid in chosen:
            bank.get(pid)  # unknown ids raise with suggestions
        return list(dict.fromkeys(chosen)), ""
    specs = [s for s in bank.all_specs() if (not tag or tag in s.tags) and
             (not difficulty or s.difficulty == difficulty)]
    if not specs:
        raise UsageError(t("mock.no_match"))
    notes = []
    if not difficulty:
        levels = level_of(statuses)
        at_level = [s for s in specs if s.difficulty in levels]
        if at_level and len(at_level) < len(specs):
            specs = at_level
            words = t("join.list").join(t(f"level.{d}") for d in levels)
            notes.append(t("mock.at_level", levels=words) if any(st == "passed" for st in statuses.values())
                         else t("mock.at_level_new", levels=words))
    rng = random.Random(seed)
    unsolved = [s for s in specs if statuses.get(s.id) != "passed"]
    solved = [s for s in specs if statuses.get(s.id) == "passed"]
    rng.shuffle(unsolved)
    rng.shuffle(solved)
    order = unsolved + solved
    if minutes is None:
        return [s.id for s in order[:count]], t("report.join").join(notes)
    out, used = [], 0
    for s in order:
        if len(out) < count and used + s.minutes <= minutes:
            out.append(s)
            used += s.minutes
    if not out:                                   # nothing fits: the shortest, said so
        shortest = min(order, key=lambda s: (s.minutes, order.index(s)))
        out = [shortest]
        notes.append(t("mock.none_fit", id=shortest.id, est=shortest.minutes, minutes=f"{minutes:g}"))
    elif len(out) < count:
        notes.append(tn("mock.fewer_fit", len(out), count=count, minutes=f"{minutes:g}", est=used))
    return [s.id for s in out], t("report.join").join(notes)


def make_folder(parent: Path) -> Path:
    """A fresh mock-YYYYmmdd-HHMM folder; never an existing one."""
    parent.mkdir(parents=True, exist_ok=True)
    base = f"mock-{time.strftime('%Y%m%d-%H%M', time.localtime(clock.now()))}"
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
        sep = t("join.list")
        parts.append("## " + t("mock.md_heading", i=i, title=spec.title.get(lang), file=f"`{pid}.py`",
                               level=t(f"level.{spec.difficulty}"), minutes=spec.minutes) +
                     f"\n\n{spec.statement.get(lang)}\n\n" +
                     t("mock.rules", interface=sep.join(spec.interface), forbidden=sep.join(spec.all_forbidden)) +
                     "\n")
    return "\n".join(parts)


def start(count: int, minutes: float | None, seconds: float | None, difficulty: str | None, tag: str | None,
          chosen: list[str], seed: int | None, parent: Path, as_json: bool, lang: str, cwd: Path) -> int:
    seed = random.randrange(1_000_000) if seed is None else seed
    if count < 1:
        raise UsageError(t("mock.count_min"))
    if minutes is not None and minutes <= 0 or seconds is not None and seconds <= 0:
        raise UsageError(t("mock.minutes_min"))
    limit = seconds / 60 if seconds is not None else minutes
    pids, note = pick(count, difficulty, tag, chosen, seed, progress.statuses(), limit)
    total = seconds if seconds is not None else \
        (minutes * 60 if minutes is not None else sum(bank.get(p).minutes for p in pids) * 60)
    for m in store.load(None, render.warn)["mocks"]:
        if m.get("status") in ("running", "paused") and m.get("folder"):
            render.say(t("mock.unfinished", id=m["id"]), "yellow", _ui(as_json))
    folder = make_folder(parent).resolve()
    for pid in pids:
        (folder / f"{pid}.py").write_text(stub_text(pid), encoding="utf-8")
    (folder / "MOCK.md").write_text("# " + t("mock.md_title", id=folder.name) + "\n\n" + _statements_md(pids, lang),
                                    encoding="utf-8")
    now = clock.now()
    record = {"id": folder.name, "folder": str(folder), "active": False, "status": "paused", "seed": seed,
              "seconds": float(total), "elapsed": 0.0, "segment_start": None, "heartbeat": now, "started": now,
              "finished": None, "pid": None, "lang": lang, "note": note or None, "problem_ids": pids,
              "problems": {pid: {"checks": 0, "hints": 0, "solution_viewed": False, "passed_at": None,
                                 "passed_after": None, "last": None} for pid in pids}}
    store.update(None, lambda d: d["mocks"].append(record), render.warn)
    return Interview(folder, as_json, lang).run(first=True)


def resume(as_json: bool, lang: str | None, cwd: Path) -> int:
    """Continue the latest unfinished mock, from wherever it is asked."""
    data = store.load(None, render.warn)
    open_ = [m for m in data["mocks"] if m.get("status") in ("running", "paused") and m.get("folder")]
    if not open_:
        raise UsageError(t("mock.none_paused"))
    m = open_[-1]
    folder = Path(m["folder"])
    if not isinstance(m.get("problems"), dict):
        raise UsageError(t("mock.no_mock_in", folder=folder))
    if not folder.is_dir():
        raise UsageError(t("mock.folder_gone", folder=folder))
    return Interview(folder, as_json, lang or m.get("lang", "en"), mid=m["id"]).run(first=False)


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
    """A report, as the mock's screen and scorecard keep it: status, one line, the named mistake (its
    id, its title), the replay."""
    from ..render.report import case_reason, mistake_title, summary_line
    first = r.first_failure()
    named = r.diagnosis or r.symptom
    msg = summary_line(r)
    if first is not None and r.status != PASS:
        msg = f"{first.name}: {case_reason(first) or msg}"
    return {"status": "not attempted" if untouched and r.status != PASS else r.status, "message": msg,
            "mistake": named.mistake if named else None,
            "title": mistake_title(r.problem, named.mistake) if named else None,
            "why": in_lang(named.en, named.zh) if named else None,
            "replay": r.replay if r.status != PASS else None}


# ---------------------------------------------------------------- the running mock
class Interview:
    """One mock interview while it runs: its record, its judge, its screen and keys."""

    def __init__(self, folder: Path, as_json: bool, lang: str, mid: str | None = None):
        self.folder, self.as_json, self.lang = Path(folder).resolve(), as_json, lang
        self.con = _ui(as_json)
        self.client = None
        self.checking: threading.Thread | None = None
        self.last: dict = {}          # pid -> one-line result of the latest in-mock check
        self.reports: dict = {}       # pid -> the latest Report (the key l shows it whole)
        self.notes: list = []         # renderables to print above the live screen
        self.followups: dict = {}     # pid -> "2 of 3 right" after its follow-ups, for the panel
        self.asking_hint = False
        self.asking_finish = False
        self.mid = mid or self.folder.name
        self.mock: dict = {"id": self.mid}
        self.tty = (None, None)

    # -- state
    def _mine(self, m: dict) -> bool:
        return m.get("id") == self.mid and isinstance(m.get("problems"), dict) and \
            progress._same_folder(m.get("folder") or "", self.folder)

    def _update_mock(self, fn):
        def apply(d):
            for m in d["mocks"]:
                if self._mine(m):
                    fn(m, d)
                    return dict(m)
            raise UsageError(t("mock.missing_from", id=self.mid, folder=store._shown(store.home())))
        self.mock = store.update(None, apply, self._warn)
        return self.mock

    def _warn(self, message: str) -> None:
        render.warn(message, self.con)

    def _open_segment(self) -> None:
        now = clock.now()
        mine = os.getpid()

        def fn(m, _):
            if m.get("status") == "finished":
                raise UsageError(t("mock.already_finished", id=m["id"]))
            if m.get("status") == "running" and m.get("segment_start") is not None:
                if m.get("pid") != mine and _alive(m.get("pid")) and now - m.get("heartbeat", 0) < 3 * HEARTBEAT_S:
                    raise UsageError(t("mock.running_elsewhere", id=m["id"], pid=m["pid"]))
                # its process died without pausing: count the time up to its last heartbeat
                m["elapsed"] = m.get("elapsed", 0.0) + max(0.0, m.get("heartbeat", now) - m["segment_start"])
            m.update(status="running", active=True, segment_start=now, heartbeat=now, pid=mine)
        self._update_mock(fn)

    def _close_segment(self, status: str) -> None:
        now = clock.now()

        def fn(m, _):
            m["elapsed"] = round(mocks.elapsed(m, now), 2)
            m.update(segment_start=None, heartbeat=now, active=False, status=status, pid=None)
        self._update_mock(fn)

    # -- grading
    def _client(self):
        if self.client is None:
            self.client = JudgeClient().start()
        return self.client

    def _stop_client(self) -> None:
        c, self.client = self.client, None
        if c is not None:
            c.close()          # a judge still importing torch is killed, not waited for

    def _files(self) -> list[tuple[str, Path]]:
        return [(pid, self.folder / f"{pid}.py") for pid in self.mock["problems"]]

    def _grade_all(self, record: bool) -> dict:
        """Grade every mock file now, as `attn-drill check` in the folder does (so a check counts the same
        from the key and from another terminal); an untouched stub reads 'not attempted'."""
        out = {}
        for pid, file in self._files():
            if not file.is_file():
                out[pid] = {"status": "missing", "message": t("mock.file_missing", file=file.name)}
                continue
            untouched = file.read_text(encoding="utf-8", errors="replace") == stub_text(pid)
            try:
                r = static_report(pid, file, self.mock["seed"], typed="") or \
                    grade_file(self._client(), pid, file, self.mock["seed"],
                               time_limit=rules.time_limit(bank.get(pid)), typed="")
            except (ToolError, UsageError) as exc:
                out[pid] = {"status": "error", "message": t("mock.grader_failed", error=str(exc)[:300])}
                continue
            if record:
                progress.record_check(self.folder, r, self._warn, file=file)
            out[pid] = outcome(r, untouched)
            self.reports[pid] = r
        return out

    def _check_in_background(self) -> None:
        if self.checking and self.checking.is_alive():
            return

        def go():
            try:
                self.last = self._grade_all(record=True)
                self._reload()
            except Exception as exc:  # noqa: BLE001 - shown on screen; the mock goes on
                self.notes.append((t("mock.check_failed", error=exc), "red"))
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
        return view.mock_screen(self.mock, self.last, mocks.left(self.mock, clock.now()), prompt,
                                os.path.relpath(self.folder), self.con.width, self.followups)

    def _print_statements(self, con=None) -> None:
        pids = list(self.mock["problems"])
        (con or self.con).print(render.markdown(_statements_md(pids, self.lang)))

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
            self._print_statements(live.console)
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
        apart from the score (scorecard: follow-ups right of asked), and each answer reviews its
        question's card in the user's progress, as `quiz` does. The last answer's feedback stays on
        the screen until a key is pressed."""
        from .quizzing import Answers, ask, questions_of, record
        ready = self._ready_followups()
        if not ready:
            asked = [pid for pid, p in self.mock["problems"].items() if p.get("followups_asked")]
            if asked:
                done = t("join.list").join(f"{pid} ({self.followups.get(pid) or ''})".replace(" ()", "")
                                           for pid in asked)
                render.say(t("mock.followups_all_asked", ids=done), "yellow", live.console)
            else:
                render.say(t("mock.no_followups"), "yellow", live.console)
            return
        pid = ready[0]
        live.stop()
        fd, old = self.tty
        if fd is not None:                       # typed numbers need the terminal's own line editing
            import termios
            saved = termios.tcgetattr(fd)
            termios.tcsetattr(fd, termios.TCSADRAIN, old)
        results = []
        try:
            with ctrl_c_raises():                # Ctrl-C ends the questions, not the mock
                qs = questions_of(pid)
                for i, q in enumerate(qs, 1):
                    if mocks.left(self.mock, clock.now()) <= 0:
                        break
                    self.con.print(view.quiz_progress(i, len(qs)))
                    res = ask(pid, q, self.mock["seed"], Answers(None), self.con, self.lang)
                    results.append(res)
                    record([res], clock.now(), self._warn)
        except (KeyboardInterrupt, EOFError):
            pass
        finally:
            right, asked = sum(r["right"] for r in results), len(results)
            self._update_mock(lambda m, _: m["problems"][pid].update(followups_asked=asked, followups_right=right))
            self.followups[pid] = t("mock.right_of", right=right, n=asked)
            render.say(t("mock.followups_done", id=pid, right=right, n=asked), "bold cyan", self.con)
            if fd is not None:
                render.say(t("mock.back_to_clock"), "dim", self.con)
                termios.tcsetattr(fd, termios.TCSADRAIN, saved)
                with ctrl_c_raises():
                    try:
                        os.read(fd, 1)           # the last feedback stays until the user has read it
                    except (KeyboardInterrupt, OSError):
                        pass
            live.start()

    def _last_report(self, live) -> None:
        """The key l: the latest check's whole report of each problem, above the live panel."""
        from ..render import report as report_view
        if not self.reports:
            render.say(t("mock.no_report"), "yellow", live.console)
            return
        for pid, r in self.reports.items():
            title = bank.get(pid).title.get(self.lang)
            live.console.print(report_view.first_screen(r, title, live.console.width, hint=False))
            if r.status != PASS:
                live.console.print(report_view.details(r, live.console.width))

    def _hint(self, pid: str, live) -> None:
        spec = bank.get(pid)
        before, now = progress.record_hint(self.folder, pid, len(spec.hints), self._warn)
        self._reload()
        if now == before:
            render.say(t("mock.all_hints", n=len(spec.hints), id=pid), "yellow", live.console)
            for i in range(now):
                live.console.print(view.hint_panel(spec, i, self.lang))
        else:
            live.console.print(view.hint_panel(spec, now - 1, self.lang))
            render.say(t("mock.hint_counts"), "dim", live.console)

    # -- main loop
    def run(self, first: bool) -> int:
        self._open_segment()
        try:
            if mocks.left(self.mock, clock.now()) <= 0:
                return self._finish(t("mock.time_was_up"))
            return self._interact(first)
        except KeyboardInterrupt:
            return self._pause()
        finally:
            self._stop_client()

    def _interact(self, first: bool) -> int:
        m = self.mock
        con = self.con
        con.print(view.mock_heading(m["id"], tn("mock.count", len(m["problems"]),
                                                 time=duration(mocks.left(m, clock.now()))) + " " +
                                    (t("mock.on_clock") if first else t("mock.time_left")), m["seed"]))
        if m.get("note"):
            render.say(m["note"], "yellow", con)
        self._print_statements()
        folder = os.path.relpath(self.folder)
        render.say(t("mock.edit", files=t("join.list").join(f"{p}.py" for p in m["problems"]), folder=folder),
                   con=con)
        self._client()  # warm the grader while the user reads
        fd = sys.stdin.fileno() if sys.stdin and sys.stdin.isatty() else None
        if fd is None:      # no keys to read: say how the mock runs, and when it ends
            now = clock.now()
            ends = time.strftime("%H:%M", time.localtime(now + mocks.left(m, now)))
            render.say(t("mock.no_terminal", ends=ends, folder=folder), "yellow", con)
        old = None
        if fd is not None:
            old = cbreak(fd)
        self.tty = (fd, old)
        reason = t("mock.time_up")
        interrupted = threading.Event()
        try:
            with ctrl_c(interrupted.set), \
                    render.live(con, self._screen(), transient=True) as live:
                last_beat = last_reload = time.monotonic()
                while True:
                    if interrupted.is_set():      # Ctrl-C: pause, from here, not halfway through a write
                        raise KeyboardInterrupt
                    while self.notes:
                        render.say(*self.notes.pop(0), live.console)
                    tick = time.monotonic()
                    if tick - last_beat >= HEARTBEAT_S:  # also reloads: checks from other terminals show
                        self._update_mock(lambda mm, _: mm.update(heartbeat=clock.now()))
                        last_beat = last_reload = tick
                    elif tick - last_reload >= 1.0:
                        self._reload()
                        last_reload = tick
                    live.update(self._screen(), refresh=True)
                    if mocks.left(self.mock, clock.now()) <= 0:
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
        for m in store.load(None, self._warn)["mocks"]:
            if self._mine(m):
                self.mock = m
                return

    def _pause(self) -> int:
        self._close_segment("paused")
        left = mocks.left(self.mock, clock.now())
        self.con.print(view.mock_paused(t("mock.paused_left", id=self.mock["id"], left=duration(left), where="")))
        return 0

    # -- the end
    def _finish(self, reason: str) -> int:
        if self.checking and self.checking.is_alive():
            self.checking.join()
        self._close_segment("finished")  # stop the clock before grading
        render.say("\n" + t("mock.grading_all", reason=reason), "bold", self.con)
        final = self._grade_all(record=False)
        now = clock.now()

        def fn(m, d):
            for pid, p in m["problems"].items():
                p["final"] = final[pid]["status"]
                p["final_message"] = final[pid]["message"]
                p["final_mistake"] = final[pid].get("mistake")
                p["final_title"] = final[pid].get("title")
                p["final_why"] = final[pid].get("why")
                p["final_replay"] = final[pid].get("replay")
                if final[pid]["status"] == PASS and p.get("passed_at") is None:
                    p["passed_at"], p["passed_after"] = now, round(min(m["elapsed"], m["seconds"]), 1)  # at the bell
            m["finished"] = now
            m["scorecard"] = mocks.scorecard(m)
            m["scorecard"]["reviewed"] = progress.end_mock(d, m, now)   # the cards, as re-drills
        self._update_mock(fn)
        card = self.mock["scorecard"]
        render.emit(card, self.as_json, view.scorecard)
        return 0 if card["passed"] == len(card["problems"]) else 1


def history(cwd: Path, as_json: bool) -> int:
    """`mock --history`: the mock interviews in the user's progress."""
    found = [mocks.summary(m) for m in store.load(None, render.warn)["mocks"]]
    if as_json or found:
        render.emit(found, as_json, view.mock_history)
    else:
        render.say(t("mock.none_yet"))
    return 0
