"""What every screen shares: the console, the width rules, numbers and words that never get cut."""
from __future__ import annotations

import os
import re
import sys

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..results import ERROR, FAIL, PASS, SKIP
from .. import lazyre

STYLE = {PASS: "green", FAIL: "red", ERROR: "red", SKIP: "yellow", "-": "dim"}
FIRST_SCREEN = 24          # lines: the part of a report that must fit a 80×24 terminal


class _Console(Console):
    """rich's console, never cropping a line: a command wider than the terminal is printed whole, on a
    line of its own, for the terminal to fold (and a copy to get it whole)."""

    def print(self, *objects, crop: bool = False, **kwargs) -> None:
        super().print(*objects, crop=crop, **kwargs)


def console(stderr: bool = False, width: int | None = None) -> Console:
    if width is None and os.environ.get("COLUMNS", "").isdigit():
        width = int(os.environ["COLUMNS"])
    # no emoji codes: ":name:" in text (a submission's own words too) is shown as written
    return _Console(stderr=stderr, width=width, highlight=False, soft_wrap=False, emoji=False)


def emit(data, as_json: bool, view) -> None:
    """A verb's result: as JSON on stdout, or drawn by `view(data, width)` on the console."""
    if as_json:
        print_json(data)
        return
    con = console()
    con.print(view(data, con.width))


def print_json(data) -> None:
    """The one JSON printer: indented, UTF-8 as it is (Chinese stays readable), on stdout."""
    import json
    print(json.dumps(data, indent=2, ensure_ascii=False), flush=True)


def plain(text: str) -> None:
    """Text for another program (Markdown for a notes app, a file piped on): exactly as it is."""
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    sys.stdout.flush()


def say(text: str, style: str | None = None, con: Console | None = None, stderr: bool = False) -> None:
    """One message. In a terminal it is laid out at its width (lines break at spaces and between CJK
    characters, a command stays whole on one line); piped or captured, each paragraph is one line."""
    con = con or console(stderr=stderr)
    text = _as_written(text)
    if con.is_terminal:
        text = wrap(text, con.width)
    con.print(Text(text, style=style or ""), soft_wrap=True)


def warn(message: str, con: Console | None = None) -> None:
    """`warning: <message>`, on stderr unless a console is given."""
    from ..i18n import labelled, t
    say(labelled(t("cli.warning"), message), "yellow", con=con, stderr=con is None)


def error(message: str, con: Console | None = None) -> None:
    """`error: <message>`, on stderr unless a console is given."""
    from ..i18n import labelled, t
    say(labelled(t("cli.error"), message), "red", con=con, stderr=con is None)



def confirm(question: str) -> bool:
    """Ask yes or no on the terminal (stderr); no is the default."""
    from rich.prompt import Confirm
    return Confirm.ask(question, default=False, console=console(stderr=True))


def code(text: str):
    """A Python file, highlighted with line numbers."""
    from rich.syntax import Syntax
    return Syntax(text, "python", line_numbers=True, word_wrap=True, theme="ansi_dark", background_color="default")


def live(con: Console, first, transient: bool = False):
    """A screen redrawn in place (`with live(con, view) as screen: screen.update(view, refresh=True)`),
    refreshed only when asked."""
    from rich.live import Live
    return Live(first, console=con, auto_refresh=False, transient=transient)


def spinner(con: Console, message: str):
    """A spinner with the message while something runs (a terminal only; elsewhere nothing)."""
    import contextlib
    return con.status(message) if con.is_terminal else contextlib.nullcontext()


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


def pad(text: str, cells: int) -> str:
    """Text padded to `cells` terminal cells (a CJK character takes two), for columns that line up."""
    return text + " " * max(0, cells - cell_width(text))


# ---------------------------------------------------------------- laying out text
# Lines break at spaces and between two CJK characters, never inside a word or a command; a CJK
# closing mark (，。）…) never starts a line and an opening one (（“) never ends one.
CJK = "\u3000-\u303f\u4e00-\u9fff\uff00-\uffef"     # Chinese characters and full-width marks
_CJK_CHAR = lazyre.compile(f"[{CJK}]")
NO_START = set("，。、；：！？）】」』》〉”’…·%")
NO_END = set("（【「『《〈“‘")
SEPARATORS = ("·", "|")
_WORDS = lazyre.compile(f"[{CJK}]|[^\\s{CJK}]+\\s*|\\s+")     # kept for tables: what may not be split
VERBS = ("list", "show", "new", "check", "watch", "mock", "quiz", "today", "plan", "grade", "bench", "hint",
         "solution", "reset", "progress", "drill", "verify", "config", "--help", "--version",
         "--show-completion", "--install-completion")
# words that end a command written inside a sentence ("attn-drill hint mhsa --all to read them again")
_STOP = {"to", "or", "and", "with", "then", "for", "in", "on", "shows", "lists", "again", "first", "is", "as",
         "from", "until", "after", "before", "here", "it", "the", "a", "an", "at", "if", "each", "every",
         "gives", "runs", "prints", "writes", "also", "continues", "instead", "once", "now", "when"}
_ARG = re.compile(r"(--?[A-Za-z][\w-]*(=\S*)?|[\w./<>{}$~@:=+*,\[\]|&'\"-]+)")
_TRAIL = ",;.):]，。；）：、!?"
_START = re.compile(r"(?:(?<![\w/-])cd [^\s;&]+ && )?(?<![\w/-])attn-drill(?![\w-])")


def commands(text: str) -> list[tuple[int, int]]:
    """Where the commands are in a sentence: `attn-drill <verb> <arguments>` (after `cd <folder> && `),
    up to the punctuation or the word that ends it."""
    spans = []
    for m in _START.finditer(text):
        pos, end, first = m.end(), m.end(), True
        while True:
            tok = re.match(f" ([^\\s{CJK}]+)", text[pos:])     # a word ends at a Chinese character
            if tok is None:
                break
            word = tok.group(1)
            core = word.rstrip(_TRAIL) if not first else word.rstrip(_TRAIL)
            if not core or _CJK_CHAR.search(core) or not _ARG.fullmatch(core) or core.lower() in _STOP \
                    or (first and core not in VERBS):
                break
            end = pos + 1 + len(core)
            first = False
            if core != word:         # a comma, a full stop or a bracket after it: the sentence goes on
                break
            pos = end
        if end > m.end() or text[m.start():m.end()].startswith("cd "):
            spans.append((m.start(), end))
    return spans


def _pieces(text: str) -> list[tuple[str, str | None]]:
    """The text as unbreakable pieces, each with what joins it to the one before: " " (a space: a
    line may break there, the space is dropped), "" (a line may break there: between CJK characters)
    or None (glued: a command's parts are one piece, a closing mark stays with what it closes)."""
    cmds = commands(text)
    atoms: list[tuple[str, str]] = []         # (text, "space" before it or "" )
    i, n, gap = 0, len(text), ""
    while i < n:
        c = text[i]
        span = next((s for s in cmds if s[0] == i), None)
        if span is not None:
            atoms.append((text[span[0]:span[1]], gap))
            i, gap = span[1], ""
            continue
        if c.isspace():
            gap = " "
            i += 1
            continue
        if _CJK_CHAR.match(c):
            atoms.append((c, gap))
            i, gap = i + 1, ""
            continue
        j = i
        while j < n and not text[j].isspace() and not _CJK_CHAR.match(text[j]) and \
                not any(s[0] == j for s in cmds):
            j += 1
        atoms.append((text[i:j], gap))
        i, gap = j, ""
    out: list[tuple[str, str | None]] = []
    for k, (a, g) in enumerate(atoms):
        glue = g
        if k == 0:
            glue = ""
        elif g == "" and not (_CJK_CHAR.match(a[0]) or _CJK_CHAR.match(atoms[k - 1][0][-1])):
            glue = None                        # two non-CJK atoms touching: one word
        if g == "" and (a[0] in NO_START or atoms[k - 1][0][-1] in NO_END):
            glue = None
        out.append((a, glue))
    merged: list[tuple[str, str | None]] = []
    for a, glue in out:
        if a in SEPARATORS and glue == " " and merged:   # " · " ends its line, never starts one, never goes
            merged[-1] = (merged[-1][0] + " " + a, merged[-1][1])
        elif glue is None and merged:
            merged[-1] = (merged[-1][0] + a, merged[-1][1])
        else:
            merged.append((a, "" if glue is None else glue))
    return merged


def lines(text: str, width: int, indent: int = 0, hang: int | None = None) -> list[str]:
    """One paragraph laid out in lines of at most `width` cells (a piece wider than that, a long
    command, stands on a line of its own). The first line is indented by `indent`, the others by
    `hang` (default: the same)."""
    from rich.cells import cell_len
    hang = indent if hang is None else hang
    out, row, lead = [], "", " " * indent
    for piece, glue in _pieces(text):
        if not row:
            row = piece
            continue
        joined = row + (glue or "") + piece
        if cell_len(lead + joined) <= width:
            row = joined
        else:
            out.append(lead + row)
            lead, row = " " * hang, piece
    if row or not out:
        out.append(lead + row)
    return out


def wrap(text: str, width: int, indent: int = 0, hang: int | None = None) -> str:
    """Text laid out at `width` cells, paragraph by paragraph (each line of the text is one)."""
    width = max(width, 10)
    out = []
    for para in text.split("\n"):
        if not para.strip():
            out.append("")
            continue
        lead = len(para) - len(para.lstrip(" "))
        out += lines(para.strip(), width, indent + lead, (indent + lead) if hang is None else hang)
    return "\n".join(out)


def clip(text: str, width: int, n: int, more: str = "…") -> str:
    """At most `n` lines of `width` cells, cut after a whole word (or a CJK character) with "…"."""
    from rich.cells import cell_len
    if n <= 0:
        return ""
    laid = wrap(" ".join(text.split()) if "\n" not in text.strip() else text.strip(), width).split("\n")
    if len(laid) <= n:
        return "\n".join(laid)
    last = laid[n - 1]
    while last and cell_len(last + more) > width:
        cut = [p for p, _ in _pieces(last)]
        last = last[: len(last) - len(cut[-1])].rstrip() if len(cut) > 1 else last[: max(0, width - 1)]
    return "\n".join(laid[: n - 1] + [last.rstrip() + more])


def _as_written(text: str) -> str:
    """In Chinese, texts put together from several messages read as one: no space between two
    Chinese characters or marks ("凭记忆：今天"), one between Chinese and Latin (i18n.tidy)."""
    from ..i18n import lang, tidy
    return tidy(text) if lang() == "zh" else text


class Para:
    """A paragraph for the screen, laid out at the width it is drawn in (a panel, a table cell, the
    terminal): lines break at spaces and between CJK characters, never inside a word or a command.
    lines: at most that many (cut after a word, with "…")."""

    def __init__(self, text: str, style: str = "", indent: int = 0, hang: int | None = None,
                 max_lines: int | None = None):
        self.text, self.style, self.indent, self.hang, self.max_lines = _as_written(text), style, indent, hang, \
            max_lines

    def laid_out(self, width: int) -> list[str]:
        if self.max_lines is not None:
            return clip(self.text, width, self.max_lines).split("\n") if self.max_lines > 0 else []
        return wrap(self.text, width, self.indent, self.hang).split("\n")

    def __rich_console__(self, console, options):
        from rich.segment import Segment
        style = console.get_style(self.style) if self.style else None
        for line in self.laid_out(options.max_width):
            yield Segment(line, style)
            yield Segment.line()

    def __rich_measure__(self, console, options):
        from rich.measure import Measurement
        pieces = [cell_width(p) for p, _ in _pieces(" ".join(self.text.split()))] or [0]
        return Measurement(min(max(pieces) + self.indent, options.max_width),
                           min(cell_width(self.text) + self.indent, options.max_width))


def fitted_table(columns: list[dict], rows: list[list], width: int, **table_kw) -> Table:
    """A table that drops optional columns (highest `drop` first) until every value fits whole;
    values are never cut. columns: {"name", "drop": 0 (never) or a rank, "justify"?, "min"?, "wrap"? (at words),
    "fold"? (anywhere)}."""
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


_CJK_BREAK = lazyre.compile(r"(?<=[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef])[ \t]*\n[ \t]*"
                        r"(?=[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef])")


def markdown(text: str):
    """A statement as rich Markdown. A line break between two CJK characters is dropped: Markdown
    would render it as a space, which Chinese text does not have."""
    from rich.markdown import Markdown  # only `show` needs it; keep `list` light
    return Markdown(_CJK_BREAK.sub("", text))


class Command:
    """A command to copy, after a label: on the label's line when both fit, else on a line of its own;
    never broken (wider than the screen, it is printed whole for the terminal to fold)."""

    def __init__(self, text: str, label: str = "", indent: int = 0, style: str = "bold", label_style: str = "dim"):
        self.text, self.label, self.indent, self.style, self.label_style = text, label, indent, style, label_style

    def __rich_console__(self, console, options):
        from rich.segment import Segment
        lead = " " * self.indent
        label, cmd = console.get_style(self.label_style), console.get_style(self.style)
        if cell_width(lead + self.label + self.text) <= options.max_width or not self.label.strip():
            yield from (Segment(lead + self.label, label), Segment(self.text, cmd), Segment.line())
            return
        yield from (Segment(lead + self.label.rstrip(), label), Segment.line(),
                    Segment(lead + "  " + self.text, cmd), Segment.line())

    def __rich_measure__(self, console, options):
        from rich.measure import Measurement
        w = min(cell_width(self.text) + self.indent + 2, options.max_width)
        return Measurement(w, min(cell_width(self.label + self.text) + self.indent, options.max_width))


def command(text: str, label: str = "", indent: int = 0) -> Command:
    return Command(text, label, indent)


def print_command(con: Console, text: str, label: str = "") -> None:
    con.print(Command(text, label))
