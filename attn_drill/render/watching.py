"""What `watch` shows: a header, a line per file, "checking… 12 s (limit 30 s)", then the first screen
of the latest report (and, with the key d, all of its details), the keys. Reads the Watcher's state;
prints nothing."""
from __future__ import annotations

import time
from pathlib import Path

from rich.console import Group
from rich.text import Text

from .. import bank
from ..i18n import t
from ..results import PASS
from .base import FIRST_SCREEN, Para, clip, height as height_of
from .report import details, first_screen, summary_line, verdict_word


def watch_screen(w, height: int | None = None) -> Group:
    width = w.con.width
    parts = [_header(w)]
    if w.message:
        parts.append(Text(w.message, style="red"))
    if len(w.targets) > 1:
        for pid, file in w.targets.items():
            parts.append(_file_line(w, pid, file))
    pid = w.latest
    if w.checking:
        names = ", ".join(w.targets[p].name for p in sorted(w.checking))
        parts.append(Para(t("watch.checking", files=names) + _elapsed(w) +
                          (" " + t("watch.previous") if pid in w.checking and pid in w.reports else ""),
                          "bold yellow"))
    if pid in w.reports:
        r = w.reports[pid]
        used = sum(height_of(p, width) for p in parts)
        budget = max(8, (height or FIRST_SCREEN) - used - 1) if not w.details else 10 ** 6
        title = bank.get(pid).title.get(w.lang)
        parts.append(first_screen(r, title, width, budget=budget, hint=True, details_cmd=None))
        if w.details and r.status != PASS:
            parts.append(details(r, width))
    missing = [p for p in w.targets if not w.targets[p].is_file()]
    for p in missing:
        parts.append(Text(t("watch.waiting", file=w.targets[p].name), style="yellow"))
    if not w.targets:
        parts.append(Text(t("watch.no_files"), style="yellow"))
    parts.append(Text(t("watch.keys"), style="dim"))
    return Group(*parts)


def _elapsed(w) -> str:
    """" 12 s (limit 30 s)": how long the running check has taken, against its time limit."""
    started = [w.started[p] for p in w.checking if p in w.started]
    if not started:
        return ""
    limit = max(w.limits.get(p, 0) for p in w.checking)
    return " " + t("watch.elapsed", s=int(time.monotonic() - min(started)), limit=f"{limit:g}")


def _header(w) -> Text:
    files = ", ".join(f.name for f in w.targets.values()) or w.cwd.name + "/"
    head = Text.assemble((t("watch.watching") + " ", "dim"), (files, "bold"), "   ",
                         (t("report.seed", seed=w.seed), "dim"))
    if w.count:          # the time of that check, not of this drawing
        at = time.strftime("%H:%M:%S", time.localtime(w.checked_at)) if w.checked_at else ""
        head.append("   " + t("watch.check_no", n=w.count, at=at), style="dim")
    if w.checking:
        head.append("   " + t("watch.checking_short"), style="bold yellow")
    if head.cell_len > w.con.width:
        return Text(clip(head.plain, w.con.width, 2), style="dim")
    return head


def _file_line(w, pid: str, file: Path) -> Text:
    r = w.reports.get(pid)
    if pid in w.checking:
        return Text.assemble(("  …  ", "yellow"), (file.name, "bold"), "  ", (t("watch.checking_short"), "yellow"))
    if r is None:
        return Text.assemble(("  -  ", "dim"), (file.name, "bold"), "  ", (t("watch.not_checked"), "dim"))
    word = verdict_word(r.status)
    style = "green" if r.status == PASS else "red"
    line = Text.assemble((f"  {word:<5}", style), " ", (file.name, "bold"), "  ")
    line.append(clip(summary_line(r), max(20, w.con.width - line.cell_len - 1), 1), style="dim")
    return line
