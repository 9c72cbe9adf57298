"""Probes for `beam_search` (they run beside the submission and hold no answers).

TinyLM is the model the statement describes: one causal attention layer over learned token and
position embeddings, with a KV cache whose rows can be reordered, built from weights the case gives.

run  beam_search(model, prompt, **kwargs) -> (sequences, scores)"""
import torch

from attn_drill.room import kit


class TinyLM(kit.TinyLM):
    """kit.TinyLM with lm_bias, and a cache whose rows can be reordered."""

    def reorder_cache(self, beam_idx: torch.Tensor) -> None:
        """Row n of the new cache is row beam_idx[n] of the old one (beam_idx (N,) int64)."""
        if not isinstance(beam_idx, torch.Tensor) or beam_idx.dim() != 1 or beam_idx.shape[0] != self.k_cache.shape[0]:
            raise ValueError(f"reorder_cache expects a ({self.k_cache.shape[0]},) int64 tensor of row indices")
        self.k_cache = self.k_cache.index_select(0, beam_idx.long())
        self.v_cache = self.v_cache.index_select(0, beam_idx.long())


def run(p):
    model = TinyLM(p.args["weights"], p.args["num_heads"], p.dtype)
    return p.target(model, p.inputs["prompt"].clone(), **p.kwargs)
