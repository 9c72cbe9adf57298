"""`quiz`: the interviewer's follow-up questions, asked in the terminal (numbers or arrow keys), or
answered from --answers for scripts. Each answer is a review of the question's card (right: good,
wrong: again), so a forgotten concept comes back like a forgotten implementation. No torch."""
from __future__ import annotations

import functools
import json
import os
import select
import sys
from pathlib import Path

from .. import bank, clock, quiz, render, schedule, source, state
from ..i18n import pick, t
from ..render import practice as view
from .check import UsageError

DEFAULT_COUNT = 5


@functools.lru_cache(maxsize=None)
def questions_of(pid: str) -> list:
    path = bank.questions_path(pid)
    if not path.is_file():
        return []
    try:
        return quiz.load(path)
    except Exception as exc:  # noqa: BLE001 - a broken questions file of the bank: say which
        raise bank.BankError(bank.fault_message("questions", path, f"{type(exc).__name__}: {exc}")) from None


def choose(root: Path, pid: str | None, count: int, due_only: bool) -> list[tuple[str, object]]:
    """(problem, question) to ask: due ones first, then ones never asked of problems passed (or of pid)."""
    data = state.load(root)
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
        passed = [pid] if pid else [s.id for s in _ordered() if data["problems"].get(s.id, {}).get("status") == "passed"]
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
    from .. import curriculum
    return curriculum.order(bank.all_specs())


class Answers:
    """Where answers come from: a list (--answers), or the terminal."""

    def __init__(self, given: list[str] | None):
        self.given = list(given) if given is not None else None
        self.fd = sys.stdin.fileno() if given is None and sys.stdin is not None and sys.stdin.isatty() else None

    def choice(self, n: int, con, draw) -> int | None:
        """The index picked (0-based), None to skip. Keys: 1-n, arrows and Enter, s to skip."""
        if self.given is not None:
            return _index(self.given.pop(0) if self.given else "", n)
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

    def number(self, con) -> str | None:
        if self.given is not None:
            return self.given.pop(0) if self.given else None
        try:
            return con.input(t("quiz.your_number") + " ")
        except EOFError:
            return None


def _index(text: str, n: int) -> int | None:
    text = text.strip().lower()
    if text.isdigit() and 1 <= int(text) <= n:
        return int(text) - 1
    if len(text) == 1 and "a" <= text <= chr(ord("a") + n - 1):
        return ord(text) - ord("a")
    return None


def ask(pid: str, q, seed: int, answers: Answers, con, lang: str) -> dict:
    """Ask one question; the result {id, problem, right, given, answer}. Draws through render.practice."""
    ref_src = source.read(bank.reference_path(pid))
    line = quiz.ref_line(q, ref_src)
    where = f"reference/{pid}.py:{line}" if line else (t("quiz.statement", id=pid) if q.see else None)
    if isinstance(q, quiz.Choice):
        opts = q.options(seed)
        texts = [pick(*o[0]) for o in opts]
        con.print(view.question(pid, q, lang))
        if answers.given is None:                # the choices redrawn in place as the arrow keys move
            from rich.live import Live
            with Live(view.choices(texts, 0), console=con, auto_refresh=False) as live:
                at = answers.choice(len(opts), con, lambda i: live.update(view.choices(texts, i), refresh=True))
        else:
            con.print(view.choices(texts, None))
            at = answers.choice(len(opts), con, None)
        right = at is not None and opts[at][1]
        correct = next(i for i, o in enumerate(opts) if o[1])
        result = {"problem": pid, "id": q.id, "kind": "choice", "given": None if at is None else at + 1,
                  "right": bool(right), "answer": correct + 1}
        con.print(view.feedback(right, at is None, texts[correct], pick(*q.explain), where, lang, width=con.width))
    else:
        con.print(view.question(pid, q, lang))
        raw = answers.number(con)
        value = quiz.parse_number(raw) if raw is not None else None
        right = value is not None and q.accepts(value)
        want = q.value()
        shown = f"{want:,.0f}" if float(want).is_integer() else f"{want:.6g}"
        unit = pick(*q.unit)
        result = {"problem": pid, "id": q.id, "kind": "number", "given": raw, "right": bool(right), "answer": want}
        con.print(view.feedback(right, raw is None or raw.strip() == "", f"{shown} {unit}", pick(*q.explain), where,
                                lang, got=None if value is None else value, width=con.width))
    return result


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
        con.print(t("quiz.nothing", id=pid) if pid else t("quiz.nothing_all"), soft_wrap=True)
        if as_json:
            print(json.dumps({"asked": 0, "right": 0, "results": []}, indent=2))
        return 0
    seed = int(clock.now()) // 86400
    answers = Answers(given)
    results = []
    for i, (p, q) in enumerate(picked, 1):
        con.print(view.quiz_progress(i, len(picked)))
        res = ask(p, q, seed, answers, con, lang)
        results.append(res)
        now = clock.now()
        state.update(root, lambda d, r=res: schedule.review(d, f"{r['problem']}/{r['id']}", "quiz",
                                                            "good" if r["right"] else "again", now))
    right = sum(r["right"] for r in results)
    con.print(view.quiz_summary(right, len(results)))
    if as_json:
        print(json.dumps({"asked": len(results), "right": right, "results": results}, indent=2, ensure_ascii=False))
    return 0 if right == len(results) else 1
