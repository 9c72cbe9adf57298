"""Attention pooling with a learnable query (reference for `attention_pooling`)."""
import math

import torch
import torch.nn as nn


class AttentionPooling(nn.Module):
    """Pools a sequence (B, L, hidden_dim) into one vector (B, hidden_dim) with a learned query.

    self.query (1, 1, hidden_dim) is split into num_heads heads of head_dim = hidden_dim // num_heads;
    each head attends over the L positions with its own slice of the keys and values.

    forward(x, mask=None)
      x:    (B, L, hidden_dim)
      mask: (B, L) bool, True = padding (that position gets zero weight)
      returns (B, hidden_dim)
    """

    def __init__(self, hidden_dim: int, num_heads: int = 1):
        super().__init__()
        if hidden_dim % num_heads != 0:
            raise ValueError(f"hidden_dim={hidden_dim} is not divisible by num_heads={num_heads}")
        self.hidden_dim = hidden_dim
        self.num_heads = num_heads
        self.head_dim = hidden_dim // num_heads
        self.query = nn.Parameter(torch.randn(1, 1, hidden_dim))
        self.key_proj = nn.Linear(hidden_dim, hidden_dim, bias=False)
        self.value_proj = nn.Linear(hidden_dim, hidden_dim, bias=False)
        self.out_proj = nn.Linear(hidden_dim, hidden_dim)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        B, L, E = x.shape
        H, D = self.num_heads, self.head_dim
        q = self.query.view(1, 1, H, D).transpose(1, 2)                 # (1, H, 1, D): shared by the batch
        k = self.key_proj(x).view(B, L, H, D).transpose(1, 2)          # (B, H, L, D)
        v = self.value_proj(x).view(B, L, H, D).transpose(1, 2)        # (B, H, L, D)

        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(D)   # (B, H, 1, L)
        if mask is not None:
            scores = scores.masked_fill(mask[:, None, None, :], float("-inf"))
        weights = torch.softmax(scores, dim=-1)                         # over positions
        pooled = torch.matmul(weights, v)                               # (B, H, 1, D)
        pooled = pooled.reshape(B, E)                                   # (B, E): heads side by side
        return self.out_proj(pooled)
