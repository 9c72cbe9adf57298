"""Differential attention (Diff Transformer, Ye et al. 2024): each head is the difference of two softmax
maps, normalised per head (reference solution for `differential_attention`)."""
import math

import torch
import torch.nn as nn


def lambda_init_schedule(depth: int) -> float:
    """lambda_init for the layer with 0-based index `depth`: 0.8 - 0.6 * exp(-0.3 * depth)
    (0.2 for the first layer, rising towards 0.8)."""
    return 0.8 - 0.6 * math.exp(-0.3 * depth)


class _RMSNorm(nn.Module):
    """weight * x / sqrt(mean(x^2 over the last dim) + eps)."""

    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def _rope_cos_sin(seq_len: int, dim: int, theta: float, dtype: torch.dtype, device=None):
    """cos and sin of shape (seq_len, dim/2): angle[m, i] = m * theta ** (-2i / dim), in float64."""
    inv_freq = theta ** (-torch.arange(0, dim, 2, dtype=torch.float64, device=device) / dim)  # (dim/2,)
    angles = torch.arange(seq_len, dtype=torch.float64, device=device)[:, None] * inv_freq    # (L, dim/2)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def _rope_interleaved(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate the adjacent pairs (2i, 2i+1) of x (..., L, dim) by the angles of cos, sin (L, dim/2)."""
    x0, x1 = x[..., 0::2], x[..., 1::2]                                # (..., L, dim/2) each
    out = torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1)   # (..., L, dim/2, 2)
    return out.flatten(-2)                                             # (..., L, dim)


class DifferentialAttention(nn.Module):
    """Causal differential multi-head attention with RoPE.

    num_heads differential heads; head_dim d = hidden_dim // (2 * num_heads). Queries and keys have
    2 * num_heads heads of width d, values num_heads heads of width 2d. Differential head h subtracts
    the softmax map of query/key heads 2h + 1 from the map of heads 2h:

      A_h = softmax(Q_2h K_2h^T / sqrt(d)) - lambda * softmax(Q_2h+1 K_2h+1^T / sqrt(d))
      O_h = (1 - lambda_init) * RMSNorm(A_h V_h)          (RMSNorm over the 2d dims of each head)
      lambda = exp(lambda_q1 . lambda_k1) - exp(lambda_q2 . lambda_k2) + lambda_init (one scalar)

    forward(x, key_padding_mask=None)
      x:                (B, L, hidden_dim)
      key_padding_mask: (B, L) bool, True = padding (that key is ignored by every query)
      returns           (B, L, hidden_dim)
    """

    def __init__(self, hidden_dim: int, num_heads: int, depth: int, rope_theta: float = 10000.0):
        super().__init__()
        if hidden_dim % (2 * num_heads) != 0:
            raise ValueError(f"hidden_dim={hidden_dim} is not divisible by 2 * num_heads={2 * num_heads}")
        if (hidden_dim // (2 * num_heads)) % 2 != 0:
            raise ValueError(f"head_dim={hidden_dim // (2 * num_heads)} must be even for RoPE")
        self.hidden_dim = hidden_dim
        self.num_heads = num_heads
        self.head_dim = hidden_dim // (2 * num_heads)
        self.rope_theta = rope_theta
        d = self.head_dim
        self.q_proj = nn.Linear(hidden_dim, 2 * num_heads * d, bias=False)
        self.k_proj = nn.Linear(hidden_dim, 2 * num_heads * d, bias=False)
        self.v_proj = nn.Linear(hidden_dim, 2 * num_heads * d, bias=False)
        self.out_proj = nn.Linear(2 * num_heads * d, hidden_dim, bias=False)
        self.lambda_init = lambda_init_schedule(depth)
        self.lambda_q1 = nn.Parameter(torch.zeros(d).normal_(mean=0.0, std=0.1))
        self.lambda_k1 = nn.Parameter(torch.zeros(d).normal_(mean=0.0, std=0.1))
        self.lambda_q2 = nn.Parameter(torch.zeros(d).normal_(mean=0.0, std=0.1))
        self.lambda_k2 = nn.Parameter(torch.zeros(d).normal_(mean=0.0, std=0.1))
        self.subln = _RMSNorm(2 * d, eps=1e-5)

    def forward(self, x: torch.Tensor, key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        B, L, E = x.shape
        H, d = self.num_heads, self.head_dim
        q = self.q_proj(x).view(B, L, 2 * H, d).transpose(1, 2)        # (B, 2H, L, d)
        k = self.k_proj(x).view(B, L, 2 * H, d).transpose(1, 2)        # (B, 2H, L, d)
        v = self.v_proj(x).view(B, L, H, 2 * d).transpose(1, 2)        # (B, H, L, 2d)

        cos, sin = _rope_cos_sin(L, d, self.rope_theta, x.dtype, x.device)   # (L, d/2)
        q = _rope_interleaved(q, cos, sin)
        k = _rope_interleaved(k, cos, sin)

        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d)   # (B, 2H, L, L)
        keep = torch.ones(L, L, dtype=torch.bool, device=x.device).tril()    # (L, L) causal
        if key_padding_mask is not None:
            keep = keep & key_padding_mask.logical_not()[:, None, None, :]   # (B, 1, L, L)
        scores = scores.masked_fill(keep.logical_not(), float("-inf"))
        maps = torch.softmax(scores, dim=-1)                           # (B, 2H, L, L)
        maps = maps.view(B, H, 2, L, L)                                # head h: maps of q/k heads 2h, 2h+1

        lambda_1 = torch.exp(torch.sum(self.lambda_q1 * self.lambda_k1))
        lambda_2 = torch.exp(torch.sum(self.lambda_q2 * self.lambda_k2))
        lam = lambda_1 - lambda_2 + self.lambda_init                   # one scalar for the layer
        diff = maps[:, :, 0] - lam * maps[:, :, 1]                     # (B, H, L, L)

        out = torch.matmul(diff, v)                                    # (B, H, L, 2d)
        out = self.subln(out)                                          # RMSNorm of each head over 2d
        out = out * (1 - self.lambda_init)
        out = out.transpose(1, 2).contiguous().view(B, L, 2 * H * d)   # (B, L, 2H * d)
        return self.out_proj(out)
