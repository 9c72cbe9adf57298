"""StreamingLLM attention sinks: a KV cache that keeps the first tokens of the stream and a window of
recent ones, with RoPE at positions inside the cache (reference solution for `attention_sinks`)."""
import math

import torch
import torch.nn as nn


def streaming_mask(seq_len: int, num_sinks: int, window_size: int, device=None) -> torch.Tensor:
    """(seq_len, seq_len) bool, True = query i may attend to key j:

        j <= i  and  (j < num_sinks  or  i - j < window_size)

    The first num_sinks tokens (the sinks) stay visible to every later query; otherwise a query sees
    the window_size most recent tokens, its own position included.
    """
    pos = torch.arange(seq_len, device=device)
    i, j = pos[:, None], pos[None, :]                     # queries on rows, keys on columns
    causal = j <= i
    sink = j < num_sinks
    recent = (i - j) < window_size
    return causal & (sink | recent)


def _rope_cos_sin(positions: torch.Tensor, dim: int, theta: float, dtype: torch.dtype):
    """cos and sin of shape (*positions.shape, dim) for the rotate-half layout: dims i and i + dim/2
    form pair i, turned by position * theta ** (-2i / dim). Angles are computed in float64."""
    inv_freq = theta ** (-torch.arange(0, dim, 2, dtype=torch.float64, device=positions.device) / dim)  # (dim/2,)
    angles = positions.to(torch.float64)[..., None] * inv_freq             # (..., dim/2)
    angles = torch.cat([angles, angles], dim=-1)                             # (..., dim)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


def _apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x: (..., dim); cos, sin broadcast against it."""
    return x * cos + _rotate_half(x) * sin


class StreamingAttention(nn.Module):
    """Multi-head self-attention over a stream, with a StreamingLLM cache (attention sinks).

    The cache holds at most num_sinks + window_size tokens: the first num_sinks tokens of the stream
    and the most recent ones. Each new token first evicts the oldest non-sink token if the cache is
    full, is appended, and then attends to everything in the cache (itself included).

    Positions are positions in the cache: with n cached tokens, the cached keys are rotated at
    0 .. n-1 and the new query (the last entry) at n-1, whatever their places in the stream.

    init_cache(batch_size, device=None)
      empties the cache and starts a new stream: k_cache, v_cache of shape (batch_size, num_heads,
      0, head_dim) in the weights' dtype, cache_index an empty int64 tensor.

    forward(x)
      x:       (B, L, hidden_dim), the next L tokens of the stream
      returns  (B, L, hidden_dim), exactly what L calls with one token each would return

    State after each call (n = number of cached tokens):
      k_cache:     (B, num_heads, n, head_dim), keys before RoPE, oldest first
      v_cache:     (B, num_heads, n, head_dim), values, in the same order
      cache_index: (n,) int64, the stream index (0, 1, 2, ... since init_cache) of each entry
    """

    def __init__(self, hidden_dim: int, num_heads: int, num_sinks: int = 4, window_size: int = 8,
                 rope_theta: float = 10000.0):
        super().__init__()
        if hidden_dim % num_heads != 0:
            raise ValueError(f"hidden_dim={hidden_dim} is not divisible by num_heads={num_heads}")
        if (hidden_dim // num_heads) % 2 != 0:
            raise ValueError(f"head_dim={hidden_dim // num_heads} must be even for RoPE")
        if window_size < 1:
            raise ValueError(f"window_size={window_size} must be at least 1 (the current token)")
        self.hidden_dim = hidden_dim
        self.num_heads = num_heads
        self.head_dim = hidden_dim // num_heads
        self.num_sinks = num_sinks
        self.window_size = window_size
        self.rope_theta = rope_theta
        self.q_proj = nn.Linear(hidden_dim, hidden_dim, bias=False)
        self.k_proj = nn.Linear(hidden_dim, hidden_dim, bias=False)
        self.v_proj = nn.Linear(hidden_dim, hidden_dim, bias=False)
        self.out_proj = nn.Linear(hidden_dim, hidden_dim, bias=False)
        self.k_cache: torch.Tensor | None = None
        self.v_cache: torch.Tensor | None = None
        self.cache_index: torch.Tensor | None = None
        self.seen = 0

    def init_cache(self, batch_size: int, device: torch.device | str | None = None) -> None:
        dtype = self.q_proj.weight.dtype
        H, D = self.num_heads, self.head_dim
        self.k_cache = torch.zeros(batch_size, H, 0, D, device=device, dtype=dtype)   # (B, H, 0, D)
        self.v_cache = torch.zeros_like(self.k_cache)                                # (B, H, 0, D)
        self.cache_index = torch.zeros(0, dtype=torch.long, device=device)           # (0,)
        self.seen = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.k_cache is None:
            raise RuntimeError("call init_cache(batch_size, device) before forward")
        B, L, E = x.shape
        H, D, S, W = self.num_heads, self.head_dim, self.num_sinks, self.window_size
        q = self.q_proj(x).view(B, L, H, D).transpose(1, 2)           # (B, H, L, D)
        k = self.k_proj(x).view(B, L, H, D).transpose(1, 2)           # (B, H, L, D)
        v = self.v_proj(x).view(B, L, H, D).transpose(1, 2)           # (B, H, L, D)

        # everything this call can see: the cache, then the L new tokens (keys before RoPE)
        keys = torch.cat([self.k_cache, k], dim=2)                    # (B, H, N, D), N = n0 + L
        values = torch.cat([self.v_cache, v], dim=2)                  # (B, H, N, D)
        new = self.seen + torch.arange(L, device=x.device)            # (L,) stream indices of the new tokens
        j = torch.cat([self.cache_index, new])                        # (N,) stream index of each key
        t = new[:, None]                                              # (L, 1) stream index of each query

        # A chunk is computed at once. Each new token gets the cache it would have had if the tokens
        # came one at a time (the sinks and its window) and the positions inside that cache; this
        # takes one rotated copy of the keys per query, (B, H, L, N, D).
        keep = (j <= t) & ((j < S) | (t - j < W))                     # (L, N)

        # positions inside that cache: a kept key's rank among the kept keys; the query comes last
        pos_k = (keep.cumsum(dim=-1) - 1).clamp(min=0)                # (L, N) (masked keys: never used)
        pos_q = keep.sum(dim=-1) - 1                                  # (L,)
        cos_q, sin_q = _rope_cos_sin(pos_q, D, self.rope_theta, x.dtype)        # (L, D)
        cos_k, sin_k = _rope_cos_sin(pos_k, D, self.rope_theta, x.dtype)        # (L, N, D)
        q = _apply_rope(q, cos_q, sin_q)                              # (B, H, L, D)
        # (B, H, L, N, D): the keys as each query sees them
        k_rot = _apply_rope(keys[:, :, None], cos_k, sin_k)

        scores = (q[:, :, :, None, :] * k_rot).sum(dim=-1) / math.sqrt(D)       # (B, H, L, N)
        scores = scores.masked_fill(keep.logical_not(), float("-inf"))
        weights = torch.softmax(scores, dim=-1)                       # over the keys each query keeps
        out = torch.matmul(weights, values)                           # (B, H, L, D)

        # the cache keeps what the last token kept: the sinks and the window_size newest tokens
        last = keep[-1]                                               # (N,)
        self.k_cache = keys[:, :, last]                               # (B, H, n, D), before RoPE
        self.v_cache = values[:, :, last]                             # (B, H, n, D)
        self.cache_index = j[last]                                    # (n,)
        self.seen += L

        out = out.transpose(1, 2).contiguous().view(B, L, E)          # (B, L, E)
        return self.out_proj(out)
