"""Multi-head self-attention under autocast, with scores and softmax kept in float32
(reference solution for `mixed_precision`)."""
import math

import torch
import torch.nn as nn


class MixedPrecisionAttention(nn.Module):
    """Self-attention whose projections run in a low-precision dtype under torch.autocast while
    the attention core (Q Kᵀ, scaling, masking, softmax, weights @ V) runs in float32.

    MixedPrecisionAttention(hidden_dim, num_heads, dropout=0.1, amp_dtype=torch.bfloat16)
    forward(x, key_padding_mask=None, attn_mask=None)
      x:                (B, L, hidden_dim), usually float32 (the master weights' dtype)
      key_padding_mask: (B, L) bool, True = padding (that key is ignored by every query)
      attn_mask:        (L, L) or (B, L, L) bool, True = may attend
      returns           (B, L, hidden_dim) in x's dtype
    """

    def __init__(self, hidden_dim: int, num_heads: int, dropout: float = 0.1,
                 amp_dtype: torch.dtype = torch.bfloat16):
        super().__init__()
        if hidden_dim % num_heads != 0:
            raise ValueError(f"hidden_dim={hidden_dim} is not divisible by num_heads={num_heads}")
        self.hidden_dim = hidden_dim
        self.num_heads = num_heads
        self.head_dim = hidden_dim // num_heads
        self.amp_dtype = amp_dtype
        self.qkv_proj = nn.Linear(hidden_dim, 3 * hidden_dim, bias=False)  # rows: [W_q; W_k; W_v]
        self.out_proj = nn.Linear(hidden_dim, hidden_dim, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, key_padding_mask=None, attn_mask=None):
        B, L, E = x.shape
        H, D = self.num_heads, self.head_dim
        device_type = x.device.type
        core = torch.promote_types(x.dtype, torch.float32)            # float32 (float64 stays float64)
        with torch.autocast(device_type=device_type, dtype=self.amp_dtype):
            q, k, v = self.qkv_proj(x).split(E, dim=-1)              # 3 x (B, L, E), low precision
            q = q.view(B, L, H, D).transpose(1, 2)                     # (B, H, L, D)
            k = k.view(B, L, H, D).transpose(1, 2)                     # (B, H, L, D)
            v = v.view(B, L, H, D).transpose(1, 2)                     # (B, H, L, D)

            # autocast would cast a matmul of float32 tensors back down: switch it off here
            with torch.autocast(device_type=device_type, enabled=False):
                scores = torch.matmul(q.to(core), k.to(core).transpose(-2, -1)) / math.sqrt(D)  # (B, H, L, L)
                if key_padding_mask is not None:
                    scores = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
                if attn_mask is not None:
                    if attn_mask.dim() == 3:
                        attn_mask = attn_mask.unsqueeze(1)             # (B, 1, L, L): same for every head
                    scores = scores.masked_fill(attn_mask.logical_not(), float("-inf"))
                weights = torch.softmax(scores, dim=-1)                # over keys, in float32
                weights = self.dropout(weights)
                out = torch.matmul(weights, v.to(core))                # (B, H, L, D)

            out = out.to(v.dtype).transpose(1, 2).contiguous().view(B, L, E)  # (B, L, E), back to v's dtype
            out = self.out_proj(out)                                   # low precision
        return out.to(x.dtype)
