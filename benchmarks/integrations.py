"""The floors of the notebook magic and of the HTML class report.

  notebook   the wall time of a `%%check mhsa` cell in a warm kernel (nbclient; the extension loaded,
             the judge warm from an earlier cell) against `attn-drill check mhsa FILE` on the same code
             (a fresh process, as a user runs it), and the judge's own grading seconds in each.
             Floor: the cell within 1.2x of check.
  class      `attn-drill grade` of the 8-student fixture class with --html: the size of the page and the
             time to write it (measured around the writing alone, after the grading). Floor: at most
             2 MB and 2 s.

    python benchmarks/integrations.py               # both, medians of 3
    python benchmarks/integrations.py --repeat 5 --json
    python benchmarks/integrations.py --only notebook

The notebook part needs the test extra (nbclient, nbformat, ipykernel).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLASS = ROOT / "tests" / "fixtures" / "class"
SEED = 1


def _check_cli(file: Path, cwd: Path) -> tuple[float, float]:
    """(wall seconds, the report's grading seconds) of `attn-drill check mhsa FILE --json`."""
    env = dict(os.environ, NO_COLOR="1", PYTHONPATH=str(ROOT))
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "attn_drill", "check", "mhsa", str(file), "--seed", str(SEED),
                        "--json"], cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    return wall, json.loads(p.stdout)["attn_drill"]["seconds"]


def _seconds(stamp_from: str, stamp_to: str) -> float:
    return (datetime.fromisoformat(stamp_to.replace("Z", "+00:00"))
            - datetime.fromisoformat(stamp_from.replace("Z", "+00:00"))).total_seconds()


def notebook(repeat: int) -> dict:
    import nbformat
    from nbclient import NotebookClient
    out = {}
    for kind, src in (("right", ROOT / "reference" / "mhsa.py"), ("wrong", CLASS / "bob" / "mhsa.py")):
        code = src.read_text()
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            (tmp / "mhsa.py").write_text(code)
            cli = [_check_cli(tmp / "mhsa.py", tmp) for _ in range(repeat)]
            nb = nbformat.v4.new_notebook()
            # the first %%check warms the judge (torch imported there); the next `repeat` are measured
            nb.cells = [nbformat.v4.new_code_cell("%load_ext attn_drill")] + \
                [nbformat.v4.new_code_cell(f"%%check mhsa --seed {SEED}\n{code}") for _ in range(repeat + 1)]
            NotebookClient(nb, timeout=600, kernel_name="python3", record_timing=True,
                           resources={"metadata": {"path": str(tmp)}}).execute()
            cells = []
            for cell in nb.cells[1:]:
                ex = cell.metadata["execution"]
                meta = next(o["metadata"]["attn-drill"] for o in cell.outputs if o.get("output_type") == "display_data")
                cells.append((_seconds(ex["iopub.execute_input"], ex["shell.execute_reply"]), meta["seconds"]))
        warm = cells[1:]
        row = {"check_wall_s": statistics.median(w for w, _ in cli),
               "check_grading_s": statistics.median(g for _, g in cli),
               "cell_first_wall_s": cells[0][0],
               "cell_warm_wall_s": statistics.median(w for w, _ in warm),
               "cell_warm_grading_s": statistics.median(g for _, g in warm)}
        row["ratio_warm_cell_to_check"] = row["cell_warm_wall_s"] / row["check_wall_s"]
        row["ratio_first_cell_to_check"] = row["cell_first_wall_s"] / row["check_wall_s"]
        out[kind] = row
    return out


def class_report() -> dict:
    import contextlib
    import io
    from attn_drill.verbs import grade as verb, outputs
    timings = []
    real = outputs.write_class_html

    def timed(*args, **kwargs):
        t0 = time.perf_counter()
        real(*args, **kwargs)
        timings.append(time.perf_counter() - t0)
    outputs.write_class_html = timed
    try:
        with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stdout(io.StringIO()):
            page = Path(tmp) / "class.html"
            t0 = time.perf_counter()
            verb.grade(CLASS, [], 2, None, Path(tmp) / "grades", SEED, False, 20.0, None, None, True, html=page)
            total = time.perf_counter() - t0
            size = page.stat().st_size
    finally:
        outputs.write_class_html = real
    return {"grade_total_s": total, "html_write_s": timings[0], "html_bytes": size, "html_mb": size / 2 ** 20}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", choices=["notebook", "class"])
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    res = {}
    if a.only in (None, "notebook"):
        res["notebook"] = notebook(a.repeat)
    if a.only in (None, "class"):
        res["class"] = class_report()
    if a.json:
        print(json.dumps(res, indent=2))
        return
    for kind, row in res.get("notebook", {}).items():
        print(f"notebook, {kind} code: check {row['check_wall_s']:.2f} s (grading {row['check_grading_s']:.2f} s); "
              f"%%check cell warm {row['cell_warm_wall_s']:.2f} s (grading {row['cell_warm_grading_s']:.2f} s), "
              f"first {row['cell_first_wall_s']:.2f} s; warm/check {row['ratio_warm_cell_to_check']:.2f}x, "
              f"first/check {row['ratio_first_cell_to_check']:.2f}x (floor <= 1.2x)")
    if "class" in res:
        c = res["class"]
        print(f"class report: {c['html_mb']:.3f} MB (floor <= 2 MB), written in {c['html_write_s']:.3f} s "
              f"(floor <= 2 s) after grading the class in {c['grade_total_s']:.1f} s")


if __name__ == "__main__":
    main()
