"""A pre-norm Llama decoder layer: RMSNorm, causal grouped-query attention with RoPE (rotate-half
layout), a SwiGLU MLP and two residual connections (reference solution for `llama_block`)."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    """y = weight * (x / sqrt(mean(x^2 over the last dim) + eps)).

    float16/bfloat16 inputs are normalised in float32 and cast back to their dtype before the weight
    is applied (as in Llama); float32 and float64 inputs are normalised in their own dtype.
    """

    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)


class LlamaMLP(nn.Module):
    """SwiGLU: down_proj(silu(gate_proj(x)) * up_proj(x)); (B, L, hidden_dim) -> (B, L, hidden_dim)."""

    def __init__(self, hidden_dim: int, intermediate_dim: int):
        super().__init__()
        self.gate_proj = nn.Linear(hidden_dim, intermediate_dim, bias=False)
        self.up_proj = nn.Linear(hidden_dim, intermediate_dim, bias=False)
        self.down_proj = nn.Linear(intermediate_dim, hidden_dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


class LlamaAttention(nn.Module):
    """Causal grouped-query self-attention with RoPE on queries and keys.

    head_dim = hidden_dim // num_heads; query head h reads KV head h // (num_heads // num_kv_heads).
    RoPE, rotate-half layout: dims i and i + head_dim/2 form pair i, turned at position m (0 .. L-1)
    by m * rope_theta ** (-2i / head_dim).

    forward(x, key_padding_mask=None)
      x:                (B, L, hidden_dim)
      key_padding_mask: (B, L) bool, True = padding (that key is ignored by every query)
      returns           (B, L, hidden_dim)
    """

    def __init__(self, hidden_dim: int, num_heads: int, num_kv_heads: int, rope_theta: float = 10000.0):
        super().__init__()
        if hidden_dim % num_heads != 0:
            raise ValueError(f"hidden_dim={hidden_dim} is not divisible by num_heads={num_heads}")
        if num_heads % num_kv_heads != 0:
            raise ValueError(f"num_heads={num_heads} is not divisible by num_kv_heads={num_kv_heads}")
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.head_dim = hidden_dim // num_heads
        self.rope_theta = rope_theta
        D = self.head_dim
        self.q_proj = nn.Linear(hidden_dim, num_heads * D, bias=False)
        self.k_proj = nn.Linear(hidden_dim, num_kv_heads * D, bias=False)
        self.v_proj = nn.Linear(hidden_dim, num_kv_heads * D, bias=False)
        self.o_proj = nn.Linear(num_heads * D, hidden_dim, bias=False)

    def forward(self, x: torch.Tensor, key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        B, L, E = x.shape
        H, Hkv, D = self.num_heads, self.num_kv_heads, self.head_dim
        G = H // Hkv                                                   # query heads per KV head
        q = self.q_proj(x).view(B, L, H, D).transpose(1, 2)           # (B, H, L, D)
        k = self.k_proj(x).view(B, L, Hkv, D).transpose(1, 2)         # (B, Hkv, L, D)
        v = self.v_proj(x).view(B, L, Hkv, D).transpose(1, 2)         # (B, Hkv, L, D)

        # RoPE at positions 0 .. L-1; angles in float64, cos/sin cast to the input's dtype
        inv_freq = self.rope_theta ** (-torch.arange(0, D, 2, dtype=torch.float64, device=x.device) / D)  # (D/2,)
        angles = torch.arange(L, dtype=torch.float64, device=x.device)[:, None] * inv_freq  # (L, D/2)
        angles = torch.cat([angles, angles], dim=-1)                  # (L, D): pair i sits at i and i + D/2
        cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
        q = q * cos + _rotate_half(q) * sin
        k = k * cos + _rotate_half(k) * sin

        k = k[:, :, None].expand(B, Hkv, G, L, D).reshape(B, H, L, D)   # query head h -> KV head h // G
        v = v[:, :, None].expand(B, Hkv, G, L, D).reshape(B, H, L, D)

        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(D)  # (B, H, L, L)
        keep = torch.ones(L, L, dtype=torch.bool, device=x.device).tril()  # (L, L) causal
        if key_padding_mask is not None:
            keep = keep & key_padding_mask.logical_not()[:, None, None, :]  # (B, 1, L, L)
        scores = scores.masked_fill(keep.logical_not(), float("-inf"))
        weights = torch.softmax(scores, dim=-1)                       # over keys
        out = torch.matmul(weights, v)                                # (B, H, L, D)
        out = out.transpose(1, 2).contiguous().view(B, L, H * D)      # (B, L, H * D)
        return self.o_proj(out)


class LlamaDecoderLayer(nn.Module):
    """Pre-norm decoder layer:

      h = x + self_attn(input_layernorm(x))
      y = h + mlp(post_attention_layernorm(h))

    forward(x, key_padding_mask=None)
      x:                (B, L, hidden_dim)
      key_padding_mask: (B, L) bool, True = padding
      returns           (B, L, hidden_dim)
    """

    def __init__(self, hidden_dim: int, num_heads: int, num_kv_heads: int, intermediate_dim: int,
                 rope_theta: float = 10000.0, rms_norm_eps: float = 1e-5):
        super().__init__()
        self.self_attn = LlamaAttention(hidden_dim, num_heads, num_kv_heads, rope_theta)
        self.mlp = LlamaMLP(hidden_dim, intermediate_dim)
        self.input_layernorm = RMSNorm(hidden_dim, eps=rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(hidden_dim, eps=rms_norm_eps)

    def forward(self, x: torch.Tensor, key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        h = x + self.self_attn(self.input_layernorm(x), key_padding_mask)   # (B, L, E)
        return h + self.mlp(self.post_attention_layernorm(h))               # (B, L, E)
