"""What a notebook cell shows after `%%check`: the HTML report (render.html) for Jupyter, and the
terminal's first screen as plain text for a console (IPython in a terminal, a text-only front end).
Prints nothing: attn_drill.notebook hands both to IPython's display."""
from __future__ import annotations

import io

from rich.console import Console

from ..results import Report
from . import html
from .report import first_screen


def plain(r: Report, title: str, notes: list[str], width: int = 100) -> str:
    """The first screen of the report, as `attn-drill check` prints it, without colour."""
    con = Console(file=io.StringIO(), width=width, color_system=None, force_terminal=False, force_jupyter=False,
                  highlight=False)
    con.print(first_screen(r, title, width, hint=False))
    for n in notes:
        con.print(n, soft_wrap=True)
    return con.file.getvalue()


def cell_output(r: Report, title: str, notes: list[str]) -> tuple[str, str]:
    """(HTML, plain text) of a graded cell. notes: lines said after the report (what a pass scheduled,
    what is next)."""
    extra = [f'<p class="small">{html.esc(n)}</p>' for n in notes]
    return html.fragment(html.check_section(r, title, extra=extra)), plain(r, title, notes)


def message(text: str, error: bool = False) -> tuple[str, str]:
    """(HTML, plain text) of one line the magic says."""
    cls = "fail" if error else "dim"
    return html.fragment(f'<p class="{cls}">{html.esc(text)}</p>'), text
