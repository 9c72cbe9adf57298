"""Running user code: captured prints and warnings, tripwires on, the user's own frames of a
traceback, and loading a file as a fresh module. Used by the room (submissions) and the judge
(the reference and mutants, with session=None)."""
from __future__ import annotations

import contextlib
import io
import sys
import traceback
import types
import warnings
from pathlib import Path

from ..results import Frame, UserProblem
from .guards import ForbiddenCall, Tripwires
from ..i18n import t

_counter = 0
MAX_OUTPUT = 64_000


class UserProblemError(Exception):
    def __init__(self, problem: UserProblem):
        super().__init__(problem.message)
        self.problem = problem


class _Capped(io.StringIO):
    """Captures what user code prints, keeping at most MAX_OUTPUT characters."""

    def write(self, s):
        if self.tell() < MAX_OUTPUT:
            return super().write(str(s)[:MAX_OUTPUT - self.tell()])
        return len(s)


class Session:
    """Everything that happens while user code runs: tripwires, captured prints and warnings."""

    def __init__(self, path: str, forbidden, folders=()):
        self.path = str(Path(path).resolve())
        self.folders = [str(Path(f).resolve()) for f in folders] or [str(Path(self.path).parent)]
        self.forbidden = forbidden
        self.stdout = _Capped()
        self.warnings: list[str] = []
        self.guard = Tripwires(forbidden)

    def mine(self, filename: str) -> bool:
        """Is this frame's file the user's file (or a helper module next to it)?"""
        try:
            full = str(Path(filename).resolve())
        except (OSError, ValueError):
            return False
        return full == self.path or any(full.startswith(f + "/") for f in self.folders) and \
            full.endswith(".py") and "site-packages" not in full

    @contextlib.contextmanager
    def user(self):
        with self.guard, contextlib.redirect_stdout(self.stdout), warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            try:
                yield
            finally:
                for w in rec:
                    if self.mine(w.filename):
                        msg = f"line {w.lineno}: {w.category.__name__}: {w.message}"
                        if msg not in self.warnings and len(self.warnings) < 20:
                            self.warnings.append(msg)

    def frames(self, exc: BaseException) -> list[Frame]:
        out = []
        for fs in traceback.extract_tb(exc.__traceback__):
            if self.mine(fs.filename):
                out.append(Frame(Path(fs.filename).name, fs.lineno or 0, fs.name, (fs.line or "").strip()))
        return out[-8:]

    def problem(self, exc: BaseException, kind: str = "exception", context: str = "") -> UserProblem:
        if isinstance(exc, ForbiddenCall):
            return UserProblem("forbidden", str(exc), self.frames(exc))
        text = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, (SystemExit, KeyboardInterrupt)):
            text = t("room.stopped", what=f"{type(exc).__name__}{': ' + str(exc) if str(exc) else ''}")
        if isinstance(exc, MemoryError) or "can't allocate memory" in str(exc) or "DefaultCPUAllocator" in str(exc):
            text = t("room.memory", what=_first_line(str(exc))[:160])
            kind = "memory"
        return UserProblem(kind, (context + text) if context else text, self.frames(exc))


def seed_all(seed: int) -> None:
    """torch.manual_seed without its cost: that seeds CUDA lazily, recording a stack trace each call."""
    import torch
    torch.default_generator.manual_seed(seed)
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.manual_seed_all(seed)


def _first_line(s: str) -> str:
    return s.strip().splitlines()[0] if s.strip() else s


# ---------------------------------------------------------------- loading
def load_module(path: str, session: Session | None, label: str, source: str | None = None) -> types.ModuleType:
    """Execute a file as a fresh module. Raises UserProblemError for syntax/import/other errors."""
    global _counter
    _counter += 1
    src = Path(path).read_text(encoding="utf-8") if source is None else source
    if session is None:
        return load_source(src, label, str(path))       # trusted: compiled once per process
    name = f"attn_drill_{label}_{_counter}"
    try:
        code = compile(src, str(path), "exec", dont_inherit=True)
    except SyntaxError as exc:
        line = (exc.text or "").rstrip("\n")
        raise UserProblemError(UserProblem(
            "syntax", f"SyntaxError: {exc.msg}",
            [Frame(Path(path).name, exc.lineno or 0, "<module>", line.strip())])) from None
    mod = types.ModuleType(name)
    mod.__file__ = str(path)
    sys.modules[name] = mod
    try:
        with session.user():
            exec(code, mod.__dict__)
    except ImportError as exc:
        prob = session.problem(exc, "import")
        prob.kind = "import"
        raise UserProblemError(prob) from None
    except BaseException as exc:  # noqa: BLE001 - anything the user's module does at import time
        raise UserProblemError(session.problem(exc, "import", "while importing your file: ")) from None
    return mod


_COMPILED: dict[tuple[str, str], types.CodeType] = {}


def load_source(src: str, label: str, filename: str | None = None) -> types.ModuleType:
    """Trusted source (a reference, grader, probe file, mutant) as a fresh module; compiled once."""
    global _counter
    _counter += 1
    mod = types.ModuleType(f"attn_drill_{label}_{_counter}")
    mod.__file__ = filename or f"<{label}>"
    sys.modules[mod.__name__] = mod
    key = (mod.__file__, src)
    code = _COMPILED.get(key)
    if code is None:
        code = _COMPILED[key] = compile(src, mod.__file__, "exec", dont_inherit=True)
        if len(_COMPILED) > 512:
            _COMPILED.pop(next(iter(_COMPILED)))
    exec(code, mod.__dict__)
    return mod
