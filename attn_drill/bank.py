"""Where the problem bank lives: inside the wheel, or at the root of a source checkout.

No torch here: `list`, `show` and `--help` go through this module.
"""
from __future__ import annotations

import difflib
import os
from functools import lru_cache
from pathlib import Path

from .spec import Spec, SpecError, load_spec

_PKG = Path(__file__).resolve().parent


@lru_cache(maxsize=1)
def root() -> Path:
    """The folder that holds problems/, reference/ and graders/.

    ATTN_DRILL_BANK overrides it (the tests use a small fixture bank).
    """
    override = os.environ.get("ATTN_DRILL_BANK")
    if override:
        return Path(override).resolve()
    installed = _PKG / "_bank"
    if (installed / "problems").is_dir():
        return installed
    return _PKG.parent


def spec_path(pid: str) -> Path:
    return root() / "problems" / f"{pid}.yaml"


def reference_path(pid: str) -> Path:
    return root() / "reference" / f"{pid}.py"


def grader_path(pid: str) -> Path:
    return root() / "graders" / f"{pid}.py"


def probe_path(pid: str) -> Path:
    """probes/<id>.py: optional code that drives a submission beside it (attn_drill.room.kit)."""
    return root() / "probes" / f"{pid}.py"


def ids() -> list[str]:
    folder = root() / "problems"
    return sorted(p.stem for p in folder.glob("*.yaml"))


class UnknownProblem(LookupError):
    def __init__(self, pid: str, suggestions: list[str]):
        self.pid = pid
        self.suggestions = suggestions
        hint = f" Did you mean {', '.join(suggestions)}?" if suggestions else ""
        super().__init__(f"No problem called '{pid}'.{hint} Run 'attn-drill list' to see them all.")


def suggest(pid: str) -> list[str]:
    known = ids()
    close = difflib.get_close_matches(pid, known, n=3, cutoff=0.5)
    close += [k for k in known if pid and pid in k and k not in close]
    return close[:3]


@lru_cache(maxsize=None)
def get(pid: str) -> Spec:
    path = spec_path(pid)
    if not path.is_file():
        raise UnknownProblem(pid, suggest(pid))
    return load_spec(path)


def all_specs() -> list[Spec]:
    return [get(pid) for pid in ids()]


__all__ = ["root", "ids", "get", "all_specs", "suggest", "UnknownProblem", "SpecError",
           "spec_path", "reference_path", "grader_path", "probe_path"]
