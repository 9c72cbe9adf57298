"""The tool's own errors: one base class, each kind with the exit code the CLI gives it.

The CLI (attn_drill.cli.app) turns an AttnDrillError into its message and exit code, Ctrl-C into
exit 130, and an OSError (a folder not writable, a disk full) into the system's words. Anything
else is a bug in attn-drill: the CLI says so, with how to report it, and exits 2. The grading of a
user's code never raises these for what the code does: that is a verdict, not an error.
No torch, no rich.
"""
from __future__ import annotations

from pathlib import Path


class AttnDrillError(Exception):
    """Base class of every error the tool raises on purpose."""
    exit_code = 2


class UsageError(AttnDrillError):
    """The command cannot be done as asked (an unknown option value, a missing file): exit 2."""


class UnknownProblem(UsageError, LookupError):
    """No problem with this id; `suggestions` holds the near ones."""

    def __init__(self, pid: str, suggestions: list[str]):
        self.pid = pid
        self.suggestions = suggestions
        hint = f" Did you mean {', '.join(suggestions)}?" if suggestions else ""
        super().__init__(f"No problem called '{pid}'.{hint} Run 'attn-drill list' to see them all.")


class ToolError(AttnDrillError):
    """The grader itself failed (not the user's code): exit 2."""


class BankError(AttnDrillError):
    """A file of the problem bank is missing or broken (not the user's code): exit 2."""


class SpecError(BankError):
    """A problem spec that cannot be used: names the file, the field and the fix."""

    def __init__(self, path: Path | str, field_name: str, problem: str, fix: str):
        self.path, self.field, self.problem, self.fix = str(path), field_name, problem, fix
        super().__init__(f"{path}: field '{field_name}': {problem}. Fix: {fix}")


class GraderBug(BankError):
    """A grader gave the engine cases it cannot use (two cases with one name, a NaN truth)."""


class Cancelled(AttnDrillError):
    """The grading was cancelled by the client (watch saw a newer save)."""
