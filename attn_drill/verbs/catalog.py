"""`list` and `show`: read the specs only (no torch)."""
from __future__ import annotations

import json

from rich.table import Table
from rich.text import Text

from .. import bank, render
from ..spec import DIFFICULTIES


def list_problems(tag: str | None, difficulty: str | None, lang: str, as_json: bool, statuses: dict) -> int:
    specs = bank.all_specs()
    if tag:
        specs = [s for s in specs if tag in s.tags]
    if difficulty:
        specs = [s for s in specs if s.difficulty == difficulty]
    if as_json:
        print(json.dumps([{"id": s.id, "title": s.title.en, "title_zh": s.title.zh, "difficulty": s.difficulty,
                           "kind": s.kind, "tags": list(s.tags), "minutes": s.minutes,
                           "status": statuses.get(s.id, "not started")} for s in specs], ensure_ascii=False,
                         indent=2))
        return 0
    con = render.console()
    wide = con.width >= 120
    table = Table(title=f"attn-drill problems ({len(specs)})", title_justify="left")
    table.add_column("id", no_wrap=True)
    table.add_column("title", ratio=1)
    table.add_column("level", no_wrap=True)
    if wide:
        table.add_column("kind", no_wrap=True)
        table.add_column("tags")
    table.add_column("min", no_wrap=True, justify="right")
    table.add_column("status", no_wrap=True)
    order = {d: i for i, d in enumerate(DIFFICULTIES)}
    style = {"passed": "green", "failing": "red"}
    for s in sorted(specs, key=lambda s: (s.seed_section or 99, order[s.difficulty], s.id)):
        st = statuses.get(s.id, "not started")
        row = [s.id, s.title.get(lang), s.difficulty]
        if wide:
            row += [s.kind, ", ".join(s.tags)]
        row += [str(s.minutes), Text(st, style=style.get(st, "dim"))]
        table.add_row(*row)
    con.print(table)
    if not specs:
        con.print("No problem matches those filters.")
    return 0


def show(pid: str, lang: str) -> int:
    spec = bank.get(pid)
    con = render.console()
    con.print(Text(f"{spec.id}: {spec.title.get(lang)}", style="bold"),
              Text(f"  [{spec.difficulty}, ~{spec.minutes} min, {', '.join(spec.tags)}]", style="dim"))
    con.print(render.markdown(spec.statement.get(lang)))
    con.print(Text(("接口：" if lang == "zh" else "Interface: ") + ", ".join(spec.interface), style="cyan"))
    forbidden = ", ".join(spec.all_forbidden)
    con.print(Text(("禁止使用：" if lang == "zh" else "Forbidden: ") + forbidden, style="dim"))
    if spec.required:
        con.print(Text(("必须使用：" if lang == "zh" else "Required: ") +
                       ", ".join(r.api for r in spec.required), style="dim"))
    con.print(Text(f"{len(spec.hints)} hints: attn-drill hint {spec.id}   ·   start: attn-drill new {spec.id}",
                   style="dim"))
    return 0
