"""Probes for `rope_cached_decode` (they run beside the submission and hold no answers)."""
import torch

from attn_drill.room import kit


def _run(m, x, freqs_cis, schedule, max_len):
    """init_cache, then forward on consecutive chunks of x (lengths `schedule`) at start_pos 0, n0, ..."""
    B, L, _ = x.shape
    if sum(schedule) != L:
        raise ValueError(f"grader: schedule {schedule} does not cover {L} positions")
    m.init_cache(B, max_len, x.device)
    outs, pos = [], 0
    for n in schedule:
        outs.append(m(x[:, pos:pos + n], pos, freqs_cis))
        pos += n
    return outs


def decode(p):
    """A prefill and chunks (p.args["schedule"]) through the cache, then one forward of all of x from
    a fresh cache. Returns (incremental, full_forward), each (B, L, hidden_dim)."""
    x, freqs_cis = p.inputs["x"], p.inputs["freqs_cis"]
    incremental = torch.cat(_run(p.impl, x, freqs_cis, p.args["schedule"], p.args["max_len"]), dim=1)
    full = _run(p.impl, x, freqs_cis, [x.shape[1]], p.args["max_len"])[0]
    return incremental, full


def cache_state(p):
    """After the schedule (no gradients), the module's k_cache and v_cache as they are."""
    m = p.build()
    with torch.no_grad():
        _run(m, p.inputs["x"], p.inputs["freqs_cis"], p.args["schedule"], p.args["max_len"])
    return {a: kit.describe(getattr(m, a, None)) for a in ("k_cache", "v_cache")}
