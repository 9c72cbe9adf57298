"""Output-gated attention as in Qwen3-Next: causal GQA with zero-centred QK-norm and partial RoPE, and a
sigmoid gate, read from the same projection as the queries, on each head's output before o_proj
(reference solution for `gated_attention`)."""
import math

import torch
import torch.nn as nn


class _ZeroCentredRMSNorm(nn.Module):
    """x / sqrt(mean(x^2 over the last dim) + eps) * (1 + weight), weight initialised to zeros.
    float16/bfloat16 inputs are computed in float32 (the weight included) and cast back."""

    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        h = h * (1 + self.weight.to(h.dtype))
        return h.to(x.dtype)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


class GatedAttention(nn.Module):
    """Causal grouped-query self-attention with an elementwise sigmoid output gate.

    q_proj gives, for each query head, [query (head_dim) | gate (head_dim)]:
      q_proj(x).view(B, L, num_heads, 2 * head_dim) -> query = [..., :head_dim], gate = [..., head_dim:]
    With qk_norm, q_norm and k_norm (zero-centred RMSNorm over head_dim) act on every query and key head
    before RoPE. RoPE (rotate-half) turns only the first rotary_dim = int(head_dim * partial_rotary_factor)
    dims of each head, with frequencies rope_theta ** (-2i / rotary_dim); the other dims pass through.
    Query head h reads KV head h // (num_heads // num_kv_heads).

      out = o_proj(attention(q, k, v) * sigmoid(gate))      (heads merged, (B, L, num_heads * head_dim))

    forward(x, key_padding_mask=None)
      x:                (B, L, hidden_dim), the hidden states after the block's pre-norm
      key_padding_mask: (B, L) bool, True = padding (that key is ignored by every query)
      returns           (B, L, hidden_dim)
    """

    def __init__(self, hidden_dim: int, num_heads: int, num_kv_heads: int, head_dim: int,
                 partial_rotary_factor: float = 0.25, rope_theta: float = 10000.0, rms_norm_eps: float = 1e-6,
                 qk_norm: bool = True):
        super().__init__()
        if num_heads % num_kv_heads != 0:
            raise ValueError(f"num_heads={num_heads} is not divisible by num_kv_heads={num_kv_heads}")
        rotary_dim = int(head_dim * partial_rotary_factor)
        if rotary_dim < 2 or rotary_dim % 2 != 0 or rotary_dim > head_dim:
            raise ValueError(f"rotary_dim = int({head_dim} * {partial_rotary_factor}) = {rotary_dim} must be "
                             f"even, at least 2 and at most head_dim")
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.head_dim = head_dim
        self.rotary_dim = rotary_dim
        self.rope_theta = rope_theta
        self.qk_norm = qk_norm
        self.q_proj = nn.Linear(hidden_dim, num_heads * 2 * head_dim, bias=False)   # per head [query | gate]
        self.k_proj = nn.Linear(hidden_dim, num_kv_heads * head_dim, bias=False)
        self.v_proj = nn.Linear(hidden_dim, num_kv_heads * head_dim, bias=False)
        self.o_proj = nn.Linear(num_heads * head_dim, hidden_dim, bias=False)
        if qk_norm:
            self.q_norm = _ZeroCentredRMSNorm(head_dim, eps=rms_norm_eps)
            self.k_norm = _ZeroCentredRMSNorm(head_dim, eps=rms_norm_eps)

    def forward(self, x: torch.Tensor, key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        B, L, E = x.shape
        H, Hkv, D = self.num_heads, self.num_kv_heads, self.head_dim
        G = H // Hkv                                                    # query heads per KV head
        q_and_gate = self.q_proj(x).view(B, L, H, 2 * D)                # per head: [query | gate]
        q, gate = q_and_gate.split(D, dim=-1)                           # 2 x (B, L, H, D)
        gate = gate.reshape(B, L, H * D)                                # (B, L, H * D)
        k = self.k_proj(x).view(B, L, Hkv, D)                           # (B, L, Hkv, D)
        v = self.v_proj(x).view(B, L, Hkv, D).transpose(1, 2)           # (B, Hkv, L, D)
        if self.qk_norm:
            q = self.q_norm(q)                                          # over head_dim, before RoPE
            k = self.k_norm(k)
        q, k = q.transpose(1, 2), k.transpose(1, 2)                     # (B, H, L, D), (B, Hkv, L, D)

        # partial RoPE on the first `rot` dims of each head; angles in float64
        rot = self.rotary_dim
        inv_freq = self.rope_theta ** (-torch.arange(0, rot, 2, dtype=torch.float64, device=x.device) / rot)
        angles = torch.arange(L, dtype=torch.float64, device=x.device)[:, None] * inv_freq   # (L, rot/2)
        angles = torch.cat([angles, angles], dim=-1)                    # (L, rot)
        cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
        q = torch.cat([q[..., :rot] * cos + _rotate_half(q[..., :rot]) * sin, q[..., rot:]], dim=-1)
        k = torch.cat([k[..., :rot] * cos + _rotate_half(k[..., :rot]) * sin, k[..., rot:]], dim=-1)

        k = k[:, :, None].expand(B, Hkv, G, L, D).reshape(B, H, L, D)   # query head h -> KV head h // G
        v = v[:, :, None].expand(B, Hkv, G, L, D).reshape(B, H, L, D)

        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(D)   # (B, H, L, L)
        keep = torch.ones(L, L, dtype=torch.bool, device=x.device).tril()    # (L, L) causal
        if key_padding_mask is not None:
            keep = keep & key_padding_mask.logical_not()[:, None, None, :]   # (B, 1, L, L)
        scores = scores.masked_fill(keep.logical_not(), float("-inf"))
        weights = torch.softmax(scores, dim=-1)                         # over keys
        out = torch.matmul(weights, v)                                  # (B, H, L, D)
        out = out.transpose(1, 2).contiguous().view(B, L, H * D)        # (B, L, H * D)
        out = out * torch.sigmoid(gate)                                 # the output gate, per head and channel
        return self.o_proj(out)
