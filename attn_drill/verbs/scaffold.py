"""`new`: write the stub for a problem, never overwriting a user's file without --force."""
from __future__ import annotations

import shutil
import time
from pathlib import Path

from .. import bank, render, source


def stub_text(pid: str) -> str:
    spec = bank.get(pid)
    return source.make_stub(spec, source.read(bank.reference_path(pid)))


def backup(path: Path) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    dest = path.with_name(f"{path.name}.{stamp}.bak")
    n = 1
    while dest.exists():
        dest = path.with_name(f"{path.name}.{stamp}-{n}.bak")
        n += 1
    shutil.copy2(path, dest)
    return dest


def new(pid: str, folder: Path, force: bool) -> int:
    con = render.console()
    text = stub_text(pid)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{pid}.py"
    if path.exists():
        if not force:
            con.print(f"[red]{path} already exists[/red]; your work is kept. "
                      f"Use --force to replace it (a backup is kept), or grade it: attn-drill check {pid}")
            return 1
        saved = backup(path)
        con.print(f"[yellow]kept a backup of your file:[/yellow] {saved}")
    path.write_text(text, encoding="utf-8")
    from ..state import record_new
    record_new(folder, pid)
    con.print(f"wrote [bold]{path}[/bold]. Read the task: attn-drill show {pid}; "
              f"grade it: attn-drill check {pid}" + (f" {path}" if folder.resolve() != Path.cwd().resolve() else ""))
    return 0
