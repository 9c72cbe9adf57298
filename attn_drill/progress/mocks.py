"""The rules of a mock interview's record: its clock (segments, what is left), its scorecard, and the
summary of one mock that `progress` and `mock --history` list. No torch.

Timing: `elapsed` holds the seconds of finished segments; `segment_start` the time the running
segment began (attn_drill.progress.clock); `heartbeat` is refreshed every few seconds so a mock whose
process was killed resumes with the time it really had left.
"""
from __future__ import annotations

from ..results import PASS
from . import clock


def elapsed(mock: dict, now: float | None = None) -> float:
    """Seconds of the mock used so far: closed segments plus the running one."""
    used = float(mock.get("elapsed", 0.0))
    if mock.get("segment_start") is not None:
        used += max(0.0, (now if now is not None else clock.now()) - mock["segment_start"])
    return used


def left(mock: dict, now: float | None = None) -> float:
    return max(0.0, float(mock["seconds"]) - elapsed(mock, now))


VERDICTS = ((0.9, "strong pass"), (0.6, "pass"), (0.3, "borderline"), (-1.0, "no pass"))


def scorecard(m: dict) -> dict:
    """Per problem: passed, time to green, checks, hints; overall score and verdict.

    A problem scores 1 when it passes at the end, less 0.25 for each hint (at least 0.25), and 0 if
    its solution was viewed during the mock. The verdict reads the mean score.
    """
    rows, score = [], 0.0
    for pid, p in m["problems"].items():
        passed = p.get("final") == PASS
        s = 0.0 if not passed or p.get("solution_viewed") else max(0.25, 1.0 - 0.25 * p.get("hints", 0))
        score += s
        rows.append({"id": pid, "passed": passed, "result": p.get("final"), "message": p.get("final_message", ""),
                     "mistake": p.get("final_mistake"), "title": p.get("final_title"), "why": p.get("final_why"),
                     "replay": p.get("final_replay"),
                     "followups_asked": p.get("followups_asked", 0), "followups_right": p.get("followups_right", 0),
                     "time_to_green": p.get("passed_after") if passed else None, "checks": p.get("checks", 0),
                     "hints": p.get("hints", 0), "solution_viewed": bool(p.get("solution_viewed")),
                     "score": round(s, 2)})
    mean = score / max(len(rows), 1)
    verdict = next(word for limit, word in VERDICTS if mean >= limit)
    used = round(min(m["elapsed"], m["seconds"]), 1)
    return {"id": m["id"], "seed": m.get("seed"), "seconds": m["seconds"], "used": used,
            "problems": rows, "passed": sum(r["passed"] for r in rows), "hints": sum(r["hints"] for r in rows),
            "followups_asked": sum(r["followups_asked"] for r in rows),
            "followups_right": sum(r["followups_right"] for r in rows),
            "score": round(mean, 2), "verdict": verdict}


def summary(m: dict) -> dict:
    """One mock interview, in the same shape whether read from its folder or from a link to it."""
    card = m.get("scorecard") or {}
    live = m.get("problems") if isinstance(m.get("problems"), dict) else None
    ids = m.get("problem_ids") or list((live or {}).keys())
    passed, hints = card.get("passed"), card.get("hints")
    if not card and live:  # a mock still going, read in its own folder
        passed = sum(bool(p.get("passed_at")) for p in live.values())
        hints = sum(p.get("hints", 0) for p in live.values())
    used = card.get("used", elapsed(m) if "elapsed" in m else None)
    return {"id": m.get("id"), "folder": m.get("folder"), "status": m.get("status"),
            "started": clock.iso(m.get("started")), "seconds": m.get("seconds"), "used": used, "problems": ids,
            "passed": passed, "hints": hints, "verdict": card.get("verdict"), "score": card.get("score")}
