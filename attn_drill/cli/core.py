"""The main loop's commands: list, show, new, check, verify, config (behaviour lives in verbs/)."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from .app import app, complete_id, run, use_lang
from .options import DifficultyOpt, FileArg, Format, FormatOpt, Full, HtmlOpt, Json, LangOpt, Problem, value


@app.command("list")
def list_cmd(tag: Optional[str] = typer.Option(None, "--tag", "-t", help="Only problems with this tag."),
             difficulty: DifficultyOpt = None, lang: LangOpt = None, json_out: Json = False):
    """List the problem bank, with your status.

    Example: attn-drill list --tag masks
    """
    from ..progress.rules import statuses
    from ..verbs.catalog import list_problems
    run(list_problems, tag, value(difficulty), use_lang(lang), json_out, statuses(Path.cwd()))


@app.command()
def show(problem: Problem, lang: LangOpt = None):
    """Show a problem's statement, interface and rules.

    Example: attn-drill show gqa --lang zh
    """
    from ..verbs.catalog import show as verb
    run(verb, problem, use_lang(lang))


@app.command()
def new(problem: Problem,
        dir: Path = typer.Option(Path("."), "--dir", help="Folder to write <id>.py into."),
        force: bool = typer.Option(False, "--force", help="Replace an existing file (a backup is kept).")):
    """Write the stub <id>.py for a problem to fill in.

    Example: attn-drill new gqa
    """
    from ..verbs.scaffold import new as verb
    run(verb, problem, dir, force)


@app.command()
def check(problem: Optional[str] = typer.Argument(None, help="Problem id; omit to grade every problem file here.",
                                                  autocompletion=complete_id),
          path: FileArg = None,
          seed: Optional[int] = typer.Option(None, "--seed", help="Master seed (default: random, printed)."),
          full: Full = False,
          case: Optional[str] = typer.Option(None, "--case", help="Run only this case (replay)."),
          verbose: bool = typer.Option(False, "--verbose", "-v",
                                       help="After the first screen, the details: every case, the mismatch, "
                                            "heatmaps of the error and of the attention weights."),
          json_out: bool = typer.Option(False, "--json", help="Exercism v3 JSON on stdout."),
          lang: LangOpt = None,
          sandbox: Optional[bool] = typer.Option(None, "--sandbox/--no-sandbox",
                                                 help="Grade inside the OS sandbox (bubblewrap), as grade does. "
                                                      "Default: only files owned by another user."),
          fmt: FormatOpt = Format.text,
          html: HtmlOpt = None):
    """Grade your solution: outputs and gradients against the reference.

    Examples: attn-drill check gqa · attn-drill check gqa work/gqa.py --seed 7 · attn-drill check --json ·
    attn-drill check gqa --format lines · attn-drill check gqa --html report.html
    """
    from ..verbs.check import check as verb
    run(verb, problem, path, seed, full, case, verbose, json_out, use_lang(lang), sandbox, Path.cwd(), fmt.value,
        html, json_errors=json_out)


@app.command()
def verify(problems: Optional[List[str]] = typer.Argument(None, help="Problem ids (default: all).",
                                                          autocompletion=complete_id),
           seed: int = typer.Option(0, "--seed", help="Master seed."),
           full: Full = False,
           json_out: bool = typer.Option(False, "--json", help="JSON summary on stdout."),
           jobs: Optional[int] = typer.Option(None, "--jobs", "-j", min=1,
                                              help="Problems verified in parallel (default 2, at most the CPUs).")):
    """Prove the bank: references pass, stubs fail, every known mistake fails and is named.

    Example: attn-drill verify gqa rope
    """
    from ..verbs.verify import verify as verb
    run(verb, list(problems or []), seed, full, json_out, jobs)


@app.command("config")
def config_cmd(key: Optional[str] = typer.Argument(None, help="The setting: lang."),
               value_: Optional[str] = typer.Argument(None, metavar="VALUE", help="Its new value, e.g. zh."),
               user: bool = typer.Option(False, "--user", help="Set it for every workspace of this user, not just "
                                                               "this folder.")):
    """Show or change settings made once: the language (en or zh).

    Examples: attn-drill config · attn-drill config lang zh · attn-drill config lang en --user
    """
    from ..verbs.settings import settings
    run(settings, key, value_, user, Path.cwd())
