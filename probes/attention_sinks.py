"""Probes for `attention_sinks` (they run beside the submission and hold no answers): stream the
case's tokens through the module in chunks, and read the cache after a stream."""
import torch


def _run(m, x, schedule):
    if sum(schedule) != x.shape[1]:
        raise ValueError(f"grader: schedule {list(schedule)} does not cover {x.shape[1]} tokens")
    m.init_cache(x.shape[0], x.device)
    outs, pos = [], 0
    for n in schedule:
        outs.append(m(x[:, pos:pos + n]))
        pos += n
    return torch.cat(outs, dim=1)


def stream(p):
    """init_cache(B), then forward on consecutive chunks of x (p.args["schedule"] lists their
    lengths); returns the outputs, concatenated along the sequence."""
    return _run(p.impl, p.inputs["x"], p.args["schedule"])


def stream_state(p):
    """The same stream without gradients, then the module's cache as it is: k_cache, v_cache and
    cache_index, plus the module's own k_proj and v_proj of the whole stream (reshaped to heads) so
    that the check can tell which tokens the cache holds."""
    m, x = p.build(), p.inputs["x"]
    B, L, E = x.shape
    with torch.no_grad():
        _run(m, x, p.args["schedule"])
        H = p.init["num_heads"]
        keys = m.k_proj(x).view(B, L, H, E // H).transpose(1, 2)      # (B, H, L, D)
        values = m.v_proj(x).view(B, L, H, E // H).transpose(1, 2)    # (B, H, L, D)
    obs = {}
    for name in ("k_cache", "v_cache", "cache_index"):
        value = getattr(m, name, None)
        obs[name] = value.detach() if isinstance(value, torch.Tensor) else repr(type(value).__name__)
    obs["keys"], obs["values"] = keys, values
    return obs
