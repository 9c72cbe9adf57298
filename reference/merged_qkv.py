"""Fusing the Q, K and V projections into one matrix product (reference for `merged_qkv`)."""
import math

import torch
import torch.nn as nn


def fuse_qkv(q_proj: nn.Linear, k_proj: nn.Linear, v_proj: nn.Linear) -> nn.Linear:
    """One nn.Linear(E_in, 3 * E_out) computing all three projections in a single matrix product.

    q_proj, k_proj, v_proj: nn.Linear(E_in, E_out), all with a bias or all without
    returns fused with fused(x).split(E_out, dim=-1) == (q_proj(x), k_proj(x), v_proj(x)):
      fused.weight (3 * E_out, E_in) = rows [W_q; W_k; W_v], fused.bias (3 * E_out,) = [b_q; b_k; b_v]
    """
    E_in, E_out = q_proj.in_features, q_proj.out_features
    w = q_proj.weight
    fused = nn.Linear(E_in, 3 * E_out, bias=q_proj.bias is not None, device=w.device, dtype=w.dtype)
    weight = torch.cat([q_proj.weight, k_proj.weight, v_proj.weight], dim=0)  # (3 * E_out, E_in)
    fused.weight = nn.Parameter(weight.detach().clone())
    if fused.bias is not None:
        bias = torch.cat([q_proj.bias, k_proj.bias, v_proj.bias], dim=0)      # (3 * E_out,)
        fused.bias = nn.Parameter(bias.detach().clone())
    return fused


class MergedQKVAttention(nn.Module):
    """Multi-head self-attention whose Q, K and V come from one fused projection.

    forward(x, key_padding_mask=None, attn_mask=None)
      x:                (B, L, hidden_dim)
      key_padding_mask: (B, L) bool, True = padding (that key is ignored by every query)
      attn_mask:        (L, L) or (B, L, L) bool, True = may attend
      returns           (B, L, hidden_dim)
    """

    def __init__(self, hidden_dim: int, num_heads: int, dropout: float = 0.1, bias: bool = False):
        super().__init__()
        if hidden_dim % num_heads != 0:
            raise ValueError(f"hidden_dim={hidden_dim} is not divisible by num_heads={num_heads}")
        self.hidden_dim = hidden_dim
        self.num_heads = num_heads
        self.head_dim = hidden_dim // num_heads
        self.qkv_proj = nn.Linear(hidden_dim, 3 * hidden_dim, bias=bias)  # rows: [W_q; W_k; W_v]
        self.out_proj = nn.Linear(hidden_dim, hidden_dim, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, key_padding_mask: torch.Tensor | None = None,
                attn_mask: torch.Tensor | None = None) -> torch.Tensor:
        B, L, E = x.shape
        H, D = self.num_heads, self.head_dim
        qkv = self.qkv_proj(x)                                         # (B, L, 3E): one matmul
        q, k, v = qkv.chunk(3, dim=-1)                                 # 3 x (B, L, E)
        q = q.view(B, L, H, D).transpose(1, 2)                         # (B, H, L, D)
        k = k.view(B, L, H, D).transpose(1, 2)                         # (B, H, L, D)
        v = v.view(B, L, H, D).transpose(1, 2)                         # (B, H, L, D)

        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(D)  # (B, H, L, L)
        if key_padding_mask is not None:
            scores = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
        if attn_mask is not None:
            if attn_mask.dim() == 3:
                attn_mask = attn_mask.unsqueeze(1)                     # (B, 1, L, L)
            scores = scores.masked_fill(attn_mask.logical_not(), float("-inf"))

        weights = torch.softmax(scores, dim=-1)                        # over keys
        weights = self.dropout(weights)
        out = torch.matmul(weights, v)                                 # (B, H, L, D)
        out = out.transpose(1, 2).contiguous().view(B, L, E)           # (B, L, E)
        return self.out_proj(out)
