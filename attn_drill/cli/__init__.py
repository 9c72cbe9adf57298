"""The command line: the app and its exit path (app), shared options (options), and the commands
(core, practice, classroom), each a thin call into attn_drill.verbs. No torch."""
import os
import sys

from .app import app, tidy_help
from . import classroom, core, practice  # noqa: E402,F401 - importing them registers their commands

tidy_help(app)


def main() -> None:
    _only_the_command_invoked(sys.argv[1:])
    app(prog_name="attn-drill")


def _only_the_command_invoked(args: list[str]) -> None:
    """Typer builds click's object of every registered command on each run (a fifth of what `list`
    takes): a run that names one of them gets only that one. The top-level help, an unknown name
    (click suggests the near ones) and shell completion keep them all."""
    if not args or args[0].startswith("-") or any(k.startswith("_") and k.endswith("_COMPLETE") for k in os.environ):
        return
    from typer.main import get_command_name
    named = [c for c in app.registered_commands
             if (c.name or get_command_name(c.callback.__name__)) == args[0]]
    if named:
        app.registered_commands = named


__all__ = ["app", "main"]
