"""Causal self-attention with RoPE and a KV cache: each key is rotated once, at its absolute position,
before it is cached (reference solution for `rope_cached_decode`)."""
import math

import torch
import torch.nn as nn


def _rotate(x: torch.Tensor, freqs_cis: torch.Tensor) -> torch.Tensor:
    """Turn adjacent pairs (2i, 2i+1) of x by the angles of freqs_cis (Meta Llama layout).

    x:         (B, H, L, D), D even
    freqs_cis: (L, D // 2) complex, row t for the t-th position of x
    returns    x's shape and dtype; computed in float64 for float64 x, in float32 otherwise
    """
    B, H, L, D = x.shape
    real = torch.float64 if x.dtype == torch.float64 else torch.float32
    cplx = torch.complex128 if real == torch.float64 else torch.complex64
    pairs = x.to(real).reshape(B, H, L, D // 2, 2)                     # (B, H, L, D/2, 2): (x[2i], x[2i+1])
    rotated = torch.view_as_complex(pairs) * freqs_cis.to(cplx)        # (B, H, L, D/2)
    return torch.view_as_real(rotated).reshape(B, H, L, D).to(x.dtype)


class RoPECachedAttention(nn.Module):
    """Causal multi-head self-attention with RoPE on q and k and a KV cache for decoding.

    init_cache(batch_size, max_len, device=None)
      k_cache, v_cache: zeros (batch_size, num_heads, max_len, head_dim) in the weights' dtype.
      k_cache holds keys already rotated at their own positions; v_cache holds plain values.

    forward(x, start_pos, freqs_cis)
      x:         (B, L, hidden_dim), the tokens at positions start_pos .. start_pos + L - 1
      start_pos: int, the position of x's first token (0 for the prefill)
      freqs_cis: (max_positions, head_dim // 2) complex, the rotation table from position 0
                 (freqs_cis[t, i] = exp(1j * t * theta ** (-2i / head_dim))), at least start_pos + L rows
      returns    (B, L, hidden_dim); query start_pos + i attends to cached positions 0 .. start_pos + i
    """

    def __init__(self, hidden_dim: int, num_heads: int):
        super().__init__()
        if hidden_dim % num_heads != 0:
            raise ValueError(f"hidden_dim={hidden_dim} is not divisible by num_heads={num_heads}")
        self.num_heads = num_heads
        self.head_dim = hidden_dim // num_heads
        self.qkv_proj = nn.Linear(hidden_dim, 3 * hidden_dim, bias=False)  # rows: [W_q; W_k; W_v]
        self.out_proj = nn.Linear(hidden_dim, hidden_dim, bias=False)
        self.k_cache: torch.Tensor | None = None
        self.v_cache: torch.Tensor | None = None

    def init_cache(self, batch_size: int, max_len: int, device: torch.device | str | None = None) -> None:
        dtype = self.qkv_proj.weight.dtype
        self.k_cache = torch.zeros(batch_size, self.num_heads, max_len, self.head_dim,
                                   device=device, dtype=dtype)        # (B, H, max_len, D)
        self.v_cache = torch.zeros_like(self.k_cache)                 # (B, H, max_len, D)

    def forward(self, x: torch.Tensor, start_pos: int, freqs_cis: torch.Tensor) -> torch.Tensor:
        B, L, E = x.shape
        H, D = self.num_heads, self.head_dim
        end = start_pos + L
        q, k, v = self.qkv_proj(x).split(E, dim=-1)                  # 3 x (B, L, E)
        q = q.view(B, L, H, D).transpose(1, 2)                         # (B, H, L, D)
        k = k.view(B, L, H, D).transpose(1, 2)                         # (B, H, L, D)
        v = v.view(B, L, H, D).transpose(1, 2)                         # (B, H, L, D)

        freqs = freqs_cis[start_pos:end]                               # (L, D/2): this chunk's positions
        q = _rotate(q, freqs)                                          # (B, H, L, D)
        k = _rotate(k, freqs)                                          # (B, H, L, D)

        self.k_cache[:, :, start_pos:end] = k                          # rotated once, never again
        self.v_cache[:, :, start_pos:end] = v
        keys = self.k_cache[:, :, :end]                                # (B, H, end, D)
        values = self.v_cache[:, :, :end]                              # (B, H, end, D)

        scores = torch.matmul(q, keys.transpose(-2, -1)) / math.sqrt(D)  # (B, H, L, end)
        # query i sits at position start_pos + i and sees keys 0 .. start_pos + i (bottom-right aligned)
        keep = torch.ones(L, end, dtype=torch.bool, device=x.device).tril(diagonal=start_pos)  # (L, end)
        scores = scores.masked_fill(keep.logical_not(), float("-inf"))
        weights = torch.softmax(scores, dim=-1)                        # over keys
        out = torch.matmul(weights, values)                            # (B, H, L, D)
        out = out.transpose(1, 2).contiguous().view(B, L, E)           # (B, L, E)
        return self.out_proj(out)
