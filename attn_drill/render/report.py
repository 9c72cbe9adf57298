"""A check report: the first screen (verdict, the failing case and why, the named mistake, the
replay command; fits 24 lines at 80 columns), then the details (the case table, the mismatch,
got against expected, heatmaps of the error and of the attention weights, all notes)."""
from __future__ import annotations

from rich import box
from rich.console import Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ..i18n import has, index, pick, t, tn
from ..messages import MESSAGES
from ..results import ERROR, FAIL, PASS, SKIP, CaseResult, Report
from .base import FIRST_SCREEN, STYLE, Command, Para, cell_width, clip, fitted_table, height, num

# ---------------------------------------------------------------- the first screen


STATIC = ("syntax", "missing", "refused", "import", "forbidden")   # found before any code ran


def verdict_word(status: str) -> str:
    return t(f"verdict.{status}") if status in (PASS, FAIL, ERROR, SKIP) else status


def is_static(r: Report) -> bool:
    """The file was refused before it ran (a syntax error, a forbidden call...): no seed, no replay."""
    return r.problem_error is not None and not r.cases and r.problem_error.kind in STATIC


def readable(mistake_id: str) -> str:
    """An id as words, for a mistake that has no title yet: softmax_query_axis → softmax query axis."""
    return mistake_id.replace("_", " ")


def mistake_title(problem: str, mistake_id: str) -> str:
    """A known mistake's short title (its spec's `title`), or a symptom's, in the user's language."""
    from .. import bank
    from ..bank import catalogue
    kind = catalogue.kind_of(mistake_id)
    if kind is not None:
        return pick(kind.title.en, kind.title.zh)
    try:
        m = bank.get(problem).mistake(mistake_id)
    except Exception:  # noqa: BLE001 - a report of a problem that is gone: its id, made readable
        m = None
    if m is not None:
        return pick(m.shown.en, m.shown.zh)
    key = f"symptom.{mistake_id}"
    if has(key):
        return t(key)
    if mistake_id.startswith("only_"):
        traits = [t(f"trait.{x}") if has(f"trait.{x}") else _DTYPES.get(x, x) for x in _traits(mistake_id[5:])]
        return t("symptom.only", traits=t("symptom.and").join(traits))
    return readable(mistake_id)


_DTYPES = {"fp64": "float64", "fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def _traits(text: str) -> list[str]:
    """only_lq_ne_lk_pad → lq_ne_lk, pad (the longest trait names first)."""
    known = sorted([k[6:] for k in MESSAGES if k.startswith("trait.")] + list(_DTYPES), key=len, reverse=True)
    out = []
    while text:
        hit = next((k for k in known if text == k or text.startswith(k + "_")), None)
        if hit is None:
            return out + [readable(text)]
        out.append(hit)
        text = text[len(hit) + 1:]
    return out


def named_title(r: Report) -> str:
    """"looks like: <the mistake's title>", or "what the failure shows: <the symptom>"."""
    named = r.diagnosis or r.symptom
    label = t("report.looks_like") if r.diagnosis else t("report.shows")
    return t("report.named", label=label, id=mistake_title(r.problem, named.mistake))


def first_screen(r: Report, title: str, width: int = 80, budget: int = FIRST_SCREEN, hint: bool = True,
                 details_cmd: str | None = None) -> Group:
    """The verdict and what to do next, in at most `budget` lines at this width. Texts that would not
    fit are cut after a whole word; a command is never cut."""
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
        line = t("report.line", line=f["line"], message=f["message"])
        if f["message"] not in said and one_line(line) not in said:
            parts.append(Para(line, "red", max_lines=2))
    if first is not None:
        parts.append(_first_case(first, inner, level, said))
    named = r.diagnosis or r.symptom
    if named is not None:
        parts.append(Panel(Para(pick(named.en, named.zh), max_lines=(5, 3, 2, 1)[level]), title=named_title(r),
                           title_align="left", border_style="magenta", expand=True, padding=(0, 1)))
    if level < 3:
        line = _spread(r, inner, 2 - (level > 0))
        if line is not None:
            parts.append(line)
    notes = r.warnings[: (2, 1, 1, 0)[level]]
    for w in notes:
        parts.append(Para(t("report.note", text=w), "yellow", max_lines=2))
    hidden = len(r.warnings) - len(notes)
    if r.output.strip():
        n = len(r.output.strip().splitlines())
        parts.append(Text(tn("report.printed", n), style="dim"))
    elif hidden > 0:
        parts.append(Text(tn("report.more_notes", hidden), style="dim"))
    skipped = [c for c in r.cases if c.status == SKIP]
    if skipped:                                  # said once, here, not in every summary
        parts.append(Para(tn("report.skipped", len(skipped)), "dim"))
    if r.replay and r.status != PASS and not is_static(r):
        parts.append(Command(r.replay, t("report.replay")))
    if r.status != PASS and hint:
        tips = [t("report.stuck", id=r.problem)]
        if details_cmd and r.cases:
            tips.insert(0, t("report.details", command=details_cmd))
        parts.append(Para(" · ".join(tips), "dim"))
    return parts


def _header(r: Report, title: str, inner: int) -> Panel:
    style = STYLE.get(r.status, "")
    badge = Text(f" {verdict_word(r.status)} ", style="bold black on green" if r.status == PASS else
                 "bold white on red")
    where = Text(r.file)
    if not is_static(r):                         # a file that never ran has no seed to replay
        where.append("  ·  ", style="dim")
        where.append(t("report.seed", seed=r.seed))
    if r.full:
        where.append("  ·  --full", style="dim")
    kind = r.problem_error.kind if r.problem_error else ""
    if r.seconds >= 0.005 and kind != "timeout":
        where.append("  ·  ", style="dim")
        where.append(t("report.seconds", s=f"{r.seconds:.2f}"))
    summary = Para(summary_line(r), "bold" if r.status != PASS else "", max_lines=3)
    head = Text.assemble(badge, "  ", (r.problem, "bold"), "  ", title)
    return Panel(Group(Text(clip(head.plain, inner, 1)) if head.cell_len > inner else head,
                       Para(where.plain, "dim", max_lines=2) if where.cell_len > inner else where,
                       summary),
                 border_style=style, expand=True, padding=(0, 1))


def summary_line(r: Report) -> str:
    """The report's one line, in the user's language, from the counts (not from the engine's words).
    Cases not run here (CUDA) are said once, below, not in this line."""
    ran = [c for c in r.cases if c.status != SKIP]
    failed = [c for c in ran if c.status in (FAIL, ERROR)]
    if r.status == PASS:
        if not ran:
            return t("report.nothing_ran")
        return tn(r.passed_key(), len(ran))
    if r.problem_error is not None and (not r.cases or r.status == ERROR or
                                        r.problem_error.kind in ("timeout", "crash", "runner", "memory")):
        return first_line(r.problem_error.message)
    if len(ran) == 1 and len(failed) == 1 and failed[0].problem is not None and \
            failed[0].problem.unwritten:
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
    return t("report.join").join(parts)


def one_line(text: str) -> str:
    return " ".join((text or "").split())


def first_line(text: str) -> str:
    return one_line((text or "").strip().split("\n")[0])


def _problem_lines(p, inner: int, frames: int, said: set) -> Group:
    """An error in the user's code: the message once, then the user's own lines (innermost last), with
    a caret under the column where the error is, when it is known."""
    rows = []
    lines = (p.message or "").strip().split("\n")
    if first_line(p.message) in said:        # the header said the first line: the rest, as it is laid out
        lines = lines[1:]
    elif len(lines) == 1:
        lines = [one_line(p.message)]
    for line in lines[:8]:
        indent = len(line) - len(line.lstrip())
        rows.append(Para(line.strip(), "red", indent=indent, max_lines=3) if line.strip() else Text(""))
    if len(lines) > 8:
        rows.append(Text("…", style="red"))
    said.add(first_line(p.message))
    said.add(one_line(p.message))
    for fr in p.frames[-frames:] if frames > 0 else []:
        loc = Text.assemble(("  → ", "red"), (f"{fr.file}:{fr.line}", "bold cyan"), f" {t('report.in')} {fr.func}")
        rows.append(loc)
        if fr.code:
            code = fr.code if cell_width(fr.code) <= inner - 6 else clip(fr.code, inner - 6, 1)
            rows.append(Text("      " + code, style="yellow"))
            col = getattr(fr, "col", 0) or 0
            if 0 < col <= len(code) + 1:
                rows.append(Text("      " + " " * cell_width(code[:col - 1]) + "^", style="bold red"))
    return Group(*rows)


def _first_case(c: CaseResult, inner: int, level: int, said: set) -> Group:
    where = ", ".join(x for x in (c.shapes, _short(c.dtype), c.note.replace("+", " + ")) if x)
    head = Text.assemble(("✗ ", "bold red"), (c.name, "bold"), f"  ({where})" if where else "")
    rows = [Para(head.plain, max_lines=1 + (level < 2)) if head.cell_len > inner else head]
    reason = case_reason(c)
    if reason and reason not in said:
        rows.append(Para(reason, indent=2, max_lines=(4, 3, 2, 2)[level]))
        said.add(reason)
    for msg in c.checks[1:1 + (level < 2)]:
        rows.append(Para(f"• {msg}", indent=2, hang=4, max_lines=2))
    if c.problem is not None:
        if c.problem.unwritten:
            said.add(first_line(c.problem.message))       # "not written yet" says it already
        rows.append(_problem_lines(c.problem, inner, (2, 2, 1, 1)[level], said))
    return Group(*rows)


def case_reason(c: CaseResult) -> str:
    """One sentence: what is wrong in this case."""
    cmp = c.compare
    numeric = bool(cmp and not cmp["ok"] and c.tensor and not c.tensor.startswith(("trace", "precision")))
    if numeric and not cmp["nonfinite"]:
        if cmp["mismatched"] == 0:
            return t("cmp.off_as_whole", name=c.tensor, relnorm=num(cmp["relnorm"], 3), gate=num(cmp["gate"], 3))
        return t("cmp.differs", name=c.tensor, bad=cmp["mismatched"], total=cmp["total"],
                 share=f"{100.0 * cmp['mismatched'] / max(cmp['total'], 1):.1f}", worst=num(cmp["max_abs"], 3),
                 at=index(cmp["max_abs_index"]), allowed=num(cmp["allowed_abs"]), rtol=num(cmp["rtol"]))
    return one_line(c.message)


def _spread(r: Report, inner: int, lines: int) -> Para | None:
    """Which cases fail and which pass, on one or two lines: a pattern the user can read."""
    ran = [c for c in r.cases if c.status != SKIP]
    failed = [c.name for c in ran if c.status in (FAIL, ERROR)]
    passed = [c.name for c in ran if c.status == PASS]
    if len(ran) < 2 or not failed:
        return None
    text = t("report.failing", names=" ".join(failed))
    if passed:
        text += " · " + t("report.passing", names=" ".join(passed))
    return Para(text, "dim", max_lines=lines)


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
    for w in r.warnings:           # the named mistake is on the first screen, printed just before these
        parts.append(Para(t("report.note", text=w), "yellow"))
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
            verdict = Text(t("report.failed_in", verdict=verdict_word(c.status), where=where) if where else
                           verdict_word(c.status), style="red")
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
    numeric = bool(cmp and not cmp["ok"] and c.tensor and not c.tensor.startswith(("trace", "precision")))
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
