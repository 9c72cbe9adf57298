"""Moving a folder's own progress into the user's (one progress per user, wherever they practise).

Before, each folder kept `.attn-drill/state.json` beside the user's files, and a mock interview its
own in its folder. The first command run in such a folder merges what it holds into the user's
progress (attn_drill.progress.store.home()) and renames the old file `state.json.moved-<time>`, so
it is merged once and nothing of it is lost:
  problems  the counts added up, the first pass the earliest, the best times the best of both;
  cards     the one reviewed last;
  drills    the one started last, its file named by its full path;
  mocks     each one once, its folder by its full path; a link to a mock in another folder takes in
            that folder's live record (and renames it too).
No torch.
"""
from __future__ import annotations

import copy
import os
import time
from pathlib import Path

_DONE: set = set()
RANK = {"not started": 0, "failing": 1, "passed": 2}


def once(cwd: Path, home: Path) -> None:
    """Merge cwd's own progress into `home`'s, once per process and folder."""
    folder = Path(cwd) / ".attn-drill"
    key = str(folder)
    if key in _DONE:
        return
    _DONE.add(key)
    old = folder / "state.json"
    try:
        if not old.is_file() or folder.resolve() == Path(home).resolve():
            return
    except OSError:
        return
    merge_folder(Path(cwd), Path(home))


def merge_folder(cwd: Path, home: Path, warn=None) -> bool:
    """Merge cwd/.attn-drill/state.json into home's progress; True when it was merged."""
    from ..i18n import t
    from . import clock, store
    old = cwd / ".attn-drill" / "state.json"
    theirs = store.load(old.parent, warn)            # read (and repaired) as any progress file is
    moved: list[Path] = [old]

    def fn(mine):
        merge(mine, theirs, cwd, moved)
    store.update(home, fn, warn)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(clock.now()))
    for path in moved:
        try:
            os.rename(path, path.with_name(f"state.json.moved-{stamp}"))
        except OSError:
            pass
    (warn or store.note)(t("state.adopted", file=store._shown(old), home=store._shown(home / "state.json"),
                              kept=f"state.json.moved-{stamp}"))
    return True


def merge(mine: dict, theirs: dict, cwd: Path, moved: list | None = None) -> None:
    """What `theirs` (a folder's progress, its paths relative to `cwd`) adds to `mine`."""
    for pid, e in theirs.get("problems", {}).items():
        mine["problems"][pid] = _problem(mine["problems"].get(pid), e)
    for cid, c in theirs.get("cards", {}).items():
        had = mine["cards"].get(cid)
        if had is None or (c.get("last_review") or 0) > (had.get("last_review") or 0):
            mine["cards"][cid] = c
    for pid, d in theirs.get("drills", {}).items():
        d = dict(d, file=str((cwd / d["file"]).resolve()))
        had = mine["drills"].get(pid)
        if had is None or d.get("started", 0) > had.get("started", 0):
            mine["drills"][pid] = d
    known = {(m.get("id"), m.get("folder")) for m in mine["mocks"]}
    for m in theirs.get("mocks", []):
        m = copy.deepcopy(m)
        if m.get("folder"):
            where = (cwd / m["folder"]).resolve()
            m["folder"] = str(where)
            live = _live_of(where, m.get("id"))
            if live is not None:
                m.update({k: v for k, v in live.items() if k not in ("folder", "workspace")})
                if moved is not None:
                    moved.append(where / ".attn-drill" / "state.json")
        elif isinstance(m.get("problems"), dict):          # a live record: this folder is the mock's
            m["folder"] = str(cwd.resolve())
        m.pop("workspace", None)
        if (m.get("id"), m.get("folder")) in known:
            continue
        known.add((m.get("id"), m.get("folder")))
        mine["mocks"].append(m)


def _live_of(folder: Path, mid) -> dict | None:
    from . import store
    if not (folder / ".attn-drill" / "state.json").is_file():
        return None
    for m in store.load(folder / ".attn-drill", lambda _: None)["mocks"]:
        if m.get("id") == mid and isinstance(m.get("problems"), dict):
            return m
    return None


def _problem(a: dict | None, b: dict) -> dict:
    if a is None:
        return copy.deepcopy(b)
    out = dict(a)
    out["status"] = max(a.get("status", "not started"), b.get("status", "not started"), key=lambda s: RANK.get(s, 0))
    out["attempts"] = a.get("attempts", 0) + b.get("attempts", 0)
    out["hints_shown"] = max(a.get("hints_shown", 0), b.get("hints_shown", 0))
    out["solution_viewed"] = bool(a.get("solution_viewed") or b.get("solution_viewed"))
    for key in ("started", "first_pass"):
        vals = [v for v in (a.get(key), b.get(key)) if v is not None]
        out[key] = min(vals) if vals else None
    if b.get("first_pass") is not None and (a.get("first_pass") is None or b["first_pass"] < a["first_pass"]):
        out["time_to_pass"] = b.get("time_to_pass")
    for key in ("best_time_to_pass", "best_seconds"):
        vals = [v for v in (a.get(key), b.get(key)) if v is not None]
        out[key] = min(vals) if vals else None
    vals = [v for v in (a.get("last_check"), b.get("last_check")) if v is not None]
    out["last_check"] = max(vals) if vals else None
    return out
