"""When to re-drill a problem from memory, and when to ask a follow-up question again: FSRS.

Every problem passed once becomes a card (its id: the problem id), and so does every follow-up
question answered (`<id>/<question>`). A review rates what happened, never what the user says:

  again  the re-drill failed, was given up, or its solution was viewed; a question answered wrongly
  hard   passed, but slower than the problem's estimate or with hints
  good   passed within the estimate, no hints; a question answered right
  easy   passed in half the estimate or less, no hints, right at the first check

The scheduler is the `fsrs` package (FSRS, the algorithm behind Anki's modern scheduler) with its
default parameters, a 0.9 target retention, no same-day learning steps (a re-drill is a day's
work, not a flash card), no fuzz (the same history gives the same dates) and intervals capped at
180 days. Cards live in the workspace state (state.json: `cards`), with the state's guarantees.
No torch; fsrs is imported only when a review is made or a date computed.
"""
from __future__ import annotations

from datetime import datetime, timezone

MAX_DAYS = 180
RETENTION = 0.9


def scheduler():
    from fsrs import Scheduler
    return Scheduler(desired_retention=RETENTION, learning_steps=(), relearning_steps=(), maximum_interval=MAX_DAYS,
                     enable_fuzzing=False)


def parameters() -> dict:
    """What the closing notes and `today --json` report about the scheduler."""
    s = scheduler()
    return {"algorithm": "FSRS (fsrs package)", "parameters": list(s.parameters), "desired_retention": RETENTION,
            "learning_steps": [], "relearning_steps": [], "maximum_interval_days": MAX_DAYS, "fuzz": False}


def rate_solve(seconds: float | None, minutes: float, hints: int, solution_viewed: bool, first_try: bool,
               gave_up: bool = False) -> str:
    if gave_up or solution_viewed or seconds is None:
        return "again"
    estimate = minutes * 60.0
    if hints or seconds > estimate:
        return "hard"
    if seconds <= estimate / 2 and first_try:
        return "easy"
    return "good"


def _utc(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, tz=timezone.utc)


def review(data: dict, card_id: str, kind: str, rating: str, when: float) -> dict:
    """Record one review of a card in the state dict; returns the card's entry."""
    from fsrs import Card, Rating
    cards = data.setdefault("cards", {})
    entry = cards.get(card_id)
    card = Card.from_dict(entry["fsrs"]) if entry and isinstance(entry.get("fsrs"), dict) else \
        Card(card_id=abs(hash(card_id)) % (10 ** 12), due=_utc(when))
    card, _ = scheduler().review_card(card, Rating[rating.capitalize()], _utc(when))
    new = dict(entry or {}, kind=kind, fsrs=card.to_dict(), due=card.due.timestamp(), last_rating=rating,
               last_review=when)
    new["reviews"] = int(new.get("reviews", 0)) + 1
    new["lapses"] = int(new.get("lapses", 0)) + (rating == "again")
    cards[card_id] = new
    return new


def due_cards(data: dict, until: float, kind: str | None = None) -> list[tuple[str, dict]]:
    """Cards due at `until` or before, earliest first."""
    out = [(cid, c) for cid, c in (data.get("cards") or {}).items()
           if isinstance(c, dict) and (kind is None or c.get("kind") == kind) and float(c.get("due", 0)) <= until]
    return sorted(out, key=lambda kv: (kv[1].get("due", 0), kv[0]))


def retention(data: dict, day_end: float) -> dict:
    """Re-drills due today, overdue (due before today), and problems passed from memory at least once."""
    start = day_end - 86399
    drills = [c for c in (data.get("cards") or {}).values() if isinstance(c, dict) and c.get("kind") == "drill"]
    return {"tracked": len(drills),
            "due": sum(start <= float(c.get("due", 0)) <= day_end for c in drills),
            "overdue": sum(float(c.get("due", 0)) < start for c in drills),
            "from_memory": sum(bool(c.get("from_memory")) for c in drills)}
