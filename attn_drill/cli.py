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
    no_args_is_help=True, add_completion=False, rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
)


class Lang(str, Enum):
    en = "en"
    zh = "zh"


class Difficulty(str, Enum):
    easy = "easy"
    medium = "medium"
    hard = "hard"


def _fail(message: str, code: int = 2):
    from .render import console
    console(stderr=True).print(f"[red]error:[/red] {message}", soft_wrap=True)
    raise typer.Exit(code)


def _run(fn, *args, **kwargs) -> None:
    """Call a verb; turn the tool's own error types into a message and an exit code."""
    from .spec import SpecError
    from .verbs.check import UsageError
    from .worker import ToolError
    try:
        code = fn(*args, **kwargs)
    except bank.UnknownProblem as exc:
        _fail(str(exc))
    except SpecError as exc:
        _fail(f"bad problem spec: {exc}")
    except (UsageError, ValueError) as exc:
        _fail(str(exc))
    except ToolError as exc:
        _fail(f"the grader itself failed (not your code); please report this:\n{exc}")
    except KeyboardInterrupt:
        _fail("interrupted", 130)
    raise typer.Exit(code or 0)


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
             lang: Lang = typer.Option(Lang.en, "--lang", help="Titles in en or zh."),
             json_out: bool = typer.Option(False, "--json", help="Print JSON instead of a table.")):
    """List the problem bank, with your status in this folder.

    Example: attn-drill list --tag masks
    """
    from .verbs.catalog import list_problems
    _run(list_problems, tag, difficulty.value if difficulty else None, lang.value, json_out, _statuses())


@app.command()
def show(problem: str = typer.Argument(..., help="Problem id, e.g. gqa."),
         lang: Lang = typer.Option(Lang.en, "--lang", help="Statement in en or zh.")):
    """Show a problem's statement, interface and rules.

    Example: attn-drill show gqa --lang zh
    """
    from .verbs.catalog import show as show_verb
    _run(show_verb, problem, lang.value)


@app.command()
def new(problem: str = typer.Argument(..., help="Problem id, e.g. gqa."),
        dir: Path = typer.Option(Path("."), "--dir", help="Folder to write <id>.py into."),
        force: bool = typer.Option(False, "--force", help="Replace an existing file (a backup is kept).")):
    """Write the stub <id>.py for a problem to fill in.

    Example: attn-drill new gqa
    """
    from .verbs.scaffold import new as new_verb
    _run(new_verb, problem, dir, force)


@app.command()
def check(problem: Optional[str] = typer.Argument(None, help="Problem id; omit to grade every problem file here."),
          path: Optional[Path] = typer.Argument(None, help="File to grade (default ./<id>.py)."),
          seed: Optional[int] = typer.Option(None, "--seed", help="Master seed (default: random, printed)."),
          full: bool = typer.Option(False, "--full", help="Also run the larger random cases."),
          case: Optional[str] = typer.Option(None, "--case", help="Run only this case (replay)."),
          json_out: bool = typer.Option(False, "--json", help="Exercism v3 JSON on stdout."),
          lang: Lang = typer.Option(Lang.en, "--lang", help="Diagnoses in en or zh."),
          sandbox: Optional[bool] = typer.Option(None, "--sandbox/--no-sandbox",
                                                 help="Grade inside the OS sandbox (bubblewrap), as grade does. "
                                                      "Default: only files owned by another user.")):
    """Grade your solution: outputs and gradients against the reference.

    Examples: attn-drill check gqa · attn-drill check gqa work/gqa.py --seed 7 · attn-drill check --json
    """
    from .worker import WorkerClient
    client = WorkerClient().start()      # torch starts loading while the files are read and vetted
    from .verbs import check as verb

    def go():
        try:
            targets = verb.resolve(problem, str(path) if path else None, Path.cwd())
            reports = verb.run(targets, seed, full, case, client, sandbox)
        finally:
            client.close()
        from .state import record_check, statuses
        for r in reports:
            record_check(Path.cwd(), r)
        return verb.show(reports, json_out, lang.value, statuses(Path.cwd()))
    _run(go)


@app.command()
def verify(problems: Optional[List[str]] = typer.Argument(None, help="Problem ids (default: all)."),
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


from . import cli_classroom, cli_practice  # noqa: E402,F401 - importing them registers their commands


def main() -> None:
    app(prog_name="attn-drill")


if __name__ == "__main__":
    main()
