"""The judge process, and the client that talks to it.

The judge worker imports torch once, forks the zygote that rooms come from (before it loads
anything of the problem bank), and answers JSON requests, one per line: each `grade` runs the
engine, which sends the submission to a fresh room and judges what comes back. The judge never
executes submitted code; a hang or crash there ends only that room. The client side
(WorkerClient) never imports torch.
"""
from __future__ import annotations

import json
import os
import re
import selectors
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from .results import Frame, Report

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
    import torch  # noqa: F401 - the one import this process exists to pay once

    torch.set_num_threads(1)  # tiny tensors: threads only add contention
    from .rooms import Zygote
    rooms = Zygote().fork()   # before anything of the bank is loaded: rooms never hold it
    try:
        import ctypes
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)   # PR_SET_DUMPABLE 0: no reading this process's memory
    except (OSError, AttributeError):
        pass
    from . import engine
    from .rooms import Cancelled
    sandboxes: dict[str, Zygote] = {}
    proto.write(json.dumps({"ready": True}) + "\n")
    stdin = sys.stdin.buffer
    while True:
        line = stdin.readline()
        if not line:
            break
        if not line.strip():
            continue
        req = json.loads(line)
        op = req.get("op")
        if op == "quit":
            break
        try:
            if op == "grade":
                from .i18n import set_lang
                set_lang(req.get("lang") or "en")
                box = req.get("sandbox")
                if box:
                    zyg = sandboxes.get(box) or _sandbox(sandboxes, box)
                    rel = Path(req["path"]).resolve().relative_to(Path(box).resolve())
                    from .sandbox import INSIDE
                    target = engine.Target(req["path"], room_path=f"{INSIDE}/{rel}", hidden=[],
                                           writable=[INSIDE, "/tmp"], shown=req.get("shown"), typed=req.get("typed"))
                else:
                    if not rooms.alive:
                        rooms = _respawn()
                    zyg = rooms
                    target = engine.Target(req["path"], hidden=_hidden(req["path"]) + list(req.get("hide") or []),
                                           writable=req.get("writable"), shown=req.get("shown"),
                                           typed=req.get("typed"))
                report = engine.grade(req["problem"], target, zyg, seed=req.get("seed", 0),
                                      full=req.get("full", False), only_case=req.get("case"),
                                      fail_fast=req.get("fail_fast", False), diagnose=req.get("diagnose", True),
                                      time_limit=req.get("time_limit"), cancel_fd=stdin.fileno())
                reply = {"ok": True, "report": report.to_dict()}
            elif op == "prepare_sandbox":
                if req["scratch"] not in sandboxes:
                    _sandbox(sandboxes, req["scratch"])
                reply = {"ok": True}
            elif op == "close_sandbox":
                for key in [k for k in sandboxes if req.get("scratch") in (None, k)]:
                    sandboxes.pop(key).close()
                reply = {"ok": True}
            elif op == "questions":      # verify: a problem's follow-up questions, their proofs run here (torch)
                from . import quiz
                reply = {"ok": True, "problems": quiz.check_problem(req["problem"])}
            elif op in ("ping", "cancel"):
                reply = {"ok": True}
            else:
                reply = {"ok": False, "error": f"unknown op {op!r}"}
        except Cancelled:
            reply = {"ok": False, "cancelled": True}
        except KeyError as exc:
            reply = {"ok": False, "error": str(exc.args[0]) if exc.args else repr(exc), "usage": True,
                     "bank": _bank_fault(req, exc)}
        except Exception as exc:  # noqa: BLE001 - a grader or engine bug: report it, keep serving
            import traceback
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}",
                     "traceback": traceback.format_exc(), "bank": _bank_fault(req, exc)}
        if op != "cancel":
            proto.write(json.dumps(reply) + "\n")
    for zyg in [rooms, *sandboxes.values()]:
        zyg.close()


def _bank_fault(req: dict, exc: BaseException) -> str | None:
    """The message for a failure inside the bank's own files (attn_drill.bank.fault); imported only
    now, after the zygote is forked, so rooms never hold the bank module."""
    from . import bank
    return bank.fault(req.get("problem"), exc)


def _sandbox(sandboxes: dict, scratch: str):
    """Start a zygote in an OS sandbox around `scratch` (it loads torch in the background)."""
    from . import sandbox
    from .rooms import Zygote
    argv, env = sandbox.command(Path(scratch))
    zyg = sandboxes[scratch] = Zygote().spawn(argv, env)
    return zyg


def _respawn():
    """A new zygote by exec: this process has the bank loaded now, so it must not fork one."""
    from .rooms import Zygote
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    return Zygote().spawn([], env)


def _hidden(path: str) -> list[str]:
    """What a room in the user's own folder may not touch: the bank and the progress records."""
    from . import sandbox
    here = Path(path).resolve().parent
    return sandbox.bank_dirs() + [str(here / ".attn-drill"), str(Path.cwd() / ".attn-drill")]


# ---------------------------------------------------------------- client side
class ToolError(RuntimeError):
    """The tool itself failed (not the user's code): exit code 2."""


class Cancelled(Exception):
    """The grading was cancelled by the client (watch saw a newer save)."""


JUDGE_ALLOWANCE_S = 120.0


class WorkerClient:
    def __init__(self, env: dict | None = None):
        self.extra_env = dict(env or {})
        self.proc: subprocess.Popen | None = None
        self._tmp = tempfile.TemporaryDirectory(prefix="attn-drill-")
        self._stderr_path = Path(self._tmp.name) / "worker.err"
        self._ready = False
        self._lock = threading.Lock()

    def start(self) -> "WorkerClient":
        if self.proc is None or self.proc.poll() is not None:
            env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONFAULTHANDLER="1", **self.extra_env)
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
              diagnose=True, time_limit: float = 30.0, sandbox: str | None = None, shown: str | None = None,
              writable: list[str] | None = None, hide: list[str] | None = None, typed: str | None = None) -> Report:
        """Grade one file. `sandbox`: a scratch folder holding it, graded inside an OS sandbox;
        without one, `writable` limits where the code may write and `hide` adds folders it may not
        touch. Raises Cancelled when cancel() was called meanwhile, ToolError when the judge failed."""
        self.start()
        self._wait_ready()
        from .i18n import lang
        req = dict(op="grade", problem=problem, path=str(path), seed=seed, full=full, case=case,
                   fail_fast=fail_fast, diagnose=diagnose, time_limit=time_limit, shown=shown, typed=typed,
                   sandbox=str(sandbox) if sandbox else None, writable=writable, hide=hide, lang=lang())
        self._send(req)
        # the judge's own work (reference, mutants) comes on top of the submission's time limit
        line = self._readline(2 * time_limit + JUDGE_ALLOWANCE_S)
        if not line:
            tail = self._stderr_tail()
            self.kill()
            raise ToolError("the grading process stopped answering" + (f":\n{tail}" if tail else ""))
        reply = json.loads(line)
        if not reply.get("ok"):
            if reply.get("cancelled"):
                raise Cancelled()
            if reply.get("bank"):   # a grader, reference or probe file of the bank failed: named, no traceback
                from .bank import BankError
                raise BankError(reply["bank"])
            if reply.get("usage"):
                raise ValueError(reply["error"])
            raise ToolError(reply.get("traceback") or reply.get("error"))
        return Report.from_dict(reply["report"])

    def check_questions(self, problem: str) -> list[str]:
        """What is wrong with a problem's follow-up questions, proofs measured with its reference."""
        self.start()
        self._wait_ready()
        self._send({"op": "questions", "problem": problem})
        line = self._readline(JUDGE_ALLOWANCE_S)
        if not line:
            raise ToolError("the grading process stopped answering")
        reply = json.loads(line)
        if not reply.get("ok"):
            raise ToolError(reply.get("traceback") or reply.get("error"))
        return list(reply["problems"])

    def cancel(self) -> None:
        """Stop the grading in progress (from another thread); its grade() raises Cancelled."""
        try:
            self._send({"op": "cancel"})
        except (OSError, ValueError, AttributeError):
            pass

    def prepare_sandbox(self, scratch) -> None:
        """Start the OS sandbox for a scratch folder now; torch loads in it while other work goes on."""
        self.start()
        self._wait_ready()
        self._send({"op": "prepare_sandbox", "scratch": str(scratch)})
        self._readline(60)

    def close_sandbox(self, scratch=None) -> None:
        """End the OS sandbox of a scratch folder (all of them by default); returns once every
        process in it is gone."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self._send({"op": "close_sandbox", "scratch": None if scratch is None else str(scratch)})
        self._readline(60)

    def _send(self, req: dict) -> None:
        with self._lock:
            self.proc.stdin.write(json.dumps(req) + "\n")
            self.proc.stdin.flush()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None and not self._ready:
            self.proc.kill()                  # still importing torch: nothing to wait for
            self.proc.wait()
        elif self.proc is not None and self.proc.poll() is None:
            try:   # the worker ends its rooms and itself; nobody needs to wait for that
                self.proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
                self.proc.stdin.close()
                self.proc.wait(timeout=0.05)
            except subprocess.TimeoutExpired:
                pass
            except (OSError, ValueError):
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
