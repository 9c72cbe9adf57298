"""Grouped-query attention with a KV cache that stores only the KV heads (reference for `gqa_kv_cache`)."""
import math

import torch
import torch.nn as nn


class GQAWithCache(nn.Module):
    """Causal grouped-query attention for decoding: num_query_heads query heads share
    num_kv_heads key/value heads (query head h uses KV head h // (num_query_heads // num_kv_heads)).

    init_cache(batch_size, max_len, device)
      allocates k_cache and v_cache, each (batch_size, num_kv_heads, max_len, head_dim),
      zero-filled, in the dtype of the weights.

    forward(x, start_pos)
      x:         (B, L, hidden_dim), the tokens at positions start_pos .. start_pos + L - 1
      start_pos: int, the position of x's first token
      returns    (B, L, hidden_dim); query position i attends to every cached position <= i
      raises     ValueError when start_pos + L > max_len
    """

    def __init__(self, hidden_dim: int, num_query_heads: int, num_kv_heads: int, dropout: float = 0.1):
        super().__init__()
        if hidden_dim % num_query_heads != 0:
            raise ValueError(f"hidden_dim={hidden_dim} is not divisible by num_query_heads={num_query_heads}")
        if num_query_heads % num_kv_heads != 0:
            raise ValueError(f"num_query_heads={num_query_heads} is not divisible by num_kv_heads={num_kv_heads}")
        self.hidden_dim = hidden_dim
        self.num_query_heads = num_query_heads
        self.num_kv_heads = num_kv_heads
        self.head_dim = hidden_dim // num_query_heads
        self.num_groups = num_query_heads // num_kv_heads               # query heads per KV head
        self.q_proj = nn.Linear(hidden_dim, num_query_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden_dim, num_kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden_dim, num_kv_heads * self.head_dim, bias=False)
        self.out_proj = nn.Linear(hidden_dim, hidden_dim, bias=False)
        self.dropout = nn.Dropout(dropout)
        self.k_cache: torch.Tensor | None = None
        self.v_cache: torch.Tensor | None = None

    def init_cache(self, batch_size: int, max_len: int, device: torch.device | str | None = None) -> None:
        dtype = self.q_proj.weight.dtype
        self.k_cache = torch.zeros(batch_size, self.num_kv_heads, max_len, self.head_dim,
                                   device=device, dtype=dtype)   # (B, Hkv, max_len, D)
        self.v_cache = torch.zeros_like(self.k_cache)           # (B, Hkv, max_len, D)

    def forward(self, x: torch.Tensor, start_pos: int = 0) -> torch.Tensor:
        B, L, E = x.shape
        Hq, Hkv, D, n_rep = self.num_query_heads, self.num_kv_heads, self.head_dim, self.num_groups
        if self.k_cache is None:
            raise RuntimeError("call init_cache(batch_size, max_len, device) before forward")
        max_len = self.k_cache.size(2)
        end = start_pos + L
        if end > max_len:
            raise ValueError(f"KV cache overflow: positions {start_pos}..{end - 1} do not fit in "
                             f"max_len={max_len}; call init_cache with a larger max_len")

        q = self.q_proj(x).view(B, L, Hq, D).transpose(1, 2)          # (B, Hq, L, D)
        k = self.k_proj(x).view(B, L, Hkv, D).transpose(1, 2)         # (B, Hkv, L, D)
        v = self.v_proj(x).view(B, L, Hkv, D).transpose(1, 2)         # (B, Hkv, L, D)

        self.k_cache[:, :, start_pos:end] = k
        self.v_cache[:, :, start_pos:end] = v
        # broadcast only at attention time: query head h reads KV head h // n_rep
        keys = self.k_cache[:, :, :end].repeat_interleave(n_rep, dim=1)    # (B, Hq, end, D)
        values = self.v_cache[:, :, :end].repeat_interleave(n_rep, dim=1)  # (B, Hq, end, D)

        scores = torch.matmul(q, keys.transpose(-2, -1)) / math.sqrt(D)  # (B, Hq, L, end)
        # query i sits at position start_pos + i and sees keys 0 .. start_pos + i
        keep = torch.ones(L, end, dtype=torch.bool, device=x.device).tril(diagonal=start_pos)  # (L, end)
        scores = scores.masked_fill(keep.logical_not(), float("-inf"))

        weights = torch.softmax(scores, dim=-1)                        # over keys
        weights = self.dropout(weights)
        out = torch.matmul(weights, values)                            # (B, Hq, L, D)
        out = out.transpose(1, 2).contiguous().view(B, L, E)           # (B, L, E)
        return self.out_proj(out)
