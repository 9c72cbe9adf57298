"""Running user code: tripwires on forbidden APIs, captured prints and warnings, the user's own
frames of a traceback, and loading a file as a fresh module."""
from __future__ import annotations

import contextlib
import io
import sys
import traceback
import types
import warnings
from pathlib import Path

import torch

from . import source
from .results import Frame, UserProblem

FORBIDDEN_OPS = ("scaled_dot_product", "_flash_attention", "_efficient_attention", "_cudnn_attention",
                 "flex_attention")
_counter = 0


class ForbiddenCall(BaseException):
    """Raised by a tripwire; a BaseException so a bare `except Exception` cannot swallow it."""

    def __init__(self, name: str):
        super().__init__(f"called `{name}`, which this problem forbids: write it by hand")
        self.name = name


# ---------------------------------------------------------------- guards, capture, tracing
class Guard:
    """Replaces forbidden torch entry points with tripwires while user code runs."""

    def __init__(self, names):
        self.names = set(names)
        self.tripped: list[str] = []
        self._saved = []

    def _targets(self):
        F, nn = torch.nn.functional, torch.nn
        table = {
            "scaled_dot_product_attention": [(F, "scaled_dot_product_attention")],
            "multi_head_attention_forward": [(F, "multi_head_attention_forward")],
            "MultiheadAttention": [(nn, "MultiheadAttention"), (nn.modules.activation, "MultiheadAttention")],
        }
        flex = sys.modules.get("torch.nn.attention.flex_attention")
        if flex is not None:
            table["flex_attention"] = [(flex, "flex_attention")]
        return [(obj, attr, name) for name, places in table.items() if name in self.names
                for obj, attr in places]

    def __enter__(self):
        for obj, attr, name in self._targets():
            self._saved.append((obj, attr, getattr(obj, attr)))
            setattr(obj, attr, self._tripwire(name))
        return self

    def _tripwire(self, name):
        def tripwire(*args, **kwargs):
            self.tripped.append(name)
            raise ForbiddenCall(name)
        return tripwire

    def __exit__(self, *exc):
        for obj, attr, value in reversed(self._saved):
            setattr(obj, attr, value)
        self._saved.clear()
        return False


class Session:
    """Everything that happens while user code runs: guards, captured prints and warnings."""

    def __init__(self, path: str, forbidden):
        self.path = str(Path(path).resolve())
        self.forbidden = forbidden
        self.stdout = io.StringIO()
        self.warnings: list[str] = []
        self.guard = Guard(forbidden)

    @contextlib.contextmanager
    def user(self):
        with self.guard, contextlib.redirect_stdout(self.stdout), warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            try:
                yield
            finally:
                for w in rec:
                    if str(Path(w.filename).resolve()) == self.path:
                        msg = f"line {w.lineno}: {w.category.__name__}: {w.message}"
                        if msg not in self.warnings:
                            self.warnings.append(msg)

    def frames(self, exc: BaseException) -> list[Frame]:
        out = []
        for fs in traceback.extract_tb(exc.__traceback__):
            try:
                same = str(Path(fs.filename).resolve()) == self.path
            except (OSError, ValueError):
                same = False
            if same:
                out.append(Frame(Path(fs.filename).name, fs.lineno or 0, fs.name, (fs.line or "").strip()))
        return out

    def problem(self, exc: BaseException, kind: str = "exception", context: str = "") -> UserProblem:
        if isinstance(exc, ForbiddenCall):
            kind = "forbidden"
        text = f"{type(exc).__name__}: {exc}" if not isinstance(exc, ForbiddenCall) else str(exc)
        if isinstance(exc, MemoryError) or "can't allocate memory" in str(exc):
            text = f"ran out of memory ({str(exc)[:160]}); does something allocate far more than the inputs need?"
            kind = "memory"
        return UserProblem(kind, (context + text) if context else text, self.frames(exc))


# ---------------------------------------------------------------- loading
def load_module(path: str, session: Session | None, label: str) -> types.ModuleType:
    """Execute a file as a fresh module. Raises UserProblemError for syntax/import/other errors."""
    global _counter
    _counter += 1
    src = source.read(Path(path))
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
    ctx = session.user() if session else contextlib.nullcontext()
    try:
        with ctx:
            exec(code, mod.__dict__)
    except ImportError as exc:
        prob = session.problem(exc, "import") if session else UserProblem("import", str(exc))
        prob.kind = "import"
        raise UserProblemError(prob) from None
    except BaseException as exc:  # noqa: BLE001 - anything the user's module does at import time
        if isinstance(exc, (KeyboardInterrupt, SystemExit)) and not session:
            raise
        prob = session.problem(exc, "import", "while importing your file: ") if session else \
            UserProblem("import", repr(exc))
        raise UserProblemError(prob) from None
    return mod


def load_source(src: str, label: str) -> types.ModuleType:
    global _counter
    _counter += 1
    mod = types.ModuleType(f"attn_drill_{label}_{_counter}")
    mod.__file__ = f"<{label}>"
    sys.modules[mod.__name__] = mod
    exec(compile(src, f"<{label}>", "exec", dont_inherit=True), mod.__dict__)
    return mod


class UserProblemError(Exception):
    def __init__(self, problem: UserProblem):
        super().__init__(problem.message)
        self.problem = problem


# ---------------------------------------------------------------- one side of a case
