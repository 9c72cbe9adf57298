"""Causal (autoregressive) self-attention with a lower-triangular mask (reference for `causal`)."""
import math

import torch
import torch.nn as nn


def generate_causal_mask(seq_len: int, device: torch.device | str | None) -> torch.Tensor:
    """The causal mask for a sequence of seq_len tokens, built with torch.ones and torch.tril.

    returns (seq_len, seq_len) on `device`; entry [i, j] is 1 (keep) when j <= i, else 0 (masked).
    """
    ones = torch.ones(seq_len, seq_len, device=device)  # (L, L)
    return torch.tril(ones)                              # (L, L): 1 on and below the diagonal


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention in which position i attends only to positions j <= i.

    forward(x, key_padding_mask=None)
      x:                (B, L, hidden_dim)
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

    def forward(self, x: torch.Tensor, key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        B, L, E = x.shape
        H, D = self.num_heads, self.head_dim
        q, k, v = self.qkv_proj(x).split(E, dim=-1)                  # 3 x (B, L, E)
        q = q.view(B, L, H, D).transpose(1, 2)                         # (B, H, L, D)
        k = k.view(B, L, H, D).transpose(1, 2)                         # (B, H, L, D)
        v = v.view(B, L, H, D).transpose(1, 2)                         # (B, H, L, D)

        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(D)  # (B, H, L, L)
        causal_mask = generate_causal_mask(L, x.device)                # (L, L), 1 = keep
        scores = scores.masked_fill(causal_mask == 0, float("-inf"))  # broadcasts over (B, H)
        if key_padding_mask is not None:
            scores = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))

        weights = torch.softmax(scores, dim=-1)                        # over keys
        weights = self.dropout(weights)
        out = torch.matmul(weights, v)                                 # (B, H, L, D)
        out = out.transpose(1, 2).contiguous().view(B, L, E)           # (B, L, E)
        return self.out_proj(out)
