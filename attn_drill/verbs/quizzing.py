"""`quiz`: the interviewer's follow-up questions, asked in the terminal (numbers or arrow keys), or
answered from --answers for scripts. Each answer is a review of the question's card (right: good,
wrong: again), so a forgotten concept comes back like a forgotten implementation. No torch."""
from __future__ import annotations

import functools
import os
import select
import sys
from pathlib import Path

from .. import bank, render
from ..bank import curriculum, quiz, sources
from ..errors import BankError, UsageError
from ..i18n import pick, t
from ..progress import clock, schedule, store
from ..render import practice as view


@functools.lru_cache(maxsize=None)
def questions_of(pid: str) -> list:
    path = bank.questions_path(pid)
    if not path.is_file():
        return []
    try:
        return quiz.load(path)
    except Exception as exc:  # noqa: BLE001 - a broken questions file of the bank: say which
        raise BankError(bank.fault_message("questions", path, f"{type(exc).__name__}: {exc}")) from None


def choose(root: Path, pid: str | None, count: int, due_only: bool) -> list[tuple[str, object]]:
    """(problem, question) to ask: due ones first, then ones never asked of problems passed (or of pid)."""
    data = store.load(None, render.warn)
    end = clock.day_end(clock.now())
    cards = data.get("cards") or {}
    picked: list = []
    due = [cid for cid, _ in schedule.due_cards(data, end, kind="quiz")]
    for cid in due:
        p, _, qid = cid.partition("/")
        if pid and p != pid:
            continue
        q = next((q for q in questions_of(p) if q.id == qid), None) if p in bank.ids() else None
        if q is not None:
            picked.append((p, q))
    if not due_only:
        passed = [pid] if pid else [s.id for s in _ordered()
                                    if data["problems"].get(s.id, {}).get("status") == "passed"]
        for p in passed:
            for q in questions_of(p):
                if f"{p}/{q.id}" not in cards and (p, q) not in picked:
                    picked.append((p, q))
        if pid:             # asked for one problem: the rest of its questions too, soonest due first
            rest = sorted((q for q in questions_of(pid) if (pid, q) not in picked),
                          key=lambda q: cards.get(f"{pid}/{q.id}", {}).get("due", 0))
            picked += [(pid, q) for q in rest]
    seen, unique = set(), []
    for p, q in picked:
        if (p, q.id) not in seen:
            seen.add((p, q.id))
            unique.append((p, q))
    return unique[:count]


def _ordered():
    return curriculum.order(bank.all_specs())


class Answers:
    """Where answers come from: a list (--answers), or the terminal."""

    def __init__(self, given: list[str] | None):
        self.given = list(given) if given is not None else None
        self.fd = sys.stdin.fileno() if given is None and sys.stdin is not None and sys.stdin.isatty() else None

    @property
    def scripted(self) -> bool:
        return self.given is not None

    def next_given(self) -> str | None:
        return self.given.pop(0) if self.given else None

    def choice(self, n: int, draw) -> int | None:
        """The index picked (0-based), None to skip. Keys: 1-n, arrows and Enter, s to skip; any other
        key is not an answer and changes nothing."""
        import termios
        import tty
        old = termios.tcgetattr(self.fd)
        tty.setcbreak(self.fd)
        at = 0
        try:
            draw(at)
            while True:
                ch = os.read(self.fd, 1).decode(errors="replace")
                if ch == "\x1b":                   # an arrow key: ESC [ A / B
                    ready, _, _ = select.select([self.fd], [], [], 0.05)
                    seq = os.read(self.fd, 2).decode(errors="replace") if ready else ""
                    if seq in ("[A", "OA"):
                        at = (at - 1) % n
                    elif seq in ("[B", "OB"):
                        at = (at + 1) % n
                    draw(at)
                elif ch in ("\r", "\n"):
                    return at
                elif ch.isdigit() and 1 <= int(ch) <= n:
                    return int(ch) - 1
                elif ch.lower() in ("s", "q"):
                    return None
        finally:
            termios.tcsetattr(self.fd, termios.TCSADRAIN, old)

    def line(self, con) -> str | None:
        render.say(t("quiz.number_hint"), "dim", con)
        try:
            return con.input(t("quiz.your_number") + ("" if t("quiz.your_number").endswith("：") else " "))
        except EOFError:
            return None


def ask(pid: str, q, seed: int, answers: Answers, con, lang: str) -> dict:
    """Ask one question; the result {problem, id, kind, given, right, answer, rated}. An answer that
    cannot be read is asked again in a terminal; from --answers it is said and not rated (rated False)."""
    ref_src = sources.read(bank.reference_path(pid))
    line = quiz.ref_line(q, ref_src)
    where = f"reference/{pid}.py:{line}" if line else (t("quiz.statement", id=pid) if q.see else None)
    con.print(view.question(pid, q, lang))
    if isinstance(q, quiz.Choice):
        # a script answers the choices in the order they are printed for it, the same every day;
        # a person in a terminal gets them shuffled by the day, so the answer is not a position
        opts = q.options(0 if answers.scripted else seed)
        texts = [pick(*o[0]) for o in opts]
        correct = next(i for i, o in enumerate(opts) if o[1])
        result = {"problem": pid, "id": q.id, "kind": "choice", "answer": correct + 1, "rated": True}
        if answers.scripted:
            con.print(view.choices(texts, None))
            raw = answers.next_given()
            at = quiz.read_choice(raw, len(opts)) if raw and raw.strip().lower() not in ("s", "skip") else None
            if raw and raw.strip() and raw.strip().lower() not in ("s", "skip") and at is None:
                con.print(view.unreadable(t("quiz.not_a_choice", text=raw.strip(), n=len(opts),
                                            last=chr(ord("a") + len(opts) - 1))))
                return dict(result, given=raw, right=False, rated=False)
        else:                                    # the choices redrawn in place as the arrow keys move
            with render.live(con, view.choices(texts, 0)) as live:
                at = answers.choice(len(opts), lambda i: live.update(view.choices(texts, i), refresh=True))
            raw = None if at is None else str(at + 1)
        right = at is not None and opts[at][1]
        con.print(view.feedback(right, at is None, texts[correct], pick(*q.explain), where, lang, width=con.width))
        return dict(result, given=None if at is None else at + 1, right=bool(right))
    want = q.value()
    shown = view.number_with_unit(want, pick(*q.unit))
    result = {"problem": pid, "id": q.id, "kind": "number", "answer": want, "rated": True}
    while True:
        raw = answers.next_given() if answers.scripted else answers.line(con)
        if raw is None or not raw.strip() or raw.strip().lower() in ("s", "skip"):
            value = None                         # skipped: the answer is shown, and it comes back soon
            break
        value = quiz.read_number(raw)
        if value is not None:
            break
        con.print(view.unreadable(t("quiz.unreadable", text=raw.strip())))
        if answers.scripted:                     # nobody to ask again: no rating for what was not read
            return dict(result, given=raw, right=False, rated=False)
    right = value is not None and q.accepts(value)
    con.print(view.feedback(right, value is None, shown, pick(*q.explain), where, lang,
                            got=None if value is None or right else view.number_with_unit(value, pick(*q.unit)),
                            width=con.width))
    return dict(result, given=raw, right=bool(right), read_as=None if value is None else float(value))


def record(results: list[dict], when: float, warn=None) -> None:
    """Each rated answer reviews its question's card in the user's progress: right good, wrong again.
    An answer that could not be read is not a review."""
    rated = [r for r in results if r.get("rated", True)]
    if not rated:
        return

    def fn(d):
        for r in rated:
            schedule.review(d, f"{r['problem']}/{r['id']}", "quiz", "good" if r["right"] else "again", when)
    store.update(None, fn, warn)


def run(pid: str | None, count: int, due_only: bool, given: list[str] | None, as_json: bool, lang: str,
        root: Path) -> int:
    if pid is not None:
        bank.get(pid)
    if count < 1:
        raise UsageError(t("quiz.count"))
    if given is None and (sys.stdin is None or not sys.stdin.isatty()):
        raise UsageError(t("quiz.no_terminal"))
    picked = choose(root, pid, count, due_only)
    con = render.console(stderr=as_json)
    if not picked:
        render.say(t("quiz.nothing", id=pid) if pid else t("quiz.nothing_all"), con=con)
        if as_json:
            render.print_json({"asked": 0, "right": 0, "results": []})
        return 0
    seed = int(clock.now()) // 86400
    answers = Answers(given)
    results = []
    for i, (p, q) in enumerate(picked, 1):
        con.print(view.quiz_progress(i, len(picked)))
        res = ask(p, q, seed, answers, con, lang)
        results.append(res)
        record([res], clock.now(), render.warn)      # each answer saved as it is given
    right = sum(r["right"] for r in results)
    unread = sum(not r["rated"] for r in results)
    con.print(view.quiz_summary(right, len(results), unread))
    if as_json:
        render.print_json({"asked": len(results), "right": right, "unread": unread, "results": results})
    return 0 if right == len(results) else 1
