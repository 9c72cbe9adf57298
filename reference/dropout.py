"""Multi-head self-attention with attention-weight dropout and output dropout (reference solution for `dropout`)."""
import math

import torch
import torch.nn as nn


class AttentionWithDropout(nn.Module):
    """Self-attention with two dropouts: on the attention weights and on the merged heads.

    forward(x, key_padding_mask=None, attn_mask=None)
      x:                (B, L, hidden_dim)
      key_padding_mask: (B, L) bool, True = padding (that key is ignored by every query)
      attn_mask:        (L, L) or (B, L, L) bool, True = may attend
      returns           (B, L, hidden_dim)
    Training: attn_dropout on the softmax weights (before weights @ V), output_dropout on the merged
    heads (before out_proj). Eval: no dropout at all.
    """

    def __init__(self, hidden_dim: int, num_heads: int, attn_dropout: float = 0.1, output_dropout: float = 0.1):
        super().__init__()
        if hidden_dim % num_heads != 0:
            raise ValueError(f"hidden_dim={hidden_dim} is not divisible by num_heads={num_heads}")
        self.hidden_dim = hidden_dim
        self.num_heads = num_heads
        self.head_dim = hidden_dim // num_heads
        self.qkv_proj = nn.Linear(hidden_dim, 3 * hidden_dim, bias=False)  # rows: [W_q; W_k; W_v]
        self.out_proj = nn.Linear(hidden_dim, hidden_dim, bias=False)
        self.attn_dropout = nn.Dropout(attn_dropout)
        self.output_dropout = nn.Dropout(output_dropout)

    def forward(self, x: torch.Tensor, key_padding_mask: torch.Tensor | None = None,
                attn_mask: torch.Tensor | None = None) -> torch.Tensor:
        B, L, E = x.shape
        H, D = self.num_heads, self.head_dim
        q, k, v = self.qkv_proj(x).split(E, dim=-1)                  # 3 x (B, L, E)
        q = q.view(B, L, H, D).transpose(1, 2)                         # (B, H, L, D)
        k = k.view(B, L, H, D).transpose(1, 2)                         # (B, H, L, D)
        v = v.view(B, L, H, D).transpose(1, 2)                         # (B, H, L, D)

        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(D)  # (B, H, L, L)
        if key_padding_mask is not None:
            scores = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
        if attn_mask is not None:
            if attn_mask.dim() == 3:
                attn_mask = attn_mask.unsqueeze(1)                     # (B, 1, L, L): same for every head
            scores = scores.masked_fill(attn_mask.logical_not(), float("-inf"))

        weights = torch.softmax(scores, dim=-1)                        # over keys
        weights = self.attn_dropout(weights)                           # zero with prob p, survivors / (1 - p)
        out = torch.matmul(weights, v)                                 # (B, H, L, D)
        out = out.transpose(1, 2).contiguous().view(B, L, E)           # (B, L, E)
        out = self.output_dropout(out)                                 # on the merged heads, before out_proj
        return self.out_proj(out)
