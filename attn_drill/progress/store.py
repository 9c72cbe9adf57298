"""Where the progress lives and how it is read and written: one progress per user, wherever they
practise, in the folder `home()` names (`$ATTN_DRILL_HOME`, else `$XDG_DATA_HOME/attn-drill`, else
`~/.local/share/attn-drill`): `state.json`, its last good copies `state.json.1`..`.3`, a lock.

Every write is atomic (a temp file, fsync, rename) under an exclusive lock, so a kill at any moment
or two `check` runs at once never leave a half-written file; after each write the same content is
copied to `state.json.1` (the older copies move to `.2` and `.3`). The whole file is checked against
attn_drill.progress.schema on every read; nothing in it can stop a command, and nothing of it is lost:
  - a file that cannot be used at all (not JSON, truncated, not a mapping, another version,
    unreadable, a folder in its place) is kept aside as `state.json.damaged-<time>` and the newest
    last good copy that reads is restored in its place (only when there is none: a fresh start);
  - an entry of the wrong type is dropped, or a field reset to its default, the rest is kept, and
    the original file is copied to `state.json.damaged-<time>` first;
  - where nothing can be written (a read-only folder, the folder a file that cannot be moved),
    the command still runs and its result is shown; progress is just not saved.
Each of these says so in one line (warn, by default on stderr) naming the file and the kept copy.

Before one progress per user, each folder kept its own `.attn-drill/state.json`: the first command
run in such a folder moves what it holds into the user's progress (attn_drill.progress.adopt, hooked
in by the command line).
No torch.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
import time
from pathlib import Path

from ..i18n import labelled, t
from . import clock
from .schema import KINDS, SCHEMA, VERSION, _seen, check

FOLDER = ".attn-drill"        # a folder's own progress, before one progress per user (and its config)
HOME_ENV = "ATTN_DRILL_HOME"
COPIES = 3                    # last good copies kept: state.json.1 (the newest) .. state.json.3


def _empty() -> dict:
    return {"version": VERSION, "problems": {}, "mocks": [], "cards": {}, "drills": {}}


def home() -> Path:
    """The folder of the user's progress: $ATTN_DRILL_HOME, else $XDG_DATA_HOME/attn-drill, else
    ~/.local/share/attn-drill. To move it: move the folder, and set ATTN_DRILL_HOME to where it is."""
    given = os.environ.get(HOME_ENV, "").strip()
    if given:
        return Path(given).expanduser()
    data = os.environ.get("XDG_DATA_HOME", "").strip() or str(Path.home() / ".local" / "share")
    return Path(data) / "attn-drill"


def state_dir(root: Path) -> Path:
    """A folder's own `.attn-drill/` (where progress lived before one progress per user)."""
    return Path(root) / FOLDER


HOOKS: dict = {}        # "home": called with (cwd, home) before the user's progress is used (set by the CLI:
#                         attn_drill.progress.adopt.once, which moves a folder's own progress into it)


def _where(folder: Path | None) -> Path:
    if folder is not None:
        return Path(folder)
    here = home()
    if HOOKS.get("home"):
        HOOKS["home"](Path.cwd(), here)
    return here


# ---------------------------------------------------------------- warnings
_SAID: set = set()
PRINTERS: dict = {}     # "warn", "note": how the command line prints them (set by attn_drill.cli.app)


def _stderr(message: str) -> None:
    if PRINTERS.get("warn"):
        PRINTERS["warn"](message)
        return
    print(labelled(t("cli.warning"), message), file=sys.stderr, flush=True)


def note(message: str) -> None:
    """A line of information on stderr (not a warning): how the command line prints it."""
    if PRINTERS.get("note"):
        PRINTERS["note"](message)
        return
    print(message, file=sys.stderr, flush=True)


def _sayer(warn):
    """warn (default: a line on stderr), saying each thing about each file once per process."""
    out = warn or _stderr

    def say(message: str, about: Path) -> None:
        key = (str(Path(about).absolute()), message)
        if key not in _SAID:
            _SAID.add(key)
            out(message)
    return say


def _shown(path: Path) -> str:
    path = Path(path)
    try:
        return str(path.absolute().relative_to(Path.cwd()))
    except (ValueError, OSError):
        return str(path)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return "it is not UTF-8 text"
    if isinstance(exc, json.JSONDecodeError):
        if exc.pos >= len(exc.doc.rstrip()) or exc.msg.startswith("Unterminated"):
            return f"it ends in the middle, cut off after line {exc.doc.rstrip().count(chr(10)) + 1}"
        return f"it is not valid JSON: {exc.msg}, line {exc.lineno} column {exc.colno}"
    if isinstance(exc, IsADirectoryError):
        return "it is a folder, not a file"
    if isinstance(exc, RecursionError):
        return "it is nested too deeply to read"
    if isinstance(exc, OSError):
        return f"it cannot be read: {exc.strerror or exc}"
    return f"it cannot be read as JSON: {exc}"


def _free_name(path: Path) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(clock.now()))
    kept = path.with_name(f"{path.name}.damaged-{stamp}")
    n = 1
    while kept.exists() or kept.is_symlink():
        n += 1
        kept = path.with_name(f"{path.name}.damaged-{stamp}-{n}")
    return kept


def _set_aside(path: Path, why: str, say) -> tuple[dict, bool]:
    """Move a file (or folder) that cannot be used out of the way, and put the newest last good copy in
    its place; (the state to go on with, whether it may be written back)."""
    kept = _free_name(path)
    try:
        os.rename(path, kept)
    except OSError as exc:
        say(t("state.damaged_stuck", file=_shown(path), why=why, error=exc.strerror), path)
        return _empty(), False
    good = _last_good(path)
    if good is None:
        say(t("state.damaged", file=_shown(path), why=why, kept=_shown(kept)), path)
        return _empty(), True
    copy, data, raw = good
    try:
        _replace(path, raw)
    except OSError:
        pass                      # the copy is still there; the next write saves what it holds
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(copy.stat().st_mtime))
    say(t("state.restored", file=_shown(path), why=why, kept=_shown(kept), copy=copy.name, when=when), path)
    return data, True


def _copies(path: Path) -> list[Path]:
    return [path.with_name(f"{path.name}.{i}") for i in range(1, COPIES + 1)]


def _last_good(path: Path):
    """(copy, state, bytes) of the newest last good copy that reads whole, or None."""
    for copy in _copies(path):
        try:
            raw = copy.read_bytes()
            data = json.loads(raw.decode("utf-8"))
        except (OSError, ValueError, RecursionError):
            continue
        if isinstance(data, dict) and KINDS["version"][0](data.get("version")):
            notes: list[str] = []
            data = check(data, SCHEMA, "", notes)
            if not notes:
                return copy, data, raw
    return None


# ---------------------------------------------------------------- reading and writing
def _folder(folder: Path, create: bool, say) -> Path | None:
    """The state folder; None where there is none (and, with create, none can be made)."""
    if folder.is_dir():
        return folder
    if folder.exists() or folder.is_symlink():   # a file (or a dangling link) where the folder belongs
        kept = _free_name(folder)
        try:
            os.rename(folder, kept)
        except OSError as exc:
            say(t("state.folder_is_file_stuck", folder=_shown(folder), error=exc.strerror), folder)
            return None
        say(t("state.folder_was_file", folder=_shown(folder), kept=_shown(kept)), folder)
    if not create:
        return None
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        folder.mkdir()
    except FileExistsError:
        if folder.is_dir():
            return folder                        # another process made it just now
        say(t("state.no_folder", folder=_shown(folder)), folder)
        return None
    except OSError as exc:
        say(t("state.cannot_create", folder=_shown(folder), error=exc.strerror), folder)
        return None
    return folder


@contextlib.contextmanager
def _locked(folder: Path):
    """An exclusive lock on the folder; without one where it cannot be taken (a read-only folder):
    reads go on, and a write that fails says so itself."""
    try:
        fh = open(folder / "lock", "a+")
    except OSError:
        fh = None
    try:
        if fh is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(fh, fcntl.LOCK_EX)
        yield folder
    finally:
        if fh is not None:
            fh.close()   # releases the lock


def _read(folder: Path, say) -> tuple[dict, bool]:
    """The state in `folder` as SCHEMA allows it, and whether it may be written back."""
    path = folder / "state.json"
    if not path.exists() and not path.is_symlink():
        good = _last_good(path)            # killed between a rename and a write: the copy has it all
        return (good[1], True) if good is not None else (_empty(), True)
    try:
        raw = path.read_bytes()
        data = json.loads(raw.decode("utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        return _set_aside(path, _reason(exc), say)
    if not isinstance(data, dict):
        return _set_aside(path, f"it holds {_seen(data)}, not a mapping", say)
    if not KINDS["version"][0](data.get("version")):
        found = "no version" if "version" not in data else f"version {_seen(data['version'])}"
        return _set_aside(path, f"it has {found}; this attn-drill reads version {VERSION}", say)
    notes: list[str] = []
    data = check(data, SCHEMA, "", notes)
    if not notes:
        return data, True
    listed = "; ".join(notes[:3]) + (f"; and {len(notes) - 3} more" if len(notes) > 3 else "")
    kept = _free_name(path)
    try:
        with open(kept, "xb") as fh:
            fh.write(raw)
    except OSError as exc:
        say(t("state.entries_stuck", file=_shown(path), listed=listed, error=exc.strerror), path)
        return data, False
    say(t("state.entries", file=_shown(path), listed=listed, kept=_shown(kept)), path)
    with contextlib.suppress(OSError):
        _write(folder, data)
    return data, True


def _write(folder: Path, data: dict) -> None:
    try:
        try:
            blob = json.dumps(data, indent=1, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:   # a lone surrogate in a key the schema does not name
            blob = json.dumps(data, indent=1).encode("ascii")
    except (ValueError, RecursionError) as exc:
        raise OSError(f"the progress cannot be written as JSON ({exc})") from None
    path = folder / "state.json"
    _replace(path, blob)
    copies = _copies(path)              # the last good copies: state.json.1 is what was just written
    with contextlib.suppress(OSError):
        for older, newer in zip(copies[::-1], copies[-2::-1]):
            if newer.is_file():
                os.replace(newer, older)
        _replace(copies[0], blob)


def _replace(path: Path, blob: bytes) -> None:
    """Write `blob` as `path` atomically: a temp file beside it, fsync, rename."""
    import tempfile                      # only when writing: reading the records needs none
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".state-", suffix=".json")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(blob)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def load(folder: Path | None = None, warn=None) -> dict:
    """The user's progress (or the one in `folder`): a fresh one where there is none or it cannot be
    used; never raises."""
    say = _sayer(warn)
    folder = _folder(_where(folder), False, say)
    if folder is None:
        return _empty()
    with _locked(folder):
        return _read(folder, say)[0]


def update(folder: Path | None, fn, warn=None):
    """Read-modify-write under the lock, of the user's progress (or the one in `folder`); fn(data)
    mutates data and may return a value.

    What fn raises propagates; a state that cannot be saved (a read-only folder...) is said once by
    warn and fn still runs, on what could be read."""
    say = _sayer(warn)
    folder = _folder(_where(folder), True, say)
    if folder is None:
        return fn(_empty())
    with _locked(folder):
        data, savable = _read(folder, say)
        value = fn(data)
        if savable:
            try:
                _write(folder, data)
            except OSError as exc:
                say(t("state.cannot_save", folder=_shown(folder), error=exc.strerror or exc), folder)
        return value
