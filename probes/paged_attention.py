"""Probes for `paged_attention` (they run beside the submission and hold no answers)."""


def nan_poison(p):
    """paged_attention on copies of the pool in which the slots marked in p.args["empty"]
    (num_blocks, block_size), the ones that hold no token, are NaN."""
    empty = p.args["empty"]
    key_cache = p.inputs["key_cache"].clone()
    value_cache = p.inputs["value_cache"].clone()
    key_cache[empty] = float("nan")
    value_cache[empty] = float("nan")
    return p.target(p.inputs["query"], key_cache, value_cache, p.inputs["block_tables"], p.inputs["context_lens"],
                    **p.kwargs)


def write_then_attend(p):
    """write_kv of the new rows into copies of the pool, then paged_attention over it. Returns the two
    pools after the write and the attention output."""
    key_cache = p.inputs["key_cache"].clone()
    value_cache = p.inputs["value_cache"].clone()
    p.module.write_kv(p.inputs["key"], p.inputs["value"], key_cache, value_cache, p.inputs["slot_mapping"])
    out = p.module.paged_attention(p.inputs["query"], key_cache, value_cache, p.inputs["block_tables"],
                                   p.inputs["context_lens"])
    return key_cache, value_cache, out
