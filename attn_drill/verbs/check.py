"""`check`: grade the user's files in the worker and render the reports."""
from __future__ import annotations

import json
import random
from pathlib import Path

from .. import bank, render
from ..results import PASS, Report
from ..worker import WorkerClient


class UsageError(ValueError):
    pass


def resolve(pid: str | None, path: str | None, cwd: Path) -> list[tuple[str, Path]]:
    """Which (problem, file) pairs to grade."""
    if pid is None:
        found = [(p, cwd / f"{p}.py") for p in bank.ids() if (cwd / f"{p}.py").is_file()]
        if not found:
            raise UsageError(f"no problem files in {cwd}; start one with: attn-drill new mhsa")
        return found
    if path is None and pid.endswith(".py"):
        path, pid = pid, Path(pid).stem
    bank.get(pid)  # unknown ids raise UnknownProblem with suggestions
    file = Path(path) if path else Path(f"{pid}.py")
    if not file.is_absolute():
        file = cwd / file if path is None else file
    if file.is_dir():
        raise UsageError(f"{file} is a folder; give the file to grade, e.g. {file / (pid + '.py')}")
    if not file.is_file():
        raise UsageError(f"{file} does not exist; create it with: attn-drill new {pid}"
                         + (f" --dir {file.parent}" if path else ""))
    return [(pid, file)]


def run(targets, seed: int | None, full: bool, case: str | None, client: WorkerClient) -> list[Report]:
    seed = random.randrange(1_000_000) if seed is None else seed
    reports = []
    for pid, file in targets:
        spec = bank.get(pid)
        reports.append(client.grade(pid, str(file.resolve()), seed, full=full, case=case,
                                    time_limit=spec.time_limit * (3 if full else 1)))
    return reports


def next_problem(statuses: dict, done: set[str]) -> str | None:
    """The first problem in the bank's order that is not passed yet."""
    for spec in sorted(bank.all_specs(), key=lambda s: (s.seed_section or 99, s.id)):
        if spec.id not in done and statuses.get(spec.id) != "passed":
            return spec.id
    return None


def show(reports: list[Report], as_json: bool, lang: str, statuses: dict | None = None) -> int:
    if as_json:
        data = [render.exercism(r) for r in reports]
        print(json.dumps(data[0] if len(data) == 1 else data, indent=2, ensure_ascii=False))
    else:
        con = render.console()
        for r in reports:
            con.print(render.report(r, bank.get(r.problem).title.get(lang), lang, con.width))
        if len(reports) > 1:
            passed = sum(r.status == PASS for r in reports)
            con.print(f"[bold]{passed} of {len(reports)} problems pass[/bold]")
        if statuses is not None and all(r.status == PASS for r in reports):
            nxt = next_problem(statuses, {r.problem for r in reports})
            if nxt:
                con.print(f"[dim]next:[/dim] attn-drill show {nxt}   [dim]then[/dim] attn-drill new {nxt}")
    return 0 if all(r.status == PASS for r in reports) else 1
