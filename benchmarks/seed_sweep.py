"""Seed sweep: is a verdict a property of the code, not of the seed?

For every seed in the sweep, with --full:
  every correct alternative (tests/fixtures/alternatives/<id>__<how>.py) and every reference must pass;
  every known mistake (each spec's mutants) must fail.
Prints one line per file that flipped, then the totals; exits 1 if anything flipped.

    python benchmarks/seed_sweep.py --seeds 50 --jobs 2
    python benchmarks/seed_sweep.py --seeds 50 --only sdpa_backward,alibi
    python benchmarks/seed_sweep.py --seeds 50 --mutant-seeds 5

Progress (gradings done of total) goes to stderr every 100 gradings.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from attn_drill import bank  # noqa: E402
from attn_drill.bank import sources  # noqa: E402
from attn_drill.client import JudgeClient  # noqa: E402

ALTERNATIVES = ROOT / "tests" / "fixtures" / "alternatives"


def jobs_for(only: set[str] | None, tmp: Path) -> list[tuple[str, str, Path, bool]]:
    """(problem, label, file, should pass) for the alternatives, the references and the mutants."""
    out = []
    for path in sorted(ALTERNATIVES.glob("*.py")):
        pid = path.stem.split("__")[0]
        if only is None or pid in only:
            out.append((pid, f"alternative {path.stem}", path, True))
    for pid in bank.ids():
        if only is not None and pid not in only:
            continue
        spec = bank.get(pid)
        ref_src = sources.read(bank.reference_path(pid))
        ref = tmp / f"{pid}.py"
        ref.write_text(ref_src, encoding="utf-8")
        out.append((pid, f"reference {pid}", ref, True))
        for m in spec.mistakes:
            mpath = tmp / f"{pid}__{m.id}.py"
            mpath.write_text(sources.mutant_source(spec, ref_src, m.id), encoding="utf-8")
            out.append((pid, f"mutant {pid}.{m.id}", mpath, False))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=50)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", default=None, help="comma-separated problem ids")
    ap.add_argument("--mutant-seeds", type=int, default=None,
                    help="grade the mutants at only the first N seeds (default: every seed)")
    ap.add_argument("--json", action="store_true", help="the totals as JSON on stdout")
    args = ap.parse_args()
    only = set(args.only.split(",")) if args.only else None
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="attn-drill-sweep-") as tmp:
        todo = jobs_for(only, Path(tmp))
        mutant_seeds = seeds if args.mutant_seeds is None else seeds[:args.mutant_seeds]
        work = [(j, s) for s in seeds for j in todo if j[3] or s in mutant_seeds]
        work.reverse()  # pop() takes from the end: every file at the first seed, then the next seed
        planned = len(work)
        flips: Counter = Counter()
        runs = Counter()
        lock = threading.Lock()

        def worker() -> None:
            with JudgeClient() as client:
                while True:
                    with lock:
                        if not work:
                            return
                        (pid, label, path, should_pass), seed = work.pop()
                    r = client.grade(pid, str(path), seed, full=True, fail_fast=not should_pass,
                                     diagnose=False, time_limit=120)
                    ok = (r.status == "pass") == should_pass
                    with lock:
                        runs[label] += 1
                        done = sum(runs.values())
                        if done % 100 == 0:
                            print(f"{done}/{planned} gradings, {time.perf_counter() - t0:.0f} s",
                                  file=sys.stderr, flush=True)
                        if not ok:
                            flips[label] += 1
                            first = r.first_failure()
                            why = f"{first.name}: {first.message}" if first else r.message
                            print(f"FLIP {label} seed {seed}: {r.status}  {why[:160]}", flush=True)

        threads = [threading.Thread(target=worker) for _ in range(max(1, args.jobs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    kinds = Counter(label.split()[0] for label in runs)
    total = {"seeds": len(seeds), "mutant_seeds": len(mutant_seeds), "full": True,
             "seconds": round(time.perf_counter() - t0, 1), "files": dict(kinds), "gradings": sum(runs.values()),
             "flips": sum(flips.values()),
             "flipped": dict(flips)}
    if args.json:
        print(json.dumps(total, indent=2))
    else:
        print(f"{total['gradings']} gradings ({', '.join(f'{n} {k}s' for k, n in kinds.items())} x "
              f"{len(seeds)} seeds, mutants x {len(mutant_seeds)}, --full) in {total['seconds']} s: "
              f"{total['flips']} verdict(s) flipped")
    return 1 if flips else 0


if __name__ == "__main__":
    sys.exit(main())
