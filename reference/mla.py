"""Multi-head latent attention (DeepSeek-V2/V3 MLA) with a compressed KV cache (reference solution for `mla`)."""
import torch
import torch.nn as nn


def _rope_angles(positions: torch.Tensor, d: int, theta: float, dtype: torch.dtype):
    """cos and sin of positions[t] * theta ** (-2i / d), each (L, d/2), formed in float64, cast to dtype."""
    inv_freq = theta ** (-torch.arange(0, d, 2, dtype=torch.float64, device=positions.device) / d)  # (d/2,)
    angles = positions.to(torch.float64)[:, None] * inv_freq[None, :]                            # (L, d/2)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate adjacent pairs (2i, 2i+1) of the last dim of x by the angles of (cos, sin).

    x: (..., L, d) with the positions on dim -2; cos, sin: (L, d/2) in the compute dtype
    returns x's shape and dtype (computed in cos.dtype: float64 for float64 x, float32 otherwise)
    """
    *lead, L, d = x.shape
    pairs = x.to(cos.dtype).reshape(*lead, L, d // 2, 2)                  # (..., L, d/2, 2)
    even, odd = pairs[..., 0], pairs[..., 1]                               # (..., L, d/2) each
    out = torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1)   # (..., L, d/2, 2)
    return out.reshape(x.shape).to(x.dtype)


def _causal(scores: torch.Tensor, start_pos: int) -> torch.Tensor:
    """Mask scores (B, H, L, T) so that query i (position start_pos + i) sees keys 0 .. start_pos + i."""
    L, T = scores.shape[-2:]
    keep = torch.ones(L, T, dtype=torch.bool, device=scores.device).tril(diagonal=start_pos)   # (L, T)
    return scores.masked_fill(keep.logical_not(), float("-inf"))


def _expand(c: torch.Tensor, w_uk: torch.Tensor, w_uv: torch.Tensor):
    """Per-head keys and values from the latents: c (B, T, r) -> k_nope (B, H, T, dn), v (B, H, T, dv)."""
    c = c[:, None]                                                         # (B, 1, T, r)
    return c @ w_uk.transpose(-2, -1), c @ w_uv.transpose(-2, -1)          # (H, r, dn), (H, r, dv) per head


def _attend_expanded(q_nope, q_pe, k_nope, k_pe, v, scale: float, start_pos: int) -> torch.Tensor:
    """Attention with materialised per-head keys and values (the training path).

    q_nope (B, H, L, dn), q_pe (B, H, L, dr), k_nope (B, H, T, dn), k_pe (B, T, dr), v (B, H, T, dv)
    returns (B, H, L, dv)
    """
    scores = q_nope @ k_nope.transpose(-2, -1)                             # (B, H, L, T): content part
    scores = scores + q_pe @ k_pe[:, None].transpose(-2, -1)               # + position part (k_pe shared)
    scores = _causal(scores * scale, start_pos)
    weights = torch.softmax(scores, dim=-1)                                # over keys
    return weights @ v                                                     # (B, H, L, dv)


def _attend_absorbed(q_nope, q_pe, c, k_pe, w_uk, w_uv, scale: float, start_pos: int) -> torch.Tensor:
    """Attention straight on the latents: W_UK folded into the query, W_UV applied after the weights.

    q_nope (B, H, L, dn), q_pe (B, H, L, dr), c (B, T, r), k_pe (B, T, dr), w_uk (H, dn, r), w_uv (H, dv, r)
    returns (B, H, L, dv); apart from the scores no tensor has both a head axis and the T positions
    """
    q_lat = q_nope @ w_uk                                                  # (B, H, L, r): W_UK[h]^T q_nope
    scores = q_lat @ c[:, None].transpose(-2, -1)                          # (B, H, L, T) = q_nope . (W_UK[h] c_t)
    scores = scores + q_pe @ k_pe[:, None].transpose(-2, -1)
    scores = _causal(scores * scale, start_pos)
    weights = torch.softmax(scores, dim=-1)                                # over keys
    o_lat = weights @ c[:, None]                                           # (B, H, L, r)
    return o_lat @ w_uv.transpose(-2, -1)                                  # (B, H, L, dv) = W_UV[h] o_lat


class MultiHeadLatentAttention(nn.Module):
    """Causal multi-head latent attention (DeepSeek-V2/V3) with decoupled RoPE and a latent cache.

    Sizes: E = hidden_dim, H = num_heads, rq = q_lora_rank, r = kv_lora_rank, dn = qk_nope_head_dim,
    dr = qk_rope_head_dim, dv = v_head_dim. Parameters (all without bias):
      q_a_proj (rq, E) -> q_a_layernorm RMSNorm(rq) -> q_b_proj (H*(dn+dr), rq): per head [q_nope | q_pe]
      kv_a_proj_with_mqa (r+dr, E): output [latent (r) | k_pe (dr)]; kv_a_layernorm RMSNorm(r) on the latent
      kv_b_proj (H*(dn+dv), r): per head h, rows [h*(dn+dv), h*(dn+dv)+dn) are W_UK[h], the next dv are W_UV[h]
      o_proj (E, H*dv)
    RoPE turns adjacent pairs (2i, 2i+1) of q_pe (every head) and of k_pe (one vector shared by all
    heads) by position * rope_theta ** (-2i / dr). Scores are scaled by (dn + dr) ** -0.5.

    init_cache(batch_size, max_len, device=None)
      kv_cache (B, max_len, r): the normalised latents; pe_cache (B, max_len, dr): the rotated k_pe.
      Zeros, in the dtype of the weights.

    forward(x, start_pos=0)
      x: (B, L, E), the tokens at positions start_pos .. start_pos + L - 1; returns (B, L, E).
      Without a cache (kv_cache is None): causal attention within x, from per-head keys and values.
      With a cache: write the L latents and rotated k_pe at start_pos, then attend causally over the
      cached positions 0 .. start_pos + L - 1 with W_UK and W_UV absorbed (no per-head keys or values).
    """

    def __init__(self, hidden_dim: int, num_heads: int, q_lora_rank: int, kv_lora_rank: int,
                 qk_nope_head_dim: int, qk_rope_head_dim: int, v_head_dim: int,
                 rope_theta: float = 10000.0, eps: float = 1e-6):
        super().__init__()
        H, dn, dr, dv = num_heads, qk_nope_head_dim, qk_rope_head_dim, v_head_dim
        self.num_heads = H
        self.kv_lora_rank = kv_lora_rank
        self.qk_nope_head_dim = dn
        self.qk_rope_head_dim = dr
        self.v_head_dim = dv
        self.rope_theta = rope_theta
        self.softmax_scale = (dn + dr) ** -0.5                 # the query/key head dim, rope part included
        self.q_a_proj = nn.Linear(hidden_dim, q_lora_rank, bias=False)
        self.q_a_layernorm = nn.RMSNorm(q_lora_rank, eps=eps)
        self.q_b_proj = nn.Linear(q_lora_rank, H * (dn + dr), bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(hidden_dim, kv_lora_rank + dr, bias=False)
        self.kv_a_layernorm = nn.RMSNorm(kv_lora_rank, eps=eps)
        self.kv_b_proj = nn.Linear(kv_lora_rank, H * (dn + dv), bias=False)
        self.o_proj = nn.Linear(H * dv, hidden_dim, bias=False)
        self.kv_cache: torch.Tensor | None = None
        self.pe_cache: torch.Tensor | None = None

    def init_cache(self, batch_size: int, max_len: int, device: torch.device | str | None = None) -> None:
        dtype = self.kv_a_proj_with_mqa.weight.dtype
        self.kv_cache = torch.zeros(batch_size, max_len, self.kv_lora_rank,
                                    device=device, dtype=dtype)             # (B, max_len, r)
        self.pe_cache = torch.zeros(batch_size, max_len, self.qk_rope_head_dim,
                                    device=device, dtype=dtype)             # (B, max_len, dr)

    def forward(self, x: torch.Tensor, start_pos: int = 0) -> torch.Tensor:
        B, L, E = x.shape
        H, dn, dr, dv = self.num_heads, self.qk_nope_head_dim, self.qk_rope_head_dim, self.v_head_dim
        r = self.kv_lora_rank
        scale = self.softmax_scale
        positions = torch.arange(start_pos, start_pos + L, device=x.device)    # (L,)
        real = torch.float64 if x.dtype == torch.float64 else torch.float32
        cos, sin = _rope_angles(positions, dr, self.rope_theta, real)          # (L, dr/2) each

        q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(x)))                # (B, L, H*(dn+dr))
        q = q.view(B, L, H, dn + dr).transpose(1, 2)                           # (B, H, L, dn+dr)
        q_nope, q_pe = q.split([dn, dr], dim=-1)                               # (B, H, L, dn), (B, H, L, dr)
        q_pe = _rope(q_pe, cos, sin)

        kv = self.kv_a_proj_with_mqa(x)                                        # (B, L, r+dr)
        c, k_pe = kv.split([r, dr], dim=-1)                                    # (B, L, r), (B, L, dr)
        c = self.kv_a_layernorm(c)                                             # the latent the cache keeps
        k_pe = _rope(k_pe, cos, sin)                                           # (B, L, dr), one for all heads

        w = self.kv_b_proj.weight.view(H, dn + dv, r)                          # per-head blocks of rows
        w_uk, w_uv = w[:, :dn], w[:, dn:]                                      # (H, dn, r), (H, dv, r)

        if self.kv_cache is None:
            k_nope, v = _expand(c, w_uk, w_uv)                                 # (B, H, L, dn), (B, H, L, dv)
            out = _attend_expanded(q_nope, q_pe, k_nope, k_pe, v, scale, 0)
        else:
            end = start_pos + L
            self.kv_cache[:, start_pos:end] = c
            self.pe_cache[:, start_pos:end] = k_pe
            c_all = self.kv_cache[:, :end]                                     # (B, T, r), T = end
            pe_all = self.pe_cache[:, :end]                                    # (B, T, dr)
            out = _attend_absorbed(q_nope, q_pe, c_all, pe_all, w_uk, w_uv, scale, start_pos)
        out = out.transpose(1, 2).reshape(B, L, H * dv)                        # (B, L, H*dv)
        return self.o_proj(out)
