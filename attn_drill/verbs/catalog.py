"""`list` and `show`: read the specs only (no torch)."""
from __future__ import annotations

from .. import bank, render
from ..bank import curriculum
from ..errors import SpecError, UsageError
from ..i18n import t
from ..render import practice as view


def rows(specs, statuses: dict) -> list[dict]:
    return [{"id": s.id, "title": s.title.en, "title_zh": s.title.zh, "difficulty": s.difficulty, "kind": s.kind,
             "tags": list(s.tags), "minutes": s.minutes, "status": statuses.get(s.id, "not started")}
            for s in specs]


def _readable_specs() -> tuple[list, list[str]]:
    """Every spec that loads, and a line for each that does not (listed apart, never hiding the rest)."""
    specs, bad = [], []
    for pid in bank.ids():
        try:
            specs.append(bank.get(pid))
        except SpecError as exc:
            bad.append(str(exc))
    return specs, bad


def list_problems(tag: str | None, difficulty: str | None, lang: str, as_json: bool, statuses: dict) -> int:
    specs, bad = _readable_specs()
    specs = curriculum.order(specs)
    if tag:
        specs, near = curriculum.match_tag(tag, specs)
        if not specs:
            raise UsageError(t("list.no_tag", tag=tag) + (t("list.near", tags=", ".join(near)) if near else ""))
    if difficulty:
        specs = [s for s in specs if s.difficulty == difficulty]
    data = rows(specs, statuses)
    if as_json:
        render.print_json(data)
        return _report_bad(bad)
    con = render.console()
    con.print(view.problem_table(data, lang, con.width))
    if not data:
        con.print(t("list.none"))
    return _report_bad(bad)


def _report_bad(bad: list[str]) -> int:
    for line in bad:
        render.error(t("cli.bad_spec", error=line))
    return 2 if bad else 0


def show(pid: str, lang: str) -> int:
    spec = bank.get(pid)
    render.console().print(view.statement(spec, lang))
    return 0
