"""HTML reports: a check report and a class report, each one self-contained file (no network, no
script, no external font or style sheet), readable on a phone; a notebook cell shows the same check
section.

    check_page([(report, title), ...])     the document `check --html` writes
    check_section(report, title)           one report: verdict, failing case, mistake, maps, replay, cases
    class_page(students, problems, ...)    the document `grade --html` writes: the grid, the mistakes per
                                           problem, and every student's report below, linked from its cell
    fragment(html)                         a section with its style, for a notebook's output

Every text that comes from a submission, a student or a file name goes through `esc`, and the
page's Content-Security-Policy forbids every script and every fetch, so a submission that prints
`<script>` or `</table>` changes nothing in the page. The maps (the error heatmap, the attention
weights) are PNG images written here, inline as data: URIs. No torch.
"""
from __future__ import annotations

import base64
import html
import struct
import zlib

from ..i18n import index, lang, pick, t
from ..results import ERROR, FAIL, PASS, SKIP, CaseResult, Report
from .base import num
from .classroom import outcome_word
from .report import case_reason, mistake_title, summary_line, verdict_word

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"

CSS = """
.ad{--bg:#fff;--fg:#1f2328;--dim:#59636e;--line:#d1d9e0;--soft:#f6f8fa;--pass:#1a7f37;--fail:#cf222e;
--warn:#9a6700;--odd:#8250df;--miss:#6e7781;--mark:#8250df;
font:15px/1.45 -apple-system,"Segoe UI",Roboto,"Noto Sans","Helvetica Neue",Arial,"PingFang SC",
"Microsoft YaHei",sans-serif;color:var(--fg);background:var(--bg);max-width:980px;margin:0 auto;padding:12px;
box-sizing:border-box;overflow-wrap:break-word}
@media (prefers-color-scheme:dark){.ad.page{--bg:#0d1117;--fg:#e6edf3;--dim:#9198a1;--line:#3d444d;
--soft:#151b23;--pass:#3fb950;--fail:#f85149;--warn:#d29922;--odd:#ab7df8;--miss:#9198a1}}
.ad *{box-sizing:border-box}
.ad h1{font-size:1.35em;margin:.2em 0 .4em}.ad h2{font-size:1.15em;margin:1.2em 0 .4em}
.ad h3{font-size:1em;margin:1em 0 .3em}
.ad code,.ad pre,.ad .mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"Liberation Mono",monospace;
font-size:.88em}
.ad pre{background:var(--soft);border:1px solid var(--line);border-radius:6px;padding:8px 10px;
white-space:pre-wrap;margin:.4em 0}
.ad .report{border:1px solid var(--line);border-radius:8px;padding:10px 14px;margin:12px 0;background:var(--bg)}
.ad .head{display:flex;flex-wrap:wrap;align-items:baseline;gap:.5em}
.ad .badge{display:inline-block;font-weight:700;font-size:.85em;padding:.1em .55em;border-radius:4px;color:#fff;
background:var(--fail)}
.ad .badge.b-pass{background:var(--pass)}.ad .badge.b-odd{background:var(--odd)}
.ad .badge.b-miss{background:var(--miss)}
.ad .pid{font-weight:700}.ad .dim{color:var(--dim)}.ad .small{font-size:.85em}
.ad .summary{font-weight:600;margin:.3em 0}
.ad .box{border-left:4px solid var(--fail);background:var(--soft);padding:6px 10px;margin:.6em 0;
border-radius:0 6px 6px 0}
.ad .box.named{border-color:var(--mark)}.ad .box.note{border-color:var(--warn)}
.ad .box .title{font-weight:700}
.ad .frames{margin:.2em 0 .2em 1em;padding:0;list-style:none}
.ad .frames li{margin:.15em 0}
.ad .cmd{display:block;background:var(--soft);border:1px solid var(--line);border-radius:6px;padding:6px 10px;
margin:.4em 0;white-space:pre;overflow-x:auto;user-select:all}
.ad .scroll{overflow-x:auto;-webkit-overflow-scrolling:touch;margin:.4em 0}
.ad table{border-collapse:collapse;font-size:.9em;overflow-wrap:normal}
.ad table.cases td,.ad table.window td{white-space:nowrap}
.ad th,.ad td{border-bottom:1px solid var(--line);padding:.25em .55em;text-align:left;vertical-align:top}
.ad th{background:var(--soft);font-weight:600;white-space:nowrap}
.ad td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.ad tr.worst td{font-weight:700}
.ad .pass{color:var(--pass)}.ad .fail,.ad .error,.ad .exception,.ad .forbidden{color:var(--fail)}
.ad .timeout,.ad .crash,.ad .memory{color:var(--odd)}.ad .missing,.ad .skip{color:var(--miss)}
.ad .tool-error{color:var(--fail);font-weight:700}
.ad .maps{display:flex;flex-wrap:wrap;gap:12px;margin:.4em 0}
.ad figure{margin:0;max-width:100%}
.ad figure img{display:block;max-width:100%;height:auto;image-rendering:pixelated;border:1px solid var(--line)}
.ad figcaption{font-size:.85em;color:var(--dim);margin:.2em 0}
.ad .legend{display:flex;flex-wrap:wrap;gap:.2em .8em;font-size:.8em;color:var(--dim);margin:.2em 0}
.ad .legend i{display:inline-block;width:.9em;height:.9em;vertical-align:-.1em;margin-right:.25em;
border:1px solid var(--line)}
.ad table.grid td,.ad table.grid th{text-align:center}
.ad table.grid td:first-child,.ad table.grid th:first-child{text-align:left}
.ad table.grid a{text-decoration:none;display:block;color:inherit}
.ad table.grid a:hover{text-decoration:underline}
.ad .cell-id{display:block;font-size:.78em;color:var(--dim)}
.ad .bars{margin:.3em 0 .8em}
.ad .bar{display:grid;grid-template-columns:minmax(7em,14em) 1fr 2.5em;gap:.5em;align-items:center;margin:.15em 0}
.ad .bar .track{background:var(--soft);border-radius:3px;height:.9em}
.ad .bar .fill{background:var(--fail);border-radius:3px;height:.9em}
.ad .bar .fill.odd{background:var(--odd)}.ad .bar .fill.miss{background:var(--miss)}
.ad .student{scroll-margin-top:8px}
.ad .back{font-size:.85em}
.ad details{margin:.6em 0}.ad summary{cursor:pointer;font-weight:600}
.ad footer{margin-top:2em;font-size:.8em;color:var(--dim)}
@media (max-width:600px){.ad{font-size:14px;padding:8px}.ad .report{padding:8px 10px}
.ad .bar{grid-template-columns:minmax(6em,9em) 1fr 2em}}
"""


def esc(x) -> str:
    """Text as HTML, quotes included: what a submission prints stays text."""
    return html.escape("" if x is None else str(x), quote=True)


def _cls(word: str) -> str:
    """A class name from a known set of words, never from user text."""
    return word if word in ("pass", "fail", "error", "skip", "exception", "forbidden", "timeout", "crash",
                            "memory", "missing", "tool-error") else "error"


# ---------------------------------------------------------------- images
def _png(pixels: list[list[tuple[int, int, int]]], scale: int) -> str:
    """An RGB image (rows of pixels), each pixel a scale×scale square with a 1-pixel gap when the squares
    are large, as a data: URI."""
    gap = 1 if scale >= 6 else 0
    h, w = len(pixels) * scale, len(pixels[0]) * scale
    raw = bytearray()
    for row in pixels:
        line = bytearray()
        for rgb in row:
            line += bytes(rgb) * (scale - gap) + b"\xff\xff\xff" * gap
        for k in range(scale):
            raw += b"\0" + (line if k < scale - gap else b"\xff" * len(line))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    data = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(bytes(raw), 9)) + chunk(b"IEND", b""))
    return "data:image/png;base64," + base64.b64encode(data).decode("ascii")


def _scale(rows: int, cols: int) -> int:
    return max(2, min(28, 420 // max(cols, 1), 280 // max(rows, 1)))


def _hex(rgb: tuple[int, int, int]) -> str:
    return "#%02x%02x%02x" % rgb


# the error of an element against what it is allowed: within, then 10×, 100×, 1000×, more (as the terminal's shades)
ERROR_SCALE = [(1.0, (209, 242, 217)), (10.0, (250, 219, 95)), (100.0, (247, 150, 70)), (1e3, (224, 49, 49)),
               (float("inf"), (120, 10, 20))]
# |yours - reference| of the weights: equal (to the dtype's rounding), then up to 1e-3, 1e-2, 0.1, more
WEIGHT_SCALE = [(1e-3, (250, 219, 95)), (1e-2, (247, 150, 70)), (1e-1, (224, 49, 49)), (float("inf"), (120, 10, 20))]
EQUAL = (209, 242, 217)


def _shade(v: float, scale) -> tuple[int, int, int]:
    for limit, rgb in scale:
        if v <= limit:
            return rgb
    return scale[-1][1]


def _blue(v: float, top: float) -> tuple[int, int, int]:
    """A weight in [0, top] from white to deep blue (square root, so small weights still show)."""
    x = max(0.0, min(1.0, v / top)) ** 0.5 if top > 0 else 0.0
    lo, hi = (255, 255, 255), (9, 61, 160)
    return tuple(round(a + (b - a) * x) for a, b in zip(lo, hi))


def _figure(grid: list[list[float]], color, caption: str, alt: str) -> str:
    if not grid or not grid[0]:
        return ""
    pixels = [[color(v) for v in row] for row in grid]
    src = _png(pixels, _scale(len(grid), len(grid[0])))
    return (f'<figure><figcaption>{esc(caption)}</figcaption>'
            f'<img src="{src}" alt="{esc(alt)}"></figure>')


def _legend(items: list[tuple[tuple[int, int, int], str]]) -> str:
    return '<div class="legend">' + "".join(
        f'<span><i style="background:{_hex(rgb)}"></i>{esc(label)}</span>' for rgb, label in items) + "</div>"


def _pooled(grid, rows, cols) -> str:
    return t("report.pooled") if grid and (len(grid) < rows or len(grid[0]) < cols) else ""


def heatmap(h: dict, axes, tensor: str) -> str:
    lead = t("report.at_leading", at=index(h["leading_index"])) if h.get("leading_index") else ""
    caption = t("html.error_map", tensor=tensor, lead=lead, rows_axis=axes[0], cols_axis=axes[1], rows=h["rows"],
                cols=h["cols"], pooled=_pooled(h["ratio"], h["rows"], h["cols"]))
    legend = _legend([(ERROR_SCALE[0][1], t("html.within"))] +
                     [(rgb, t("html.times", n=f"{limit:g}")) for limit, rgb in ERROR_SCALE[1:-1]] +
                     [(ERROR_SCALE[-1][1], t("html.more", n="1000"))])
    return '<div class="maps">' + _figure(h["ratio"], lambda v: _shade(v, ERROR_SCALE), caption,
                                          t("html.error_alt")) + "</div>" + legend


def weights(w: dict) -> str:
    if w.get("matches"):
        return f'<p class="small">{esc(t("report.weights_match"))}</p>'
    lead = t("report.at_batch_head", at=index(w["leading_index"])) if w.get("leading_index") else ""
    caption = t("html.weights", lead=lead, rows=w["rows"], cols=w["cols"],
                pooled=_pooled(w["diff"], w["rows"], w["cols"]))
    parts = [f'<p class="small">{esc(t("report.weights_differ"))}</p>', f'<p class="small dim">{esc(caption)}</p>',
             '<div class="maps">']
    if w.get("got") and w.get("expected"):
        top = max([v for row in w["got"] + w["expected"] for v in row] + [1e-12])
        parts.append(_figure(w["got"], lambda v: _blue(v, top), t("html.yours"), t("html.yours")))
        parts.append(_figure(w["expected"], lambda v: _blue(v, top), t("html.reference"), t("html.reference")))
    limit = w.get("limit", 0.0)
    parts.append(_figure(w["diff"], lambda v: EQUAL if v <= limit else _shade(v, WEIGHT_SCALE), t("html.difference"),
                         t("html.difference")))
    parts.append("</div>")
    parts.append(_legend([(EQUAL, t("html.equal"))] +
                         [(rgb, t("html.up_to", n=f"{limit:g}")) for limit, rgb in WEIGHT_SCALE[:-1]] +
                         [(WEIGHT_SCALE[-1][1], t("html.more", n="0.1"))]))
    return "".join(parts)


# ---------------------------------------------------------------- one check report
def _short(dtype: str) -> str:
    for long, short in (("float64", "fp64"), ("float32", "fp32"), ("bfloat16", "bf16"), ("float16", "fp16")):
        dtype = dtype.replace(long, short)
    return dtype


def _frames(p) -> str:
    if not p.frames:
        return ""
    rows = []
    for fr in p.frames:
        code = f'<br><code>{esc(fr.code)}</code>' if fr.code else ""
        rows.append(f'<li><code class="fail">{esc(fr.file)}:{esc(fr.line)}</code> '
                    f'<span class="dim">{esc(t("report.in"))} {esc(fr.func)}</span>{code}</li>')
    return '<ul class="frames">' + "".join(rows) + "</ul>"


def _problem(p, title: str) -> str:
    return (f'<div class="box"><div class="title">{esc(title)} ({esc(p.kind)})</div>'
            f'<pre>{esc(p.message.strip())}</pre>{_frames(p)}</div>')


def case_table(cases: list[CaseResult]) -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in (t("table.case"), t("table.inputs"), t("table.dtype"),
                                                   t("table.notes"), t("table.result"), t("table.error"), "ms"))
    rows = []
    for c in cases:
        word = verdict_word(c.status)
        if c.status in (FAIL, ERROR):
            where = t("report.grad") if c.gradient == FAIL else (t("report.fwd") if c.forward == FAIL else "")
            word += f" {where}" if where else ""
        err = ""
        if c.max_error is not None:
            e, a = (c.compare or {}).get("shown") or (c.max_error, c.allowed)
            if a is not None:
                ok = c.compare is None or c.compare.get("ok", True)
                sign = "≤" if e <= a else "&gt;"
                err = f'<span class="{"" if ok else "fail"}">{esc(num(e))} {sign} {esc(num(a))}</span>'
        rows.append(f'<tr><td class="mono {_cls(c.status)}">{esc(c.name)}</td><td>{esc(c.shapes)}</td>'
                    f'<td>{esc(_short(c.dtype))}</td><td>{esc(c.note.replace("+", " + "))}</td>'
                    f'<td class="{_cls(c.status)}">{esc(word)}</td><td class="num">{err}</td>'
                    f'<td class="num">{c.time_ms:.0f}</td></tr>')
    return f'<div class="scroll"><table class="cases"><tr>{head}</tr>{"".join(rows)}</table></div>'


def _window(d: dict) -> str:
    head = "".join(f"<th>{esc(t(f'table.{k}'))}</th>" for k in ("index", "got", "expected", "diff"))
    rows = []
    for w in d.get("window") or []:
        worst = list(w["index"]) == list(d["index"])
        rows.append(f'<tr class="{"worst" if worst else ""}"><td class="num">{esc(index(w["index"]))}</td>'
                    f'<td class="num">{w["got"]:.6g}</td><td class="num">{w["expected"]:.6g}</td>'
                    f'<td class="num{" fail" if worst else ""}">{w["got"] - w["expected"]:+.3g}</td></tr>')
    return (f'<h3>{esc(t("report.window", at=index(d["index"])))}</h3>'
            f'<div class="scroll"><table class="window"><tr>{head}</tr>{"".join(rows)}</table></div>')


def _first_failing(c: CaseResult) -> str:
    cmp = c.compare
    numeric = bool(cmp and not cmp["ok"] and c.tensor and not c.tensor.startswith(("trace", "precision")))
    parts = [f'<h2>{esc(t("report.first_failing", name=c.name))}</h2>']
    where = ", ".join(x for x in (c.shapes, _short(c.dtype), c.note.replace("+", " + ")) if x)
    if where:
        parts.append(f'<p class="dim small">{esc(where)}</p>')
    reason = case_reason(c)
    if reason:
        parts.append(f'<p class="summary">{esc(reason)}</p>')
    for msg in c.checks[1:]:
        parts.append(f"<p>• {esc(msg)}</p>")
    if c.problem is not None:
        parts.append(_problem(c.problem, t("report.exception")))
    if numeric:
        parts.append("<pre>" + esc(t("cmp.summary", bad=cmp["mismatched"], total=cmp["total"],
                                     share=f"{100.0 * cmp['mismatched'] / max(cmp['total'], 1):.1f}",
                                     max_abs=f"{cmp['max_abs']:.4g}", at_abs=index(cmp["max_abs_index"]),
                                     allowed=num(cmp["allowed_abs"]), rtol=num(cmp["rtol"]),
                                     max_rel=f"{cmp['max_rel']:.4g}", at_rel=index(cmp["max_rel_index"]),
                                     relnorm=num(cmp["relnorm"], 3), gate=num(cmp["gate"]),
                                     ref_err=num(cmp["ref_err"]))) + "</pre>")
    d = c.detail or {}
    if d.get("window"):
        parts.append(_window(d))
    if d.get("heatmap"):
        parts.append(f'<h3>{esc(t("html.error_title"))}</h3>')
        parts.append(heatmap(d["heatmap"], d.get("axes") or ["query", "key"], c.tensor))
    if d.get("weights"):
        parts.append(f'<h3>{esc(t("html.weights_title"))}</h3>')
        parts.append(weights(d["weights"]))
    return "".join(parts)


def check_section(r: Report, title: str, anchor: str | None = None, replay: str | None = None,
                  extra: list[str] | None = None, fold: bool = False) -> str:
    """One report as an HTML section. replay: the command to show (default the report's); extra: lines
    (already HTML) to add at the end; fold: the case table folded away (open when something failed)."""
    badge = "b-pass" if r.status == PASS else "b-fail"
    meta = [esc(r.file), esc(t("report.seed", seed=r.seed))]
    if r.full:
        meta.append("--full")
    kind = r.problem_error.kind if r.problem_error else ""
    if r.seconds >= 0.005 and kind != "timeout":
        meta.append(esc(t("report.seconds", s=f"{r.seconds:.2f}")))
    ident = f' id="{esc(anchor)}"' if anchor else ""
    parts = [f'<section class="report"{ident}>',
             f'<div class="head"><span class="badge {badge}">{esc(verdict_word(r.status))}</span>'
             f'<span class="pid mono">{esc(r.problem)}</span><span>{esc(title)}</span></div>',
             f'<div class="dim small">{" · ".join(meta)}</div>',
             f'<p class="summary {_cls(r.status)}">{esc(summary_line(r))}</p>']
    if r.problem_error is not None:
        parts.append(_problem(r.problem_error, t("report.could_not") if r.status == ERROR else t("report.failed")))
    for f in [f for f in r.findings if f.get("line")]:
        parts.append(f'<div class="box">{esc(t("report.line", line=f["line"], message=f["message"]))}</div>')
    for f in [f for f in r.findings if not f.get("line")]:
        parts.append(f'<div class="box">{esc(f["message"])}</div>')
    named = r.diagnosis or r.symptom
    if named is not None:
        label = t("report.looks_like") if r.diagnosis else t("report.shows")
        head = t("report.named", label=label, id=named.mistake)
        said = pick(named.en, named.zh)
        parts.append(f'<div class="box named"><div class="title">{esc(head)}</div>{esc(said)}</div>')
    command = r.replay if replay is None else replay
    if command:
        parts.append(f'<div class="dim small">{esc(t("report.replay").strip())}</div>'
                     f'<code class="cmd">{esc(command)}</code>')
    for w in r.warnings:
        parts.append(f'<div class="box note">{esc(t("report.note", text=w))}</div>')
    first = r.first_failure()
    if first is not None:
        parts.append(_first_failing(first))
    if r.cases:
        ran = [c for c in r.cases if c.status != SKIP]
        head = esc(t("html.cases", n=len(ran), passed=sum(c.status == PASS for c in ran)))
        if fold:
            parts.append(f'<details{" open" if first is not None else ""}><summary>{head}</summary>'
                         f"{case_table(r.cases)}</details>")
        else:
            parts.append(f"<h2>{head}</h2>{case_table(r.cases)}")
    if r.output.strip():
        parts.append(f'<h3>{esc(t("report.printed_title"))}</h3><pre>{esc(r.output.strip()[-1500:])}</pre>')
    parts += extra or []
    parts.append("</section>")
    return "".join(parts)


def fragment(body: str) -> str:
    """A section with its own (scoped) style, for a notebook's output or another page."""
    return f'<div class="ad"><style>{CSS}</style>{body}</div>'


def document(title: str, body: str) -> str:
    return (f'<!DOCTYPE html>\n<html lang="{"zh" if lang() == "zh" else "en"}"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<meta name="color-scheme" content="light dark">'
            f"<title>{esc(title)}</title><style>html,body{{margin:0}}{CSS}</style></head>"
            f'<body><main class="ad page">{body}'
            f'<footer>{esc(t("html.footer"))}</footer></main></body></html>\n')


def check_page(reports: list[tuple[Report, str]]) -> str:
    """The document of `check --html`: each report (with its problem's title) as a section."""
    heading = ", ".join(r.problem for r, _ in reports)
    body = f'<h1>{esc(t("html.check_title", ids=heading))}</h1>'
    body += "".join(check_section(r, title) for r, title in reports)
    return document(t("html.check_title", ids=heading), body)


# ---------------------------------------------------------------- a class
def _mistake_of(cell) -> str:
    """What a cell that did not pass got wrong: the named mistake, else its outcome."""
    return cell.diagnosis or cell.outcome


def class_page(students: list[str], problems: list[str], cells: dict, title: str, notes: list[str],
               reports: dict | None = None, titles: dict | None = None) -> str:
    """The document of `grade --html`: a grid of students × problems, each cell linking to that student's
    report further down; what the class got wrong most, per problem; then every report.
    cells: {(student, problem): Cell}; reports: {(student, problem): Report} where there is one."""
    reports, titles = reports or {}, titles or {}
    anchors = {(s, p): f"s{i}-p{j}" for i, s in enumerate(students) for j, p in enumerate(problems)}
    body = [f'<h1 id="top">{esc(title)}</h1>']
    for n in notes:
        body.append(f'<p class="dim small">{esc(n)}</p>')
    # the grid
    head = f'<th>{esc(t("grade.student"))}</th>' + "".join(f'<th class="mono">{esc(p)}</th>' for p in problems) + \
        f'<th>{esc(t("grade.passed"))}</th>'
    rows = []
    for s in students:
        row, n = [f"<td>{esc(s)}</td>"], 0
        for p in problems:
            c = cells.get((s, p))
            if c is None:
                row.append('<td class="dim">-</td>')
                continue
            n += c.outcome == "pass"
            label = esc(outcome_word(c.outcome))
            if c.outcome == "fail" and c.cases_total:
                label += f' <span class="dim">{c.cases_passed}/{c.cases_total}</span>'
            sub = f'<span class="cell-id mono">{esc(c.diagnosis)}</span>' if c.diagnosis else ""
            hover = esc(f"{s} · {p}: {' '.join((c.message or outcome_word(c.outcome)).split())}"[:300])
            row.append(f'<td class="{_cls(c.outcome)}"><a href="#{anchors[(s, p)]}" title="{hover}">{label}{sub}</a>'
                       "</td>")
        row.append(f'<td class="num">{n}/{len(problems)}</td>')
        rows.append("<tr>" + "".join(row) + "</tr>")
    body.append(f'<div class="scroll"><table class="grid"><tr>{head}</tr>{"".join(rows)}</table></div>')
    # what the class got wrong most, per problem
    body.append(f'<h2>{esc(t("html.wrong_most"))}</h2>')
    for p in problems:
        graded = [cells[(s, p)] for s in students if (s, p) in cells]
        wrong = [c for c in graded if c.outcome != "pass"]
        passed = t("html.passed_of", passed=len(graded) - len(wrong), n=len(graded))
        body.append(f'<h3><span class="mono">{esc(p)}</span> {esc(titles.get(p, ""))} '
                    f'<span class="dim small">{esc(passed)}</span></h3>')
        if not wrong:
            body.append(f'<p class="dim small">{esc(t("html.none_wrong"))}</p>')
            continue
        counts: dict[str, list] = {}
        for c in wrong:
            counts.setdefault(_mistake_of(c), []).append(c)
        bars = ['<div class="bars">']
        for key, who in sorted(counts.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            label = (f'{esc(mistake_title(p, key))} <span class="mono dim small">{esc(key)}</span>'
                     if who[0].diagnosis else f'<span class="mono">{esc(outcome_word(key))}</span>')
            said = next((r.diagnosis for r in (reports.get((c.student, p)) for c in who)
                         if r is not None and r.diagnosis is not None), None) if who[0].diagnosis else None
            text = f'<span class="cell-id">{esc(pick(said.en, said.zh))}</span>' if said else ""
            tone = "odd" if key in ("timeout", "crash", "memory") else "miss" if key == "missing" else ""
            share = 100.0 * len(who) / max(len(graded), 1)
            names = ", ".join(f'<a href="#{anchors[(c.student, p)]}">{esc(c.student)}</a>' for c in who)
            bars.append(f'<div class="bar"><div>{label}{text}'
                        f'<span class="cell-id">{names}</span></div>'
                        f'<div class="track"><div class="fill {tone}" style="width:{share:.1f}%"></div></div>'
                        f'<div class="num small">{len(who)}</div></div>')
        bars.append("</div>")
        body.append("".join(bars))
    # every student's report
    body.append(f'<h2>{esc(t("html.reports"))}</h2>')
    for s in students:
        for p in problems:
            c = cells.get((s, p))
            if c is None:
                continue
            back = f'<a class="back" href="#top">{esc(t("html.back"))}</a>'
            body.append(f'<div class="student" id="{anchors[(s, p)]}"><h3>{esc(t("html.cell_title", student=s, id=p))}'
                        f" {back}</h3>")
            r = reports.get((s, p))
            if r is not None:
                body.append(check_section(r, titles.get(p, ""), replay=c.replay or "", fold=True))
            else:
                body.append(f'<section class="report"><div class="head"><span class="badge b-fail">'
                            f'{esc(outcome_word(c.outcome))}</span><span class="pid mono">{esc(p)}</span></div>'
                            f'<div class="dim small">{esc(c.file)}</div><pre>{esc(c.detail or c.message)}</pre>'
                            "</section>")
            body.append("</div>")
    return document(title, "".join(body))


def wrote(path: str) -> str:
    return t("html.wrote", path=path)
