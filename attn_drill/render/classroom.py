"""What the instructors' and authors' commands show: grade (progress, the class table), verify, bench."""
from __future__ import annotations

import threading
import time

from rich import box
from rich.console import Console, Group
from rich.text import Text

from ..i18n import labelled, t
from ..results import one_line
from .base import clip, fitted_table, num
from .report import verdict_word

OUTCOME_STYLE = {"pass": "green", "fail": "red", "error": "red", "exception": "red", "forbidden": "red",
                 "timeout": "magenta", "crash": "magenta", "memory": "magenta", "missing": "dim",
                 "tool-error": "bold red"}


def outcome_word(outcome: str) -> str:
    return verdict_word(outcome) if outcome in ("pass", "fail", "error") else t(f"grade.o.{outcome.replace('-', '_')}")


# ---------------------------------------------------------------- grade
def grade_heading(n: int, everyone: int, where: str, problems: list[str], workers: int, seed: int, full: bool) -> Text:
    return Text(t("grade.heading", n=n, everyone=everyone, where=where, problems=", ".join(problems),
                  workers=workers, seed=seed) + (" --full" if full else ""))


def isolation_line(sandboxed: bool, note: str) -> Text:
    return Text(labelled(t("grade.isolation") if sandboxed else t("cli.warning"), note),
                style="dim" if sandboxed else "yellow")


def cell_line(c, width: int) -> Text:
    """One finished grade, as it arrives."""
    line = Text.assemble((f"{outcome_word(c.outcome):<10}", OUTCOME_STYLE.get(c.outcome, "")),
                         f" {one_line(c.student)}/{c.problem}")
    if c.outcome != "pass" and c.message:
        line.append("  " + clip(" ".join(c.message.split()), max(20, width - line.cell_len - 2), 1), style="dim")
    return line


class GradeProgress:
    """Students done of total, elapsed time and who is still running, on a live line (a terminal only);
    each finished grade is printed above it, whole."""

    def __init__(self, con: Console, total: int):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
        self.con, self.total = con, total
        self.running: dict[str, float] = {}
        self.lock = threading.Lock()
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(bar_width=20), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("{task.fields[who]}", style="dim"),
                                 console=con, transient=True, disable=not con.is_terminal)
        self.task = self.progress.add_task(t("grade.progress"), total=total, who="")

    def __enter__(self):
        self.progress.__enter__()
        return self

    def __exit__(self, *exc):
        self.progress.__exit__(*exc)

    def _who(self) -> str:
        names = sorted(self.running, key=self.running.get)
        shown = ", ".join(names[:3]) + (f" +{len(names) - 3}" if len(names) > 3 else "")
        return t("grade.running", who=shown) if names else ""

    def started(self, key: str) -> None:
        with self.lock:
            self.running[key] = time.monotonic()
            self.progress.update(self.task, who=self._who())

    def finished(self, cell) -> None:
        with self.lock:
            self.running.pop(f"{cell.student}/{cell.problem}", None)
            self.progress.console.print(cell_line(cell, self.con.width))
            self.progress.update(self.task, advance=1, who=self._who())


def class_table(students: list[str], problems: list[str], cells: dict, title: str, width: int):
    cols = [{"name": t("grade.student"), "drop": 0}] + [{"name": p, "drop": 0} for p in problems] + \
        [{"name": t("grade.passed"), "drop": 0, "justify": "right"}]
    body = []
    for s in students:
        row, n = [one_line(s)], 0
        for p in problems:
            c = cells.get((s, p))
            if c is None:
                row.append(Text("-", style="dim"))
                continue
            n += c.outcome == "pass"
            extra = f" {c.cases_passed}/{c.cases_total}" if c.outcome == "fail" and c.cases_total else ""
            row.append(Text(outcome_word(c.outcome) + extra, style=OUTCOME_STYLE.get(c.outcome, "")))
        row.append(f"{n}/{len(problems)}")
        body.append(row)
    return fitted_table(cols, body, width, title=title, title_justify="left", box=box.SIMPLE_HEAD)


def grade_footer(out: str, sfx: str, seconds: float) -> Text:
    return Text(t("grade.wrote", out=out, sfx=sfx, s=f"{seconds:.1f}"), style="dim")


# ---------------------------------------------------------------- verify
def verify_row(row) -> Group:
    mark = Text("ok  ", style="green") if row.ok else Text("FAIL", style="red")
    line = Text.assemble(mark, f"{row.problem:<23}", t("verify.row", reference=verdict_word(row.reference)
                                                          if row.reference in ("pass", "fail", "error")
                                                          else row.reference, stub=t(f"verify.stub.{row.stub}")
                                                          if row.stub in ("fails", "PASSES") else row.stub,
                                                          caught=row.mutants_caught, total=row.mutants,
                                                          questions=row.questions, s=f"{row.seconds:.1f}"))
    return Group(line, *[Text(f"      {p}", style="red") for p in row.problems])


def verify_total(rows, seconds: float, seed: int, full: bool) -> Text:
    return Text(t("verify.total", ok=sum(r.ok for r in rows), n=len(rows),
                  caught=sum(r.mutants_caught for r in rows), mutants=sum(r.mutants for r in rows),
                  s=f"{seconds:.1f}", seed=seed) + (" --full" if full else ""), style="bold")


# ---------------------------------------------------------------- bench
def _ms(x: float) -> str:
    return f"{x:.3f} ms" if x < 10 else f"{x:.1f} ms"


def _bytes(n) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def bench(r: dict, width: int) -> Group:
    shapes = ", ".join(f"{k} {'×'.join(map(str, v))}" for k, v in r["inputs"].items())
    cols = [{"name": "", "drop": 0}, {"name": t("bench.median"), "drop": 0, "justify": "right"},
            {"name": "±", "drop": 3, "justify": "right"}, {"name": t("bench.ratio"), "drop": 0, "justify": "right"},
            {"name": "GFLOP/s", "drop": 2, "justify": "right"},
            {"name": t("bench.largest"), "drop": 1, "wrap": True, "min": 14}]
    names = {"submission": t("bench.yours"), "reference": t("bench.reference"), "sdpa": t("bench.sdpa")}
    body = []
    for who, s in r["series"].items():
        ratio = r["ratios"].get(who)
        rtext = f"{ratio['median']:.2f}× ({ratio['q1']:.2f}–{ratio['q3']:.2f})" if ratio else ""
        big = s["largest"]
        big_text = f"{_bytes(big['bytes'])} {'×'.join(map(str, big['shape']))} ({big['op'].split('.')[1]})" \
            if big else "-"
        if s.get("cuda_peak_bytes") is not None:
            big_text += "; " + t("bench.cuda_peak", bytes=_bytes(s["cuda_peak_bytes"]))
        body.append([Text(names[who], style="bold" if who == "submission" else ""), _ms(s["median_ms"]),
                     f"{s['rse_pct']:.1f}%", rtext, f"{s['gflops_per_s']:.2f}" if s["gflops_per_s"] else "-",
                     big_text])
    title = t("bench.title", id=r["problem"], dtype=r["dtype"], device=r["device"], threads=r["threads"],
              shapes=shapes)
    parts = [Text(clip(title, width, 2), style="bold"),
             fitted_table(cols, body, width, box=box.SIMPLE_HEAD),
             Text(clip(t("bench.caption", sizes=r["sizes"], runs=r["runs"], warmup=r["warmup"], stopped=r["stopped"],
                         err=f"{r['max_rel_error']:.1e}"), width, 3), style="dim")]
    sub = r["series"]["submission"]["largest"]
    ref = r["series"]["reference"]["largest"]
    if sub and ref and sub["bytes"] < ref["bytes"]:
        parts.append(Text(t("bench.smaller", x=num(ref["bytes"] / max(sub["bytes"], 1))), style="green"))
    if "sdpa" not in r["series"]:
        parts.append(Text(t("bench.no_sdpa"), style="dim"))
    if r["device"] == "cpu":
        parts.append(Text(t("bench.cpu"), style="dim"))
    return Group(*parts)
