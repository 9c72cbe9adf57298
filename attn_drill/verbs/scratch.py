"""Scratch copies of someone's folder, for grading it where its files cannot be changed. No torch.

Regular files only, no caches, within size caps. Built so that no link can redirect it: the source
is opened with O_NOFOLLOW (a symbolic link is skipped, never read through), and the copy is written
with directory file descriptors, each name created afresh (O_CREAT | O_EXCL | O_NOFOLLOW): a link
planted in the scratch folder, even while the copy runs, makes that one file fail, never a write
elsewhere. In the OS sandbox the scratch folder is mounted read-only (the code runs in an in-memory
copy the sandbox makes of it), so nothing a student's code does can touch it.
"""
from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

MAX_FILE_BYTES = 5 << 20      # files larger than this are not copied into the scratch folder
MAX_FOLDER_BYTES = 50 << 20   # nor anything once a copy reaches this size
SKIP_NAMES = {"__pycache__", ".git", ".attn-drill", ".ipynb_checkpoints"}
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW


def clear(dst: Path) -> None:
    """Empty the scratch folder: links are removed themselves, folders without following links."""
    for old in os.scandir(dst):
        if old.is_dir(follow_symlinks=False):
            shutil.rmtree(old.path, ignore_errors=True)      # rmtree does not follow links inside
        else:
            try:
                os.unlink(old.path)
            except OSError:
                pass


def copy_folder(src: Path, dst: Path) -> dict[str, str]:
    """Fill dst with a copy of src; returns what was left out, {relative path: why} ("link", "size",
    "unreadable")."""
    clear(dst)
    skipped: dict[str, str] = {}
    total = 0
    root_fd = os.open(dst, _DIR)
    try:
        for dirpath, dirnames, filenames in os.walk(src):
            rel = Path(dirpath).relative_to(src)
            kept = []
            for d in sorted(dirnames):
                if d in SKIP_NAMES or d.startswith("."):
                    continue
                if os.path.islink(os.path.join(dirpath, d)):
                    skipped[str(rel / d)] = "link"
                    continue
                kept.append(d)
            dirnames[:] = kept
            for name in sorted(filenames):
                where = str(rel / name)
                try:
                    fd = os.open(os.path.join(dirpath, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
                except OSError:
                    skipped[where] = "link" if os.path.islink(os.path.join(dirpath, name)) else "unreadable"
                    continue
                try:
                    info = os.fstat(fd)
                    if not stat.S_ISREG(info.st_mode):
                        skipped[where] = "unreadable"
                        continue
                    if info.st_size > MAX_FILE_BYTES or total + info.st_size > MAX_FOLDER_BYTES:
                        skipped[where] = "size"
                        continue
                    total += info.st_size
                    _write(root_fd, rel, name, fd)
                except OSError:
                    skipped[where] = "unreadable"
                finally:
                    os.close(fd)
    finally:
        os.close(root_fd)
    return skipped


def _write(root_fd: int, rel: Path, name: str, src_fd: int) -> None:
    """Create rel/name under root_fd, never following a link, and copy src_fd's bytes into it."""
    fds = [root_fd]
    try:
        for part in rel.parts:
            try:
                os.mkdir(part, 0o755, dir_fd=fds[-1])
            except FileExistsError:
                pass
            fds.append(os.open(part, _DIR, dir_fd=fds[-1]))
        out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=fds[-1])
        try:
            while True:
                chunk = os.read(src_fd, 1 << 20)
                if not chunk:
                    break
                os.write(out, chunk)
        finally:
            os.close(out)
    finally:
        for fd in fds[1:]:
            os.close(fd)
