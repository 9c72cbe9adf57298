"""Parsed specs kept between runs, so `list`, `today` and `show` do not parse every YAML file each
time. One file per bank in the user's cache folder ($XDG_CACHE_HOME/attn-drill, else
~/.cache/attn-drill; ATTN_DRILL_CACHE overrides it, "off" turns it off). An entry is used only while
its spec file has the same size and modification time, and only by the same version of this
parser; it is read back with an unpickler that can build nothing but the spec's own dataclasses.
A cache that cannot be read or written is simply not used. No torch, no YAML here.
"""
from __future__ import annotations

import io
import os
import pickle
import zlib
from pathlib import Path

from . import spec as _spec

ENV = "ATTN_DRILL_CACHE"
_BUILTINS = {"tuple", "list", "dict", "frozenset", "set", "str", "int", "float", "bool", "NoneType"}


def folder() -> Path | None:
    where = os.environ.get(ENV, "").strip()
    if where.lower() == "off":
        return None
    if where:
        return Path(where)
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "attn-drill"


def _parser_version() -> str:
    """Changes whenever the code that builds a Spec, or this module, does."""
    return ":".join(f"{st.st_mtime_ns}:{st.st_size}" for st in map(os.stat, (_spec.__file__, __file__)))


class _SpecsOnly(pickle.Unpickler):
    def find_class(self, module, name):
        if module == _spec.__name__ and isinstance(getattr(_spec, name, None), type):
            return getattr(_spec, name)
        if module == "builtins" and name in _BUILTINS:
            return super().find_class(module, name)
        if module == "pathlib" and name in ("PosixPath", "WindowsPath", "Path", "PurePosixPath"):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not part of a spec")


class SpecCache:
    """{spec file name: ((size, mtime_ns), Spec)} for one bank folder."""

    def __init__(self, problems: Path):
        self.problems = problems
        where = folder()
        bank_path = str(problems.resolve()).encode()
        tag = f"{zlib.crc32(bank_path):08x}{len(bank_path):04x}"   # zlib, not hashlib: a name only, cheap to import
        self.file = None if where is None else where / f"specs-{tag}.pickle"
        self.version = _parser_version()
        self.entries: dict[str, tuple] = {}
        self.dirty = False
        self._read()

    def _read(self) -> None:
        if self.file is None:
            return
        try:
            blob = self.file.read_bytes()
            data = _SpecsOnly(io.BytesIO(blob)).load()
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ValueError, TypeError, IndexError):
            return
        if isinstance(data, dict) and data.get("version") == self.version and isinstance(data.get("entries"), dict):
            self.entries = data["entries"]

    def get(self, path: Path):
        """The cached Spec of `path` while the file is unchanged, else None."""
        try:
            st = path.stat()
        except OSError:
            return None
        hit = self.entries.get(path.name)
        if hit and hit[0] == (st.st_size, st.st_mtime_ns) and isinstance(hit[1], _spec.Spec):
            return hit[1]
        return None

    def put(self, path: Path, value) -> None:
        try:
            st = path.stat()
        except OSError:
            return
        self.entries[path.name] = ((st.st_size, st.st_mtime_ns), value)
        self.dirty = True

    def save(self) -> None:
        if self.file is None or not self.dirty:
            return
        try:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            import tempfile                      # only when writing: `list` reads
            fd, tmp = tempfile.mkstemp(dir=self.file.parent, prefix=".specs-")
            with os.fdopen(fd, "wb") as fh:
                pickle.dump({"version": self.version, "entries": self.entries}, fh, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, self.file)
            self.dirty = False
        except OSError:
            try:
                os.unlink(tmp)
            except (OSError, UnboundLocalError):
                pass
