"""Multi-query attention and the size of a KV cache (reference for `mqa`)."""
import math

import torch
import torch.nn as nn


class MultiQueryAttention(nn.Module):
    """Self-attention with num_heads query heads that all share ONE key head and ONE value head.

    forward(x, key_padding_mask=None, attn_mask=None)
      x:                (B, L, hidden_dim)
      key_padding_mask: (B, L) bool, True = padding (that key is ignored by every query)
      attn_mask:        (L, L) or (B, L, L) bool, True = may attend (same for every head)
      returns           (B, L, hidden_dim)
    """

    def __init__(self, hidden_dim: int, num_heads: int, dropout: float = 0.1):
        super().__init__()
        if hidden_dim % num_heads != 0:
            raise ValueError(f"hidden_dim={hidden_dim} is not divisible by num_heads={num_heads}")
        self.hidden_dim = hidden_dim
        self.num_heads = num_heads
        self.head_dim = hidden_dim // num_heads
        self.q_proj = nn.Linear(hidden_dim, hidden_dim, bias=False)
        self.k_proj = nn.Linear(hidden_dim, self.head_dim, bias=False)   # one key head
        self.v_proj = nn.Linear(hidden_dim, self.head_dim, bias=False)   # one value head
        self.out_proj = nn.Linear(hidden_dim, hidden_dim, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, key_padding_mask: torch.Tensor | None = None,
                attn_mask: torch.Tensor | None = None) -> torch.Tensor:
        B, L, E = x.shape
        H, D = self.num_heads, self.head_dim
        q = self.q_proj(x).view(B, L, H, D).transpose(1, 2)             # (B, H, L, D)
        k = self.k_proj(x).unsqueeze(1)                                 # (B, 1, L, D): broadcast over heads
        v = self.v_proj(x).unsqueeze(1)                                 # (B, 1, L, D)

        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(D)   # (B, H, L, L)
        if key_padding_mask is not None:
            scores = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
        if attn_mask is not None:
            if attn_mask.dim() == 3:
                attn_mask = attn_mask.unsqueeze(1)                      # (B, 1, L, L): same for every head
            scores = scores.masked_fill(attn_mask.logical_not(), float("-inf"))

        weights = torch.softmax(scores, dim=-1)                         # over keys
        weights = self.dropout(weights)
        out = torch.matmul(weights, v)                                  # (B, H, L, D)
        out = out.transpose(1, 2).contiguous().view(B, L, E)            # (B, L, E)
        return self.out_proj(out)


def kv_cache_bytes(num_layers: int, hidden_dim: int, num_heads: int, num_kv_heads: int,
                   seq_len: int, batch_size: int, bytes_per_elem: int = 2) -> int:
    """Bytes a decoder's KV cache holds for batch_size sequences of seq_len tokens.

    head_dim = hidden_dim // num_heads. MHA: num_kv_heads == num_heads; GQA: fewer; MQA: 1.
    Every layer caches one key and one value vector of head_dim per KV head, token and sequence.
    Returns an int.
    """
    head_dim = hidden_dim // num_heads
    per_token_per_layer = 2 * num_kv_heads * head_dim               # K and V
    return num_layers * per_token_per_layer * seq_len * batch_size * bytes_per_elem
