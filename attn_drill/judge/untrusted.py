"""Every byte that comes from a room, turned into typed data here and nowhere else.

A room runs code under judgement, so whatever it sends (its framed replies, the fields in them,
the traceback it leaves in its pipe when it dies) is untrusted input: it may be malformed, oversized
or crafted. The functions below are the only readers of that input in the judge. Each checks
sizes, types and depth and returns plain, bounded values; what cannot be read raises Unreadable,
which the judge turns into the submission's failure (never a tool error, never a traceback).

    take_messages(inbox)      complete framed messages out of the bytes received so far
    reply_meta(reply)         the bookkeeping every reply carries: time used, prints, warnings
    side(reply)               one side of a case (outputs, gradients, ops, ...) as a room.side.Side
    problem(p)                a UserProblem the room reports (an exception, a missing name ...)
    bench_timing(reply) ...   the numbers of a `bench` room
    death(...)                what the traceback pipe of a room that died or hung says
    zygote_reply(raw)         a control reply of the fork server
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import torch

from ..bank.sources import read_regular
from ..i18n import t
from ..results import Frame, UserProblem, printable
from ..room import wire
from ..room.side import Side
from ..room.tracer import OpRecord

MAX_NAME = 200            # an output, gradient or parameter name
MAX_MESSAGE = 4000        # a problem's message
MAX_FRAMES = 16
MAX_OUTPUT = 64_000       # what the code printed, kept per grading
MAX_WARNINGS = 20
MAX_OPS = 400_000         # op records in one side's trace
MAX_OPS_TEXT = 64 << 20
MAX_DUMP = 1 << 20        # bytes of a traceback pipe read
MAX_REPLY = 256 << 20     # bytes of one reply when the judge expects no more than a few outputs


def text(value, limit: int) -> str:
    """A text from the room, cut to `limit` characters and made printable (no control characters)."""
    return printable(str(value)[:limit])


class Unreadable(ValueError):
    """Something a room sent that cannot be read as what it claims to be."""


class TooBig(Unreadable):
    """A reply larger than its case allows."""


# ---------------------------------------------------------------- framing
def take_messages(inbox: bytearray, limit: int = MAX_REPLY) -> list:
    """Decode and remove every complete message at the front of `inbox` (bytes received from a
    room); the rest stays for the next call. Unreadable when a header is not ours, announces more
    than `limit` bytes, or a body does not decode."""
    out = []
    while len(inbox) >= wire.HEADER_SIZE:
        total = wire.frame_size(bytes(inbox[:wire.HEADER_SIZE]))
        if total is None:
            raise Unreadable(t("room.not_protocol"))
        if total > limit + wire.HEADER_SIZE:
            raise TooBig(t("room.too_big", mib=max(1, limit >> 20)))
        if len(inbox) < total:
            break
        raw = bytes(inbox[:total])
        del inbox[:total]
        try:
            out.append(wire.decode(raw))
        except wire.WireError as exc:
            raise Unreadable(str(exc)) from None
    return out


def inbox_limit(limit: int = MAX_REPLY) -> int:
    """The most bytes a room may have in flight toward the judge: two replies of `limit` bytes
    (the judge asks for at most one case ahead)."""
    return 2 * (limit + wire.HEADER_SIZE)


# ---------------------------------------------------------------- replies
def _count(v) -> float | None:
    """A finite number of ordinary size, or None (an int past float's range is no count either)."""
    if isinstance(v, int) and not isinstance(v, bool):
        return float(v) if abs(v) < 2 ** 63 else None
    return v if isinstance(v, float) and math.isfinite(v) else None


def reply_meta(reply) -> tuple[float | None, str | None, list[str] | None]:
    """(seconds the room has worked in all, what the code printed, its warnings), each None when the
    reply does not carry a readable one."""
    if not isinstance(reply, dict):
        raise Unreadable(t("room.not_reply"))
    used = _count(reply.get("used"))
    output = printable(reply["output"][-MAX_OUTPUT:]) if isinstance(reply.get("output"), str) else None
    warnings = [text(w, 500) for w in reply["warnings"][:MAX_WARNINGS]] \
        if isinstance(reply.get("warnings"), list) else None
    return used, output, warnings


def problem(p) -> UserProblem:
    """A problem the room reports about the code (its kind, message and the user's frames)."""
    try:
        frames = [Frame(text(f[0], MAX_NAME), int(f[1]), text(f[2], MAX_NAME), text(f[3], 500))
                  for f in (p.get("frames") or [])[:MAX_FRAMES]]
        kind, message = p.get("kind", "runner"), p.get("message", "")
        if not isinstance(kind, str) or not isinstance(message, str):
            raise TypeError("kind and message must be texts")
        return UserProblem(text(kind, 30), text(message, MAX_MESSAGE), frames)
    except (AttributeError, TypeError, ValueError, IndexError, KeyError, OverflowError):
        return UserProblem("runner", t("engine.unreadable_reply", why="?"))


def side(reply) -> Side:
    """The side of a case a room sent back; a reply that cannot be read becomes the side's problem."""
    if isinstance(reply, dict) and reply.get("problem") and not reply.get("side"):
        return Side(problem=problem(reply["problem"]))
    try:
        return _side(reply.get("side") if isinstance(reply, dict) else None)
    except (ValueError, TypeError, KeyError, RecursionError, ArithmeticError) as exc:
        return Side(problem=UserProblem("runner", t("engine.unreadable_reply", why=exc)))


def _side(d) -> Side:
    if not isinstance(d, dict):
        raise Unreadable("the reply is not a mapping")
    out = Side()
    outs = d.get("outs") or []
    if not isinstance(outs, list) or not all(isinstance(p, list) and len(p) == 2 and isinstance(p[0], str)
                                             for p in outs):
        raise Unreadable("malformed outputs")
    out.outs = [(text(n, MAX_NAME), v) for n, v in outs]
    grads = d.get("grads") or {}
    if not isinstance(grads, dict) or not all(isinstance(k, str) and (v is None or isinstance(v, torch.Tensor))
                                              for k, v in grads.items()):
        raise Unreadable("malformed gradients")
    out.grads = grads
    if d.get("problem") is not None:
        if not isinstance(d["problem"], dict) or not isinstance(d["problem"].get("message"), str) or \
                not isinstance(d["problem"].get("kind"), str):
            raise Unreadable("malformed problem")
        out.problem = problem(d["problem"])
    ops = d.get("ops") or "[]"
    if not isinstance(ops, str) or len(ops) > MAX_OPS_TEXT:
        raise Unreadable("malformed op trace")
    ops = json.loads(ops)
    if not isinstance(ops, list) or len(ops) > MAX_OPS:
        raise Unreadable("malformed op trace")
    out.ops = [op_record(o) for o in ops]
    dropped = d.get("ops_dropped") or 0
    out.ops_dropped = dropped if isinstance(dropped, int) and not isinstance(dropped, bool) and dropped >= 0 else 1
    seconds = _count(d.get("seconds"))
    out.seconds = seconds if seconds is not None and seconds >= 0 else 0.0
    mutated = d.get("mutated") or []
    out.mutated = [text(m, 100) for m in mutated[:100]] if isinstance(mutated, list) else []
    nd = d.get("nondeterministic")
    out.nondeterministic = text(nd, 500) if nd else None
    out.adapted = text(d.get("adapted") or "", 1000)
    mapping = d.get("mapping") or {}
    if not isinstance(mapping, dict) or not all(isinstance(k, str) for k in mapping):
        raise Unreadable("malformed parameter mapping")
    out.mapping = mapping
    w = d.get("weights")
    out.weights = w if isinstance(w, torch.Tensor) else None
    used = d.get("weights_used")
    out.weights_used = used if isinstance(used, bool) else None
    out.obs = d.get("obs")
    return out


_DTYPES = {n: getattr(torch, n) for n in ("float64", "float32", "float16", "bfloat16", "complex64", "complex128",
                                          "int64", "int32", "int16", "int8", "uint8", "bool")}


def op_record(row) -> OpRecord:
    """One row of a room's op trace."""
    if not isinstance(row, list) or len(row) != 6:
        raise Unreadable("malformed op record")
    name, phase, dtypes, ins, outs, numel = row
    if not (isinstance(name, str) and isinstance(phase, str) and isinstance(numel, int)
            and isinstance(dtypes, list) and isinstance(ins, list) and isinstance(outs, list)):
        raise Unreadable("malformed op record")
    return OpRecord(_op_name(name), _op_name(phase)[:20], tuple(_DTYPES.get(d) if isinstance(d, str) else None
                                                       for d in dtypes),
                    tuple(_shape(s) for s in ins), tuple(_shape(s) for s in outs), int(numel))


def _shape(s) -> tuple:
    """A tensor's sizes as a room reports them: a list of at most 16 whole numbers, each in range."""
    if type(s) is not list or len(s) > 16:
        raise Unreadable("malformed op record")
    for v in s:
        if type(v) is not int or not 0 <= v < _MAX_SIZE:      # (a bool's type is bool, not int)
            raise Unreadable("malformed op record")
    return tuple(s)


_MAX_SIZE = 2 ** 48
_OP_NAMES: dict[str, str] = {}       # an op's name as a room sent it -> as it may be shown (most repeat)


def _op_name(name: str) -> str:
    shown = _OP_NAMES.get(name)
    if shown is None:
        shown = text(name, MAX_NAME)
        if len(_OP_NAMES) < 4096:
            _OP_NAMES[name] = shown
    return shown


def loaded(reply) -> UserProblem | None:
    """The answer to a room's `load`: None when the file loaded, else why it did not."""
    if not isinstance(reply, dict):
        raise Unreadable(t("room.not_reply"))
    return problem(reply["problem"]) if reply.get("problem") else None


# ---------------------------------------------------------------- bench rooms
def bench_timing(reply) -> tuple[float, list]:
    """(seconds, [(name, value)] outputs) of one timed call."""
    seconds = _count(reply.get("seconds")) if isinstance(reply, dict) else None
    outs = reply.get("outs") if isinstance(reply, dict) else None
    if seconds is None or seconds < 0 or not isinstance(outs, list) or not all(
            isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) for p in outs):
        raise Unreadable("malformed timing reply")
    return seconds, [(text(n, MAX_NAME), v) for n, v in outs]


def bench_profile(reply) -> tuple[dict | None, float | None]:
    """(the largest intermediate tensor: {op, shape, numel, bytes, dtype}, FLOPs) of one profiled call."""
    if not isinstance(reply, dict):
        raise Unreadable("malformed profile reply")
    largest = reply.get("largest")
    if largest is not None:
        if not isinstance(largest, dict):
            raise Unreadable("malformed profile reply")
        largest = {"op": text(largest.get("op", ""), MAX_NAME),
                   "shape": [int(s) for s in (largest.get("shape") or [])[:16]],
                   "numel": int(largest.get("numel") or 0), "bytes": int(largest.get("bytes") or 0),
                   "dtype": text(largest.get("dtype", ""), 20)}
    return largest, _count(reply.get("flops"))


# ---------------------------------------------------------------- a room that died
def frames_from_dump(dump: str, path) -> list[Frame]:
    """The user's frames (the file and helper files beside it) from a faulthandler dump, innermost
    last."""
    if not path:
        return []
    target = str(Path(path).resolve())
    folder = str(Path(target).parent)
    frames = []
    for m in re.finditer(r'File "([^"]+)", line (\d+) in (\S+)', dump[:MAX_DUMP]):
        file = m.group(1)
        try:
            full = str(Path(file).resolve())
        except (OSError, ValueError):
            continue
        if full == target or (full.startswith(folder + "/") and full.endswith(".py")
                              and "site-packages" not in full):
            line = int(m.group(2))
            source = read_regular(full)           # the room may have left a FIFO under a .py name
            try:
                code = text(source.splitlines()[line - 1].strip(), 500) if source else ""
            except IndexError:
                code = ""
            frames.append(Frame(text(Path(full).name, MAX_NAME), line, text(m.group(3), MAX_NAME), code))
        if len(frames) >= 8:
            break
    # faulthandler prints the innermost frame first: reverse to read like a traceback
    return list(reversed(frames))


def death(dump: str, status: int | None, budget: float, hung: bool, path) -> UserProblem:
    """Why a room stopped, at the user's line: a timeout, an os._exit, a signal, a fatal error."""
    dump = dump[:MAX_DUMP]
    frames = frames_from_dump(dump, path)
    if "Timeout (" in dump or hung:
        msg, kind = t("room.timeout", s=f"{budget:.0f}"), "timeout"
    elif "os._exit(" in dump or "os.abort()" in dump:
        called = "os.abort()" if "os.abort()" in dump else \
            (re.search(r"os\._exit\(-?\d+\)", dump) or re.search(r"os\._exit\(", dump)).group(0)
        msg, kind = t("room.exit", called=text(called, 40)), "crash"
    else:
        fatal = re.search(r"Fatal Python error: ([^\n]{0,300})", dump)
        sig = t("room.signal", n=-status) if isinstance(status, int) and status < 0 else \
            (t("room.exit_code", n=status) if status is not None else t("room.no_status"))
        msg = t("room.crash", what=text(fatal.group(1).strip(), 300) if fatal else sig)
        if status == -9 and not fatal:
            msg += t("room.oom")
        kind = "crash"
    if frames:
        msg += ("" if msg.endswith((".", "?", "!", "。", "？")) else t("room.stop")) + \
            t("room.was_at", file=frames[-1].file, line=frames[-1].line, func=frames[-1].func)
    return UserProblem(kind, msg, frames)


# ---------------------------------------------------------------- the fork server
def zygote_reply(raw: bytes) -> dict:
    """A control reply of the zygote: a JSON object of numbers (pid, status)."""
    try:
        msg = json.loads(raw)
    except (ValueError, RecursionError):
        raise Unreadable("the room server sent an unreadable reply") from None
    if not isinstance(msg, dict):
        raise Unreadable("the room server sent an unreadable reply")
    return {k: v for k, v in msg.items() if isinstance(k, str) and (v is None or isinstance(v, int))}
