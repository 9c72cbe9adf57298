"""The judge's side of the rooms: start a zygote, open a room per grading, talk to it, end it.

Nothing a room sends is trusted: a reply that cannot be read, an oversized one, one that never
comes, or a room that dies are all the submission's failure (RoomFailure), never a tool error.
"""
from __future__ import annotations

import json
import os
import re
import select
import socket
import sys
import time
from pathlib import Path

from .results import Frame, UserProblem
from .room import wire

GRACE_S = 5.0            # the judge waits this long past a room's own deadline before killing it


class RoomFailure(Exception):
    """The room died, hung, or sent something unreadable; `problem` says what, at the user's line."""

    def __init__(self, problem: UserProblem):
        super().__init__(problem.message)
        self.problem = problem


class Cancelled(Exception):
    """The client asked to stop this grading (watch: the file was saved again)."""


class Zygote:
    """A fork server for rooms: forked from this process (`fork`) or started in a sandbox (`spawn`)."""

    def __init__(self):
        self.control: socket.socket | None = None
        self.pid: int | None = None
        self.proc = None                  # a sandboxed zygote's Popen
        self.memory_gb = float(os.environ.get("ATTN_DRILL_MEMORY_GB", "6"))

    def fork(self) -> "Zygote":
        """Fork the zygote from this process; call before anything of the bank is imported."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            ours.close()
            from .room.zygote import forked
            forked(theirs)
        theirs.close()
        self.control, self.pid = ours, pid
        return self

    def spawn(self, argv_prefix: list[str], env: dict, cwd: str | None = None) -> "Zygote":
        """Start a zygote with exec (in a sandbox: argv_prefix is the bwrap command)."""
        import subprocess
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        fd = theirs.fileno()
        boot = f"import sys; sys.path.pop(0); from attn_drill.room.zygote import main; main({fd})"
        self.proc = subprocess.Popen([*argv_prefix, sys.executable, "-c", boot], pass_fds=(fd,), env=env,
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
        return json.loads(raw)

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
        pid = json.loads(raw)["pid"]
        return Room(self, pid, socket.socket(fileno=fds[0]), fds[1])

    def _stderr_tail(self) -> str:
        if self.proc is None or self.proc.poll() is None or self.proc.stderr is None:
            return ""
        return ": " + self.proc.stderr.read().decode(errors="replace")[-1500:]

    def wait(self, pid: int, timeout: float) -> int | None:
        try:
            return self._ask({"op": "wait", "pid": pid, "timeout": timeout}, timeout + 10)["status"]
        except (OSError, ValueError, KeyError):
            return None

    def release(self, pid: int) -> None:
        """The room was told to end: the zygote reaps it, or kills it after a grace."""
        try:
            self.control.send(json.dumps({"op": "release", "pid": pid}).encode())
        except OSError:
            pass

    def kill(self, pid: int) -> int | None:
        try:
            return self._ask({"op": "kill", "pid": pid}, 15)["status"]
        except (OSError, ValueError, KeyError):
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
        self.budget = 30.0
        self.used = 0.0
        self.path = ""
        self.output = ""
        self.warnings: list[str] = []
        self.closed = False
        self.cancel_fd: int | None = None       # a readable fd here means: stop (watch's next save)

    def call(self, msg: dict) -> dict:
        """Send one request; the reply, or RoomFailure with the user's line when the room died or hung."""
        if self.closed:
            raise RoomFailure(UserProblem("crash", "the grading process of your code has already ended"))
        try:
            wire.send(self.chan, msg)
        except (OSError, wire.WireError):
            raise self._died() from None
        deadline = time.monotonic() + max(0.0, self.budget - self.used) + GRACE_S
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._died(hung=True)
            watch = [self.chan] + ([self.cancel_fd] if self.cancel_fd is not None else [])
            ready, _, _ = select.select(watch, [], [], left)
            if self.cancel_fd is not None and self.cancel_fd in ready:
                self.close()
                raise Cancelled()
            if self.chan in ready:
                break
        self.chan.settimeout(max(1.0, deadline - time.monotonic()))
        try:
            reply = wire.recv(self.chan)
        except socket.timeout:
            raise self._died(hung=True) from None
        except wire.WireError as exc:
            self.close()
            raise RoomFailure(UserProblem("runner", f"your code's grading process sent back something that "
                                                    f"cannot be read ({exc})")) from None
        except OSError:
            raise self._died() from None
        finally:
            if not self.closed:
                self.chan.settimeout(None)
        if reply is None:
            raise self._died()
        if not isinstance(reply, dict):
            self.close()
            raise RoomFailure(UserProblem("runner", "your code's grading process sent back something that is "
                                                    "not a reply"))
        used = reply.get("used")
        if isinstance(used, (int, float)) and not isinstance(used, bool) and used >= self.used:
            self.used = float(used)
        if isinstance(reply.get("output"), str):
            self.output = reply["output"][-64_000:]
        if isinstance(reply.get("warnings"), list):
            self.warnings = [str(w)[:500] for w in reply["warnings"][:20]]
        return reply

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
        frames = frames_from_dump(dump, self.path)
        if "Timeout (" in dump or hung:
            msg = (f"timed out after {self.budget:.0f} s: an infinite loop, or far too much work for "
                   f"these sizes?")
            kind = "timeout"
        elif "os._exit(" in dump or "os.abort()" in dump:
            called = "os.abort()" if "os.abort()" in dump else re.search(r"os\._exit\(-?\d+\)", dump).group(0)
            msg = f"your code called {called}, which ended its grading process"
            kind = "crash"
        else:
            fatal = re.search(r"Fatal Python error: ([^\n]+)", dump)
            sig = f"signal {-status}" if isinstance(status, int) and status < 0 else \
                (f"exit code {status}" if status is not None else "no exit status")
            what = fatal.group(1).strip() if fatal else sig
            msg = f"your code crashed its grading process ({what})"
            if status == -9 and not fatal:
                msg += "; out of memory?"
            kind = "crash"
        if frames:
            msg += ("" if msg.endswith((".", "?", "!")) else ".") + \
                f" It was at {frames[-1].file}:{frames[-1].line} in {frames[-1].func}."
        return RoomFailure(UserProblem(kind, msg, frames))

    def _read_dump(self) -> str:
        chunks = []
        try:
            os.set_blocking(self.tb_fd, False)
            while True:
                part = os.read(self.tb_fd, 1 << 16)
                if not part or sum(map(len, chunks)) > 1 << 20:
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
            wire.send(self.chan, {"op": "end"})
        except (OSError, wire.WireError):
            pass
        self.zygote.release(self.pid)
        self._close_fds()


def frames_from_dump(dump: str, path) -> list[Frame]:
    """The user's frames from a faulthandler dump (innermost last)."""
    if not path:
        return []
    target = str(Path(path).resolve())
    folder = str(Path(target).parent)
    frames = []
    for m in re.finditer(r'File "([^"]+)", line (\d+) in (\S+)', dump):
        file = m.group(1)
        try:
            full = str(Path(file).resolve())
        except (OSError, ValueError):
            continue
        if full == target or (full.startswith(folder + "/") and full.endswith(".py")
                              and "site-packages" not in full):
            line = int(m.group(2))
            try:
                code = Path(full).read_text(errors="replace").splitlines()[line - 1].strip()
            except (OSError, IndexError):
                code = ""
            frames.append(Frame(Path(full).name, line, m.group(3), code))
        if len(frames) >= 8:
            break
    # faulthandler prints the innermost frame first: reverse to read like a traceback
    return list(reversed(frames))
