"""The CLI's side of the judge: start the judge process, send it requests, read its replies.

The judge (attn_drill.judge.server) imports torch; this module never does, so a command starts the
judge first and reads and vets files while torch loads there. Replies that say the grading failed
become the tool's errors (attn_drill.errors): a usage error, a fault of the problem bank, a cancelled
grading, or a ToolError when the judge itself failed.
"""
from __future__ import annotations

import json
import os
import selectors
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from . import protocol, rules
from .errors import BankError, Cancelled, ToolError, UsageError
from .results import Report

JUDGE_ALLOWANCE_S = 120.0        # the judge's own work (reference, mutants) on top of a grading's limit
START_S = 120.0                  # starting Python and importing torch on a busy machine


class JudgeClient:
    def __init__(self, env: dict | None = None, memory_gb: float | None = None):
        self.extra_env = dict(env or {})
        if memory_gb is not None:
            self.extra_env[rules.MEMORY_ENV] = str(rules.memory_gb(memory_gb))
        self.proc: subprocess.Popen | None = None
        self._tmp = tempfile.TemporaryDirectory(prefix="attn-drill-")
        self._stderr_path = Path(self._tmp.name) / "judge.err"
        self._ready = False
        self._lock = threading.Lock()

    def start(self) -> "JudgeClient":
        if self.proc is None or self.proc.poll() is not None:
            rules.memory_gb()            # a bad ATTN_DRILL_MEMORY_GB is the user's to fix, before any start
            env = dict(os.environ, **self.extra_env)
            self._stderr = open(self._stderr_path, "ab")
            argv = rules.interpreter("from attn_drill.judge.server import main; main()")
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=self._stderr, env=env, text=True,
                                         bufsize=1)
            self._ready = False
        return self

    @property
    def starting(self) -> bool:
        """The judge process runs but has not said it is ready (it is importing torch)."""
        return self.proc is not None and self.proc.poll() is None and not self._ready

    # ------------------------------------------------------------ requests
    def grade(self, problem: str, path, seed: int = 0, **options) -> Report:
        """Grade one file; `options` are the fields of protocol.Grade (full, case, fail_fast, diagnose,
        time_limit, sandbox, shown, typed, writable, hide, lang). Raises Cancelled when cancel() was
        called meanwhile, ToolError when the judge failed."""
        from .i18n import lang
        req = protocol.Grade(problem=problem, path=str(path), seed=seed, **options)
        if req.lang is None:
            req.lang = lang()
        reply = self._ask(req, 2 * req.time_limit + JUDGE_ALLOWANCE_S)
        return Report.from_dict(reply["report"])

    def bench(self, problem: str, path, **options) -> dict:
        """The timing of one file (attn_drill.judge.timing; `options`: the fields of protocol.Bench);
        the submission's faults raise BenchFailed."""
        req = protocol.Bench(problem=problem, path=str(path), **options)
        return self._ask(req, req.time_limit + START_S)["result"]

    def check_questions(self, problem: str) -> list[str]:
        """What is wrong with a problem's follow-up questions, proofs measured with its reference."""
        return list(self._ask(protocol.Questions(problem=problem), JUDGE_ALLOWANCE_S)["problems"])

    def prepare_sandbox(self, scratch) -> None:
        """Start the OS sandbox for a scratch folder now; torch loads in it while other work goes on."""
        self._ask(protocol.Sandbox(action="open", scratch=str(scratch)), 60)

    def scrub_sandbox(self, scratch) -> int:
        """End every process left running in the OS sandbox of a scratch folder (its zygote stays), and
        make its in-memory /submission again from the scratch folder."""
        return int(self._ask(protocol.Sandbox(action="scrub", scratch=str(scratch)), 60).get("killed") or 0)

    def close_sandbox(self, scratch=None) -> None:
        """End the OS sandbox of a scratch folder (all of them by default); returns once every
        process in it is gone."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self._ask(protocol.Sandbox(action="close", scratch=None if scratch is None else str(scratch)), 60)

    def cancel(self) -> None:
        """Stop the grading in progress (from another thread); its grade() raises Cancelled."""
        try:
            self._send(protocol.Simple("cancel"))
        except (OSError, ValueError, AttributeError):
            pass

    def _ask(self, req: protocol.Request, timeout: float) -> dict:
        self.start()
        self._wait_ready()
        self._send(req)
        line = self._readline(timeout)
        if not line:
            tail = self._stderr_tail()
            self.kill()
            raise ToolError("the grading process stopped answering" + (f":\n{tail}" if tail else ""))
        reply = json.loads(line)
        if reply.get("ok"):
            return reply
        kind, error = reply.get("kind"), reply.get("error") or ""
        if kind == "cancelled":
            raise Cancelled()
        if kind == "bank":      # a grader, reference or probe file of the bank failed: named, no traceback
            raise BankError(error)
        if kind == "usage":
            raise UsageError(error)
        if kind == "user":
            raise BenchFailed(error)
        raise ToolError(reply.get("traceback") or error)

    # ------------------------------------------------------------ the process
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
        line = self._readline(START_S)
        if not line:
            raise ToolError("the grading worker did not start: " + self._stderr_tail())
        self._ready = True

    def _stderr_tail(self) -> str:
        try:
            return self._stderr_path.read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def _send(self, req: protocol.Request) -> None:
        with self._lock:
            self.proc.stdin.write(json.dumps(req.to_wire()) + "\n")
            self.proc.stdin.flush()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def close(self) -> None:
        if self.starting:
            self.proc.kill()                  # still importing torch: nothing to wait for
            self.proc.wait()
        elif self.proc is not None and self.proc.poll() is None:
            try:   # the judge ends its rooms and itself; nobody needs to wait for that
                self.proc.stdin.write(json.dumps(protocol.Simple("quit").to_wire()) + "\n")
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


class BenchFailed(Exception):
    """The submission could not be timed (it crashed, hung or gave a wrong answer): exit 1."""
