"""Follow-up questions: what an interviewer asks once the code is written.

A problem's questions live in `questions/<id>.py`, a plain Python file of the bank (no torch at
import: `quiz` starts as fast as `list`) that defines QUESTIONS, a list of:

    Choice(id, en, zh, right=(en, zh), wrong=[(en, zh), ...], explain=(en, zh), see=Ref(...))
        one right answer and plausible wrong ones; shown in an order fixed by the seed
    Number(id, en, zh, answer=callable, unit=(en, zh), rel_tol=0.0, explain=(en, zh), see=Ref(...),
           proof=None)
        a number (bytes, FLOPs, a size) computed by `answer()` from a formula in the file, never typed
        in; checked exactly (rel_tol 0) or within rel_tol. `proof(reference_module)`, when given,
        measures the same number with the problem's reference (verify runs it, with torch, in the judge).

Ref("reference", "text on one line") points at the line of reference/<id>.py that holds the text;
Ref("statement", "words of the English statement") at the statement. `verify` proves each file:
ids unique, both languages, exactly one right choice and at least two wrong ones, distinct texts,
computed answers finite and equal to their proofs, every Ref found exactly once.
"""
from __future__ import annotations

import ast
import importlib.util
import math
import random
import re
import unicodedata
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Callable

Text2 = tuple  # (English, Chinese)


@dataclass(frozen=True)
class Ref:
    where: str            # "reference" or "statement"
    text: str             # a line's text (reference) or words of the English statement


@dataclass(frozen=True)
class Choice:
    id: str
    en: str
    zh: str
    right: Text2
    wrong: list
    explain: Text2
    see: Ref | None = None
    kind: str = field(default="choice", init=False)

    def options(self, seed: int) -> list[tuple[Text2, bool]]:
        """The choices in an order fixed by the seed and the question."""
        opts = [(self.right, True)] + [(w, False) for w in self.wrong]
        random.Random(f"{seed}:{self.id}").shuffle(opts)
        return opts


@dataclass(frozen=True)
class Number:
    id: str
    en: str
    zh: str
    answer: Callable[[], float]
    unit: Text2
    explain: Text2
    rel_tol: float = 0.0
    see: Ref | None = None
    proof: Callable | None = None
    kind: str = field(default="number", init=False)

    def value(self) -> float:
        return self.answer()

    def accepts(self, given) -> bool:
        """given: a number as read_number reads it (exact), or a float."""
        want = self.value()
        if self.rel_tol == 0:
            return given == Fraction(want) if isinstance(given, Fraction) else given == want
        return math.isclose(float(given), want, rel_tol=self.rel_tol, abs_tol=0.0)


# ---------------------------------------------------------------- reading a typed answer
UNITS = {"kib": 2 ** 10, "mib": 2 ** 20, "gib": 2 ** 30, "tib": 2 ** 40, "kb": 10 ** 3, "mb": 10 ** 6,
         "gb": 10 ** 9, "tb": 10 ** 12, "k": 10 ** 3, "m": 10 ** 6, "g": 10 ** 9, "t": 10 ** 12, "b": 1,
         "byte": 1, "bytes": 1, "flop": 1, "flops": 1, "字节": 1, "万": 10 ** 4, "亿": 10 ** 8,
         "千": 10 ** 3, "个": 1, "次": 1}
_SIGNS = {"×": "*", "·": "*", "⋅": "*", "÷": "/", "−": "-", "–": "-", "—": "-", "＾": "^", "（": "(", "）": ")"}
_TOKEN = re.compile(r"\s*(?:(?P<num>(?:\d{1,3}(?:,\d{3})+|\d+(?:_\d+)*)(?:\.\d+)?(?:[eE][+-]?\d+)?|\.\d+"
                    r"(?:[eE][+-]?\d+)?)|(?P<op>\*\*|[-+*/^()])|(?P<unit>[A-Za-z\u4e00-\u9fff]+))")
MAX_BITS = 4096            # 2**4096 is an answer no question has; larger powers are not computed


class Unreadable(ValueError):
    """What was typed is not a number or an arithmetic expression of numbers."""


def read_number(text: str) -> Fraction | None:
    """A number as people type it, exactly: 266240, 266,240, 266_240, 6.4e9, 1.5k, 16 KiB, 2**38, 2^38,
    (2**38), 16*(64*64+64)*4, 2*2**10 GiB, 3.2 万. Arithmetic with parentheses, + - * / and powers
    (** or ^, right to left, before a unary minus: -2**2 is -4), units after a number or a bracket.
    Parsed here, never by eval; None when it cannot be read (a word, half an expression, a power too
    large to hold, a non-real result)."""
    try:
        v = _Reader(text).value()
        float(v)                  # a number no float can hold is no answer either
        return v
    except (Unreadable, ZeroDivisionError, OverflowError):
        return None


class _Reader:
    def __init__(self, text: str):
        text = unicodedata.normalize("NFKC", text or "")
        for a, b in _SIGNS.items():
            text = text.replace(a, b)
        self.tokens, pos, text = [], 0, text.strip()
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None or m.end() == pos:
                raise Unreadable(text[pos:])
            kind = m.lastgroup
            self.tokens.append((kind, m.group(kind)))
            pos = m.end()
            while pos < len(text) and text[pos].isspace():
                pos += 1
        self.i = 0

    def peek(self):
        return self.tokens[self.i] if self.i < len(self.tokens) else (None, None)

    def take(self):
        tok = self.peek()
        self.i += 1
        return tok

    def value(self) -> Fraction:
        if not self.tokens:
            raise Unreadable("")
        v = self.sum()
        if self.i != len(self.tokens):
            raise Unreadable(str(self.peek()[1]))
        return v

    def sum(self) -> Fraction:
        v = self.product()
        while self.peek() in (("op", "+"), ("op", "-")):
            op = self.take()[1]
            w = self.product()
            v = v + w if op == "+" else v - w
        return v

    def product(self) -> Fraction:
        v = self.unary()
        while self.peek() in (("op", "*"), ("op", "/")):
            op = self.take()[1]
            w = self.unary()
            v = v * w if op == "*" else v / w
        return v

    def unary(self) -> Fraction:
        if self.peek() in (("op", "-"), ("op", "+")):
            return -self.unary() if self.take()[1] == "-" else self.unary()
        return self.power()

    def power(self) -> Fraction:
        base = self.atom()
        if self.peek() in (("op", "**"), ("op", "^")):
            self.take()
            exp = self.unary_bare()                    # right to left: 2**3**2 is 2**9
            if exp.denominator != 1:
                raise Unreadable("a power that is not a whole number")
            if base == 0 and exp < 0:
                raise ZeroDivisionError
            if abs(base) > 1 and abs(exp) * math.log2(abs(base)) > MAX_BITS:
                raise Unreadable("a power too large")
            base = base ** int(exp)
        return self.units(base)

    def unary_bare(self) -> Fraction:
        """An exponent: a signed atom or power, its unit (if any) left to the base (2**10 GiB)."""
        if self.peek() in (("op", "-"), ("op", "+")):
            return -self.unary_bare() if self.take()[1] == "-" else self.unary_bare()
        base = self.atom()
        if self.peek() in (("op", "**"), ("op", "^")):
            self.take()
            exp = self.unary_bare()
            if exp.denominator != 1 or (abs(base) > 1 and abs(exp) * math.log2(abs(base)) > MAX_BITS):
                raise Unreadable("a power too large")
            if base == 0 and exp < 0:
                raise ZeroDivisionError
            base = base ** int(exp)
        return base

    def units(self, v: Fraction) -> Fraction:
        while self.peek()[0] == "unit":                 # 16 KiB, 3.2 万, (2*32) bytes, 2**10 GiB
            unit = self.take()[1]
            scale = UNITS.get(unit.lower(), UNITS.get(unit))
            if scale is None:
                raise Unreadable(unit)
            v *= scale
        return v

    def atom(self) -> Fraction:
        kind, text = self.take()
        if kind == "num":
            v = Fraction(text.replace(",", "").replace("_", ""))
        elif (kind, text) == ("op", "("):
            v = self.sum()
            if self.take() != ("op", ")"):
                raise Unreadable("an unclosed bracket")
        else:
            raise Unreadable(str(text))
        return v


def parse_number(text: str) -> float | None:
    """read_number as a float (None: unreadable)."""
    v = read_number(text)
    return None if v is None else float(v)


def read_choice(text: str, n: int) -> int | None:
    """The index (from 0) of the choice typed: its number 1..n or its letter a..; None otherwise."""
    text = unicodedata.normalize("NFKC", text or "").strip().lower().rstrip(".)")
    if text.isdigit() and 1 <= int(text) <= n:
        return int(text) - 1
    if len(text) == 1 and "a" <= text <= chr(ord("a") + n - 1):
        return ord(text) - ord("a")
    return None


def load(path: Path) -> list:
    """The QUESTIONS of a questions file (trusted bank code, imported)."""
    spec = importlib.util.spec_from_file_location(f"attn_drill_questions_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    qs = getattr(mod, "QUESTIONS", None)
    if not isinstance(qs, list):
        raise ValueError(f"{path}: defines no QUESTIONS list")
    return qs


def ref_line(q, reference_src: str) -> int | None:
    """The line of the reference a question points at (1-based), when it points at one."""
    if q.see is None or q.see.where != "reference":
        return None
    hits = [i for i, line in enumerate(reference_src.splitlines(), 1) if q.see.text in line]
    return hits[0] if len(hits) == 1 else None


def problems(qs: list, statement_en: str, reference_src: str, path: Path) -> list[str]:
    """What is wrong with a questions file (verify); empty when it is sound. Proofs are checked apart."""
    out = []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if any(n.split(".")[0] == "torch" for n in names):
                out.append(f"{path.name}: imports torch at the top (import it inside a proof)")
    if len(qs) < 3:
        out.append(f"{path.name}: {len(qs)} question(s); a problem needs at least 3")
    ids = [getattr(q, "id", None) for q in qs]
    if len(set(ids)) != len(ids):
        out.append(f"{path.name}: two questions share an id")
    for q in qs:
        where = f"{path.name}:{getattr(q, 'id', '?')}"
        if not isinstance(q, (Choice, Number)):
            out.append(f"{where}: not a Choice or a Number")
            continue
        for name, pair in (("question", (q.en, q.zh)), ("explain", q.explain)):
            if not (isinstance(pair, tuple) and len(pair) == 2 and all(isinstance(x, str) and x.strip() for x in pair)):
                out.append(f"{where}: {name} needs English and Chinese")
        if isinstance(q, Choice):
            texts = [q.right] + list(q.wrong)
            if len(q.wrong) < 2:
                out.append(f"{where}: needs at least two wrong choices")
            for t2 in texts:
                if not (isinstance(t2, tuple) and len(t2) == 2 and all(isinstance(x, str) and x.strip() for x in t2)):
                    out.append(f"{where}: a choice needs English and Chinese")
            if len({t2[0].strip().lower() for t2 in texts}) != len(texts) or \
                    len({t2[1].strip() for t2 in texts}) != len(texts):
                out.append(f"{where}: two choices read the same: exactly one must be right")
        else:
            try:
                v = q.value()
                if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
                    out.append(f"{where}: the answer is not a finite number ({v!r})")
            except Exception as exc:  # noqa: BLE001 - a broken formula is the file's problem
                out.append(f"{where}: the answer cannot be computed ({type(exc).__name__}: {exc})")
            if not (isinstance(q.unit, tuple) and len(q.unit) == 2):
                out.append(f"{where}: unit needs English and Chinese")
        if q.see is not None:
            if q.see.where == "reference":
                n = sum(q.see.text in line for line in reference_src.splitlines())
                if n != 1:
                    out.append(f"{where}: the reference has {n} lines holding {q.see.text!r} (needs exactly 1)")
            elif q.see.where == "statement":
                if q.see.text not in " ".join(statement_en.split()):
                    out.append(f"{where}: the statement does not say {q.see.text!r}")
            else:
                out.append(f"{where}: see= points at {q.see.where!r}, not reference or statement")
    return out


def prove(qs: list, reference) -> list[str]:
    """Each computed answer against its proof, measured with the reference module (needs torch)."""
    out = []
    for q in qs:
        proof = getattr(q, "proof", None)
        if not isinstance(q, Number) or proof is None:
            continue
        try:
            got, want = float(proof(reference)), float(q.value())
        except Exception as exc:  # noqa: BLE001 - a proof that fails is reported, never fatal
            out.append(f"{q.id}: the proof failed ({type(exc).__name__}: {exc})")
            continue
        if not math.isclose(got, want, rel_tol=max(q.rel_tol, 1e-9), abs_tol=1e-9):
            out.append(f"{q.id}: the answer is {want:g} but the reference measures {got:g}")
    return out


def check_problem(pid: str, with_proofs: bool = True) -> list[str]:
    """Everything verify proves about one problem's questions (with_proofs imports torch and the reference)."""
    from .. import bank
    from . import sources
    path = bank.questions_path(pid)
    if not path.is_file():
        return [f"questions/{pid}.py is missing: every problem has at least 3 follow-up questions"]
    try:
        qs = load(path)
    except Exception as exc:  # noqa: BLE001 - a broken file is reported with its error
        return [f"questions/{pid}.py does not load: {type(exc).__name__}: {exc}"]
    spec = bank.get(pid)
    ref_src = sources.read(bank.reference_path(pid))
    out = problems(qs, spec.statement.en, ref_src, path)
    if with_proofs and any(getattr(q, "proof", None) for q in qs):
        spec_ = importlib.util.spec_from_file_location(f"attn_drill_reference_{pid}", bank.reference_path(pid))
        ref = importlib.util.module_from_spec(spec_)
        spec_.loader.exec_module(ref)
        out += prove(qs, ref)
    return out


if __name__ == "__main__":     # python -m attn_drill.bank.quiz mhsa gqa: check questions files as verify does
    import sys
    from attn_drill import bank as _bank
    from attn_drill.bank import quiz as _quiz   # the module the questions files import, not __main__
    failed = 0
    for pid in sys.argv[1:] or _bank.ids():
        found = _quiz.check_problem(pid)
        failed += bool(found)
        print(("ok   " if not found else "FAIL ") + pid + "".join(f"\n     {p}" for p in found))
    sys.exit(1 if failed else 0)
