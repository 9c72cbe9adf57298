"""ALiBi: per-head linear distance penalties on the attention scores (reference solution for `alibi`)."""
import math

import torch
import torch.nn as nn


def get_alibi_slopes(num_heads: int) -> torch.Tensor:
    """The ALiBi slope of every head, as in the paper's reference code.

    For a power of two n: start = 2 ** (-8 / n), slopes = [start ** 1, start ** 2, ..., start ** n].
    Otherwise, with c the largest power of two below n: the c slopes for c heads, then every other
    slope of the 2c-head sequence (indices 0, 2, 4, ...) until there are n.
    Returns a float64 tensor of shape (num_heads,).
    """
    def power_of_two_slopes(n: int) -> list[float]:
        start = 2.0 ** (-8.0 / n)
        return [start ** (i + 1) for i in range(n)]

    if math.log2(num_heads).is_integer():
        slopes = power_of_two_slopes(num_heads)
    else:
        closest = 2 ** math.floor(math.log2(num_heads))
        extra = power_of_two_slopes(2 * closest)[0::2][: num_heads - closest]
        slopes = power_of_two_slopes(closest) + extra
    return torch.tensor(slopes, dtype=torch.float64)


class AlibiSelfAttention(nn.Module):
    """Causal self-attention with ALiBi biases and no position embeddings.

    forward(x, key_padding_mask=None)
      x:                (B, L, hidden_dim)
      key_padding_mask: (B, L) bool, True = padding (that key is ignored by every query)
      returns           (B, L, hidden_dim)
    scores[b, h, i, j] = q_i . k_j / sqrt(head_dim) - slope[h] * (i - j) for keys j <= i; keys j > i are masked.
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

    def forward(self, x: torch.Tensor, key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        B, L, E = x.shape
        H, D = self.num_heads, self.head_dim
        q, k, v = self.qkv_proj(x).split(E, dim=-1)                   # 3 x (B, L, E)
        q = q.view(B, L, H, D).transpose(1, 2)                          # (B, H, L, D)
        k = k.view(B, L, H, D).transpose(1, 2)                          # (B, H, L, D)
        v = v.view(B, L, H, D).transpose(1, 2)                          # (B, H, L, D)

        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(D)   # (B, H, L, L)

        pos = torch.arange(L, device=x.device)
        distance = pos[:, None] - pos[None, :]                          # (L, L): i - j, query i, key j
        slopes = get_alibi_slopes(H).to(device=x.device, dtype=scores.dtype)  # (H,)
        bias = -slopes[:, None, None] * distance                        # (H, L, L)
        scores = scores + bias                                          # (B, H, L, L)

        causal = torch.ones(L, L, dtype=torch.bool, device=x.device).tril()  # (L, L): True = may attend
        scores = scores.masked_fill(causal.logical_not(), float("-inf"))
        if key_padding_mask is not None:
            scores = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))

        weights = torch.softmax(scores, dim=-1)                         # over keys
        weights = self.dropout(weights)
        out = torch.matmul(weights, v)                                  # (B, H, L, D)
        out = out.transpose(1, 2).contiguous().view(B, L, E)            # (B, L, E)
        return self.out_proj(out)
