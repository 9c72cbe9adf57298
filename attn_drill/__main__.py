"""`python -m attn_drill`. Python puts the current folder first on sys.path for `-m`; it is taken off
before anything else is imported, so a `rich.py` or `yaml.py` beside a submission never runs in the
tool (the judge and its rooms start isolated interpreters of their own: rules.interpreter)."""
import os
import sys

if sys.path and sys.path[0] in ("", os.getcwd()):
    del sys.path[0]

from .cli import main  # noqa: E402 - after the current folder is off sys.path

main()
