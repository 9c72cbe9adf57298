"""The one layer that turns results into rich output (and exercism-style JSON). No torch."""
from __future__ import annotations

import os
import re
import sys

from rich import box
from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from .results import ERROR, FAIL, PASS, SKIP, CaseResult, Report

STYLE = {PASS: "green", FAIL: "red", ERROR: "red", SKIP: "yellow", "-": "dim"}
WORD = {PASS: "PASS", FAIL: "FAIL", ERROR: "ERROR", SKIP: "skip", "-": "-"}


def console(stderr: bool = False) -> Console:
    width = int(os.environ["COLUMNS"]) if os.environ.get("COLUMNS", "").isdigit() else None
    return Console(stderr=stderr, width=width, highlight=False, soft_wrap=False)


def _v(status: str) -> Text:
    return Text(WORD.get(status, status), style=STYLE.get(status, ""))


def _num(x) -> str:
    return "" if x is None else f"{x:.2g}"


# ---------------------------------------------------------------- check report
def report(r: Report, title: str = "", lang: str = "en", width: int = 80) -> Group:
    parts = []
    verdict = Text(" PASS ", style="bold black on green") if r.status == PASS else \
        Text(f" {r.status.upper()} ", style="bold white on red")
    head = Text.assemble(verdict, "  ", (r.problem, "bold"), f"  {title}\n",
                         ("file ", "dim"), _rel(r.file), ("   seed ", "dim"), str(r.seed),
                         ("   full" if r.full else ""), ("   time ", "dim"), f"{r.seconds:.2f} s\n", r.message)
    parts.append(Panel(head, expand=True, border_style=STYLE.get(r.status, "")))
    if r.problem_error:
        parts.append(_problem(r.problem_error, "Your code could not be graded" if r.status == ERROR else
                              "Your code failed"))
    if r.cases:
        parts.append(_case_table(r.cases, width))
    for f in r.findings:
        where = f"line {f['line']}: " if f["line"] else ""
        parts.append(Text(f"  ✗ {where}{f['message']}", style="red"))
    first = r.first_failure()
    if first is not None:
        parts.append(_failure(first, lang))
    if r.diagnosis:
        text = r.diagnosis.zh if lang == "zh" else r.diagnosis.en
        parts.append(Panel(Text(text), title=f"looks like a known mistake: {r.diagnosis.mistake}",
                           border_style="magenta", expand=True))
    elif r.symptom:
        text = r.symptom.zh if lang == "zh" else r.symptom.en
        parts.append(Panel(Text(text), title=f"what the failure shows: {r.symptom.mistake}",
                           border_style="magenta", expand=True))
    for w in r.warnings:
        parts.append(Text(f"  note: {w}", style="yellow"))
    if r.output.strip():
        out = r.output.strip()
        parts.append(Panel(Text(out[-1500:]), title="your code printed", border_style="dim"))
    if r.replay:
        parts.append(Text.assemble(("replay: ", "dim"), (r.replay, "bold")))
    if r.status != PASS:
        parts.append(Text(f"stuck? attn-drill hint {r.problem}   ·   attn-drill show {r.problem}", style="dim"))
    return Group(*parts)


def _rel(path: str) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:
        return path


def _problem(p, title: str) -> Panel:
    body = Text(p.message + "\n")
    for fr in p.frames:
        body.append(f"  {fr.file}:{fr.line}", style="bold cyan")
        body.append(f" in {fr.func}\n")
        if fr.code:
            body.append(f"      {fr.code}\n", style="yellow")
    return Panel(body, title=f"{title} ({p.kind})", border_style="red", expand=True)


def _case_table(cases: list[CaseResult], width: int = 80) -> Table:
    t = Table(show_lines=False, pad_edge=False, expand=False, box=box.SIMPLE_HEAD)
    longest = max((len(c.name) for c in cases), default=4)
    t.add_column("case", no_wrap=True, min_width=min(longest, 24), max_width=24, overflow="ellipsis")
    wide = width >= 110
    if wide:
        t.add_column("inputs", min_width=10)
    t.add_column("dtype", no_wrap=True)
    t.add_column("notes", min_width=6)
    t.add_column("result", no_wrap=True)
    t.add_column("error ≤ allowed", no_wrap=True, justify="right")
    if wide:
        t.add_column("ms", no_wrap=True, justify="right")
    for c in cases:
        if c.status in (SKIP, PASS):
            verdict = _v(c.status)
        else:
            where = "grad" if c.gradient == FAIL else ("fwd" if c.forward == FAIL else "")
            verdict = Text.assemble(_v(c.status), f" {where}" if where else "")
        err = ""
        if c.max_error is not None:
            ok = c.compare is None or c.compare.get("ok", True)
            err = Text(f"{_num(c.max_error)} {'≤' if ok else '>'} {_num(c.allowed)}",
                       style="" if ok else "red")
        row = [Text(c.name, style=STYLE.get(c.status, ""))] + ([c.shapes] if wide else []) + [
            _short(c.dtype), c.note.replace("+", " + "), verdict, err]
        if wide:
            row.append(f"{c.time_ms:.0f}")
        t.add_row(*row)
    return t


def _short(dtype: str) -> str:
    for long, short in (("float64", "fp64"), ("float32", "fp32"), ("bfloat16", "bf16"), ("float16", "fp16")):
        dtype = dtype.replace(long, short)
    return dtype


def _failure(c: CaseResult, lang: str) -> Panel:
    cmp = c.compare
    numeric = bool(cmp and not cmp["ok"] and c.tensor and not c.tensor.startswith("trace"))
    # a numeric failure is spelled out by the summary below; its headline only names the tensor
    headline = c.message if not numeric or cmp["nonfinite"] else f"`{c.tensor}` does not match the reference"
    rows = [Text(headline, style="bold")]
    if c.shapes:
        rows.append(Text(f"inputs: {c.shapes}   dtype: {c.dtype}" + (f"   {c.note}" if c.note else ""), style="dim"))
    if c.problem:
        rows.append(_problem(c.problem, "Exception in your code"))
    for msg in c.checks[1:]:
        rows.append(Text(f"• {msg}"))
    if numeric:
        share = 100.0 * cmp["mismatched"] / max(cmp["total"], 1)
        rows.append(Text(
            f"Mismatched elements: {cmp['mismatched']} / {cmp['total']} ({share:.1f}%)\n"
            f"Greatest absolute difference: {cmp['max_abs']:.4g} at index {tuple(cmp['max_abs_index'])} "
            f"(up to {cmp['allowed_abs']:.2g} + {cmp['rtol']:.2g}·|expected| allowed)\n"
            f"Greatest relative difference: {cmp['max_rel']:.4g} at index {tuple(cmp['max_rel_index'])}\n"
            f"Relative error norm: {cmp['relnorm']:.3g} (gate {cmp['gate']:.2g}); the reference's own error in "
            f"this dtype: {cmp['ref_err']:.2g}"))
    if c.detail:
        rows.append(_window(c.detail))
        if c.detail.get("heatmap"):
            rows.append(_heatmap(c.detail["heatmap"], c.detail.get("axes", ["query", "key"]), c.tensor))
        if c.detail.get("weights"):
            rows.append(_weights(c.detail["weights"]))
    return Panel(Group(*rows), title=f"first failing case: {c.name}", border_style="red", expand=True)


def _window(d: dict) -> Table:
    t = Table(title=f"got vs expected around index {tuple(d['index'])}", title_justify="left", pad_edge=False)
    for col in ("index", "got", "expected", "diff"):
        t.add_column(col, justify="right")
    for w in d["window"]:
        diff = w["got"] - w["expected"]
        mark = "bold red" if list(w["index"]) == list(d["index"]) else ""
        t.add_row(str(tuple(w["index"])), f"{w['got']:.6g}", f"{w['expected']:.6g}", Text(f"{diff:+.3g}", style=mark))
    return t


SHADES = [(1.0, "·", "green"), (10.0, "░", "yellow"), (100.0, "▒", "dark_orange"), (1e3, "▓", "red"),
          (float("inf"), "█", "bold red")]


def _heatmap(h: dict, axes, tensor: str) -> Text:
    out = Text()
    lead = f" at leading index {tuple(h['leading_index'])}" if h["leading_index"] else ""
    out.append(f"error of `{tensor}`{lead} over ({axes[0]} ↓, {axes[1]} →), {h['rows']}×{h['cols']}"
               f"{' (max-pooled)' if len(h['ratio']) < h['rows'] or len(h['ratio'][0]) < h['cols'] else ''}; "
               f"· within tolerance, ░ ▒ ▓ █ = 10×, 100×, 1000×, more:\n", style="dim")
    for row in h["ratio"]:
        for v in row:
            for limit, ch, style in SHADES:
                if v <= limit:
                    out.append(ch, style=style)
                    break
        out.append("\n")
    return out


WEIGHT_SHADES = [(1e-3, "░", "yellow"), (1e-2, "▒", "dark_orange"), (1e-1, "▓", "red"),
                 (float("inf"), "█", "bold red")]


def _weights(w: dict) -> Text:
    """The attention weights (the first softmax of each side) compared over (query, key)."""
    if w["matches"]:
        return Text("Your attention weights (the first softmax) match the reference's: the mistake is after "
                    "the softmax (weights @ V, merging the heads, or the output projection).", style="cyan")
    out = Text()
    lead = f" at (batch, head) {tuple(w['leading_index'])}" if w["leading_index"] else ""
    pooled = len(w["diff"]) < w["rows"] or len(w["diff"][0]) < w["cols"]
    out.append("Your attention weights (the first softmax) already differ from the reference's, so the "
               "mistake is in the scores, the masks or the softmax. ", style="cyan")
    out.append(f"|yours - reference|{lead} over (query ↓, key →), {w['rows']}×{w['cols']}"
               f"{' (max-pooled)' if pooled else ''}; · equal, ░ ▒ ▓ █ up to 1e-3, 1e-2, 0.1, more:\n",
               style="dim")
    for row in w["diff"]:
        for v in row:
            if v <= w["limit"]:
                out.append("·", style="green")
                continue
            for limit, ch, style in WEIGHT_SHADES:
                if v <= limit:
                    out.append(ch, style=style)
                    break
        out.append("\n")
    return out


# ---------------------------------------------------------------- exercism JSON
def exercism(r: Report) -> dict:
    """The exercism test-runner format, version 3, plus per-case numbers under `attn_drill`."""
    tests = []
    # the format knows pass, fail and error: a skipped case is not in `tests`, it is listed under
    # attn_drill.skipped with its reason (never counted as passed)
    skipped = [{"name": c.name, "reason": c.message} for c in r.cases if c.status == SKIP]
    for c in r.cases:
        if c.status == SKIP:
            continue
        status = {PASS: "pass", FAIL: "fail", ERROR: "error"}[c.status]
        msg = c.message or None
        if c.diagnosis:
            msg = f"{msg} Looks like: {c.diagnosis.mistake}: {c.diagnosis.en}"
        tests.append({
            "name": c.name, "status": status, "message": msg if status != "pass" else None,
            "output": None, "test_code": f"attn-drill check {r.problem} --seed {r.seed} --case {c.name}",
            "task_id": None,
            "attn_drill": {"shapes": c.shapes, "dtype": c.dtype, "note": c.note, "seed": r.seed,
                           "forward": c.forward, "gradient": c.gradient, "tensor": c.tensor or None,
                           "max_error": c.max_error, "allowed": c.allowed, "time_ms": round(c.time_ms, 3),
                           "mismatched": c.compare["mismatched"] if c.compare else None,
                           "total": c.compare["total"] if c.compare else None,
                           "diagnosis": c.diagnosis.mistake if c.diagnosis else None},
        })
    message = None
    if r.status != PASS:
        message = r.message
        if r.problem_error:
            fr = r.problem_error.frames[-1] if r.problem_error.frames else None
            message = r.problem_error.message + (f" ({fr.file}:{fr.line})" if fr else "")
    return {
        "version": 3, "status": r.status, "message": message,
        "tests": tests,
        "attn_drill": {"problem": r.problem, "file": r.file, "seed": r.seed, "full": r.full,
                       "seconds": round(r.seconds, 3), "replay": r.replay or None,
                       "diagnosis": r.diagnosis.mistake if r.diagnosis else None,
                       "symptom": r.symptom.mistake if r.symptom else None,
                       "skipped": skipped,
                       "findings": r.findings, "warnings": r.warnings,
                       "output": (r.output[:500] or None)},
    }


_CJK_BREAK = re.compile(r"(?<=[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef])[ \t]*\n[ \t]*"
                        r"(?=[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef])")


def markdown(text: str):
    """A statement as rich Markdown. A line break between two CJK characters is dropped: Markdown
    would render it as a space, which Chinese text does not have."""
    from rich.markdown import Markdown  # only `show` needs it; keep `list` light
    return Markdown(_CJK_BREAK.sub("", text))


def is_tty() -> bool:
    return sys.stdout.isatty()
