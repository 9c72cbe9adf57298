"""The time the tool believes it is. ATTN_DRILL_NOW (seconds since 1970, or an ISO date and time)
sets it, for a scripted month of practice in the tests; otherwise the system clock. No torch."""
from __future__ import annotations

import os
import time
from datetime import datetime, timezone


def now() -> float:
    fake = os.environ.get("ATTN_DRILL_NOW", "").strip()
    if fake:
        try:
            return float(fake)
        except ValueError:
            try:
                dt = datetime.fromisoformat(fake)
            except ValueError:
                return time.time()
            if dt.tzinfo is None:
                dt = dt.astimezone()      # a local time
            return dt.timestamp()
    return time.time()


def utc(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, tz=timezone.utc)


def local_day(ts: float) -> str:
    """The user's calendar day of a time, as YYYY-MM-DD."""
    return time.strftime("%Y-%m-%d", time.localtime(ts))


def day_end(ts: float) -> float:
    """The last second of the user's calendar day holding ts."""
    lt = time.localtime(ts)
    return time.mktime((lt.tm_year, lt.tm_mon, lt.tm_mday, 23, 59, 59, 0, 0, -1))


def iso(ts: float | None) -> str | None:
    """A time as local ISO 8601 with its offset (for JSON), or None."""
    return None if ts is None else time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(ts))
