"""Probes for `beam_search` (they run beside the submission and hold no answers).

TinyLM is the model the statement describes: one causal attention layer over learned token and
position embeddings, with a KV cache whose rows can be reordered, built from weights the case gives.

run    beam_search(model, prompt, **kwargs) -> (sequences, scores)
calls  the same search; the model calls it made, as (rows, length, start_pos), and its sequences"""
import torch

from attn_drill.room import kit


class TinyLM(kit.TinyLM):
    """kit.TinyLM with lm_bias, and a cache whose rows can be reordered; each call is recorded with
    its number of rows."""

    def __call__(self, input_ids, start_pos):
        rows = int(input_ids.shape[0]) if isinstance(input_ids, torch.Tensor) and input_ids.dim() == 2 else -1
        n = len(self._log)
        try:
            return super().__call__(input_ids, start_pos)
        finally:
            if len(self._log) > n:
                self._log[n].insert(0, rows)

    def reorder_cache(self, beam_idx: torch.Tensor) -> None:
        """Row n of the new cache is row beam_idx[n] of the old one (beam_idx (N,) int64)."""
        if not isinstance(beam_idx, torch.Tensor) or beam_idx.dim() != 1 or beam_idx.shape[0] != self.k_cache.shape[0]:
            raise ValueError(f"reorder_cache expects a ({self.k_cache.shape[0]},) int64 tensor of row indices")
        self.k_cache = self.k_cache.index_select(0, beam_idx.long())
        self.v_cache = self.v_cache.index_select(0, beam_idx.long())


def run(p):
    model = TinyLM(p.args["weights"], p.args["num_heads"], p.dtype)
    return p.target(model, p.inputs["prompt"].clone(), **p.kwargs)


def calls(p):
    log = []                  # the model's record of its calls: held here, out of the submission's reach
    model = TinyLM(p.args["weights"], p.args["num_heads"], p.dtype, log)
    out = p.target(model, p.inputs["prompt"].clone(), **p.kwargs)
    seqs = out[0] if isinstance(out, (tuple, list)) and out and isinstance(out[0], torch.Tensor) else None
    return {"calls": log, "sequences": seqs}
