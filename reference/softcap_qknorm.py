"""Attention with Gemma 2's logit soft-capping and Qwen3's per-head QK-norm (reference solution for
`softcap_qknorm`)."""
import torch
import torch.nn as nn


def soft_cap(x: torch.Tensor, cap: float) -> torch.Tensor:
    """cap * tanh(x / cap), elementwise: about x for |x| << cap, never beyond +-cap."""
    return cap * torch.tanh(x / cap)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """weight * x / sqrt(mean(x^2 over the last dim) + eps).

    x: (..., n); weight: (n,). float16/bfloat16 inputs are normalised in float32 and cast back to their
    dtype before the weight is applied (as in Qwen3); float32 and float64 stay in their own dtype.
    """
    h = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    h = h * torch.rsqrt(h.pow(2).mean(dim=-1, keepdim=True) + eps)
    return weight * h.to(x.dtype)


def capped_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scaling: float, softcap: float | None = None,
                     key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Causal softmax attention whose logits are soft-capped after the scaling and before the mask.

    q, k, v:          (B, H, L, D)
    scaling:          multiplier of q k^T
    softcap:          None, or the cap c: scores = c * tanh(scores / c)
    key_padding_mask: (B, L) bool, True = padding (that key is ignored by every query)
    returns           (B, H, L, D)
    """
    L = q.shape[2]
    scores = torch.matmul(q, k.transpose(-2, -1)) * scaling           # (B, H, L, L)
    if softcap is not None:
        scores = soft_cap(scores, softcap)                            # capped before any mask
    keep = torch.ones(L, L, dtype=torch.bool, device=q.device).tril()  # (L, L) causal
    if key_padding_mask is not None:
        keep = keep & key_padding_mask.logical_not()[:, None, None, :]  # (B, 1, L, L)
    scores = scores.masked_fill(keep.logical_not(), float("-inf"))
    weights = torch.softmax(scores, dim=-1)                           # over keys
    return torch.matmul(weights, v)                                   # (B, H, L, D)


class _HeadRMSNorm(nn.Module):
    """RMSNorm over the last dim (the head dim), one weight shared by every head."""

    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.weight, self.eps)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


class SoftcapQKNormAttention(nn.Module):
    """Causal GQA self-attention with optional per-head QK-norm (Qwen3) and logit soft-capping (Gemma 2).

    Parameters: q_proj (hidden_size -> num_heads * head_dim), k_proj and v_proj (hidden_size ->
    num_kv_heads * head_dim), o_proj (num_heads * head_dim -> hidden_size), all without bias; with
    qk_norm, q_norm.weight and k_norm.weight of shape (head_dim,), ones when built.
    Query head h reads KV head h // (num_heads // num_kv_heads).

    forward(x, key_padding_mask=None)
      x:                (B, L, hidden_size)
      key_padding_mask: (B, L) bool, True = padding (that key is ignored by every query)
      returns           (B, L, hidden_size)
    Order: project; split heads; RMSNorm of every q head and k head over head_dim (qk_norm); RoPE
    (rotate-half, positions 0 .. L-1, inv_freq = rope_theta ** (-2i / head_dim)); capped_attention with
    scaling = query_pre_attn_scalar ** -0.5 (head_dim ** -0.5 when None) and the softcap; merge heads;
    o_proj.
    """

    def __init__(self, hidden_size: int, num_heads: int, num_kv_heads: int, head_dim: int, qk_norm: bool = True,
                 softcap: float | None = None, query_pre_attn_scalar: float | None = None,
                 rope_theta: float = 10000.0, rms_norm_eps: float = 1e-6):
        super().__init__()
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.head_dim = head_dim
        self.softcap = softcap
        self.rope_theta = rope_theta
        self.scaling = (query_pre_attn_scalar if query_pre_attn_scalar is not None else head_dim) ** -0.5
        self.q_proj = nn.Linear(hidden_size, num_heads * head_dim, bias=False)
        self.k_proj = nn.Linear(hidden_size, num_kv_heads * head_dim, bias=False)
        self.v_proj = nn.Linear(hidden_size, num_kv_heads * head_dim, bias=False)
        self.o_proj = nn.Linear(num_heads * head_dim, hidden_size, bias=False)
        self.qk_norm = qk_norm
        if qk_norm:
            self.q_norm = _HeadRMSNorm(head_dim, rms_norm_eps)
            self.k_norm = _HeadRMSNorm(head_dim, rms_norm_eps)

    def forward(self, x: torch.Tensor, key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        B, L, _ = x.shape
        H, Hkv, D = self.num_heads, self.num_kv_heads, self.head_dim
        G = H // Hkv                                                   # query heads per KV head
        q = self.q_proj(x).view(B, L, H, D)                            # (B, L, H, D)
        k = self.k_proj(x).view(B, L, Hkv, D)                          # (B, L, Hkv, D)
        v = self.v_proj(x).view(B, L, Hkv, D)                          # (B, L, Hkv, D)
        if self.qk_norm:
            q = self.q_norm(q)                                         # each head over its D dims
            k = self.k_norm(k)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)   # (B, heads, L, D)

        # RoPE at positions 0 .. L-1, after the norm; angles in float64, cos/sin cast to the input's dtype
        inv_freq = self.rope_theta ** (-torch.arange(0, D, 2, dtype=torch.float64, device=x.device) / D)  # (D/2,)
        angles = torch.arange(L, dtype=torch.float64, device=x.device)[:, None] * inv_freq  # (L, D/2)
        angles = torch.cat([angles, angles], dim=-1)                  # (L, D): pair i sits at i and i + D/2
        cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
        q = q * cos + _rotate_half(q) * sin
        k = k * cos + _rotate_half(k) * sin

        k = k.repeat_interleave(G, dim=1)                              # (B, H, L, D): head h <- h // G
        v = v.repeat_interleave(G, dim=1)                              # (B, H, L, D)
        out = capped_attention(q, k, v, self.scaling, self.softcap, key_padding_mask)   # (B, H, L, D)
        out = out.transpose(1, 2).reshape(B, L, H * D)                # (B, L, H * D)
        return self.o_proj(out)
