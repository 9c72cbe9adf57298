"""Probes for `decode_sampling` (they run beside the submission and hold no answers).

TinyLM is the model the statement describes: one causal attention layer over learned token and
position embeddings, with a KV cache, built from weights the case gives. The probes hand it to
`generate`:

run           generate(model, prompt, uniforms, **kwargs) -> (tokens, probs)
calls         the same, and the (length, start_pos) of every model call it made
distribution  one call with many copies of one prompt and seeded uniforms: what it drew"""
import math

import torch


class TinyLM:
    """weights: tok_emb (V, E), pos_emb (max_len, E), qkv (3E, E), out (E, E), lm_head (V, E)."""

    def __init__(self, weights: dict, num_heads: int, dtype=torch.float64):
        self.w = {n: t.to(dtype) for n, t in weights.items()}
        self.num_heads = num_heads
        self.max_len = self.w["pos_emb"].shape[0]
        self.k_cache = self.v_cache = None
        self.length = 0
        self.calls = []

    def init_cache(self, batch_size: int) -> None:
        E = self.w["tok_emb"].shape[1]
        H = self.num_heads
        shape = (batch_size, H, self.max_len, E // H)
        self.k_cache = torch.zeros(shape, dtype=self.w["tok_emb"].dtype)
        self.v_cache = torch.zeros(shape, dtype=self.w["tok_emb"].dtype)
        self.length = 0

    def __call__(self, input_ids: torch.Tensor, start_pos: int) -> torch.Tensor:
        w = self.w
        B, L = input_ids.shape
        E = w["tok_emb"].shape[1]
        H = self.num_heads
        D = E // H
        self.calls.append([int(L), int(start_pos)])
        if self.k_cache is None or self.k_cache.shape[0] != B:
            raise RuntimeError(f"call model.init_cache({B}) before the first model call")
        if start_pos + L > self.max_len:
            raise ValueError(f"positions {start_pos}..{start_pos + L - 1} do not fit in max_len={self.max_len}")
        pos = torch.arange(start_pos, start_pos + L)
        x = w["tok_emb"][input_ids] + w["pos_emb"][pos]                      # (B, L, E)
        q, k, v = (x @ w["qkv"].T).split(E, dim=-1)                         # 3 x (B, L, E)
        q = q.view(B, L, H, D).transpose(1, 2)                              # (B, H, L, D)
        self.k_cache[:, :, start_pos:start_pos + L] = k.view(B, L, H, D).transpose(1, 2)
        self.v_cache[:, :, start_pos:start_pos + L] = v.view(B, L, H, D).transpose(1, 2)
        end = start_pos + L
        keys, values = self.k_cache[:, :, :end], self.v_cache[:, :, :end]   # (B, H, end, D)
        scores = q @ keys.transpose(-2, -1) / math.sqrt(D)                  # (B, H, L, end)
        keep = torch.ones(L, end, dtype=torch.bool).tril(diagonal=start_pos)
        scores = scores.masked_fill(~keep, float("-inf"))
        att = torch.softmax(scores, dim=-1) @ values                        # (B, H, L, D)
        x = x + att.transpose(1, 2).reshape(B, L, E) @ w["out"].T           # (B, L, E)
        return x @ w["lm_head"].T                                           # (B, L, V)


def _model(p) -> TinyLM:
    return TinyLM(p.args["weights"], p.args["num_heads"], p.dtype)


def run(p):
    model = _model(p)
    return p.target(model, p.inputs["prompt"].clone(), p.inputs["uniforms"], **p.kwargs)


def calls(p):
    model = _model(p)
    out = p.target(model, p.inputs["prompt"].clone(), p.inputs["uniforms"], **p.kwargs)
    tokens = out[0] if isinstance(out, (tuple, list)) and out else out
    return {"calls": model.calls, "tokens": tokens if isinstance(tokens, torch.Tensor) else None}


def distribution(p):
    """p.args: copies (how many rows share the one prompt), steps. The uniforms come from the case's
    seeded generator, here."""
    model = _model(p)
    copies, steps = int(p.args["copies"]), int(p.args["steps"])
    prompt = p.inputs["prompt"].expand(copies, -1).contiguous()
    u = torch.rand(copies, steps, generator=p.generator(), dtype=torch.float64).to(p.dtype)
    out = p.target(model, prompt, u, **p.kwargs)
    tokens = out[0] if isinstance(out, (tuple, list)) and out else out
    probs = out[1] if isinstance(out, (tuple, list)) and len(out) > 1 else None
    return {"tokens": tokens if isinstance(tokens, torch.Tensor) else None,
            "probs": probs if isinstance(probs, torch.Tensor) else None}
