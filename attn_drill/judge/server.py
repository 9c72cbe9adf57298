"""The judge process: `python -m attn_drill.judge.server`, started by attn_drill.client.

It imports torch once, forks the zygote that rooms come from (before it loads anything of the
problem bank), then answers requests (attn_drill.protocol), one JSON line each way, from one table
of operations: grade, bench, questions, sandbox, ping, cancel, quit. The judge never executes
submitted code: each grading runs it in a fresh room; a hang or crash there ends only that room.
"""
from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path

from .. import protocol
from ..errors import AttnDrillError, BankError, Cancelled, UsageError


QUIT = object()


class Server:
    def __init__(self, rooms, stdin):
        self.rooms = rooms                # the zygote forked before the bank was loaded
        self.sandboxes: dict = {}         # scratch folder -> the zygote of its OS sandbox
        self.limits: dict = {}            # scratch folder -> its sandbox's ProcessLimit
        self.opened = 0
        self.stdin = stdin
        self.ops = {"grade": self.grade, "bench": self.bench, "questions": self.questions,
                    "sandbox": self.sandbox, "ping": lambda req: {"ok": True}}

    # ------------------------------------------------------------ operations
    def grade(self, req: protocol.Grade) -> dict:
        from ..i18n import set_lang
        from . import engine, sandbox
        set_lang(req.lang or "en")
        if req.sandbox:
            zyg = self.sandboxes.get(req.sandbox) or self._open_sandbox(req.sandbox)
            rel = Path(req.path).resolve().relative_to(Path(req.sandbox).resolve())
            target = engine.Target(req.path, room_path=f"{sandbox.INSIDE}/{rel}", hidden=[],
                                   writable=[sandbox.INSIDE, "/tmp"], shown=req.shown, typed=req.typed)
        else:
            if not self.rooms.alive:
                self.rooms = _respawn()
            zyg = self.rooms
            target = engine.Target(req.path, hidden=sandbox.hidden_from(req.path) + list(req.hide or []),
                                   writable=req.writable, shown=req.shown, typed=req.typed)
        report = engine.grade(req.problem, target, zyg, seed=req.seed, full=req.full, only_case=req.case,
                              fail_fast=req.fail_fast, diagnose=req.diagnose, time_limit=req.time_limit,
                              cancel_fd=self.stdin.fileno())
        return {"ok": True, "report": report.to_dict()}

    def bench(self, req: protocol.Bench) -> dict:
        from . import timing
        if not self.rooms.alive:
            self.rooms = _respawn()
        trusted = _respawn(blocks=False)      # the reference and torch's own attention are timed there
        try:
            return {"ok": True, "result": timing.run(req, self.rooms, trusted)}
        except timing.BenchProblem as exc:
            return protocol.failure("user", str(exc))
        finally:
            trusted.close()

    def questions(self, req: protocol.Questions) -> dict:
        from ..bank import quiz
        return {"ok": True, "problems": quiz.check_problem(req.problem)}

    def sandbox(self, req: protocol.Sandbox) -> dict:
        if req.action == "open":
            if req.scratch not in self.sandboxes:
                self._open_sandbox(req.scratch)
        elif req.action == "scrub":       # before each problem: nothing of theirs runs, their folder afresh
            zyg = self.sandboxes.get(req.scratch)
            return {"ok": True, "killed": zyg.scrub() if zyg is not None else 0}
        else:
            for key in [k for k in self.sandboxes if req.scratch in (None, k)]:
                self.sandboxes.pop(key).close()
                self.limits.pop(key).close()
        return {"ok": True}

    def _open_sandbox(self, scratch: str):
        """Start a zygote in an OS sandbox around `scratch` (it loads torch in the background), with at
        most sandbox.MAX_TASKS processes in it."""
        from . import sandbox
        from .rooms import Zygote
        argv, env = sandbox.command(Path(scratch))
        self.opened += 1                  # a name of its own: one sandbox's end never ends another's processes
        limit = self.limits[scratch] = sandbox.ProcessLimit(str(self.opened))
        zyg = self.sandboxes[scratch] = Zygote().spawn(argv, env, preexec=limit.preexec)
        return zyg

    # ------------------------------------------------------------ the loop
    def answer(self, raw: bytes) -> dict | None:
        """The reply to one request line (None: no reply is due; QUIT: the end)."""
        try:
            req = protocol.parse(json.loads(raw))
        except (ValueError, RecursionError) as exc:
            return protocol.failure("bug", f"unreadable request: {exc}")
        if req.op == "cancel":
            return None
        if req.op == "quit":
            return QUIT
        handle = self.ops.get(req.op)
        if handle is None:
            return protocol.failure("bug", f"unknown op {req.op!r}")
        try:
            return handle(req)
        except Cancelled:
            return protocol.failure("cancelled", "cancelled")
        except UsageError as exc:
            return protocol.failure("usage", str(exc))
        except MemoryError:
            from .. import rules
            return protocol.failure("bug", f"the judge reached its memory limit ({rules.judge_memory_gb():g} GB "
                                           f"on top of torch); raise it with --memory-gb or {rules.MEMORY_ENV}")
        except Exception as exc:  # noqa: BLE001 - a bank file's fault, or a bug: report it, keep serving
            fault = _bank_fault(getattr(req, "problem", None), exc)
            if fault or isinstance(exc, BankError):
                return protocol.failure("bank", fault or str(exc))
            if isinstance(exc, AttnDrillError):
                return protocol.failure("bug", str(exc))
            return protocol.failure("bug", f"{type(exc).__name__}: {exc}", traceback.format_exc())

    def close(self) -> None:
        for zyg in [self.rooms, *self.sandboxes.values()]:
            zyg.close()
        for limit in self.limits.values():
            limit.close()


def _bank_fault(pid, exc: BaseException) -> str | None:
    """The message for a failure inside the bank's own files (attn_drill.bank.fault); imported only
    now, after the zygote is forked, so rooms never hold the bank module."""
    from .. import bank
    return bank.fault(pid, exc)


def _respawn(blocks: bool = True):
    """A new zygote by exec: this process has the bank loaded now, so it must not fork one."""
    from .rooms import Zygote
    return Zygote().spawn([], dict(os.environ), blocks=blocks)


def main() -> None:
    proto = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)  # stray prints and C-level output go to stderr, never into the protocol
    sys.stdout = sys.stderr
    import torch  # noqa: F401 - the one import this process exists to pay once

    torch.set_num_threads(1)  # tiny tensors: threads only add contention
    from .rooms import Zygote
    rooms = Zygote().fork()   # before anything of the bank is loaded: rooms never hold it
    from .. import rules
    from ..room.limits import limit_memory
    limit_memory(torch, rules.judge_memory_gb(), hard=False)   # what hostile replies could grow stops here
    try:
        import ctypes
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)   # PR_SET_DUMPABLE 0: no reading this process's memory
    except (OSError, AttributeError):
        pass
    stdin = sys.stdin.buffer
    server = Server(rooms, stdin)
    proto.write(json.dumps({"ready": True}) + "\n")
    try:
        while True:
            line = stdin.readline()
            if not line:
                break
            if not line.strip():
                continue
            reply = server.answer(line)
            if reply is QUIT:
                break
            if reply is not None:
                proto.write(json.dumps(reply) + "\n")
    finally:
        server.close()


if __name__ == "__main__":
    main()
