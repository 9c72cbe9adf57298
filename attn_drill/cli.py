"""The command line: declares commands and arguments, calls the verbs, maps errors to exit codes.

Exit codes: 0 passed / done, 1 failed (a grade that did not pass, a refused action), 2 usage or tool error.
torch is never imported here: grading happens in a worker process.
"""
from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer

from . import __version__, bank

app = typer.Typer(
    name="attn-drill",
    help="Practise hand-writing attention for LLM coding interviews.\n\n"
         "Start with: attn-drill list, then attn-drill new mhsa, edit mhsa.py, attn-drill check mhsa.",
    no_args_is_help=True, add_completion=True, rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
)


def complete_id(incomplete: str) -> list[str]:
    """Shell completion of problem ids (the bank's file names only: no spec is parsed, no torch)."""
    try:
        return [pid for pid in bank.ids() if pid.startswith(incomplete)]
    except Exception:  # noqa: BLE001 - completion must never fail loudly
        return []


class Lang(str, Enum):
    en = "en"
    zh = "zh"


class Difficulty(str, Enum):
    easy = "easy"
    medium = "medium"
    hard = "hard"


def _fail(message: str, code: int = 2):
    from .render import console
    from .i18n import t
    console(stderr=True).print(f"[red]{t('cli.error')}[/red] ", end="", soft_wrap=True)
    console(stderr=True).print(message, soft_wrap=True, markup=False)
    raise typer.Exit(code)


def _run(fn, *args, **kwargs) -> None:
    """Call a verb; turn the tool's own error types into a message and an exit code."""
    if not _lang_chosen:
        use_lang(None)           # commands without --lang speak the configured language too
    from .i18n import t
    from .spec import SpecError
    from .verbs.check import UsageError
    from .worker import ToolError
    try:
        code = fn(*args, **kwargs)
    except bank.UnknownProblem as exc:
        _fail(str(exc))
    except SpecError as exc:
        _fail(t("cli.bad_spec", error=exc))
    except (UsageError, ValueError) as exc:
        _fail(str(exc))
    except ToolError as exc:
        _fail(t("cli.tool_error", error=exc))
    except KeyboardInterrupt:
        _fail(t("cli.interrupted"), 130)
    except (typer.Exit, typer.Abort, SystemExit):
        raise
    except OSError as exc:              # a folder not writable, a disk full: the system's words, no traceback
        where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
        _fail(t("cli.os_error", error=(exc.strerror or str(exc)) + where))
    except Exception as exc:  # noqa: BLE001 - a bug of the tool: a message, not a traceback
        import os
        if os.environ.get("ATTN_DRILL_DEBUG"):
            raise
        _fail(t("cli.bug", error=f"{type(exc).__name__}: {exc}"))
    raise typer.Exit(code or 0)


_lang_chosen = False


def use_lang(value: "Lang | None") -> str:
    """The language for this command: --lang, else ATTN_DRILL_LANG, else the workspace or user config."""
    from .config import resolve
    from .i18n import set_lang
    global _lang_chosen
    _lang_chosen = True
    chosen, _, problems = resolve("lang", value.value if value else None, Path.cwd())
    if problems:
        from .render import console
        for p in problems:
            console(stderr=True).print(f"[yellow]warning:[/yellow] {p}", soft_wrap=True, markup=False)
    return set_lang(chosen or "en")


LANG_HELP = "Language: en or zh (default: $ATTN_DRILL_LANG, or `attn-drill config lang`)."


def _version(value: bool):
    if value:
        print(f"attn-drill {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                              help="Print the version and exit.")):
    """Practise hand-writing attention for LLM coding interviews."""


def _statuses() -> dict:
    from .state import statuses
    return statuses(Path.cwd())


@app.command("list")
def list_cmd(tag: Optional[str] = typer.Option(None, "--tag", "-t", help="Only problems with this tag."),
             difficulty: Optional[Difficulty] = typer.Option(None, "--difficulty", "-d", help="easy, medium or hard."),
             lang: Optional[Lang] = typer.Option(None, "--lang", help=LANG_HELP),
             json_out: bool = typer.Option(False, "--json", help="Print JSON instead of a table.")):
    """List the problem bank, with your status in this folder.

    Example: attn-drill list --tag masks
    """
    from .verbs.catalog import list_problems
    _run(list_problems, tag, difficulty.value if difficulty else None, use_lang(lang), json_out, _statuses())


@app.command()
def show(problem: str = typer.Argument(..., help="Problem id, e.g. gqa.", autocompletion=complete_id),
         lang: Optional[Lang] = typer.Option(None, "--lang", help=LANG_HELP)):
    """Show a problem's statement, interface and rules.

    Example: attn-drill show gqa --lang zh
    """
    from .verbs.catalog import show as show_verb
    _run(show_verb, problem, use_lang(lang))


@app.command()
def new(problem: str = typer.Argument(..., help="Problem id, e.g. gqa.", autocompletion=complete_id),
        dir: Path = typer.Option(Path("."), "--dir", help="Folder to write <id>.py into."),
        force: bool = typer.Option(False, "--force", help="Replace an existing file (a backup is kept).")):
    """Write the stub <id>.py for a problem to fill in.

    Example: attn-drill new gqa
    """
    from .verbs.scaffold import new as new_verb
    _run(new_verb, problem, dir, force)


@app.command()
def check(problem: Optional[str] = typer.Argument(None, help="Problem id; omit to grade every problem file here.", autocompletion=complete_id),
          path: Optional[Path] = typer.Argument(None, help="File to grade (default ./<id>.py)."),
          seed: Optional[int] = typer.Option(None, "--seed", help="Master seed (default: random, printed)."),
          full: bool = typer.Option(False, "--full", help="Also run the larger random cases."),
          case: Optional[str] = typer.Option(None, "--case", help="Run only this case (replay)."),
          verbose: bool = typer.Option(False, "--verbose", "-v",
                                       help="After the first screen, the details: every case, the mismatch, "
                                            "heatmaps of the error and of the attention weights."),
          json_out: bool = typer.Option(False, "--json", help="Exercism v3 JSON on stdout."),
          lang: Optional[Lang] = typer.Option(None, "--lang", help=LANG_HELP),
          sandbox: Optional[bool] = typer.Option(None, "--sandbox/--no-sandbox",
                                                 help="Grade inside the OS sandbox (bubblewrap), as grade does. "
                                                      "Default: only files owned by another user.")):
    """Grade your solution: outputs and gradients against the reference.

    Examples: attn-drill check gqa · attn-drill check gqa work/gqa.py --seed 7 · attn-drill check --json
    """
    from .worker import WorkerClient
    client = WorkerClient().start()      # torch starts loading while the files are read and vetted
    from .verbs import check as verb
    chosen = use_lang(lang)

    def go():
        try:
            targets = verb.resolve(problem, str(path) if path else None, Path.cwd())
            typed = verb.typed_path(problem, str(path) if path else None)
            reports = verb.run(targets, seed, full, case, client, sandbox, typed)
        finally:
            client.close()
        from .state import record_check, statuses
        scheduled = {r.problem: record_check(Path.cwd(), r) for r in reports}
        return verb.show(reports, json_out, chosen, statuses(Path.cwd()), verbose, scheduled)
    _run(go)


@app.command()
def verify(problems: Optional[List[str]] = typer.Argument(None, help="Problem ids (default: all).", autocompletion=complete_id),
           seed: int = typer.Option(0, "--seed", help="Master seed."),
           full: bool = typer.Option(False, "--full", help="Also run the larger random cases."),
           json_out: bool = typer.Option(False, "--json", help="JSON summary on stdout."),
           jobs: Optional[int] = typer.Option(None, "--jobs", "-j", min=1,
                                              help="Problems verified in parallel (default 2, at most the CPUs).")):
    """Prove the bank: references pass, stubs fail, every known mistake fails and is named.

    Example: attn-drill verify gqa rope
    """
    from .verbs.verify import verify as verb
    _run(verb, list(problems or []), seed, full, json_out, jobs)


@app.command("config")
def config_cmd(key: Optional[str] = typer.Argument(None, help="The setting: lang."),
               value: Optional[str] = typer.Argument(None, help="Its new value, e.g. zh."),
               user: bool = typer.Option(False, "--user", help="Set it for every workspace of this user, not just "
                                                               "this folder.")):
    """Show or change settings made once: the language (en or zh).

    Examples: attn-drill config · attn-drill config lang zh · attn-drill config lang en --user
    """
    from .verbs.settings import settings
    _run(settings, key, value, user, Path.cwd())


from . import cli_classroom, cli_practice  # noqa: E402,F401 - importing them registers their commands


def main() -> None:
    app(prog_name="attn-drill")


if __name__ == "__main__":
    main()
