"""Rotary position embeddings (RoPE) in self-attention, Meta-Llama layout (reference solution for `rope`)."""
import math

import torch
import torch.nn as nn


def precompute_rope_freqs(dim: int, seq_len: int, theta: float = 10000.0) -> torch.Tensor:
    """Rotations for positions 0..seq_len-1 as unit complex numbers.

    Returns freqs_cis of shape (seq_len, dim // 2), complex64:
      freqs_cis[m, i] = exp(1j * m * theta ** (-2 * i / dim)),  i = 0 .. dim/2 - 1
    """
    inv_freq = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))  # (dim/2,)
    t = torch.arange(seq_len, dtype=torch.float64)                                     # (seq_len,)
    angles = torch.outer(t, inv_freq)                                                   # (seq_len, dim/2)
    return torch.polar(torch.ones_like(angles), angles).to(torch.complex64)


def apply_rotary_pos_emb(x: torch.Tensor, freqs_cis: torch.Tensor) -> torch.Tensor:
    """Rotate each pair of adjacent dims (2i, 2i+1) of x by the angle of freqs_cis.

    x:         (..., L, D), D even
    freqs_cis: (L, D // 2) complex
    returns    x's shape and dtype. Computed in float32 (float64 when x is float64).
    """
    *lead, L, D = x.shape
    real = torch.float64 if x.dtype == torch.float64 else torch.float32
    complex_dtype = torch.complex128 if real == torch.float64 else torch.complex64
    pairs = x.to(real).reshape(*lead, L, D // 2, 2)           # (..., L, D/2, 2): (x[2i], x[2i+1])
    xc = torch.view_as_complex(pairs)                          # (..., L, D/2)
    rotated = xc * freqs_cis.to(complex_dtype)                 # (L, D/2) broadcasts over the leading dims
    out = torch.view_as_real(rotated).reshape(*lead, L, D)     # (..., L, D)
    return out.to(x.dtype)


class RoPESelfAttention(nn.Module):
    """Multi-head self-attention with RoPE on queries and keys (not on values).

    forward(x, freqs_cis, key_padding_mask=None)
      x:                (B, L, hidden_dim)
      freqs_cis:        (L_max, head_dim // 2) complex, L_max >= L; rows 0..L-1 are used
      key_padding_mask: (B, L) bool, True = padding (that key is ignored by every query)
      returns           (B, L, hidden_dim)
    """

    def __init__(self, hidden_dim: int, num_heads: int, dropout: float = 0.1):
        super().__init__()
        if hidden_dim % num_heads != 0:
            raise ValueError(f"hidden_dim={hidden_dim} is not divisible by num_heads={num_heads}")
        self.hidden_dim = hidden_dim
        self.num_heads = num_heads
        self.head_dim = hidden_dim // num_heads
        self.qkv_proj = nn.Linear(hidden_dim, 3 * hidden_dim, bias=False)  # rows: [W_q; W_k; W_v]
        self.out_proj = nn.Linear(hidden_dim, hidden_dim, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, freqs_cis: torch.Tensor,
                key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        B, L, E = x.shape
        H, D = self.num_heads, self.head_dim
        q, k, v = self.qkv_proj(x).split(E, dim=-1)                  # 3 x (B, L, E)
        q = q.view(B, L, H, D).transpose(1, 2)                         # (B, H, L, D)
        k = k.view(B, L, H, D).transpose(1, 2)                         # (B, H, L, D)
        v = v.view(B, L, H, D).transpose(1, 2)                         # (B, H, L, D)

        freqs_cis = freqs_cis[:L]                                      # (L, D/2)
        q = apply_rotary_pos_emb(q, freqs_cis)                         # (B, H, L, D)
        k = apply_rotary_pos_emb(k, freqs_cis)                         # (B, H, L, D)

        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(D)  # (B, H, L, L)
        if key_padding_mask is not None:
            scores = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
        weights = torch.softmax(scores, dim=-1)                        # over keys
        weights = self.dropout(weights)
        out = torch.matmul(weights, v)                                 # (B, H, L, D)
        out = out.transpose(1, 2).contiguous().view(B, L, E)           # (B, L, E)
        return self.out_proj(out)
