"""Grouped-query attention: few KV heads shared by groups of query heads (reference for `gqa`)."""
import math

import torch
import torch.nn as nn


class GroupedQueryAttention(nn.Module):
    """Self-attention with num_query_heads query heads and num_kv_heads shared key/value heads.

    Query head h reads KV head h // (num_query_heads // num_kv_heads): consecutive query heads
    form a group that shares one KV head.

    forward(x, key_padding_mask=None, attn_mask=None)
      x:                (B, L, hidden_dim)
      key_padding_mask: (B, L) bool, True = padding (that key is ignored by every query)
      attn_mask:        (L, L) or (B, L, L) bool, True = may attend (same for every head)
      returns           (B, L, hidden_dim)
    """

    def __init__(self, hidden_dim: int, num_query_heads: int, num_kv_heads: int, dropout: float = 0.1):
        super().__init__()
        if hidden_dim % num_query_heads != 0:
            raise ValueError(f"hidden_dim={hidden_dim} is not divisible by "
                             f"num_query_heads={num_query_heads}")
        if num_query_heads % num_kv_heads != 0:
            raise ValueError(f"num_query_heads={num_query_heads} is not divisible by num_kv_heads={num_kv_heads}")
        self.hidden_dim = hidden_dim
        self.num_query_heads = num_query_heads
        self.num_kv_heads = num_kv_heads
        self.head_dim = hidden_dim // num_query_heads
        self.num_groups = num_query_heads // num_kv_heads      # query heads per KV head
        self.q_proj = nn.Linear(hidden_dim, num_query_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden_dim, num_kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden_dim, num_kv_heads * self.head_dim, bias=False)
        self.out_proj = nn.Linear(num_query_heads * self.head_dim, hidden_dim, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, key_padding_mask: torch.Tensor | None = None,
                attn_mask: torch.Tensor | None = None) -> torch.Tensor:
        B, L, E = x.shape
        Hq, Hkv, G, D = self.num_query_heads, self.num_kv_heads, self.num_groups, self.head_dim
        q = self.q_proj(x).view(B, L, Hq, D).transpose(1, 2)            # (B, Hq, L, D)
        k = self.k_proj(x).view(B, L, Hkv, D).transpose(1, 2)           # (B, Hkv, L, D)
        v = self.v_proj(x).view(B, L, Hkv, D).transpose(1, 2)           # (B, Hkv, L, D)

        # share each KV head with its G consecutive query heads: query head h -> KV head h // G
        k = k[:, :, None].expand(B, Hkv, G, L, D).reshape(B, Hq, L, D)  # (B, Hq, L, D)
        v = v[:, :, None].expand(B, Hkv, G, L, D).reshape(B, Hq, L, D)  # (B, Hq, L, D)

        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(D)   # (B, Hq, L, L)
        if key_padding_mask is not None:
            scores = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
        if attn_mask is not None:
            if attn_mask.dim() == 3:
                attn_mask = attn_mask.unsqueeze(1)                      # (B, 1, L, L): same for every head
            scores = scores.masked_fill(attn_mask.logical_not(), float("-inf"))

        weights = torch.softmax(scores, dim=-1)                         # over keys
        weights = self.dropout(weights)
        out = torch.matmul(weights, v)                                  # (B, Hq, L, D)
        out = out.transpose(1, 2).contiguous().view(B, L, Hq * D)       # (B, L, Hq * D)
        return self.out_proj(out)
