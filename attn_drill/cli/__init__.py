"""The command line: the app and its exit path (app), shared options (options), and the commands
(core, practice, classroom), each a thin call into attn_drill.verbs. No torch."""
from .app import app, tidy_help
from . import classroom, core, practice  # noqa: E402,F401 - importing them registers their commands

tidy_help(app)


def main() -> None:
    app(prog_name="attn-drill")


__all__ = ["app", "main"]
