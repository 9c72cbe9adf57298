"""The fork server rooms come from: it imports torch and this package (never the bank), blocks the
fused kernels once, then forks one room per request. It never runs submitted code itself.

It is either forked from the judge process before the judge loads anything of the bank (grading
in the user's own folder), or started inside an OS sandbox (bubblewrap) for someone else's code.

Control requests, one JSON object per datagram on a SOCK_SEQPACKET socket:
  {"op": "fork", "memory_gb", "preload"}  -> {"pid"} with two file descriptors: the room's channel, the read end
                                  of its traceback pipe
  {"op": "wait", "pid", "timeout"} -> {"status": exit status or null}   (negative: killed by a signal)
  {"op": "kill", "pid"}          -> {"status"}: the room's whole process group, SIGKILL
  {"op": "release", "pid"}       no answer: the room was told to end; reaped, or killed after a grace
  {"op": "memory", "pid", "reset"} -> {"rss", "hwm"}: the room's resident memory and its peak, in bytes, as
                                  the kernel counts them (read here, outside the room); reset: the peak
                                  starts again from now
  {"op": "scrub"}                -> {"killed"}: in a sandbox only (its own pid namespace), every process but
                                  this one, its ancestors and its spare room is killed (what a student's code
                                  left running), and reaped; then /submission is made again from /handed-in
  {"op": "quit"} or end of stream -> every room killed, exit
"""
from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time

SUBMISSION = "/submission"    # in a sandbox: where the code runs, an in-memory folder of the sandbox's own
HANDED_IN = "/handed-in"      # in a sandbox: the host's copy of the student's files, read-only


def _warm_steps():
    """Pay torch's first-use costs here once, not in every room: autograd with explicit grad_outputs
    and torch.testing import sympy (0.3 s), autocast, complex ops, dispatch modes, custom Functions.
    One step at a time, so the zygote can answer between them."""
    import warnings

    import torch

    from .tracer import OpTracer
    warnings.simplefilter("ignore")
    x = torch.randn(2, 3, 4, requires_grad=True)
    with OpTracer():
        y = torch.softmax(x @ x.transpose(-1, -2) / 2, dim=-1) @ x
    yield
    torch.autograd.grad(y, x, torch.ones_like(y))
    yield
    torch.testing.assert_close(y, y)
    yield
    with torch.autocast("cpu", dtype=torch.bfloat16):
        torch.nn.functional.linear(x, torch.randn(5, 4)).sum()
    torch.view_as_real(torch.view_as_complex(torch.randn(3, 2)) * torch.polar(torch.ones(3), torch.zeros(3)))
    yield
    torch.nn.MultiheadAttention(4, 2, batch_first=True)(x, x, x)
    yield
    torch.autograd.gradcheck(lambda a: (a * a).sum(), (torch.randn(3, dtype=torch.float64, requires_grad=True),),
                             fast_mode=True)
    warnings.resetwarnings()


def _preload(names) -> bool:
    """Modules a submission will import (matplotlib takes 0.4 s): imported here, before the fork.
    True when something new was imported."""
    new = False
    for name in names or ():
        if not isinstance(name, str) or name in sys.modules:
            continue
        try:
            if name.split(".")[0] == "matplotlib":
                import matplotlib
                matplotlib.use("Agg", force=True)
            __import__(name)
            new = True
        except Exception:  # noqa: BLE001 - the room reports the import error itself
            pass
    return new


def serve(control: socket.socket, blocks: bool = True, contained: bool = False) -> None:
    """blocks: the fused kernels raise in every room of this zygote (always, but in the trusted one
    bench times torch's own attention in); contained: it runs in a pid namespace of its own (a
    sandbox), so `scrub` may end every other process it sees."""
    import select

    from . import guards, kit, runner, side, usercode  # noqa: F401 - imported once here, not in every room
    os.environ.setdefault("MPLBACKEND", "Agg")
    if blocks:
        guards.install_dispatch_blocks()
    if contained:
        _stage()
    rooms: set[int] = set()
    released: dict[int, float] = {}     # pid -> when to kill it if it has not ended by itself
    warming = None
    spare = None                        # a room forked ahead of its request: (pid, channel, traceback pipe)
    spare_memory = None
    try:
        while True:
            _reap(rooms, released)
            idle = warming is not None
            ready, _, _ = select.select([control], [], [], 0 if idle else (0.2 if released else None))
            if not ready:
                if warming is not None:          # between requests: one more warming step
                    try:
                        next(warming)
                    except StopIteration:
                        warming = None
                    except Exception:  # noqa: BLE001 - warming is an optimisation only
                        warming = None
                continue
            try:
                raw = control.recv(65536)
            except OSError:
                break
            if not raw:
                break
            try:
                msg = json.loads(raw)
            except ValueError:
                continue
            op = msg.get("op")
            if op == "fork":
                memory_gb = float(msg.get("memory_gb", 6.0))
                if (_preload(msg.get("preload")) or memory_gb != spare_memory) and spare is not None:
                    _drop(spare, rooms)         # it was forked without what this request needs
                    spare = None
                _hand(control, spare or _spawn(control, rooms, memory_gb))
                spare, spare_memory = _spawn(control, rooms, memory_gb), memory_gb   # the next one, ahead
                if warming is None and msg.get("warm", True) and not getattr(serve, "warmed", False):
                    serve.warmed = True
                    warming = _warm_steps()      # while the first room works: the next ones start warm
            elif op == "wait":
                control.send(json.dumps({"status": _wait(int(msg["pid"]), float(msg.get("timeout", 0)),
                                                         rooms)}).encode())
            elif op == "kill":
                pid = int(msg["pid"])
                _kill(pid, rooms)
                control.send(json.dumps({"status": _wait(pid, 5.0, rooms)}).encode())
            elif op == "release":                # no answer: ended rooms are reaped here
                released[int(msg["pid"])] = time.monotonic() + float(msg.get("grace", 2.0))
            elif op == "memory":
                pid = int(msg["pid"])
                control.send(json.dumps(_memory(pid, bool(msg.get("reset"))) if pid in rooms else
                                        {"rss": None, "hwm": None}).encode())
            elif op == "scrub":
                keep = {spare[0]} if spare is not None else set()
                killed = 0
                if contained:
                    killed = _scrub(keep, rooms)
                    _stage()                     # nothing of the student's runs now: their folder afresh
                control.send(json.dumps({"killed": killed}).encode())
            elif op == "quit":
                break
    finally:
        if spare is not None:
            spare[1].close()
            os.close(spare[2])
        for pid in list(rooms):
            _kill(pid, rooms)
            _wait(pid, 1.0, rooms)


def _memory(pid: int, reset: bool) -> dict:
    """VmRSS and VmHWM of a room (bytes), read from /proc; the peak reset first when asked."""
    try:
        if reset:
            with open(f"/proc/{pid}/clear_refs", "w") as fh:
                fh.write("5")                  # 5: reset the peak resident set size to the current one
        out = {"rss": None, "hwm": None}
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "VmHWM"):
                    out["rss" if key == "VmRSS" else "hwm"] = int(value.split()[0]) * 1024
        return out
    except (OSError, ValueError):
        return {"rss": None, "hwm": None}


def _scrub(keep: set, rooms: set) -> int:
    """Kill every process of this pid namespace but this one, its ancestors and `keep`; reap ours."""
    mine, ancestors = os.getpid(), set()
    pid = mine
    while pid > 1:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                pid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
        ancestors.add(pid)
    killed = 0
    for _ in range(3):                         # what was forked while we killed: again
        others = [int(n) for n in os.listdir("/proc") if n.isdigit() and int(n) not in keep | ancestors | {mine}]
        if not others:
            break
        for pid in others:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except OSError:
                pass
        for pid in others:
            if pid in rooms:
                _wait(pid, 1.0, rooms)
        time.sleep(0.02)
    while True:                                # orphans re-parented to us are ours to reap too
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                break
        except ChildProcessError:
            break
    return killed


def _stage() -> None:
    """Empty /submission (a link is removed, never followed) and copy /handed-in into it. The host
    writes only /handed-in, which nothing in the sandbox can write: what a student's code planted
    stays in the sandbox's memory and is gone here."""
    import shutil
    for entry in os.scandir(SUBMISSION):
        try:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
        except OSError:
            pass
    try:
        shutil.copytree(HANDED_IN, SUBMISSION, symlinks=True, dirs_exist_ok=True)
    except (OSError, shutil.Error) as exc:
        print(f"attn-drill: the student's files could not be copied into the sandbox: {exc}", file=sys.stderr)


def _kill(pid: int, rooms: set) -> None:
    if pid in rooms:
        for kill in (os.killpg, os.kill):
            try:
                kill(pid, signal.SIGKILL)
            except OSError:
                pass


def _reap(rooms: set, released: dict) -> None:
    now = time.monotonic()
    for pid in list(released):
        if _wait(pid, 0.0, rooms) is not None or pid not in rooms:
            released.pop(pid, None)
        elif now > released[pid]:
            _kill(pid, rooms)


def _spawn(control, rooms: set, memory_gb: float) -> tuple[int, socket.socket, int]:
    """Fork a room: it warms itself up (its own copy-on-write faults) and waits for its first request."""
    import gc
    gc.freeze()       # what exists now is never traversed by a room's collector: no copy-on-write storm
    chan_judge, chan_room = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    tb_r, tb_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            control.close()
            chan_judge.close()
            os.close(tb_r)
            from .runner import main
            main(chan_room, tb_w, memory_gb)
        finally:
            os._exit(3)  # not reached: the room leaves by its own exit
    chan_room.close()
    os.close(tb_w)
    rooms.add(pid)
    return pid, chan_judge, tb_r


def _hand(control, room) -> None:
    pid, chan_judge, tb_r = room
    try:
        socket.send_fds(control, [json.dumps({"pid": pid}).encode()], [chan_judge.fileno(), tb_r])
    finally:
        chan_judge.close()
        os.close(tb_r)


def _drop(room, rooms: set) -> None:
    pid, chan_judge, tb_r = room
    chan_judge.close()
    os.close(tb_r)
    _kill(pid, rooms)
    _wait(pid, 1.0, rooms)


def _wait(pid: int, timeout: float, rooms: set):
    if pid not in rooms:
        return None
    deadline = time.monotonic() + timeout
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            rooms.discard(pid)
            return None
        if done:
            rooms.discard(pid)
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.005)


def main(fd: int, blocks: bool = True, contained: bool = False) -> None:
    """Entry point of a zygote started by exec (in a sandbox, or bench's trusted one):
    `python -I -c "... from attn_drill.room.zygote import main; main(FD)"`."""
    import torch
    torch.set_num_threads(1)
    control = socket.socket(fileno=fd)
    serve(control, blocks, contained)
    sys.exit(0)


def forked(control: socket.socket, keep_fds=()) -> None:
    """Entry point in a child forked from the judge (torch already imported). Never returns."""
    try:
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        os.dup2(devnull, 1)                          # the judge's answers to its client stay the judge's
        keep = {0, 1, 2, control.fileno(), *keep_fds}
        for fd in range(3, 256):
            if fd not in keep:
                try:
                    os.close(fd)
                except OSError:
                    pass
        serve(control)
    finally:
        os._exit(0)
