"""Commands of the practice workflow (hint, solution, reset, progress, watch, mock).

Registered on the main app by importing this module from cli.py; behaviour lives in verbs/.
"""
from __future__ import annotations

from .cli import app  # noqa: F401 - commands below register on it
