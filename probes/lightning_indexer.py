"""Probes for `lightning_indexer` (they run beside the submission and hold no answers)."""
import torch


def sorted_indices(p):
    """lightning_indexer, with the indices it returns sorted along their last axis: they are judged as a
    set per query, so their order does not matter. Anything else it returns is passed on as it is."""
    out = p.target(*p.inputs.values(), **p.kwargs)
    if isinstance(out, (tuple, list)) and len(out) == 2 and isinstance(out[1], torch.Tensor) \
            and not out[1].is_floating_point() and out[1].dim() >= 1:
        return out[0], out[1].sort(dim=-1).values
    return out


def pipeline(p):
    """DeepSeek sparse attention end to end: the indexer's top-k indices fed to sparse_attention.
    Returns the attention output."""
    a = p.inputs
    _, indices = p.module.lightning_indexer(a["q_index"], a["k_index"], a["weights"], p.args["topk"])
    return p.module.sparse_attention(a["q"], a["k"], a["v"], indices, **p.kwargs)
