"""Commands for instructors and performance (grade, bench).

Registered on the main app by importing this module from cli.py; behaviour lives in verbs/.
"""
from __future__ import annotations

from .cli import app  # noqa: F401 - commands below register on it
