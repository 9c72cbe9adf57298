"""The catalogue of mistake kinds, measured on itself and on files written by others.

1. Candidates (default): every candidate the catalogue makes of every reference is graded as
   `attn-drill check` grades (every case). Counted per problem: caught (the cases reject it),
   equivalent (it passes: the edit changes nothing the cases can see), named as its own kind,
   named otherwise (a spec's mutant, or another kind), unnamed.

       python benchmarks/catalogue.py --jobs 2
       python benchmarks/catalogue.py --only gqa,rope

2. Held-out files (--heldout MANIFEST): each line of the JSON-lines manifest is
   {"problem": id, "file": path relative to the manifest, "mistake": words, "kind": label}, one file
   with one mistake written by someone who had not read the graders. Each is graded at seeds 0, 1
   and 2; printed per file: rejected or not, and the name the report gives (a spec's mistake, a
   kind or a symptom) next to the writer's words, for a person to judge right or wrong; with
   --judged FILE (lines {"file": ..., "right": true|false}) the right and wrong counts too.

       python benchmarks/catalogue.py --heldout held/manifest.jsonl --json > held.json
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from attn_drill import bank, rules  # noqa: E402
from attn_drill.bank import catalogue, sources  # noqa: E402
from attn_drill.client import JudgeClient  # noqa: E402


def named(report) -> str | None:
    if report.diagnosis is not None:
        return report.diagnosis.mistake
    return report.symptom.mistake if report.symptom is not None else None


class Judges:
    def __init__(self, n: int):
        self.free = [JudgeClient().start() for _ in range(n)]
        self.lock = threading.Lock()

    def grade(self, pid, path, seed):
        with self.lock:
            client = self.free.pop()
        try:
            return client.grade(pid, str(path), seed, time_limit=rules.time_limit(bank.get(pid)))
        finally:
            with self.lock:
                self.free.append(client)

    def close(self):
        for c in self.free:
            c.close()


def candidates(judges: Judges, ids: list[str], tmp: Path, seed: int) -> dict:
    rows: dict[str, Counter] = defaultdict(Counter)
    jobs = []
    for pid in ids:
        for i, cand in enumerate(catalogue.candidates(sources.read(bank.reference_path(pid)))):
            path = tmp / f"{pid}__{i}.py"
            path.write_text(cand.source, encoding="utf-8")
            jobs.append((pid, cand, path))

    def one(job):
        pid, cand, path = job
        r = judges.grade(pid, path, seed)
        row = rows[pid]
        row["candidates"] += 1
        if r.status == "pass":
            row["equivalent"] += 1
            return
        row["caught"] += 1
        got = named(r)
        row["own kind" if got == cand.id else "unnamed" if got is None else "named otherwise"] += 1

    with ThreadPoolExecutor(len(judges.free)) as pool:
        list(pool.map(one, jobs))
    return rows


def heldout(judges: Judges, manifest: Path, judged: Path | None) -> list[dict]:
    entries = [json.loads(line) for line in manifest.read_text(encoding="utf-8").splitlines() if line.strip()]
    verdicts = {}
    if judged:
        for line in judged.read_text(encoding="utf-8").splitlines():
            if line.strip():
                j = json.loads(line)
                verdicts[j["file"]] = j["right"]

    def one(e):
        path = manifest.parent / e["file"]
        out = dict(e, rejected=[], names=[])
        for seed in (0, 1, 2):
            r = judges.grade(e["problem"], path, seed)
            out["rejected"].append(r.status != "pass")
            out["names"].append(named(r))
        out["right"] = verdicts.get(e["file"])
        return out

    with ThreadPoolExecutor(len(judges.free)) as pool:
        return list(pool.map(one, entries))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", help="comma-separated problem ids")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--heldout", type=Path, help="a manifest of files written by others")
    ap.add_argument("--judged", type=Path, help="a person's verdicts on the names given (JSON lines)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    ids = a.only.split(",") if a.only else bank.ids()
    t0 = time.perf_counter()
    judges = Judges(a.jobs)
    try:
        with tempfile.TemporaryDirectory(prefix="attn-drill-catalogue-") as tmp:
            if a.heldout:
                rows = heldout(judges, a.heldout, a.judged)
            else:
                rows = candidates(judges, ids, Path(tmp), a.seed)
    finally:
        judges.close()
    seconds = round(time.perf_counter() - t0, 1)
    if a.heldout:
        rejected = sum(all(r["rejected"]) for r in rows)
        stable = sum(len(set(r["names"])) == 1 for r in rows)
        some = sum(r["names"][0] is not None for r in rows)
        right = sum(r["right"] is True for r in rows)
        wrong = sum(r["right"] is False and r["names"][0] is not None for r in rows)
        summary = {"files": len(rows), "rejected at every seed": rejected, "same name at every seed": stable,
                   "named": some, "named right": right, "named wrong": wrong, "seconds": seconds}
        if a.json:
            print(json.dumps({"summary": summary, "files": rows}, indent=1, ensure_ascii=False))
        else:
            for r in rows:
                print(f"{r['file']:40s} {'rejected' if all(r['rejected']) else 'PASSES '} "
                      f"{str(r['names'][0]):34s} {r['mistake']}")
            print(summary)
        return 0
    total = Counter()
    for pid in ids:
        total.update(rows[pid])
        if not a.json:
            r = rows[pid]
            print(f"{pid:26s} {r['candidates']:4d} candidates  {r['caught']:4d} caught  {r['equivalent']:3d} equivalent"
                  f"  {r['own kind']:4d} own kind  {r['named otherwise']:3d} otherwise  {r['unnamed']:3d} unnamed")
    if a.json:
        print(json.dumps({"problems": {p: dict(rows[p]) for p in ids}, "total": dict(total), "seconds": seconds}))
    else:
        print(f"total: {dict(total)}  {seconds} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
