"""Framed messages between the judge and a room: a JSON header and raw tensor bytes.

Both sides use it; the judge decodes whatever a room sends as untrusted input, so decoding checks
every size, dtype and shape and raises WireError (the submission's failure, never a tool error).

A message is  b"ADW1" | u64 header length | u64 blob length | header (UTF-8 JSON) | blobs.
Values: None, bool, int, float (also NaN/inf), str, bytes, list, tuple, dict (any encodable keys),
torch.Tensor (any device; decoded on CPU unless its device is available), torch.dtype, torch.device.
"""
from __future__ import annotations

import base64
import json
import math
import struct

MAGIC = b"ADW1"
MAX_HEADER = 64 << 20          # JSON part of one message
MAX_BLOBS = 1 << 30            # tensor bytes in one message
MAX_TENSORS = 20_000
MAX_DEPTH = 64
_HEAD = struct.Struct("<4sQQ")
HEADER_SIZE = _HEAD.size


def frame_size(head: bytes) -> int | None:
    """The whole size of the message that starts with this header, or None if it is not one of ours."""
    magic, hlen, blen = _HEAD.unpack(head)
    if magic != MAGIC or hlen > MAX_HEADER or blen > MAX_BLOBS:
        return None
    return _HEAD.size + hlen + blen


class WireError(ValueError):
    """A message that cannot be read: malformed, oversized, or of an unknown kind."""


def _torch():
    import torch
    return torch


def _dtypes():
    torch = _torch()
    names = ("float64", "float32", "float16", "bfloat16", "complex64", "complex128", "int64", "int32", "int16",
             "int8", "uint8", "bool")
    return {n: getattr(torch, n) for n in names}


# ---------------------------------------------------------------- encoding
def encode(obj) -> bytes:
    blobs: list[bytes] = []
    metas: list[dict] = []
    header = json.dumps({"v": _enc(obj, blobs, metas, 0), "t": metas}, allow_nan=False,
                        ensure_ascii=False).encode("utf-8")
    data = b"".join(blobs)
    return _HEAD.pack(MAGIC, len(header), len(data)) + header + data


def _enc(x, blobs, metas, depth):
    if depth > MAX_DEPTH:
        raise WireError("value nested too deeply")
    if x is None or isinstance(x, (bool, str)):
        return x
    if isinstance(x, int):
        return x if abs(x) < 2 ** 62 else {"$big": str(x)}
    if isinstance(x, float):
        return x if math.isfinite(x) else {"$f": repr(x)}
    if isinstance(x, (bytes, bytearray)):
        return {"$b": base64.b64encode(bytes(x)).decode("ascii")}
    if isinstance(x, list):
        return [_enc(v, blobs, metas, depth + 1) for v in x]
    if isinstance(x, tuple):
        return {"$tu": [_enc(v, blobs, metas, depth + 1) for v in x]}
    if isinstance(x, dict):
        return {"$d": [[_enc(k, blobs, metas, depth + 1), _enc(v, blobs, metas, depth + 1)] for k, v in x.items()]}
    torch = _torch()
    if isinstance(x, torch.Tensor):
        t = x.detach()
        device = t.device.type
        t = t.to("cpu").contiguous()
        name = str(t.dtype).replace("torch.", "")
        if name not in _dtypes():
            raise WireError(f"tensors of dtype {name} cannot be sent")
        raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        metas.append({"dtype": name, "shape": list(t.shape), "n": len(raw), "device": device})
        blobs.append(raw)
        return {"$t": len(metas) - 1}
    if isinstance(x, torch.dtype):
        return {"$dt": str(x).replace("torch.", "")}
    if isinstance(x, torch.device):
        return {"$dev": str(x)}
    if hasattr(x, "__index__") and not isinstance(x, (float, complex)):
        return int(x)   # numpy integers
    if hasattr(x, "item") and hasattr(x, "dtype") and getattr(x, "ndim", 1) == 0:
        return _enc(x.item(), blobs, metas, depth)   # numpy scalars
    if isinstance(x, complex):
        return {"$c": [x.real if math.isfinite(x.real) else repr(x.real), x.imag if math.isfinite(x.imag) else
                       repr(x.imag)]}
    raise WireError(f"a {type(x).__name__} cannot be sent; send tensors, numbers, strings, lists or dicts")


# ---------------------------------------------------------------- decoding
def decode(msg: bytes):
    if len(msg) < _HEAD.size:
        raise WireError("message too short")
    magic, hlen, blen = _HEAD.unpack_from(msg)
    if magic != MAGIC:
        raise WireError("not a message of this protocol")
    if hlen > MAX_HEADER or blen > MAX_BLOBS or _HEAD.size + hlen + blen != len(msg):
        raise WireError("message sizes do not add up")
    try:
        header = json.loads(msg[_HEAD.size:_HEAD.size + hlen].decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise WireError(f"unreadable header ({exc})") from None
    except RecursionError:
        raise WireError("value nested too deeply") from None
    if not isinstance(header, dict) or not isinstance(header.get("t"), list) or len(header["t"]) > MAX_TENSORS:
        raise WireError("malformed header")
    tensors = _tensors(header["t"], memoryview(msg)[_HEAD.size + hlen:], blen)
    return _dec(header.get("v"), tensors, 0)


def _tensors(metas, blob, blen):
    torch = _torch()
    dtypes = _dtypes()
    out, pos = [], 0
    for m in metas:
        if not isinstance(m, dict) or m.get("dtype") not in dtypes or not isinstance(m.get("shape"), list):
            raise WireError("malformed tensor entry")
        shape = m["shape"]
        if len(shape) > 16 or not all(isinstance(s, int) and not isinstance(s, bool) and 0 <= s < 2 ** 40
                                      for s in shape):
            raise WireError("malformed tensor shape")
        dtype = dtypes[m["dtype"]]
        size = torch.empty((), dtype=dtype).element_size()
        n = math.prod(shape) * size
        if m.get("n") != n or pos + n > blen:
            raise WireError("tensor bytes do not match its shape")
        if n:
            # a copy in torch's own (aligned) memory: kernels run on it as on any tensor
            t = torch.frombuffer(bytearray(blob[pos:pos + n]), dtype=torch.uint8).view(dtype).reshape(shape).clone()
        else:
            t = torch.empty(shape, dtype=dtype)
        device = m.get("device", "cpu")
        if device == "cuda" and torch.cuda.is_available():
            t = t.to("cuda")
        out.append(t)
        pos += n
    if pos != blen:
        raise WireError("extra bytes after the tensors")
    return out


def _dec(x, tensors, depth):
    if depth > MAX_DEPTH:
        raise WireError("value nested too deeply")
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    if isinstance(x, list):
        return [_dec(v, tensors, depth + 1) for v in x]
    if not isinstance(x, dict) or len(x) != 1:
        raise WireError("malformed value")
    (tag, v), = x.items()
    if tag == "$t":
        if not isinstance(v, int) or not 0 <= v < len(tensors):
            raise WireError("bad tensor reference")
        return tensors[v]
    if tag == "$tu" and isinstance(v, list):
        return tuple(_dec(e, tensors, depth + 1) for e in v)
    if tag == "$d" and isinstance(v, list):
        out = {}
        for pair in v:
            if not isinstance(pair, list) or len(pair) != 2:
                raise WireError("malformed dict")
            k = _dec(pair[0], tensors, depth + 1)
            try:
                out[k] = _dec(pair[1], tensors, depth + 1)
            except TypeError:
                raise WireError("unhashable dict key") from None
        return out
    if tag == "$f" and v in ("nan", "inf", "-inf"):
        return float(v)
    if tag == "$big" and isinstance(v, str) and len(v) < 4000:
        try:
            return int(v)
        except ValueError:
            raise WireError("bad integer") from None
    if tag == "$b" and isinstance(v, str):
        try:
            return base64.b64decode(v.encode("ascii"), validate=True)
        except (ValueError, UnicodeEncodeError):
            raise WireError("bad bytes") from None
    if tag == "$dt" and v in _dtypes():
        return _dtypes()[v]
    if tag == "$dev" and isinstance(v, str) and v.split(":")[0] in ("cpu", "cuda", "meta"):
        return _torch().device(v)
    if tag == "$c" and isinstance(v, list) and len(v) == 2:
        parts = [float(p) if isinstance(p, str) and p in ("nan", "inf", "-inf") else p for p in v]
        if all(isinstance(p, (int, float)) and not isinstance(p, bool) for p in parts):
            return complex(*parts)
    raise WireError(f"unknown value kind {tag!r}")


# ---------------------------------------------------------------- sockets
def send(sock, obj) -> None:
    sock.sendall(encode(obj))


def recv(sock, limit: int = _HEAD.size + MAX_HEADER + MAX_BLOBS):
    """One message from a stream socket; None at a clean end of stream."""
    head = _read(sock, _HEAD.size)
    if head is None:
        return None
    magic, hlen, blen = _HEAD.unpack(head)
    if magic != MAGIC or hlen > MAX_HEADER or blen > MAX_BLOBS or _HEAD.size + hlen + blen > limit:
        raise WireError("a message of this size or kind is not accepted")
    body = _read(sock, hlen + blen)
    if body is None:
        raise WireError("the message ended early")
    return decode(head + body)


def _read(sock, n: int) -> bytes | None:
    chunks, got = [], 0
    while got < n:
        part = sock.recv(min(n - got, 1 << 20))
        if not part:
            if got == 0:
                return None
            raise WireError("the message ended early")
        chunks.append(part)
        got += len(part)
    return b"".join(chunks)
