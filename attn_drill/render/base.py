"""What every screen shares: the console, the width rules, numbers and words that never get cut."""
from __future__ import annotations

import os
import re
import sys

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..results import ERROR, FAIL, PASS, SKIP

STYLE = {PASS: "green", FAIL: "red", ERROR: "red", SKIP: "yellow", "-": "dim"}
FIRST_SCREEN = 24          # lines: the part of a report that must fit a 80×24 terminal


def console(stderr: bool = False, width: int | None = None) -> Console:
    if width is None and os.environ.get("COLUMNS", "").isdigit():
        width = int(os.environ["COLUMNS"])
    return Console(stderr=stderr, width=width, highlight=False, soft_wrap=False)


def emit(data, as_json: bool, view) -> None:
    """A verb's result: as JSON on stdout, or drawn by `view(data, width)` on the console."""
    if as_json:
        import json
        print(json.dumps(data, indent=2, ensure_ascii=False))
        return
    con = console()
    con.print(view(data, con.width))


def is_tty() -> bool:
    return sys.stdout.isatty()


def num(x, digits: int = 2) -> str:
    """A number in as few characters as it takes, never cut: 2.7e-05, 0.5, 1.2e+03."""
    return "" if x is None else f"{x:.{digits}g}"


def height(renderable, width: int) -> int:
    """Lines the renderable takes at this width."""
    con = Console(width=width, file=open(os.devnull, "w"), color_system=None, force_terminal=False)
    return len(con.render_lines(renderable, con.options.update(width=width), pad=False))


def cell_width(text) -> int:
    from rich.cells import cell_len
    return cell_len(text.plain if isinstance(text, Text) else str(text))


_WORDS = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]|[^\s\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]+\s*|\s+")


def clip(text: str, width: int, lines: int, more: str = "…") -> str:
    """At most `lines` lines of `width` cells, cut after a whole word (or a CJK character) with "…"."""
    from rich.cells import cell_len
    if lines <= 0:
        return ""
    words = _WORDS.findall(text.strip())
    out, row, n = [], "", 0
    for w in words:
        if cell_len(row + w.rstrip()) > width and row:
            n += 1
            if n == lines:
                out.append(row.rstrip() + more)
                return "".join(out)
            out.append(row.rstrip() + "\n")
            row = w.lstrip()
        else:
            row += w
    return "".join(out) + row.rstrip()


def wrap(text: str, width: int) -> str:
    """Text wrapped at `width` cells, breaking after a word or any CJK character (rich breaks only at
    spaces, which leaves Chinese lines half empty)."""
    return "\n".join(clip(para, width, 10 ** 6) if para.strip() else "" for para in text.split("\n"))


def fitted_table(columns: list[dict], rows: list[list], width: int, **table_kw) -> Table:
    """A table that drops optional columns (highest `drop` first) until every value fits whole;
    values are never cut. columns: {"name", "drop": 0 (never) or a rank, "justify"?, "min"?, "wrap"? (at words), "fold"? (anywhere)}."""
    keep = list(range(len(columns)))

    def longest_word(v) -> int:       # a CJK character is a word of its own: lines may break after any
        return max([cell_width(w.strip()) for w in _WORDS.findall(str(v.plain if isinstance(v, Text) else v))]
                   or [0])

    def needed(idx):
        total = 0
        for i in idx:
            c = columns[i]
            if c.get("fold"):      # may break inside a word (a list of tags): needs only its minimum
                w = max(cell_width(c["name"]), c.get("min") or 0)
            elif c.get("wrap"):    # a wrapping column needs its longest word, or its minimum
                w = max([cell_width(c["name"]), c.get("min") or 0] + [longest_word(r[i]) for r in rows])
            else:
                w = max([cell_width(c["name"])] + [cell_width(r[i]) for r in rows])
            total += min(w, c.get("max", w))
        return total + frame(len(idx))

    def frame(n: int) -> int:
        """Cells a rich Table adds around n columns: padding, and with a box its edges and dividers."""
        pad = 2 * n - (0 if table_kw.get("pad_edge", True) else 2)
        if table_kw.get("box", "default") is None:
            return pad
        return pad + (n - 1) + (2 if table_kw.get("show_edge", True) else 0)

    for rank in sorted({c["drop"] for c in columns if c["drop"]}, reverse=True):
        if needed(keep) <= width:
            break
        keep = [i for i in keep if columns[i]["drop"] != rank]
    t = Table(**table_kw)
    for i in keep:
        c = columns[i]
        wrap = c.get("wrap", False) or c.get("fold", False)
        t.add_column(c["name"], justify=c.get("justify", "left"), no_wrap=not wrap,
                     overflow="fold" if wrap else "ellipsis", max_width=c.get("max"),
                     min_width=c.get("min"))
    for r in rows:
        t.add_row(*[r[i] for i in keep])
    return t


_CJK_BREAK = re.compile(r"(?<=[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef])[ \t]*\n[ \t]*"
                        r"(?=[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef])")


def markdown(text: str):
    """A statement as rich Markdown. A line break between two CJK characters is dropped: Markdown
    would render it as a space, which Chinese text does not have."""
    from rich.markdown import Markdown  # only `show` needs it; keep `list` light
    return Markdown(_CJK_BREAK.sub("", text))


def command(text: str, label: str = "") -> Text:
    """A command to copy: printed whole on one line (soft-wrapped by the terminal, never by us)."""
    return Text.assemble((label, "dim"), (text, "bold"))


def print_command(con: Console, text: str, label: str = "") -> None:
    con.print(command(text, label), soft_wrap=True)
