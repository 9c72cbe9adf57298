"""Probes for `int8_kv_cache` (they run beside the submission and hold no answers)."""
import torch

from attn_drill.room import kit


def _schedule(cache, q, k, v, schedule):
    """Feed q, k, v (B, H, L, D) to the cache chunk by chunk; the outputs joined along L."""
    outs, pos = [], 0
    with torch.no_grad():
        for n in schedule:
            outs.append(cache(q[:, :, pos:pos + n], k[:, :, pos:pos + n], v[:, :, pos:pos + n], pos))
            pos += n
    return torch.cat(outs, dim=2)


def run_cache(p):
    """A fresh Int8KVCache(B, H, max_len, D, dtype=the case dtype), then forward on consecutive chunks
    of the case's q, k, v (p.args["schedule"] lists the chunk lengths). Returns the joined outputs."""
    q, k, v = p.inputs["q"], p.inputs["k"], p.inputs["v"]
    B, H, _, D = q.shape
    cache = p.target(B, H, p.args["max_len"], D, dtype=p.dtype)
    return _schedule(cache, q, k, v, p.args["schedule"])


def storage(p):
    """The same drive as run_cache with sizes p.args["sizes"] = [B, H, max_len, D], then the cache's
    buffers as they are, and how many bytes of tensors the cache object holds."""
    q, k, v = p.inputs["q"], p.inputs["k"], p.inputs["v"]
    B, H, max_len, D = p.args["sizes"]
    cache = p.target(B, H, max_len, D, dtype=p.dtype)
    _schedule(cache, q, k, v, p.args["schedule"])
    out = {name: getattr(cache, name, None) for name in ("k_cache", "v_cache", "k_scale", "v_scale")}
    out["bytes"] = _held_bytes(cache)
    return out


def overflow(p):
    """Writes at the cache's edge, each on a fresh cache of p.args["max_len"] positions: filling it
    exactly (a prefill of max_len - 2, then 2), then one token at start_pos = max_len, then 3 at
    max_len - 1 after a prefill of max_len - 1. Each: {"value": "ok"} or the error raised."""
    q, k, v = p.inputs["q"], p.inputs["k"], p.inputs["v"]
    B, H, _, D = q.shape
    max_len = p.args["max_len"]
    steps = []
    with torch.no_grad():
        def fill():
            _schedule(p.target(B, H, max_len, D, dtype=p.dtype), q, k, v, [max_len - 2, 2])
            return "ok"
        steps.append(kit.attempt(fill))
        for start, n in ((max_len, 1), (max_len - 1, 3)):
            cache = p.target(B, H, max_len, D, dtype=p.dtype)
            _schedule(cache, q, k, v, [start])
            r = kit.attempt(cache, q[:, :, :n], k[:, :, :n], v[:, :, :n], start)
            steps.append({"value": "ok"} if "value" in r else r)
    return steps


def zero_rows(p):
    """quantize_int8 along the last axis of data with all-zero rows, and dequantize_int8 of the result."""
    q, scale = p.target(p.inputs["x"], dim=-1)
    return {"q": q, "scale": scale, "back": p.module.dequantize_int8(q, scale)}


def _held_bytes(obj) -> int:
    """The bytes of every distinct tensor storage reachable from an object's attributes (through
    lists, tuples, dicts and nested objects, a few levels deep)."""
    seen, total = set(), 0

    def walk(value, depth):
        nonlocal total
        if isinstance(value, torch.Tensor):
            storage = value.untyped_storage()
            key = storage.data_ptr()
            if key not in seen:
                seen.add(key)
                total += storage.nbytes()
        elif depth < 4 and isinstance(value, (list, tuple)):
            for item in value:
                walk(item, depth + 1)
        elif depth < 4 and isinstance(value, dict):
            for item in value.values():
                walk(item, depth + 1)
        elif depth < 4 and hasattr(value, "__dict__") and not isinstance(value, type):
            walk(vars(value), depth + 1)

    walk(vars(obj), 0)
    return total
