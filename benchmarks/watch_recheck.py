"""How long a warm re-check takes in watch mode, next to the cost of importing torch.

Run: python benchmarks/watch_recheck.py [--problem mhsa] [--reps 7]

Side by side, interleaved so that machine load hits both alike:
  import   a fresh `python -c "import torch"` subprocess (what a cold `check` pays before grading)
  recheck  a re-grade through one warm JudgeClient after the file was saved again
  step     the same through watch mode's Watcher.step (grade + record in state + render the report)
The floor: the median re-check takes at most a third of the median torch import.
"""
from __future__ import annotations

import argparse
import io
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console

from attn_drill import bank
from attn_drill.verbs.watch import Watcher
from attn_drill.client import JudgeClient


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problem", default="mhsa")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="attn-drill-bench-") as tmp:
        work = Path(tmp)
        file = work / f"{args.problem}.py"
        shutil.copy(bank.reference_path(args.problem), file)
        client = JudgeClient().start()
        try:
            t0 = time.perf_counter()
            first = client.grade(args.problem, str(file), args.seed)
            cold = time.perf_counter() - t0
            assert first.passed, f"the reference should pass: {first.message}"
            w = Watcher([(args.problem, file)], args.seed, False, "en", work, client,
                        con=Console(file=io.StringIO(), width=100))
            imports, rechecks, steps = [], [], []
            for _ in range(args.reps):
                t0 = time.perf_counter()
                subprocess.run([sys.executable, "-c", "import torch"], check=True)
                imports.append(time.perf_counter() - t0)

                file.write_text(file.read_text())  # a save
                t0 = time.perf_counter()
                r = client.grade(args.problem, str(file), args.seed)
                rechecks.append(time.perf_counter() - t0)
                assert r.passed

                file.write_text(file.read_text())
                t0 = time.perf_counter()
                w.step([args.problem])
                steps.append(time.perf_counter() - t0)
        finally:
            client.close()

    imp, rec, stp = (statistics.median(x) for x in (imports, rechecks, steps))
    print(f"problem {args.problem}, {args.reps} interleaved repetitions, medians (min-max):")
    print(f"  python -c 'import torch'  {imp:6.2f} s  ({min(imports):.2f}-{max(imports):.2f})")
    print(f"  first check (cold worker) {cold:6.2f} s")
    print(f"  warm re-check (client)    {rec:6.2f} s  ({min(rechecks):.2f}-{max(rechecks):.2f})"
          f"   ratio to import {rec / imp:.2f}")
    print(f"  warm re-check (watch step){stp:6.2f} s  ({min(steps):.2f}-{max(steps):.2f})"
          f"   ratio to import {stp / imp:.2f}")
    ok = rec <= imp / 3
    print(f"floor (re-check <= 1/3 of import): {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
