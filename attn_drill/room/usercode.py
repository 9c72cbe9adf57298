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
from .guards import ForbiddenCall
from ..i18n import t

_counter = 0
MAX_OUTPUT = 64_000


_PLAIN = (str, bytes, int, float, bool, type(None))
_HEAPTYPE = 1 << 9        # Py_TPFLAGS_HEAPTYPE: a class written in Python, not in C


def user_text(exc: BaseException) -> str:
    """An exception's or a warning's text without calling any method the submission may have
    written (its __str__, an `args` property, its arguments' __str__ or __repr__): the words of the
    first class of its MRO written in C, on its arguments when they are plain values; else the
    arguments' types. The room runs no submitted code once the op tracer has stopped."""
    try:
        args = BaseException.args.__get__(exc)
    except TypeError:
        return ""
    if all(type(a) in _PLAIN for a in args):
        base = next(c for c in type(exc).__mro__ if not c.__flags__ & _HEAPTYPE)
        try:
            return base.__str__(exc)
        except Exception:  # noqa: BLE001 - a malformed exception: its arguments as below
            pass
    parts = [str(a) if type(a) in _PLAIN else f"<{type(a).__name__}>" for a in args[:8]]
    return parts[0] if len(parts) == 1 else ("(" + ", ".join(parts) + ")" if parts else "")


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
    """Everything that happens while user code runs: captured prints and warnings, and which frames
    are the user's (the file and the helper files vetted with it: `files`, the names they run under)."""

    def __init__(self, path: str, files=()):
        self.path = str(path)
        self.files = frozenset([self.path, *files])
        self.stdout = _Capped()
        self.warnings: list[str] = []

    def mine(self, filename: str) -> bool:
        """Is this frame's file the user's file (or a helper module vetted with it)?"""
        return filename in self.files

    @contextlib.contextmanager
    def user(self):
        with contextlib.redirect_stdout(self.stdout), warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            try:
                yield
            finally:
                for w in rec:
                    if self.mine(w.filename):
                        text = user_text(w.message) if isinstance(w.message, BaseException) else ""
                        msg = f"line {w.lineno}: {w.category.__name__}: {text}"
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
            return UserProblem("forbidden", user_text(exc), self.frames(exc))
        said = user_text(exc)
        text = f"{type(exc).__name__}: {said}"
        if isinstance(exc, (SystemExit, KeyboardInterrupt)):
            text = t("room.stopped", what=f"{type(exc).__name__}{': ' + said if said else ''}")
        if isinstance(exc, MemoryError) or "can't allocate memory" in said or "DefaultCPUAllocator" in said:
            text = t("room.memory", what=_first_line(said)[:160])
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
class Compiler:
    """How the submission's files become code: as written (None), or with their accesses to private
    names on `self` checked at run time (attn_drill.room.own), sharing one record of own classes."""

    def __init__(self, own_only=None):
        from .own import Registry
        self.names = None if own_only is None else frozenset(map(str, own_only))
        self.registry = Registry()

    def code(self, src: str, filename: str):
        if self.names is None:
            return compile(src, filename, "exec", dont_inherit=True)
        from .own import compile_user
        return compile_user(src, filename, self.names)

    def start(self, module: types.ModuleType) -> None:
        if self.names is not None:
            module.__dict__.update(self.registry.globals_for(module.__name__))


class VettedHelpers:
    """The helper files the judge vetted beside a submission, served from the text it vetted: an
    import of one of those names is that text, never a file read now (nor any other file of the folder:
    the submission's folder is not on sys.path)."""

    def __init__(self, helpers: dict, compiler: Compiler | None = None):
        self.helpers = {str(k): (str(f), str(src)) for k, (f, src) in helpers.items()}
        self.compiler = compiler or Compiler()

    @property
    def filenames(self) -> list[str]:
        return [f for f, _ in self.helpers.values()]

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.helpers:
            return None
        import importlib.util
        return importlib.util.spec_from_loader(fullname, self, origin=self.helpers[fullname][0])

    def create_module(self, spec):
        return None

    def exec_module(self, module) -> None:
        filename, src = self.helpers[module.__name__]
        module.__file__ = filename
        self.compiler.start(module)
        exec(self.compiler.code(src, filename), module.__dict__)


def load_module(path: str, session: Session | None, label: str, source: str | None = None,
                compiler: Compiler | None = None) -> types.ModuleType:
    """Execute a file as a fresh module. Raises UserProblemError for syntax/import/other errors."""
    global _counter
    _counter += 1
    src = Path(path).read_text(encoding="utf-8") if source is None else source
    if session is None:
        return load_source(src, label, str(path))       # trusted: compiled once per process
    name = f"attn_drill_{label}_{_counter}"
    compiler = compiler or Compiler()
    try:
        code = compiler.code(src, str(path))
    except (RecursionError, MemoryError):
        raise UserProblemError(UserProblem("syntax", t("room.too_deep"), [])) from None
    except SyntaxError as exc:
        line = (exc.text or "").rstrip("\n")
        raise UserProblemError(UserProblem(
            "syntax", f"SyntaxError: {exc.msg}",
            [Frame(Path(path).name, exc.lineno or 0, "<module>", line.strip())])) from None
    mod = types.ModuleType(name)
    mod.__file__ = str(path)
    compiler.start(mod)
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
