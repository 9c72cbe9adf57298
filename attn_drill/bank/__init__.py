"""The problem bank: where it lives (inside the wheel, or at the root of a source checkout), its
ids and specs, and what went wrong when one of its files is broken.

Modules: spec (the YAML spec, validated on load), curriculum (the order problems are met in),
sources (stubs, mutants, vetting a file before it runs), policy (what graded code may use), api
(what a grader sees), quiz (follow-up questions). No torch here: `list`, `show` and `--help` go
through this module; only api and the questions' proofs import torch.
"""
from __future__ import annotations

import difflib
import os
from functools import lru_cache
from pathlib import Path

from ..errors import BankError, GraderBug, SpecError, UnknownProblem
from .spec import Spec, load_spec

_PKG = Path(__file__).resolve().parent.parent     # the attn_drill package


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


def questions_path(pid: str) -> Path:
    """questions/<id>.py: the follow-up questions of a problem (attn_drill.bank.quiz)."""
    return root() / "questions" / f"{pid}.py"


def probe_path(pid: str) -> Path:
    """probes/<id>.py: optional code that drives a submission beside it (attn_drill.room.kit)."""
    return root() / "probes" / f"{pid}.py"


def ids() -> list[str]:
    folder = root() / "problems"
    if not folder.is_dir() and os.environ.get("ATTN_DRILL_BANK"):
        raise BankError(f"ATTN_DRILL_BANK is {os.environ['ATTN_DRILL_BANK']}, which has no problems/ folder; "
                        f"point it at a bank (a folder with problems/, reference/ and graders/) or unset it")
    return sorted(p.stem for p in folder.glob("*.yaml"))


def suggest(pid: str) -> list[str]:
    known = ids()
    close = difflib.get_close_matches(pid, known, n=3, cutoff=0.5)
    close += [k for k in known if pid and pid in k and k not in close]
    return close[:3]


@lru_cache(maxsize=None)
def get(pid: str) -> Spec:
    path = spec_path(pid)
    if not path.is_file():
        if path.exists():   # a folder called <id>.yaml
            raise SpecError(path, "<file>", "is a folder, not a file", "put the spec in a file of that name")
        raise UnknownProblem(pid, suggest(pid))
    cache = _cache()
    spec = cache.get(path)
    if spec is None:
        spec = load_spec(path)
        cache.put(path, spec)
    return spec


_CACHES: dict = {}


def _cache():
    """The parsed specs of this bank kept between runs (bank.cache), saved when the process ends."""
    from .cache import SpecCache
    problems = root() / "problems"
    if problems not in _CACHES:
        import atexit
        _CACHES[problems] = SpecCache(problems)
        atexit.register(_CACHES[problems].save)
    return _CACHES[problems]


def read_reference(pid: str) -> str:
    """reference/<id>.py as text; BankError naming it when it cannot be read."""
    path = reference_path(pid)
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = "is not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else f"cannot be read ({exc.strerror})"
        raise BankError(fault_message("reference", path, why)) from None


def fault_message(role: str, path: Path, what: str) -> str:
    shown = f"{path.parent.name}/{path.name}"
    return (f"the problem's {role} failed: {shown} {what}. This is a fault of the problem bank, not of your "
            f"code: fix {shown} (in {path.parent.parent}) or report it")


def fault(pid: str | None, exc: BaseException) -> str | None:
    """Why grading `pid` failed, when the fault is in the bank's own files: a grader that raises or does
    not import, a reference that does not parse or raises, a probe file that raises. One message naming
    the file and line (no traceback); None when the fault is elsewhere. Called by the judge worker."""
    try:
        return _fault(pid, exc)
    except Exception:  # noqa: BLE001 - explaining a failure must not fail
        return None


def _fault(pid, exc: BaseException) -> str | None:
    import traceback
    if not pid or not isinstance(pid, str):
        return None
    try:
        files = {str(p.resolve()): (p, role) for p, role in
                 ((grader_path(pid), "grader"), (reference_path(pid), "reference"), (probe_path(pid), "probe file"))}
    except (OSError, ValueError):
        return None

    def mine(filename) -> tuple | None:
        try:
            return files.get(str(Path(filename).resolve())) if filename else None
        except (OSError, ValueError):
            return None

    what = f"{type(exc).__name__}: {exc}".strip().rstrip(":")
    if isinstance(exc, SyntaxError) and mine(exc.filename):
        p, role = mine(exc.filename)
        return fault_message(role, p, f"does not parse: line {exc.lineno}: {exc.msg}")
    if isinstance(exc, OSError) and mine(exc.filename):
        p, role = mine(exc.filename)
        return fault_message(role, p, f"cannot be read ({exc.strerror})")
    for fs in reversed(traceback.extract_tb(exc.__traceback__)):   # the innermost frame in a bank file
        hit = mine(fs.filename)
        if hit:
            code = f" `{fs.line.strip()}`" if fs.line and fs.line.strip() else ""
            return fault_message(hit[1], hit[0], f"raised at line {fs.lineno} (in {fs.name}){code}: {what}")
    if isinstance(exc, GraderBug):
        return fault_message("grader", grader_path(pid), f"gave cases the engine cannot use: {exc}")
    for p, role in files.values():   # not in a traceback: a file that cannot even be read or compiled
        if not p.exists():
            if role != "probe file":
                return fault_message(role, p, "is missing")
            continue
        try:
            compile(p.read_text(encoding="utf-8"), str(p), "exec", dont_inherit=True)
        except UnicodeDecodeError:
            return fault_message(role, p, "is not UTF-8 text")
        except (OSError, SyntaxError, ValueError) as err:
            return fault_message(role, p, f"cannot be loaded ({type(err).__name__}: {err})")
    return None


def all_specs() -> list[Spec]:
    return [get(pid) for pid in ids()]


__all__ = ["root", "ids", "get", "all_specs", "suggest", "UnknownProblem", "SpecError", "BankError",
           "spec_path", "reference_path", "grader_path", "probe_path", "questions_path", "read_reference", "fault",
           "fault_message"]
