"""Sliding-window (local) attention: each query sees only the keys within window_size positions
(reference solution for `sliding_window`)."""
import math

import torch
import torch.nn as nn


def create_sliding_window_mask(seq_len: int, window_size: int, device=None,
                               bidirectional: bool = False) -> torch.Tensor:
    """(seq_len, seq_len) bool, True = query i may attend to key j.

    causal:        0 <= i - j < window_size   (window_size keys, the query's own position included)
    bidirectional: |i - j| < window_size       (2 * window_size - 1 keys, centred on the query)
    """
    pos = torch.arange(seq_len, device=device)
    distance = pos[:, None] - pos[None, :]                # (L, L): i - j, query on rows
    if bidirectional:
        return distance.abs() < window_size
    return (distance >= 0) & (distance < window_size)


class SlidingWindowAttention(nn.Module):
    """Multi-head self-attention restricted to a sliding window.

    forward(x, key_padding_mask=None)
      x:                (B, L, hidden_dim)
      key_padding_mask: (B, L) bool, True = padding (that key is ignored by every query)
      returns           (B, L, hidden_dim)
    """

    def __init__(self, hidden_dim: int, num_heads: int, window_size: int, dropout: float = 0.1,
                 bidirectional: bool = False):
        super().__init__()
        if hidden_dim % num_heads != 0:
            raise ValueError(f"hidden_dim={hidden_dim} is not divisible by num_heads={num_heads}")
        self.hidden_dim = hidden_dim
        self.num_heads = num_heads
        self.head_dim = hidden_dim // num_heads
        self.window_size = window_size
        self.bidirectional = bidirectional
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
        keep = create_sliding_window_mask(L, self.window_size, x.device, self.bidirectional)  # (L, L)
        scores = scores.masked_fill(keep.logical_not(), float("-inf"))
        if key_padding_mask is not None:
            scores = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))

        weights = torch.softmax(scores, dim=-1)                        # over keys
        weights = self.dropout(weights)
        out = torch.matmul(weights, v)                                 # (B, H, L, D)
        out = out.transpose(1, 2).contiguous().view(B, L, E)           # (B, L, E)
        return self.out_proj(out)
