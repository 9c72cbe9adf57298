"""Regular expressions compiled on first use. A character class over the CJK ranges takes milliseconds
to compile (the engine builds a table of every character in it), so a module-level pattern that a
command never uses would be paid for by every start of the tool (`list`, `--help`)."""
from __future__ import annotations

import re


class LazyPattern:
    """Stands for `re.compile(pattern, flags)`: the same methods, compiled when one is first called."""

    __slots__ = ("_args", "_compiled")

    def __init__(self, pattern: str, flags: int = 0):
        self._args, self._compiled = (pattern, flags), None

    def __getattr__(self, name: str):
        if self._compiled is None:
            self._compiled = re.compile(*self._args)
        return getattr(self._compiled, name)


def compile(pattern: str, flags: int = 0) -> LazyPattern:   # noqa: A001 - named as re.compile, for the reader
    return LazyPattern(pattern, flags)
