"""T5 relative position bias: log-spaced distance buckets, one learned scalar per bucket and head
(reference solution for `t5_bias`)."""
import math

import torch
import torch.nn as nn


class T5RelativeBias(nn.Module):
    """A learned bias per (distance bucket, head), as in T5.

    forward(seq_len, device=None) -> (1, num_heads, seq_len, seq_len)
      bias[0, h, i, j] = relative_bias.weight[bucket(j - i), h]   (query i, key j)
    """

    def __init__(self, num_heads: int, num_buckets: int = 32, max_distance: int = 128,
                 bidirectional: bool = True):
        super().__init__()
        self.num_heads = num_heads
        self.num_buckets = num_buckets
        self.max_distance = max_distance
        self.bidirectional = bidirectional
        self.relative_bias = nn.Embedding(num_buckets, num_heads)

    @staticmethod
    def _relative_position_bucket(relative_position: torch.Tensor, num_buckets: int = 32,
                                  max_distance: int = 128, bidirectional: bool = True) -> torch.Tensor:
        """Map relative positions (key_pos - query_pos, any integer shape) to bucket ids (same shape, long).

        bidirectional: half of the buckets for keys before the query, half (offset by num_buckets // 2)
                       for keys after it.
        causal:        keys after the query all go to bucket 0; every bucket is for the past.
        Within one direction, distances below max_exact = buckets // 2 get a bucket each; larger ones are
        spaced logarithmically up to max_distance, and everything further shares the last bucket.
        """
        buckets = torch.zeros_like(relative_position, dtype=torch.long)
        if bidirectional:
            num_buckets = num_buckets // 2
            buckets = buckets + (relative_position > 0).long() * num_buckets  # keys after the query
            n = relative_position.abs()
        else:
            n = (-relative_position).clamp(min=0)                             # future keys -> distance 0
        max_exact = num_buckets // 2
        is_small = n < max_exact
        log_ratio = torch.log(n.clamp(min=1).float() / max_exact) / math.log(max_distance / max_exact)
        val_if_large = max_exact + (log_ratio * (num_buckets - max_exact)).long()
        val_if_large = val_if_large.clamp(max=num_buckets - 1)
        return buckets + torch.where(is_small, n, val_if_large)

    def forward(self, seq_len: int, device: torch.device | None = None) -> torch.Tensor:
        device = self.relative_bias.weight.device if device is None else device
        pos = torch.arange(seq_len, device=device)
        rel = pos[None, :] - pos[:, None]                                  # (L, L): key j - query i
        bucket = self._relative_position_bucket(rel, self.num_buckets, self.max_distance,
                                                self.bidirectional)        # (L, L) long
        values = self.relative_bias(bucket)                                # (L, L, H)
        return values.permute(2, 0, 1).unsqueeze(0)                        # (1, H, L, L)


class T5Attention(nn.Module):
    """Self-attention with a T5 relative position bias and no 1/sqrt(head_dim) scaling.

    forward(x, key_padding_mask=None)
      x:                (B, L, hidden_dim)
      key_padding_mask: (B, L) bool, True = padding (that key is ignored by every query)
      returns           (B, L, hidden_dim)
    bidirectional=False makes it a decoder self-attention: causal buckets and a causal mask.
    """

    def __init__(self, hidden_dim: int, num_heads: int, num_buckets: int = 32, max_distance: int = 128,
                 dropout: float = 0.1, bidirectional: bool = True):
        super().__init__()
        if hidden_dim % num_heads != 0:
            raise ValueError(f"hidden_dim={hidden_dim} is not divisible by num_heads={num_heads}")
        self.hidden_dim = hidden_dim
        self.num_heads = num_heads
        self.head_dim = hidden_dim // num_heads
        self.bidirectional = bidirectional
        self.qkv_proj = nn.Linear(hidden_dim, 3 * hidden_dim, bias=False)  # rows: [W_q; W_k; W_v]
        self.out_proj = nn.Linear(hidden_dim, hidden_dim, bias=False)
        self.rel_bias = T5RelativeBias(num_heads, num_buckets, max_distance, bidirectional)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        B, L, E = x.shape
        H, D = self.num_heads, self.head_dim
        q, k, v = self.qkv_proj(x).split(E, dim=-1)                  # 3 x (B, L, E)
        q = q.view(B, L, H, D).transpose(1, 2)                         # (B, H, L, D)
        k = k.view(B, L, H, D).transpose(1, 2)                         # (B, H, L, D)
        v = v.view(B, L, H, D).transpose(1, 2)                         # (B, H, L, D)

        scores = torch.matmul(q, k.transpose(-2, -1))                  # (B, H, L, L), no scaling (T5)
        scores = scores + self.rel_bias(L, x.device).to(scores.dtype)  # + (1, H, L, L)
        if not self.bidirectional:
            causal = torch.ones(L, L, dtype=torch.bool, device=x.device).tril()  # (L, L): True = may attend
            scores = scores.masked_fill(causal.logical_not(), float("-inf"))
        if key_padding_mask is not None:
            scores = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))

        weights = torch.softmax(scores, dim=-1)                        # over keys
        weights = self.dropout(weights)
        out = torch.matmul(weights, v)                                 # (B, H, L, D)
        out = out.transpose(1, 2).contiguous().view(B, L, E)           # (B, L, E)
        return self.out_proj(out)
