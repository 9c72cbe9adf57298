"""How fast is attn-drill itself? Each figure is measured beside the floor it is judged against, in one run.

    python benchmarks/bench_tool.py            # a table
    python benchmarks/bench_tool.py --json     # and the numbers as JSON
    python benchmarks/bench_tool.py --quick    # fewer repetitions, verify on mhsa only

  list        `attn-drill list`                 vs `python -c "import typer, rich, yaml"`   floor: <= 2x
  check       `attn-drill check mhsa` (the reference copied as mhsa.py, default cases)
                                                vs `python -c "import torch"`                 floor: <= 1.2x
  failing     `attn-drill check mhsa` on a wrong file (a known mistake: every case fails, and is named)
                                                vs `python -c "import torch"`                 floor: <= 1.5x
  unnamed     `attn-drill check mhsa` on a file whose mistake nothing reproduces (all candidates run)
                                                vs `python -c "import torch"`                 floor: <= 1.5x
  recheck     a warm JudgeClient re-grading mhsa (what watch mode does on save)
                                                vs `python -c "import torch"`                 floor: <= 0.15x
  static      `attn-drill check mhsa` on a file with a syntax error (reported before torch loads)
                                                vs `python -c "import torch"`                 floor: <= 0.3x
  today       `attn-drill today` in a fresh workspace vs `python -c "import typer, rich, yaml"`  floor: <= 3x
  verify      `attn-drill verify` over the whole bank                                   floor: <= 33 s
              (25 s at 37 problems, scaled by the problem count: 33 s at 48)
  grade       `attn-drill grade tests/fixtures/class` (8 students, one of each outcome)   floor: <= 21 s
              (1.2x the 17.5 s it took sandboxed before the walls of the class grading were raised)
  bench       `attn-drill bench mhsa` twice on the reference, at the grader's sizes and at typical
              sizes (4×128×256): do the ratios repeat?                                     target: within 10%

Medians of several repetitions; the commands run in a temporary folder. Takes a few minutes.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _cmd(name: str) -> list[str]:
    exe = shutil.which(name)
    return [exe] if exe else [sys.executable, "-m", "attn_drill"]


def timed(argv: list[str], cwd: Path, reps: int, env=None) -> tuple[float, list[float]]:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        res = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, env=env)
        times.append(time.perf_counter() - t0)
        if res.returncode not in (0, 1):
            raise SystemExit(f"{' '.join(argv)} failed ({res.returncode}):\n{res.stderr[-2000:]}")
    return statistics.median(times), times


def recheck(work: Path, reps: int) -> tuple[float, list[float]]:
    from attn_drill.client import JudgeClient
    times = []
    with JudgeClient() as client:
        client.grade("mhsa", str(work / "mhsa.py"), 0)  # warm: torch, the engine, the reference
        for _ in range(reps):
            t0 = time.perf_counter()
            report = client.grade("mhsa", str(work / "mhsa.py"), 0)
            times.append(time.perf_counter() - t0)
            assert report.passed, report.message
    return statistics.median(times), times


# typical sizes for mhsa, for a bank whose spec has no settings.bench yet
TYPICAL = """
settings:
  bench:
    init: {hidden_dim: 256, num_heads: 4, dropout: 0.0}
    inputs: {x: [4, 128, 256]}
"""


def typical_bank(folder: Path) -> Path:
    """A copy of mhsa with bench sizes (used only when problems/mhsa.yaml has none)."""
    for sub, name in (("problems", "mhsa.yaml"), ("reference", "mhsa.py"), ("graders", "mhsa.py")):
        (folder / sub).mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / sub / name, folder / sub / name)
    spec = folder / "problems" / "mhsa.yaml"
    if "bench:" not in spec.read_text(encoding="utf-8"):
        with open(spec, "a", encoding="utf-8") as f:
            f.write(TYPICAL)
    return folder


def bench_twice(work: Path, max_seconds: float, env=None) -> list[dict]:
    out = []
    for _ in range(2):
        res = subprocess.run(_cmd("attn-drill") + ["bench", "mhsa", "--json", "--max-seconds", str(max_seconds)],
                             cwd=work, capture_output=True, text=True, env=env)
        if res.returncode != 0:
            raise SystemExit(f"attn-drill bench failed:\n{res.stdout[-1000:]}\n{res.stderr[-2000:]}")
        out.append(json.loads(res.stdout))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true", help="also print the numbers as JSON")
    ap.add_argument("--quick", action="store_true", help="fewer repetitions; verify only mhsa")
    ap.add_argument("--bench-seconds", type=float, default=12.0, help="--max-seconds for each bench run")
    args = ap.parse_args()
    reps = 3 if args.quick else 5
    tool = _cmd("attn-drill")
    rows, data = [], {"cpus": os.cpu_count(), "python": sys.version.split()[0]}
    t_all = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="attn-drill-bench-tool-") as tmp:
        work = Path(tmp)
        os.environ["ATTN_DRILL_HOME"] = str(work / ".attn-drill")   # the timed checks' progress: not the user's
        shutil.copy(ROOT / "reference" / "mhsa.py", work / "mhsa.py")

        base, _ = timed([sys.executable, "-c", "import typer, rich, yaml"], work, reps)
        lst, _ = timed(tool + ["list"], work, reps)
        rows.append(("list", lst, "import typer, rich, yaml", base, lst / base, "<= 2x", lst / base <= 2))
        data["list"] = {"seconds": lst, "baseline": base, "ratio": lst / base}

        torch_s, _ = timed([sys.executable, "-c", "import torch"], work, reps)
        chk, _ = timed(tool + ["check", "mhsa", "--seed", "0"], work, reps)
        rows.append(("check mhsa", chk, "import torch", torch_s, chk / torch_s, "<= 1.2x", chk / torch_s <= 1.2))
        data["check"] = {"seconds": chk, "baseline": torch_s, "ratio": chk / torch_s}

        wrong = work / "wrong"
        wrong.mkdir()
        (wrong / "mhsa.py").write_text((ROOT / "reference" / "mhsa.py").read_text().replace(
            "torch.softmax(scores, dim=-1)", "torch.softmax(scores, dim=-2)"), encoding="utf-8")
        bad, _ = timed(tool + ["check", "mhsa", "--seed", "0"], wrong, reps)
        rows.append(("check mhsa, a known mistake", bad, "import torch", torch_s, bad / torch_s, "<= 1.5x",
                     bad / torch_s <= 1.5))
        data["failing"] = {"seconds": bad, "baseline": torch_s, "ratio": bad / torch_s}

        # the worst case for naming: a mistake no spec mutant and no catalogue kind reproduces, so
        # every one of them runs on the first failing case and none is kept
        odd = work / "odd"
        odd.mkdir()
        (odd / "mhsa.py").write_text((ROOT / "reference" / "mhsa.py").read_text().replace(
            "return self.out_proj(out)", "return self.out_proj(out) * 1.01"), encoding="utf-8")
        unnamed, _ = timed(tool + ["check", "mhsa", "--seed", "0"], odd, reps)
        rows.append(("check mhsa, an unknown mistake", unnamed, "import torch", torch_s, unnamed / torch_s, "<= 1.5x",
                     unnamed / torch_s <= 1.5))
        data["failing_unnamed"] = {"seconds": unnamed, "baseline": torch_s, "ratio": unnamed / torch_s}

        broken = work / "broken"
        broken.mkdir()
        (broken / "mhsa.py").write_text("class MultiHeadSelfAttention(nn.Module:\n    pass\n", encoding="utf-8")
        st, _ = timed(tool + ["check", "mhsa"], broken, reps)
        rows.append(("check, syntax error", st, "import torch", torch_s, st / torch_s, "<= 0.3x", st / torch_s <= 0.3))
        data["static"] = {"seconds": st, "baseline": torch_s, "ratio": st / torch_s}

        fresh = work / "fresh"
        fresh.mkdir()
        td, _ = timed(tool + ["today"], fresh, reps)
        rows.append(("today", td, "import typer, rich, yaml", base, td / base, "<= 3x", td / base <= 3))
        data["today"] = {"seconds": td, "baseline": base, "ratio": td / base}

        rc, _ = recheck(work, reps)
        rows.append(("watch re-check", rc, "import torch", torch_s, rc / torch_s, "<= 0.15x", rc / torch_s <= 0.15))
        data["recheck"] = {"seconds": rc, "baseline": torch_s, "ratio": rc / torch_s}

        t0 = time.perf_counter()
        res = subprocess.run(tool + ["verify", "--json"] + (["mhsa"] if args.quick else []), cwd=work,
                             capture_output=True, text=True)
        ver = time.perf_counter() - t0
        out = json.loads(res.stdout) if res.stdout.strip().startswith("{") else {"problems": []}
        n = len(out["problems"])
        limit = float(math.ceil(25.0 * n / 37)) if n >= 37 else 60.0   # the house floor, scaled by the bank size
        rows.append((f"verify ({n} problems)", ver, "", None, None, f"<= {limit:.0f} s", ver <= limit))
        data["verify"] = {"seconds": ver, "problems": n, "ok": res.returncode == 0}

        t0 = time.perf_counter()
        res = subprocess.run(tool + ["grade", str(ROOT / "tests" / "fixtures" / "class"), "--seed", "3",
                                     "--time-limit", "10", "--out", str(work / "grades"), "--json"], cwd=work,
                             capture_output=True, text=True)
        gr = time.perf_counter() - t0
        sandboxed = res.stdout.strip().startswith("{") and json.loads(res.stdout).get("sandbox") == "bubblewrap"
        rows.append((f"grade 8 students{' (sandboxed)' if sandboxed else ''}", gr, "", None, None, "<= 21 s",
                     gr <= 21.0))
        data["grade"] = {"seconds": gr, "sandboxed": sandboxed, "ok": res.returncode == 0}

        env = dict(os.environ, ATTN_DRILL_BANK=str(typical_bank(work / "bank")))
        for label, envx in (("grader sizes", None), ("typical sizes", env)):
            b1, b2 = bench_twice(work, args.bench_seconds, envx)
            if label == "grader sizes" and b1["sizes"].startswith("settings.bench"):
                continue  # the real spec already has bench sizes: the second pair measures the same
            shape = "×".join(map(str, next(iter(b1["inputs"].values()))))
            for key in ("reference", "sdpa"):
                if key in b1["ratios"] and key in b2["ratios"]:
                    r1, r2 = b1["ratios"][key]["median"], b2["ratios"][key]["median"]
                    diff = abs(r1 - r2) / min(r1, r2)
                    rows.append((f"bench {shape} ÷ {key}", None, f"run 1 {r1:.3f}  run 2 {r2:.3f}", None, diff,
                                 "<= 10%", diff <= 0.10))
                    data[f"bench_{label.split()[0]}_ratio_{key}"] = {
                        "inputs": b1["inputs"], "runs": [b1["runs"], b2["runs"]], "run1": r1, "run2": r2,
                        "relative_difference": diff}
    data["total_seconds"] = time.perf_counter() - t_all

    print(f"attn-drill tool benchmarks: {data['cpus']} CPUs, Python {data['python']}, medians of {reps}\n")
    print(f"{'measure':<30}{'time':>8}  {'against':<28}{'base':>8}{'ratio':>9}  {'floor':<11}ok")
    for name, t, against, b, ratio, floor, ok in rows:
        tt = f"{t:.2f} s" if t is not None else ""
        bb = f"{b:.2f} s" if b is not None else ""
        rr = (f"{100 * ratio:.1f}%" if name.startswith("bench") else f"{ratio:.2f}x") if ratio is not None else ""
        print(f"{name:<30}{tt:>8}  {against:<28}{bb:>8}{rr:>9}  {floor:<11}{'yes' if ok else 'NO'}")
    print(f"\ntotal {data['total_seconds']:.0f} s")
    if args.json:
        print(json.dumps(data, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
