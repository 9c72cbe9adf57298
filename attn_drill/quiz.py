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
from dataclasses import dataclass, field
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

    def accepts(self, given: float) -> bool:
        want = self.value()
        if self.rel_tol == 0:
            return given == want
        return math.isclose(given, want, rel_tol=self.rel_tol, abs_tol=0.0)


def parse_number(text: str) -> float | None:
    """A number as a person types it: 1024, 1,024, 1_024, 6.4e9, 2**20, 2^20, 16 KiB / MiB / GiB, 1.5k,
    and products of those (2*32*4096*2 bytes as 2*32*4096*2). No eval: anything else is None."""
    s = text.strip().replace(",", "").replace("_", "").replace(" ", "")
    units = {"kib": 2 ** 10, "mib": 2 ** 20, "gib": 2 ** 30, "tib": 2 ** 40, "kb": 1e3, "mb": 1e6, "gb": 1e9,
             "tb": 1e12, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "b": 1}
    low = s.lower()
    scale = 1
    for u in sorted(units, key=len, reverse=True):
        if low.endswith(u) and low[: -len(u)]:
            scale, low = units[u], low[: -len(u)]
            break
    try:
        value = 1.0
        for factor in low.replace("**", "^").split("*"):      # a product of powers and plain numbers
            base, power, exp = factor.partition("^")
            value *= float(base) ** float(exp) if power else float(base)
        return value * scale if isinstance(value, float) else None   # (-8)^(1/3) is complex: no answer
    except (ValueError, OverflowError, ZeroDivisionError):
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
    from . import bank, source
    path = bank.questions_path(pid)
    if not path.is_file():
        return [f"questions/{pid}.py is missing: every problem has at least 3 follow-up questions"]
    try:
        qs = load(path)
    except Exception as exc:  # noqa: BLE001 - a broken file is reported with its error
        return [f"questions/{pid}.py does not load: {type(exc).__name__}: {exc}"]
    spec = bank.get(pid)
    ref_src = source.read(bank.reference_path(pid))
    out = problems(qs, spec.statement.en, ref_src, path)
    if with_proofs and any(getattr(q, "proof", None) for q in qs):
        spec_ = importlib.util.spec_from_file_location(f"attn_drill_reference_{pid}", bank.reference_path(pid))
        ref = importlib.util.module_from_spec(spec_)
        spec_.loader.exec_module(ref)
        out += prove(qs, ref)
    return out


if __name__ == "__main__":     # python -m attn_drill.quiz mhsa gqa: check questions files as verify does
    import sys
    from attn_drill import bank as _bank, quiz as _quiz   # the module the questions files import, not __main__
    failed = 0
    for pid in sys.argv[1:] or _bank.ids():
        found = _quiz.check_problem(pid)
        failed += bool(found)
        print(("ok   " if not found else "FAIL ") + pid + "".join(f"\n     {p}" for p in found))
    sys.exit(1 if failed else 0)
