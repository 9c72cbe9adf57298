"""The isolated grading process, and the client that talks to it.

The worker imports torch once and answers JSON requests, one per line. It sets a memory limit and,
for each request, a watchdog (faulthandler) that dumps the stack and exits when the time limit
passes, so a hang or crash in user code becomes a graded failure with a pointer to the user's line.
The client side (WorkerClient) never imports torch.
"""
from __future__ import annotations

import json
import os
import re
import selectors
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .results import FAIL, Frame, Report, UserProblem

MEMORY_LIMIT_GB = float(os.environ.get("ATTN_DRILL_MEMORY_GB", "6"))


# ---------------------------------------------------------------- worker side
def limit_memory(torch, gigabytes: float = MEMORY_LIMIT_GB) -> None:
    """Cap this process's address space at what torch already maps plus `gigabytes`, so a huge
    allocation in user code fails with an error instead of taking the machine. Not under CUDA,
    which reserves huge address ranges of its own."""
    import resource
    if torch.cuda.is_available():
        return
    try:
        vm = int(re.search(r"VmSize:\s+(\d+)", Path("/proc/self/status").read_text()).group(1)) * 1024
        limit = vm + int(gigabytes * (1 << 30))
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (OSError, ValueError, AttributeError):
        pass


def _serve() -> None:
    proto = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)  # stray prints and C-level output go to stderr, never into the protocol
    sys.stdout = sys.stderr
    import faulthandler

    import torch  # noqa: F401 - the one import this process exists to pay once

    from . import engine

    limit_memory(torch)
    torch.set_num_threads(1)  # tiny tensors: threads only add contention
    proto.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        op = req.get("op")
        if op == "quit":
            break
        try:
            if op == "grade":
                tb = open(req["tb_path"], "w")
                faulthandler.dump_traceback_later(req.get("time_limit", 30), exit=True, file=tb)
                try:
                    report = engine.grade(req["problem"], req["path"], seed=req.get("seed", 0),
                                          full=req.get("full", False), only_case=req.get("case"),
                                          fail_fast=req.get("fail_fast", False),
                                          diagnose=req.get("diagnose", True))
                finally:
                    faulthandler.cancel_dump_traceback_later()
                    tb.close()
                reply = {"ok": True, "report": report.to_dict()}
            elif op == "ping":
                reply = {"ok": True}
            else:
                reply = {"ok": False, "error": f"unknown op {op!r}"}
        except KeyError as exc:
            reply = {"ok": False, "error": str(exc.args[0]) if exc.args else repr(exc), "usage": True}
        except Exception as exc:  # noqa: BLE001 - a grader or engine bug: report it, keep serving
            import traceback
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}",
                     "traceback": traceback.format_exc()}
        proto.write(json.dumps(reply) + "\n")


# ---------------------------------------------------------------- client side
class ToolError(RuntimeError):
    """The tool itself failed (not the user's code): exit code 2."""


class WorkerClient:
    def __init__(self):
        self.proc: subprocess.Popen | None = None
        self._tmp = tempfile.TemporaryDirectory(prefix="attn-drill-")
        self._stderr_path = Path(self._tmp.name) / "worker.err"
        self._ready = False

    def start(self) -> "WorkerClient":
        if self.proc is None or self.proc.poll() is not None:
            env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONFAULTHANDLER="1")
            self._stderr = open(self._stderr_path, "ab")
            self.proc = subprocess.Popen([sys.executable, "-m", "attn_drill.worker"], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=self._stderr, env=env, text=True,
                                         bufsize=1)
            self._ready = False
        return self

    def _readline(self, timeout: float) -> str | None:
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + timeout
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                if sel.select(left):
                    return self.proc.stdout.readline()
        finally:
            sel.close()

    def _wait_ready(self) -> None:
        if self._ready:
            return
        line = self._readline(120)
        if not line:
            raise ToolError("the grading worker did not start: " + self._stderr_tail())
        self._ready = True

    def _stderr_tail(self) -> str:
        try:
            return self._stderr_path.read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def grade(self, problem: str, path: str, seed: int, *, full=False, case=None, fail_fast=False,
              diagnose=True, time_limit: float = 30.0) -> Report:
        self.start()
        self._wait_ready()
        tb_path = Path(self._tmp.name) / "timeout.txt"
        req = dict(op="grade", problem=problem, path=str(path), seed=seed, full=full, case=case,
                   fail_fast=fail_fast, diagnose=diagnose, time_limit=time_limit, tb_path=str(tb_path))
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        line = self._readline(time_limit + 15)
        if not line:
            return self._dead(problem, path, seed, time_limit, tb_path)
        reply = json.loads(line)
        if not reply.get("ok"):
            if reply.get("usage"):
                raise ValueError(reply["error"])
            raise ToolError(reply.get("traceback") or reply.get("error"))
        return Report.from_dict(reply["report"])

    def _dead(self, problem, path, seed, time_limit, tb_path) -> Report:
        """The worker hung or died inside user code: turn that into a graded failure."""
        if self.proc.poll() is None:
            self.proc.kill()
        code = self.proc.wait()
        dump = tb_path.read_text(errors="replace") if tb_path.exists() else ""
        self.proc = None
        frames = _frames_from_dump(dump, path)
        report = Report(problem, str(path), seed, status=FAIL)
        if "Timeout" in dump or code in (None, -9) and not dump:
            msg = f"timed out after {time_limit:.0f} s: an infinite loop, or far too much work for these sizes?"
            kind = "timeout"
        else:
            sig = f"signal {-code}" if code and code < 0 else f"exit code {code}"
            msg = f"your code crashed the grading process ({sig}); os._exit, a segfault, or running out of memory?"
            kind = "crash"
        if frames:
            msg += f" It was at {frames[-1].file}:{frames[-1].line} in {frames[-1].func}."
        report.problem_error = UserProblem(kind, msg, frames)
        report.message = msg
        report.replay = f"attn-drill check {problem} {path} --seed {seed}"
        return report

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=2)
            except (OSError, subprocess.TimeoutExpired, ValueError):
                self.proc.kill()
        self.proc = None
        self._tmp.cleanup()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()


def _frames_from_dump(dump: str, path) -> list[Frame]:
    """The user's frames from a faulthandler dump (innermost last)."""
    target = str(Path(path).resolve())
    frames = []
    for m in re.finditer(r'File "([^"]+)", line (\d+) in (\S+)', dump):
        if str(Path(m.group(1)).resolve()) == target:
            line = int(m.group(2))
            try:
                code = Path(target).read_text().splitlines()[line - 1].strip()
            except (OSError, IndexError):
                code = ""
            frames.append(Frame(Path(target).name, line, m.group(3), code))
    # faulthandler prints the innermost frame first: reverse to read like a traceback
    return list(reversed(frames[:8]))


if __name__ == "__main__":
    _serve()
