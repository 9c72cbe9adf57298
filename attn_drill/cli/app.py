"""The Typer app, and the one exit path: every command calls its verb through `run`.

Exit codes: 0 passed / done, 1 failed (a grade that did not pass, a refused action), 2 usage or tool
error, 130 interrupted. The tool's own errors (attn_drill.errors) become their message; an OSError
(a folder not writable, a disk full) the system's words; anything else is a bug in attn-drill,
said as one, with how to report it. torch is never imported here: grading happens in a judge process.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import typer

from .. import __version__, bank

app = typer.Typer(
    name="attn-drill",
    help="Practise hand-writing attention for LLM coding interviews.\n\n"
         "Start with: attn-drill list, then attn-drill new mhsa, edit mhsa.py, attn-drill check mhsa.",
    no_args_is_help=True, add_completion=True, rich_markup_mode="rich",
    suggest_commands=False,      # click suggests the near names itself: once is enough
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _tidy(text: str) -> str:
    """A help text as the terminal should lay it out: each paragraph one line (the help formatter
    wraps it between words), and an "Examples:" paragraph one command a line, so none is broken."""
    import inspect
    import re
    out = []
    for para in re.split(r"\n\s*\n", inspect.cleandoc(text)):
        joined = " ".join(line.strip() for line in para.splitlines())
        m = re.match(r"(Examples?):\s*(.*)", joined)
        if m:
            out.append(m.group(1) + ":\n" + "\n".join(c.strip() for c in m.group(2).split(" · ")))
        else:
            out.append(joined)
    return "\n\n".join(out)


def tidy_help(typer_app) -> None:
    """Every command's help text tidied (see _tidy), whether from its docstring or its help=."""
    for cmd in typer_app.registered_commands:
        if cmd.help:
            cmd.help = _tidy(cmd.help)
        elif cmd.callback is not None and cmd.callback.__doc__:
            cmd.callback.__doc__ = _tidy(cmd.callback.__doc__)


def complete_id(incomplete: str) -> list[str]:
    """Shell completion of problem ids (the bank's file names only: no spec is parsed, no torch)."""
    try:
        return [pid for pid in bank.ids() if pid.startswith(incomplete)]
    except Exception:  # noqa: BLE001 - completion must never fail loudly
        return []


_json_errors = False


def _fail(message: str, code: int = 2):
    from .. import render
    render.error(message)
    if _json_errors:        # --json: a reader of stdout gets a document whatever went wrong
        render.print_json({"version": 3, "status": "error", "message": message, "tests": [],
                           "attn_drill": {"exit_code": code, "not_graded": True}})
    raise typer.Exit(code)


def _redeliver(unraisable) -> None:
    """A Ctrl-C that lands in a callback Python cannot raise from (a weakref callback in the import
    machinery, a __del__) is printed as "Exception ignored" with a traceback and then lost: the
    command would go on. It is raised again in the main thread instead, at its next line."""
    if unraisable.exc_type is not None and issubclass(unraisable.exc_type, KeyboardInterrupt):
        import _thread           # from another thread, a moment later: raised inside this hook it is lost again
        _thread.start_new_thread(_interrupt_soon, ())
        return
    _unraisable_default(unraisable)


def _interrupt_soon() -> None:
    import signal
    import threading
    import time
    time.sleep(0.02)       # a real signal, to the main thread: it also ends a blocking wait there
    signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)


_unraisable_default = sys.unraisablehook


def run(fn, *args, json_errors: bool = False, **kwargs) -> None:
    """Call a verb; turn the tool's own error types into a message and an exit code (with
    `json_errors`, also an exercism-style error document on stdout)."""
    global _json_errors, _lang_chosen
    _json_errors = json_errors
    sys.unraisablehook = _redeliver
    from .. import render
    from ..progress import adopt, store
    store.PRINTERS.update(warn=render.warn, note=lambda m: render.say(m, "dim", stderr=True))
    store.HOOKS["home"] = adopt.once      # a folder's own progress, from before, moves into the user's
    if not _lang_chosen:
        use_lang(None)           # commands without --lang speak the configured language too
    _lang_chosen = False         # --lang was this command's: the next one in this process chooses again
    from ..errors import AttnDrillError, SpecError, ToolError
    from ..i18n import t
    try:
        code = fn(*args, **kwargs)
    except SpecError as exc:
        _fail(t("cli.bad_spec", error=exc), exc.exit_code)
    except ToolError as exc:
        _fail(t("cli.tool_error", error=exc), exc.exit_code)
    except AttnDrillError as exc:
        _fail(str(exc), exc.exit_code)
    except KeyboardInterrupt:
        _fail(t("cli.interrupted"), 130)
    except (typer.Exit, typer.Abort, SystemExit):
        raise
    except OSError as exc:              # a folder not writable, a disk full: the system's words, no traceback
        where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
        _fail(t("cli.os_error", error=(exc.strerror or str(exc)) + where))
    except Exception as exc:  # noqa: BLE001 - a bug of the tool: a message, not a traceback
        if os.environ.get("ATTN_DRILL_DEBUG"):
            raise
        _fail(t("cli.bug", error=f"{type(exc).__name__}: {exc}"))
    raise typer.Exit(code or 0)


_lang_chosen = False


def use_lang(value) -> str:
    """The language for this command: --lang, else ATTN_DRILL_LANG, else the workspace or user config."""
    from .. import render
    from ..i18n import set_lang
    from ..progress.config import resolve
    global _lang_chosen
    _lang_chosen = True
    chosen, _, problems = resolve("lang", value.value if value else None, Path.cwd())
    for p in problems:
        render.warn(p)
    return set_lang(chosen or "en")


def _version(value: bool):
    if value:
        print(f"attn-drill {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                              help="Print the version and exit.")):
    """Practise hand-writing attention for LLM coding interviews."""
