"""The order problems are met in: one order for `list`, `progress`, their JSON, `today` and `plan`.

The classic bank in the order interviews build it up (the spec's `seed_section`), then by
difficulty; problems without a section come after, easy before hard. Prerequisites (the spec's
`after`, when it has one) move a problem behind what it builds on. No torch.
"""
from __future__ import annotations

import difflib

from .spec import DIFFICULTIES, Spec


def order(specs: list[Spec]) -> list[Spec]:
    rank = {d: i for i, d in enumerate(DIFFICULTIES)}
    base = sorted(specs, key=lambda s: (s.seed_section if s.seed_section else 100 + rank[s.difficulty],
                                        rank[s.difficulty], s.id))
    placed: list[Spec] = []
    ids = {s.id for s in base}
    pending = list(base)
    while pending:               # a problem goes after the ones it builds on (cycles: keep the base order)
        for i, s in enumerate(pending):
            before = [p for p in getattr(s, "after", ()) if p in ids and p not in {x.id for x in placed}]
            if not before:
                placed.append(pending.pop(i))
                break
        else:
            placed.append(pending.pop(0))
    return placed


def match_tag(tag: str, specs: list[Spec]) -> tuple[list[Spec], list[str]]:
    """Problems with this tag, case-insensitive; and near tags when there are none."""
    want = tag.strip().lower()
    hits = [s for s in specs if want in {t.lower() for t in s.tags}]
    if hits:
        return hits, []
    tags = sorted({t.lower() for s in specs for t in s.tags})
    near = [t for t in tags if want and (want in t or t in want)]
    near += [t for t in difflib.get_close_matches(want, tags, n=4, cutoff=0.6) if t not in near]
    return [], near[:5]
