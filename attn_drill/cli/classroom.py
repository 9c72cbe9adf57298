"""Commands for instructors and performance (grade, bench).

Registered on the main app by importing this module; behaviour lives in verbs/.
"""
from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer

from .app import app, run
from .options import HtmlOpt, Problem


class Device(str, Enum):
    auto = "auto"
    cpu = "cpu"
    cuda = "cuda"


@app.command()
def grade(submissions: Path = typer.Argument(..., help="Folder with one sub-folder per student, each "
                                                      "holding <id>.py files."),
          problems: Optional[List[str]] = typer.Option(None, "--problems", "-p",
                                                       help="Problem ids to grade (repeat the option); "
                                                            "default: every id found in the folders."),
          workers: Optional[int] = typer.Option(None, "--workers", "-w",
                                                help="Students graded in parallel (default: the CPU count)."),
          shard: Optional[str] = typer.Option(None, "--shard",
                                              help="Grade only shard i of n (i/n, from 1), for a CI matrix."),
          out: Path = typer.Option(Path("grades"), "--out", "-o", help="Folder for the JSON, JUnit and CSV "
                                                                        "outputs."),
          seed: Optional[int] = typer.Option(None, "--seed", help="Master seed (default: random, printed; "
                                                                  "required with --shard)."),
          full: bool = typer.Option(False, "--full", help="Also run the larger random cases."),
          time_limit: Optional[float] = typer.Option(None, "--time-limit", help="Seconds per student and "
                                                                                "problem (default: the "
                                                                                "problem's own)."),
          memory_gb: Optional[float] = typer.Option(None, "--memory-gb", help="Memory a worker may use on "
                                                                              "top of torch (default 6)."),
          fail_under: Optional[float] = typer.Option(None, "--fail-under", help="Exit 1 when fewer than this "
                                                                                "percent of the grades pass."),
          no_sandbox: bool = typer.Option(False, "--no-sandbox",
                                          help="Grade without an OS sandbox (bubblewrap), with Python-level guards "
                                               "only; what that does not protect is printed. Without it, grade "
                                               "refuses where no sandbox can be made."),
          require_sandbox: bool = typer.Option(False, "--require-sandbox", hidden=True,
                                               help="The default now: kept so older scripts still run."),
          resume: bool = typer.Option(False, "--resume",
                                      help="Continue the grading that Ctrl-C interrupted in --out: only what it "
                                           "had not finished, with its seed and options."),
          json_out: bool = typer.Option(False, "--json", help="Summary JSON on stdout (progress on stderr)."),
          html: HtmlOpt = None):
    """Grade a class: every student's files, each in an isolated worker; JSON, JUnit and CSV results.

    Exit 0 when grading completed (whatever the students scored), 1 under --fail-under, 2 on usage
    errors or when the grader itself failed, 130 when Ctrl-C stopped it (what finished is written;
    --resume continues).

    Examples: attn-drill grade submissions/ · attn-drill grade submissions/ -p mhsa -p gqa ·
    attn-drill grade submissions/ --shard 2/4 --seed 7 · attn-drill grade submissions/ --resume ·
    attn-drill grade submissions/ --html class.html
    """
    from ..verbs.grade import grade as verb
    run(verb, submissions, list(problems or []), workers, shard, out, seed, full, time_limit, memory_gb,
         fail_under, json_out, no_sandbox and not require_sandbox, resume, html)


@app.command()
def bench(problem: Problem,
          path: Optional[Path] = typer.Argument(None, help="File to time (default ./<id>.py)."),
          seed: int = typer.Option(0, "--seed", help="Seed for the inputs and parameters."),
          device: Device = typer.Option(Device.auto, "--device", help="cpu, cuda, or auto (cuda when present)."),
          max_seconds: float = typer.Option(10.0, "--max-seconds", help="Stop measuring after this long, even "
                                                                        "if the spread is still above 2%."),
          time_limit: Optional[float] = typer.Option(None, "--time-limit", help="Kill the run after this many "
                                                                                "seconds (default: the cap + "
                                                                                "the problem's time limit)."),
          threads: int = typer.Option(1, "--threads", min=1, help="CPU threads torch may use (1 keeps the "
                                                                 "ratios repeatable)."),
          json_out: bool = typer.Option(False, "--json", help="JSON on stdout.")):
    """Time your solution against the reference and torch's fused SDPA, with memory and FLOP rate.

    Outputs are re-checked against the reference on every timed run; the answer must stay correct.

    Examples: attn-drill bench mhsa · attn-drill bench gqa work/gqa.py --json
    """
    from ..verbs.bench import bench as verb
    run(verb, problem, str(path) if path else None, seed, device.value, max_seconds, time_limit, threads,
         json_out)
