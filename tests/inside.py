"""What a sandbox holds, read from outside it: its processes as the host numbers them, and its
files through its zygote's root folder (/proc/PID/root), so a test's evidence never passes through
anything the student's code can write."""
from __future__ import annotations

import os
from pathlib import Path


def descendants(pid: int) -> list[int]:
    """Every process below `pid`, as the host numbers them, the nearest first."""
    found, todo = [], [pid]
    while todo:
        p = todo.pop(0)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                kids = [int(c) for c in Path(f"/proc/{p}/task/{task}/children").read_text().split()]
                found += kids
                todo += kids
        except OSError:
            pass
    return found


def sandbox_root(pid: int) -> Path:
    """The root folder as the sandbox's zygote sees it (the process nearest bwrap that runs the zygote,
    not one of the rooms forked from it, which may end any time)."""
    for p in descendants(pid):
        try:
            if b"attn_drill.room.zygote" in Path(f"/proc/{p}/cmdline").read_bytes():
                return Path(f"/proc/{p}/root")
        except OSError:
            pass
    raise AssertionError("no zygote found in the sandbox")


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False
