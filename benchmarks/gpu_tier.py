"""Exercise the GPU tier on a CUDA machine, in one short run.

    python benchmarks/gpu_tier.py            # exits 1 if a CUDA case skipped or failed

For every problem whose grader has CUDA cases, grades the reference (all its CUDA cases must run and
pass) and one known mistake (it must still fail), then times `attn-drill bench mhsa` on the device.
On a machine without CUDA it says so and exits 2: the tier is only proven where it can run.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    import torch

    if not torch.cuda.is_available():
        print("no CUDA device here: nothing to exercise")
        return 2
    from attn_drill import bank
    from attn_drill.bank import sources
    from attn_drill.client import JudgeClient

    print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    bad = 0
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp, JudgeClient() as judge:
        for pid in bank.ids():
            ref = Path(tmp) / "reference" / f"{pid}.py"     # a room may not read the bank: grade a copy
            ref.parent.mkdir(exist_ok=True)
            ref.write_text(sources.read(bank.reference_path(pid)))
            report = judge.grade(pid, ref, seed=0)
            cuda = [c for c in report.cases if "cuda" in c.name]
            if not cuda:
                continue
            for c in cuda:
                ok = c.status == "pass"
                bad += not ok
                err = f"{c.max_error:.2g} <= {c.allowed:.2g}" if c.max_error is not None else ""
                print(f"{'ok  ' if ok else 'FAIL'} {pid:<18} {c.name:<24} {c.dtype:<22} {c.status:<5} {err} "
                      f"{c.time_ms:.0f} ms {c.message}")
            spec = bank.get(pid)
            mistake = spec.mistakes[0].id
            path = Path(tmp) / f"{pid}.py"
            path.write_text(sources.mutant_source(spec, sources.read(bank.reference_path(pid)), mistake))
            mut = judge.grade(pid, path, seed=0)
            caught = mut.status != "pass"
            bad += not caught
            print(f"{'ok  ' if caught else 'FAIL'} {pid:<18} mutant {mistake} {'fails' if caught else 'PASSES'}")
    print(f"graded in {time.perf_counter() - t0:.1f} s")
    out = subprocess.run([sys.executable, "-m", "attn_drill", "bench", "mhsa", str(ROOT / "reference" / "mhsa.py"),
                          "--device", "cuda", "--json", "--max-seconds", "5"], capture_output=True, text=True,
                         cwd=ROOT)
    print(out.stdout[-3000:] if out.returncode == 0 else out.stderr[-3000:])
    try:
        json.loads(out.stdout)
    except ValueError:
        bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
