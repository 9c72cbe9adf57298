"""The options and arguments several commands share, declared once (typer's Annotated form)."""
from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from .app import complete_id


class Lang(str, Enum):
    en = "en"
    zh = "zh"


class Format(str, Enum):
    text = "text"
    json = "json"
    lines = "lines"
    github = "github"


class WatchFormat(str, Enum):
    text = "text"
    lines = "lines"


class Difficulty(str, Enum):
    easy = "easy"
    medium = "medium"
    hard = "hard"


LANG_HELP = "Language: en or zh (default: $ATTN_DRILL_LANG, or `attn-drill config lang`)."

LangOpt = Annotated[Optional[Lang], typer.Option("--lang", help=LANG_HELP)]
Problem = Annotated[str, typer.Argument(help="Problem id, e.g. gqa.", autocompletion=complete_id)]
FileArg = Annotated[Optional[str], typer.Argument(help="File to grade (default ./<id>.py).")]
Full = Annotated[bool, typer.Option("--full", help="Also run the larger random cases.")]
Yes = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]
Json = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
FormatOpt = Annotated[Format, typer.Option("--format", help="text (the report), json (as --json), lines "
                                                             "(path:line:col: error: message [id], one per "
                                                             "finding, for editors and grep) or github (Actions "
                                                             "annotations).")]
WatchFormatOpt = Annotated[WatchFormat, typer.Option("--format", help="text (the screen) or lines (each check "
                                                                       "as path:line:col: error: message [id] lines "
                                                                       "between a begin and an end line, for an "
                                                                       "editor's problem matcher).")]
HtmlOpt = Annotated[Optional[Path], typer.Option("--html", metavar="FILE",
                                                 help="Also write the report as one self-contained HTML page.")]
DifficultyOpt = Annotated[Optional[Difficulty], typer.Option("--difficulty", "-d", help="easy, medium or hard.")]


def value(option: Enum | None) -> str | None:
    return option.value if option is not None else None
