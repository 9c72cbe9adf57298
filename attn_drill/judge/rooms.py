"""The judge's side of the rooms: start a zygote, open a room per grading, talk to it, end it.

Nothing a room sends is trusted: it is read by attn_drill.judge.untrusted only. A reply that
cannot be read, an oversized one, one that never comes, or a room that dies are all the
submission's failure (RoomFailure), never a tool error.
"""
from __future__ import annotations

import json
import os
import select
import socket
import time

from .. import rules
from ..errors import Cancelled
from ..i18n import t
from ..results import UserProblem
from ..room import wire
from . import untrusted

GRACE_S = 5.0            # the judge waits this long past a room's own deadline before killing it


class RoomFailure(Exception):
    """The room died, hung, or sent something unreadable; `problem` says what, at the user's line."""

    def __init__(self, problem: UserProblem):
        super().__init__(problem.message)
        self.problem = problem


class Zygote:
    """A fork server for rooms: forked from this process (`fork`) or started in a sandbox (`spawn`)."""

    def __init__(self):
        self.control: socket.socket | None = None
        self.pid: int | None = None
        self.proc = None                  # a sandboxed zygote's Popen
        self.memory_gb = rules.memory_gb()

    def fork(self) -> "Zygote":
        """Fork the zygote from this process; call before anything of the bank is imported."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            ours.close()
            from ..room.zygote import forked
            forked(theirs)
        theirs.close()
        self.control, self.pid = ours, pid
        return self

    def spawn(self, argv_prefix: list[str], env: dict, cwd: str | None = None, blocks: bool = True,
              preexec=None) -> "Zygote":
        """Start a zygote with exec (in a sandbox: argv_prefix is the bwrap command, and the zygote
        may scrub it); `blocks`: its rooms raise on fused kernels (always, but for bench's trusted room)."""
        import subprocess
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        fd = theirs.fileno()
        contained = bool(argv_prefix)
        argv = rules.interpreter(f"from attn_drill.room.zygote import main; main({fd}, {bool(blocks)}, {contained})")
        self.proc = subprocess.Popen([*argv_prefix, *argv], pass_fds=(fd,), env=env, preexec_fn=preexec,
                                     cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, start_new_session=True)
        theirs.close()
        self.control = ours
        return self

    @property
    def alive(self) -> bool:
        if self.control is None:
            return False
        if self.proc is not None:
            return self.proc.poll() is None
        try:
            return os.waitpid(self.pid, os.WNOHANG)[0] == 0
        except ChildProcessError:
            return False

    def _ask(self, msg: dict, timeout: float = 30.0) -> dict:
        self.control.settimeout(timeout)
        try:
            self.control.send(json.dumps(msg).encode())
            raw = self.control.recv(65536)
        finally:
            self.control.settimeout(None)
        if not raw:
            raise OSError("the room server ended")
        return untrusted.zygote_reply(raw)

    def open(self, preload=(), timeout: float = 180.0, warm: bool = True) -> "Room":
        """A fresh room. The first one from a sandboxed zygote waits for its torch import.
        `preload`: modules the code will import, loaded in the zygote first (once); `warm`: let the
        zygote pay torch's first-use costs for later rooms while this one works (not when timing)."""
        self.control.settimeout(timeout)
        try:
            self.control.send(json.dumps({"op": "fork", "memory_gb": self.memory_gb, "warm": warm,
                                          "preload": list(preload)}).encode())
            raw, fds, _, _ = socket.recv_fds(self.control, 65536, 2)
        except (OSError, socket.timeout) as exc:
            raise OSError(f"the room server did not answer: {exc}{self._stderr_tail()}") from None
        finally:
            self.control.settimeout(None)
        if not raw or len(fds) != 2:
            raise OSError("the room server did not start a room" + self._stderr_tail())
        try:
            pid = untrusted.zygote_reply(raw)["pid"]
        except (untrusted.Unreadable, KeyError):
            raise OSError("the room server did not start a room" + self._stderr_tail()) from None
        return Room(self, pid, socket.socket(fileno=fds[0]), fds[1])

    def _stderr_tail(self) -> str:
        if self.proc is None or self.proc.poll() is None or self.proc.stderr is None:
            return ""
        return ": " + self.proc.stderr.read().decode(errors="replace")[-1500:]

    def wait(self, pid: int, timeout: float) -> int | None:
        try:
            return self._ask({"op": "wait", "pid": pid, "timeout": timeout}, timeout + 10)["status"]
        except (OSError, untrusted.Unreadable, KeyError):
            return None

    def release(self, pid: int) -> None:
        """The room was told to end: the zygote reaps it, or kills it after a grace."""
        try:
            self.control.send(json.dumps({"op": "release", "pid": pid}).encode())
        except OSError:
            pass

    def memory(self, pid: int, reset: bool = False) -> dict:
        """{"rss", "hwm"}: a room's resident memory and its peak in bytes (None where not known), read
        by the zygote from the kernel, outside the room; reset: the peak starts again from now."""
        try:
            got = self._ask({"op": "memory", "pid": pid, "reset": reset}, 15)
        except (OSError, untrusted.Unreadable):
            return {"rss": None, "hwm": None}
        return {"rss": got.get("rss"), "hwm": got.get("hwm")}

    def scrub(self) -> int:
        """In a sandbox: end every process a student's code left running there (the zygote stays)."""
        try:
            return int(self._ask({"op": "scrub"}, 30).get("killed") or 0)
        except (OSError, untrusted.Unreadable, TypeError, ValueError):
            return 0

    def kill(self, pid: int) -> int | None:
        try:
            return self._ask({"op": "kill", "pid": pid}, 15)["status"]
        except (OSError, untrusted.Unreadable, KeyError):
            return None

    def close(self, timeout: float = 10.0) -> None:
        """End the zygote and every room; returns once all of them are gone."""
        if self.control is not None:
            try:
                self.control.send(json.dumps({"op": "quit"}).encode())
            except OSError:
                pass
            self.control.close()
            self.control = None
        if self.proc is not None:
            try:
                self.proc.wait(timeout)
            except Exception:  # noqa: BLE001 - kill the whole sandbox
                self.proc.kill()
                self.proc.wait()
            if self.proc.stderr:
                self.proc.stderr.close()
        elif self.pid is not None:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                try:
                    if os.waitpid(self.pid, os.WNOHANG)[0]:
                        break
                except ChildProcessError:
                    break
                time.sleep(0.01)
            else:
                os.kill(self.pid, 9)
                os.waitpid(self.pid, 0)
            self.pid = None


class Room:
    """One room: one grading of one file."""

    def __init__(self, zygote: Zygote, pid: int, chan: socket.socket, tb_fd: int):
        self.zygote, self.pid, self.chan, self.tb_fd = zygote, pid, chan, tb_fd
        self.in_flight = 0                      # requests sent whose replies have not been read
        self.budget = 30.0
        self.used = 0.0
        self.path = ""
        self.output = ""
        self.warnings: list[str] = []
        self.closed = False
        self.cancel_fd: int | None = None       # a readable fd here means: stop (watch's next save)
        self.limit = untrusted.MAX_REPLY        # bytes one reply may hold (set per request by the judge)
        chan.setblocking(False)
        self._out, self._in = bytearray(), bytearray()
        self._sent = self._got = 0
        self._replies: dict[int, object] = {}

    def call(self, msg: dict) -> dict:
        """Send one request; the reply, or RoomFailure with the user's line when the room died or hung."""
        return self.result(self.submit(msg))

    def submit(self, msg: dict) -> int:
        """Queue a request without waiting for its reply (the judge works meanwhile); a ticket for result()."""
        if self.closed:
            raise RoomFailure(UserProblem("crash", t("room.ended")))
        try:
            self._out += wire.encode(msg)
        except wire.WireError as exc:
            raise RoomFailure(UserProblem("runner", t("room.cannot_send", why=exc)))
        self._pump(lambda: not self._out, block=False)
        self._sent += 1
        self.in_flight += 1
        return self._sent - 1

    def result(self, ticket: int) -> dict:
        """The reply to a submitted request (replies come in order; earlier ones are kept)."""
        deadline = time.monotonic() + max(0.0, self.budget - self.used) + GRACE_S
        while ticket not in self._replies:
            self._pump(lambda: self._parse() or ticket in self._replies, deadline=deadline)
        reply = self._replies.pop(ticket)
        self.in_flight -= 1
        try:
            used, output, warnings = untrusted.reply_meta(reply)
        except untrusted.Unreadable as exc:
            self.close()
            raise RoomFailure(UserProblem("runner", str(exc))) from None
        if used is not None and used >= self.used:
            self.used = used
        if output is not None:
            self.output = output
        if warnings is not None:
            self.warnings = warnings
        return reply

    def memory(self, reset: bool = False) -> dict:
        """This room's resident memory and its peak, as the kernel counts them (see Zygote.memory)."""
        return self.zygote.memory(self.pid, reset)

    def _parse(self) -> bool:
        """Decode every complete message in the inbox; True when one was."""
        try:
            messages = untrusted.take_messages(self._in, self.limit)
        except untrusted.TooBig as exc:
            self.close()
            raise RoomFailure(UserProblem("runner", str(exc))) from None
        except untrusted.Unreadable as exc:
            self.close()
            raise RoomFailure(UserProblem("runner", t("room.unreadable", why=exc))) from None
        for msg in messages:
            self._replies[self._got] = msg
            self._got += 1
        return bool(messages)

    def _pump(self, done, block: bool = True, deadline: float | None = None) -> None:
        """Move bytes both ways until done(); reading while writing, so neither side can block the other."""
        while not done():
            if deadline is not None and time.monotonic() >= deadline:
                raise self._died(hung=True)
            left = 0.0 if not block else (None if deadline is None else max(0.0, deadline - time.monotonic()))
            watch = [self.chan] + ([self.cancel_fd] if self.cancel_fd is not None else [])
            readable, writable, _ = select.select(watch, [self.chan] if self._out else [], [], left)
            if self.cancel_fd is not None and self.cancel_fd in readable:
                self.close()
                raise Cancelled()
            try:
                if self.chan in writable:
                    sent = self.chan.send(self._out[:1 << 20])
                    del self._out[:sent]
                if self.chan in readable:
                    part = self.chan.recv(1 << 20)
                    if not part:
                        raise self._died()
                    self._in += part
                    if len(self._in) > untrusted.inbox_limit(self.limit):
                        self.close()
                        raise RoomFailure(UserProblem("runner", t("room.too_big", mib=max(1, self.limit >> 20))))
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                raise self._died() from None
            if not block and not readable and not writable:
                return

    def _died(self, hung: bool = False) -> RoomFailure:
        if hung:
            status = self.zygote.kill(self.pid)
        else:
            status = self.zygote.wait(self.pid, 2.0)
            if status is None:
                status = self.zygote.kill(self.pid)
        self.closed = True
        dump = self._read_dump()
        self._close_fds()
        return RoomFailure(untrusted.death(dump, status, self.budget, hung, self.path))

    def _read_dump(self) -> str:
        chunks = []
        try:
            os.set_blocking(self.tb_fd, False)
            while True:
                part = os.read(self.tb_fd, 1 << 16)
                if not part or sum(map(len, chunks)) > untrusted.MAX_DUMP:
                    break
                chunks.append(part)
        except (OSError, BlockingIOError):
            pass
        return b"".join(chunks).decode(errors="replace")

    def _close_fds(self) -> None:
        try:
            self.chan.close()
        except OSError:
            pass
        if self.tb_fd is not None:
            try:
                os.close(self.tb_fd)
            except OSError:
                pass
            self.tb_fd = None

    def close(self) -> None:
        """End the room and everything it started."""
        if self.closed:
            return
        self.closed = True
        try:
            self.chan.setblocking(True)
            self.chan.settimeout(0.5)
            self.chan.sendall(bytes(self._out) + wire.encode({"op": "end"}))
        except (OSError, wire.WireError):
            pass
        self.zygote.release(self.pid)
        self._close_fds()
