"""Self-attention with a KV cache for autoregressive decoding (reference solution for `kv_cache`)."""
import math

import torch
import torch.nn as nn


class SelfAttentionWithCache(nn.Module):
    """Causal multi-head self-attention that caches keys and values between calls.

    init_cache(batch_size, max_len, device)
      allocates k_cache and v_cache, each (batch_size, num_heads, max_len, head_dim),
      zero-filled, in the dtype of the weights.

    forward(x, start_pos)
      x:         (B, L, hidden_dim), the tokens at positions start_pos .. start_pos + L - 1
                 (a prefill when start_pos == 0, one decode step when L == 1, or a chunk)
      start_pos: int, the position of x's first token
      returns    (B, L, hidden_dim); query position i attends to every cached position <= i
      raises     ValueError when start_pos + L > max_len
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
        self.k_cache: torch.Tensor | None = None
        self.v_cache: torch.Tensor | None = None

    def init_cache(self, batch_size: int, max_len: int, device: torch.device | str | None = None) -> None:
        dtype = self.qkv_proj.weight.dtype
        self.k_cache = torch.zeros(batch_size, self.num_heads, max_len, self.head_dim,
                                   device=device, dtype=dtype)   # (B, H, max_len, D)
        self.v_cache = torch.zeros_like(self.k_cache)           # (B, H, max_len, D)

    def forward(self, x: torch.Tensor, start_pos: int = 0) -> torch.Tensor:
        B, L, E = x.shape
        H, D = self.num_heads, self.head_dim
        if self.k_cache is None:
            raise RuntimeError("call init_cache(batch_size, max_len, device) before forward")
        max_len = self.k_cache.size(2)
        end = start_pos + L
        if end > max_len:
            raise ValueError(f"KV cache overflow: positions {start_pos}..{end - 1} do not fit in "
                             f"max_len={max_len}; call init_cache with a larger max_len")

        q, k, v = self.qkv_proj(x).split(E, dim=-1)                  # 3 x (B, L, E)
        q = q.view(B, L, H, D).transpose(1, 2)                         # (B, H, L, D)
        k = k.view(B, L, H, D).transpose(1, 2)                         # (B, H, L, D)
        v = v.view(B, L, H, D).transpose(1, 2)                         # (B, H, L, D)

        self.k_cache[:, :, start_pos:end] = k
        self.v_cache[:, :, start_pos:end] = v
        keys = self.k_cache[:, :, :end]                                # (B, H, end, D)
        values = self.v_cache[:, :, :end]                              # (B, H, end, D)

        scores = torch.matmul(q, keys.transpose(-2, -1)) / math.sqrt(D)  # (B, H, L, end)
        # query i sits at position start_pos + i and sees keys 0 .. start_pos + i
        keep = torch.ones(L, end, dtype=torch.bool, device=x.device).tril(diagonal=start_pos)  # (L, end)
        scores = scores.masked_fill(keep.logical_not(), float("-inf"))

        weights = torch.softmax(scores, dim=-1)                        # over keys
        weights = self.dropout(weights)
        out = torch.matmul(weights, values)                            # (B, H, L, D)
        out = out.transpose(1, 2).contiguous().view(B, L, E)           # (B, L, E)
        return self.out_proj(out)
