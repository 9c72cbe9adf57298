"""A check report: the first screen (verdict, the failing case and why, the named mistake, the
replay command; fits 24 lines at 80 columns), then the details (the case table, the mismatch,
got against expected, heatmaps of the error and of the attention weights, all notes)."""
from __future__ import annotations

from rich import box
from rich.console import Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ..i18n import index, pick, t, tn
from ..results import ERROR, FAIL, PASS, SKIP, CaseResult, Report
from .base import FIRST_SCREEN, STYLE, clip, fitted_table, height, num

# ---------------------------------------------------------------- the first screen


def verdict_word(status: str) -> str:
    return t(f"verdict.{status}") if status in (PASS, FAIL, ERROR, SKIP) else status


def first_screen(r: Report, title: str, width: int = 80, budget: int = FIRST_SCREEN, hint: bool = True,
                 details_cmd: str | None = None) -> Group:
    """The verdict and what to do next, in at most `budget` lines at this width. Texts that would not
    fit are cut after a whole word; the replay command is never cut."""
    for level in range(4):                       # shorter texts at each level, until it fits
        parts = _first(r, title, width, level, hint, details_cmd)
        group = Group(*parts)
        if height(group, width) <= budget or level == 3:
            return group
    return group


def _first(r: Report, title: str, width: int, level: int, hint: bool, details_cmd: str | None) -> list:
    inner = max(20, width - 4)               # inside a panel's borders and padding
    parts = [_header(r, title, inner)]
    first = r.first_failure()
    said = {summary_line(r), one_line(r.message), first_line(r.message)}
    same = first is not None and first.problem is not None and r.problem_error is not None and \
        first.problem.message == r.problem_error.message
    if r.problem_error is not None and not same:
        parts.append(_problem_lines(r.problem_error, inner, frames=3 - level if level < 3 else 1, said=said))
    for f in [f for f in r.findings if f.get("line")][:2]:
        parts.append(Text(clip(t("report.line", line=f["line"], message=f["message"]), inner, 2), style="red"))
    if first is not None:
        parts.append(_first_case(first, inner, level, said))
    named = r.diagnosis or r.symptom
    if named is not None:
        label = t("report.looks_like") if r.diagnosis else t("report.shows")
        body = clip(pick(named.en, named.zh), inner, (5, 3, 2, 1)[level])
        parts.append(Panel(Text(body), title=t("report.named", label=label, id=named.mistake), title_align="left",
                           border_style="magenta", expand=True, padding=(0, 1)))
    if level < 3:
        line = _spread(r, inner, 2 - (level > 0))
        if line is not None:
            parts.append(line)
    notes = r.warnings[: (2, 1, 1, 0)[level]]
    for w in notes:
        parts.append(Text(clip(t("report.note", text=w), inner + 2, 2), style="yellow"))
    hidden = len(r.warnings) - len(notes)
    if r.output.strip():
        n = len(r.output.strip().splitlines())
        parts.append(Text(tn("report.printed", n), style="dim"))
    elif hidden > 0:
        parts.append(Text(tn("report.more_notes", hidden), style="dim"))
    if r.replay:
        parts.append(Text.assemble((t("report.replay"), "dim"), (r.replay, "bold"), no_wrap=True,
                                   overflow="ignore"))
    if r.status != PASS and hint:
        tips = [t("report.stuck", id=r.problem)]
        if details_cmd and r.cases:
            tips.insert(0, t("report.details", command=details_cmd))
        parts.append(Text(clip(" · ".join(tips), inner + 2, 2), style="dim"))
    return parts


def _header(r: Report, title: str, inner: int) -> Panel:
    style = STYLE.get(r.status, "")
    badge = Text(f" {verdict_word(r.status)} ", style="bold black on green" if r.status == PASS else
                 "bold white on red")
    where = Text.assemble((r.file, ""), ("  ·  ", "dim"), (t("report.seed", seed=r.seed), ""))
    if r.full:
        where.append("  ·  --full", style="dim")
    kind = r.problem_error.kind if r.problem_error else ""
    if r.seconds >= 0.005 and kind != "timeout":
        where.append("  ·  ", style="dim")
        where.append(t("report.seconds", s=f"{r.seconds:.2f}"))
    summary = Text(clip(summary_line(r), inner, 3), style="bold" if r.status != PASS else "")
    head = Text.assemble(badge, "  ", (r.problem, "bold"), "  ", title)
    return Panel(Group(Text(clip(head.plain, inner, 1)) if head.cell_len > inner else head,
                       Text(clip(where.plain, inner, 2), style="dim") if where.cell_len > inner else where,
                       summary),
                 border_style=style, expand=True, padding=(0, 1))


def summary_line(r: Report) -> str:
    """The report's one line, in the user's language, from the counts (not from the engine's words)."""
    ran = [c for c in r.cases if c.status != SKIP]
    skipped = [c for c in r.cases if c.status == SKIP]
    failed = [c for c in ran if c.status in (FAIL, ERROR)]
    extra = ""
    if skipped:
        extra = tn("report.skipped", len(skipped))
    if r.status == PASS:
        if not ran:
            return t("report.nothing_ran") + extra
        return tn("report.all_passed", len(ran)) + extra
    if r.problem_error is not None and (not r.cases or r.status == ERROR or
                                        r.problem_error.kind in ("timeout", "crash", "runner", "memory")):
        return first_line(r.problem_error.message)
    if len(ran) == 1 and len(failed) == 1 and failed[0].problem is not None and \
            failed[0].problem.message.startswith("NotImplementedError"):
        return t("report.stub")
    parts = []
    if failed:
        fwd = sum(c.forward == FAIL for c in failed)
        grad = sum(c.gradient == FAIL and c.forward != FAIL for c in failed)
        where = "" if not grad else t("report.grads_only") if not fwd else t("report.where_failed", fwd=fwd, grad=grad)
        parts.append(t("report.cases_failed", failed=len(failed), ran=len(ran)) + where)
    forbidden = [f for f in r.findings if f.get("line")]
    if forbidden:
        parts.append(t("report.forbidden", name=forbidden[0].get("name", "?"), line=forbidden[0]["line"]))
    for f in [f for f in r.findings if not f.get("line")][:1]:
        parts.append(f["message"])
    if not parts:
        parts.append(one_line(r.message))
    return "; ".join(parts) + extra


def one_line(text: str) -> str:
    return " ".join((text or "").split())


def first_line(text: str) -> str:
    return one_line((text or "").strip().split("\n")[0])


def _problem_lines(p, inner: int, frames: int, said: set) -> Group:
    """An error in the user's code: the message once, then the user's own lines (innermost last)."""
    rows = []
    lines = (p.message or "").strip().split("\n")
    if first_line(p.message) in said:        # the header said the first line: the rest, as it is laid out
        lines = lines[1:]
    elif len(lines) == 1:
        lines = [one_line(p.message)]
    for line in lines[:8]:
        indent = len(line) - len(line.lstrip())
        rows.append(Text(" " * indent + clip(line, inner - indent, 3) if line.strip() else "", style="red"))
    if len(lines) > 8:
        rows.append(Text("…", style="red"))
    said.add(first_line(p.message))
    said.add(one_line(p.message))
    for fr in p.frames[-frames:] if frames > 0 else []:
        loc = Text.assemble(("  → ", "red"), (f"{fr.file}:{fr.line}", "bold cyan"), f" {t('report.in')} {fr.func}")
        rows.append(loc)
        if fr.code:
            rows.append(Text("      " + clip(fr.code, inner - 6, 1), style="yellow"))
    return Group(*rows)


def _first_case(c: CaseResult, inner: int, level: int, said: set) -> Group:
    where = ", ".join(x for x in (c.shapes, _short(c.dtype), c.note.replace("+", " + ")) if x)
    head = Text.assemble(("✗ ", "bold red"), (c.name, "bold"), f"  ({where})" if where else "")
    rows = [Text(clip(head.plain, inner, 1 + (level < 2))) if head.cell_len > inner else head]
    reason = case_reason(c)
    if reason and reason not in said:
        rows.append(Text(clip("  " + reason, inner, (4, 3, 2, 2)[level])))
        said.add(reason)
    for msg in c.checks[1:1 + (level < 2)]:
        rows.append(Text(clip(f"  • {msg}", inner, 2)))
    if c.problem is not None:
        if c.problem.message.startswith("NotImplementedError"):
            said.add(first_line(c.problem.message))       # "not written yet" says it already
        rows.append(_problem_lines(c.problem, inner, (2, 2, 1, 1)[level], said))
    return Group(*rows)


def case_reason(c: CaseResult) -> str:
    """One sentence: what is wrong in this case."""
    cmp = c.compare
    numeric = bool(cmp and not cmp["ok"] and c.tensor and not c.tensor.startswith("trace"))
    if numeric and not cmp["nonfinite"]:
        if cmp["mismatched"] == 0:
            return t("cmp.off_as_whole", name=c.tensor, relnorm=num(cmp["relnorm"], 3), gate=num(cmp["gate"], 3))
        return t("cmp.differs", name=c.tensor, bad=cmp["mismatched"], total=cmp["total"],
                 share=f"{100.0 * cmp['mismatched'] / max(cmp['total'], 1):.1f}", worst=num(cmp["max_abs"], 3),
                 at=index(cmp["max_abs_index"]), allowed=num(cmp["allowed_abs"]), rtol=num(cmp["rtol"]))
    return one_line(c.message)


def _spread(r: Report, inner: int, lines: int) -> Text | None:
    """Which cases fail and which pass, on one or two lines: a pattern the user can read."""
    ran = [c for c in r.cases if c.status != SKIP]
    failed = [c.name for c in ran if c.status in (FAIL, ERROR)]
    passed = [c.name for c in ran if c.status == PASS]
    if len(ran) < 2 or not failed:
        return None
    text = t("report.failing", names=" ".join(failed))
    if passed:
        text += "  ·  " + t("report.passing", names=" ".join(passed))
    return Text(clip(text, inner + 2, lines), style="dim")


def _short(dtype: str) -> str:
    for long, short in (("float64", "fp64"), ("float32", "fp32"), ("bfloat16", "bf16"), ("float16", "fp16")):
        dtype = dtype.replace(long, short)
    return dtype


# ---------------------------------------------------------------- the details
def details(r: Report, width: int = 80) -> Group:
    parts = []
    if r.cases:
        parts.append(case_table(r.cases, width))
    if r.problem_error is not None and r.problem_error.frames:
        parts.append(_traceback(r.problem_error, t("report.could_not") if r.status == ERROR else t("report.failed")))
    first = r.first_failure()
    if first is not None:
        parts.append(failure_panel(first))
    named = r.diagnosis or r.symptom
    if named is not None:
        label = t("report.looks_like") if r.diagnosis else t("report.shows")
        parts.append(Panel(Text(pick(named.en, named.zh)), title=t("report.named", label=label, id=named.mistake), title_align="left",
                           border_style="magenta", expand=True))
    for w in r.warnings:
        parts.append(Text(t("report.note", text=w), style="yellow"))
    if r.output.strip():
        parts.append(Panel(Text(r.output.strip()[-1500:]), title=t("report.printed_title"), border_style="dim"))
    return Group(*parts)


def case_table(cases: list[CaseResult], width: int) -> Table:
    rows = []
    for c in cases:
        if c.status in (SKIP, PASS):
            verdict = Text(verdict_word(c.status), style=STYLE.get(c.status, ""))
        else:
            where = t("report.grad") if c.gradient == FAIL else (t("report.fwd") if c.forward == FAIL else "")
            verdict = Text(verdict_word(c.status) + (f" {where}" if where else ""), style="red")
        err = Text("")
        if c.max_error is not None:
            ok = c.compare is None or c.compare.get("ok", True)
            # an element and its own bound (compare's "shown"), so the sign printed is the truth
            e, a = (c.compare or {}).get("shown") or (c.max_error, c.allowed)
            err = Text(f"{num(e)} {'≤' if e <= a else '>'} {num(a)}", style="" if ok else "red")
        rows.append([Text(c.name, style=STYLE.get(c.status, "")), c.shapes, _short(c.dtype),
                     c.note.replace("+", " + "), verdict, err, f"{c.time_ms:.0f}"])
    cols = [{"name": t("table.case"), "drop": 0, "max": 28}, {"name": t("table.inputs"), "drop": 3, "wrap": True},
            {"name": t("table.dtype"), "drop": 1}, {"name": t("table.notes"), "drop": 2, "wrap": True},
            {"name": t("table.result"), "drop": 0}, {"name": t("table.error"), "drop": 0, "justify": "right"},
            {"name": "ms", "drop": 4, "justify": "right"}]
    return fitted_table(cols, rows, width, show_lines=False, pad_edge=False, expand=False, box=box.SIMPLE_HEAD)


def _traceback(p, title: str) -> Panel:
    body = Text(p.message + "\n")
    for fr in p.frames:
        body.append(f"  {fr.file}:{fr.line}", style="bold cyan")
        body.append(f" {t('report.in')} {fr.func}\n")
        if fr.code:
            body.append(f"      {fr.code}\n", style="yellow")
    return Panel(body, title=f"{title} ({p.kind})", border_style="red", expand=True)


def failure_panel(c: CaseResult) -> Panel:
    cmp = c.compare
    numeric = bool(cmp and not cmp["ok"] and c.tensor and not c.tensor.startswith("trace"))
    rows = [Text(case_reason(c), style="bold")]
    if c.shapes:
        rows.append(Text(t("report.inputs_line", shapes=c.shapes, dtype=c.dtype) +
                         (f"   {c.note}" if c.note else ""), style="dim"))
    if c.problem:
        rows.append(_traceback(c.problem, t("report.exception")))
    for msg in c.checks[1:]:
        rows.append(Text(f"• {msg}"))
    if numeric:
        rows.append(Text(t("cmp.summary", bad=cmp["mismatched"], total=cmp["total"],
                           share=f"{100.0 * cmp['mismatched'] / max(cmp['total'], 1):.1f}",
                           max_abs=f"{cmp['max_abs']:.4g}", at_abs=index(cmp["max_abs_index"]),
                           allowed=num(cmp["allowed_abs"]), rtol=num(cmp["rtol"]), max_rel=f"{cmp['max_rel']:.4g}",
                           at_rel=index(cmp["max_rel_index"]), relnorm=num(cmp["relnorm"], 3),
                           gate=num(cmp["gate"]), ref_err=num(cmp["ref_err"]))))
    if c.detail:
        rows.append(_window(c.detail))
        if c.detail.get("heatmap"):
            rows.append(_heatmap(c.detail["heatmap"], c.detail.get("axes", ["query", "key"]), c.tensor))
        if c.detail.get("weights"):
            rows.append(_weights(c.detail["weights"]))
    return Panel(Group(*rows), title=t("report.first_failing", name=c.name), border_style="red", expand=True)


def _window(d: dict) -> Table:
    tab = Table(title=t("report.window", at=index(d["index"])), title_justify="left", pad_edge=False)
    for col in ("index", "got", "expected", "diff"):
        tab.add_column(t(f"table.{col}"), justify="right", no_wrap=True)
    for w in d["window"]:
        diff = w["got"] - w["expected"]
        mark = "bold red" if list(w["index"]) == list(d["index"]) else ""
        tab.add_row(index(w["index"]), f"{w['got']:.6g}", f"{w['expected']:.6g}", Text(f"{diff:+.3g}", style=mark))
    return tab


SHADES = [(1.0, "·", "green"), (10.0, "░", "yellow"), (100.0, "▒", "dark_orange"), (1e3, "▓", "red"),
          (float("inf"), "█", "bold red")]


def _heatmap(h: dict, axes, tensor: str) -> Text:
    out = Text()
    lead = t("report.at_leading", at=index(h["leading_index"])) if h["leading_index"] else ""
    pooled = len(h["ratio"]) < h["rows"] or len(h["ratio"][0]) < h["cols"]
    out.append(t("report.heatmap", tensor=tensor, lead=lead, rows_axis=axes[0], cols_axis=axes[1], rows=h["rows"],
                 cols=h["cols"], pooled=t("report.pooled") if pooled else "") + "\n", style="dim")
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
        return Text(t("report.weights_match"), style="cyan")
    out = Text()
    lead = t("report.at_batch_head", at=index(w["leading_index"])) if w["leading_index"] else ""
    pooled = len(w["diff"]) < w["rows"] or len(w["diff"][0]) < w["cols"]
    out.append(t("report.weights_differ") + " ", style="cyan")
    out.append(t("report.weights_map", lead=lead, rows=w["rows"], cols=w["cols"],
                 pooled=t("report.pooled") if pooled else "") + "\n", style="dim")
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
