"""`new`: write the stub for a problem, never overwriting a user's file without --force.

A file that cannot be written (a read-only folder, a folder where the file should be, --dir naming a
file) is a usage error with a message saying which and what to do; the user's file is never touched
before its backup is made."""
from __future__ import annotations

import shutil
import time
from pathlib import Path

from .. import bank, render
from ..bank import sources
from ..errors import BankError, SpecError, UsageError
from ..i18n import t
from ..progress import clock, rules


def stub_text(pid: str) -> str:
    spec = bank.get(pid)
    ref = bank.reference_path(pid)
    try:
        return sources.make_stub(spec, bank.read_reference(pid))
    except sources.MutantError as exc:   # the interface names something the reference lacks
        raise SpecError(spec.path, "interface", str(exc), f"define those names in reference/{pid}.py") from None
    except SyntaxError as exc:
        raise BankError(bank.fault_message("reference", ref, f"does not parse: line {exc.lineno}: "
                                                                  f"{exc.msg}")) from None
    except (ValueError, RecursionError) as exc:   # a NUL byte; nested too deeply
        raise BankError(bank.fault_message("reference", ref, f"does not parse: {exc}")) from None


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


def backup(path: Path) -> Path:
    """Copy `path` to <name>.<time>.bak beside it; UsageError (and the file untouched) if that fails."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(clock.now()))
    dest = path.with_name(f"{path.name}.{stamp}.bak")
    n = 1
    while dest.exists():
        dest = path.with_name(f"{path.name}.{stamp}-{n}.bak")
        n += 1
    try:
        shutil.copy2(path, dest)
    except OSError as exc:
        raise UsageError(t("new.no_backup", file=path, why=_why(exc))) from None
    return dest


def refuse_folder(path: Path, pid: str) -> None:
    """A folder where the problem's file should be: say so (nothing is replaced)."""
    if path.is_dir():
        raise UsageError(t("new.is_folder", file=path, id=pid))


def write_stub(path: Path, text: str) -> None:
    """Write the stub (making its folder); UsageError with the reason when the folder is not writable."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise UsageError(t("new.parent_file", folder=path.parent, name=path.name)) from None
    except OSError as exc:
        raise UsageError(t("new.no_folder", folder=path.parent, why=_why(exc))) from None
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(t("new.cannot_write", file=path, why=_why(exc))) from None


def new(pid: str, folder: Path, force: bool) -> int:
    con = render.console()
    text = stub_text(pid)
    if folder.exists() and not folder.is_dir():
        raise UsageError(t("new.dir_file", folder=folder, id=pid))
    path = folder / f"{pid}.py"
    refuse_folder(path, pid)
    if path.exists():
        if not force:
            render.say(t("new.exists", file=path, id=pid), "red", con)
            return 1
        saved = backup(path)
        render.say(t("new.backup", file=saved), "yellow", con)
    write_stub(path, text)
    rules.record_new(folder, pid)
    where = f" {path}" if folder.resolve() != Path.cwd().resolve() else ""
    render.say(t("new.wrote", file=path, id=pid, where=where), con=con)
    return 0
