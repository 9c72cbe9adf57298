"""RoPE with context-extension scaling: linear, dynamic NTK, YaRN and Llama 3
(reference solution for `rope_scaling`)."""
import math

import torch


def _mscale(factor: float, mscale: float) -> float:
    """YaRN's magnitude correction 0.1 * mscale * ln(factor) + 1 (1 when the factor does not stretch)."""
    return 0.1 * mscale * math.log(factor) + 1.0 if factor > 1 else 1.0


def scaled_inv_freq(dim: int, theta: float = 10000.0, scaling: dict | None = None,
                    seq_len: int | None = None) -> tuple[torch.Tensor, float]:
    """The rotation frequencies of a RoPE with `dim` rotary dims, after context-extension scaling.

    Unscaled: inv_freq[i] = theta ** (-2i / dim), i = 0 .. dim/2 - 1. `scaling` holds the Hugging Face
    rope_scaling keys:
      None                    no scaling
      {"rope_type": "linear", "factor": s}
      {"rope_type": "dynamic", "factor": s, "max_position_embeddings": M}     (uses seq_len)
      {"rope_type": "yarn", "factor": s, "original_max_position_embeddings": L_o,
       optional "beta_fast" (32), "beta_slow" (1), "truncate" (True), "mscale", "mscale_all_dim",
       "attention_factor"}
      {"rope_type": "llama3", "factor": s, "low_freq_factor": a, "high_freq_factor": b,
       "original_max_position_embeddings": L_o}
    returns (inv_freq, attention_factor): a float64 tensor (dim/2,) and a Python float that multiplies
    both cos and sin (1.0 except for YaRN)
    """
    exponents = torch.arange(0, dim, 2, dtype=torch.float64) / dim        # (dim/2,): 2i / dim
    inv_freq = 1.0 / theta ** exponents                                   # (dim/2,)
    if scaling is None:
        return inv_freq, 1.0
    kind, s = scaling["rope_type"], float(scaling["factor"])

    if kind == "linear":                       # position interpolation: positions / s
        return inv_freq / s, 1.0

    if kind == "dynamic":                      # NTK-aware: a larger base once the sequence outgrows M
        M = scaling["max_position_embeddings"]
        L = M if seq_len is None else max(seq_len, M)
        new_theta = theta * (s * L / M - (s - 1)) ** (dim / (dim - 2))
        return 1.0 / new_theta ** exponents, 1.0

    if kind == "yarn":
        L_o = scaling["original_max_position_embeddings"]
        beta_fast, beta_slow = scaling.get("beta_fast", 32.0), scaling.get("beta_slow", 1.0)

        def dim_index(rotations: float) -> float:
            # the (fractional) dim index whose wave turns `rotations` times over L_o positions
            return dim * math.log(L_o / (2 * math.pi * rotations)) / (2 * math.log(theta))

        low, high = dim_index(beta_fast), dim_index(beta_slow)
        if scaling.get("truncate", True):
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, dim - 1)
        if low == high:
            high += 0.001
        i = torch.arange(dim // 2, dtype=torch.float64)                   # (dim/2,)
        ramp = ((i - low) / (high - low)).clamp(0.0, 1.0)                 # 0: fast dims kept, 1: slow dims / s
        inv_freq = inv_freq / s * ramp + inv_freq * (1 - ramp)
        if scaling.get("attention_factor") is not None:
            attention_factor = float(scaling["attention_factor"])
        elif scaling.get("mscale") and scaling.get("mscale_all_dim"):
            attention_factor = _mscale(s, scaling["mscale"]) / _mscale(s, scaling["mscale_all_dim"])
        else:
            attention_factor = _mscale(s, 1.0)
        return inv_freq, attention_factor

    if kind == "llama3":
        L_o = scaling["original_max_position_embeddings"]
        low_f, high_f = scaling["low_freq_factor"], scaling["high_freq_factor"]
        wavelen = 2 * math.pi / inv_freq                                  # (dim/2,) positions per turn
        # 1 for short waves (wavelen < L_o / high_f: kept), 0 for long ones (wavelen > L_o / low_f: / s)
        smooth = ((L_o / wavelen - low_f) / (high_f - low_f)).clamp(0.0, 1.0)
        return (1 - smooth) * inv_freq / s + smooth * inv_freq, 1.0

    raise ValueError(f"unknown rope_type {kind!r}: use linear, dynamic, yarn or llama3")


def _rotate_half_pairs(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x * cos + rotate_half(x) * sin, where dim j pairs with dim j + D/2. cos, sin: (B, 1, L, D)."""
    xr = x.to(cos.dtype)
    x1, x2 = xr.chunk(2, dim=-1)                                          # (B, H, L, D/2) each
    rotated = torch.cat([-x2, x1], dim=-1)                                # (B, H, L, D)
    return (xr * cos + rotated * sin).to(x.dtype)


def apply_scaled_rope(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor, theta: float = 10000.0,
                      scaling: dict | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotate q and k with the scaled frequencies, Hugging Face layout (dim j pairs with j + D/2).

    q:         (B, H, L, D), D even
    k:         (B, Hk, L, D)
    positions: (B, L) int64, the position of every token (rows may differ, e.g. with left padding)
    scaling:   as in scaled_inv_freq; dynamic scaling uses seq_len = positions.max() + 1
    returns    (q_rot, k_rot) in the shapes and dtypes of q and k. Pair j at position p turns by
               p * inv_freq[j]; cos and sin are both multiplied by attention_factor. The angles are
               formed in float64; the rotation runs in float64 for float64 inputs, float32 otherwise.
    """
    B, H, L, D = q.shape
    seq_len = int(positions.max()) + 1
    inv_freq, attention_factor = scaled_inv_freq(D, theta, scaling, seq_len)
    inv_freq = inv_freq.to(q.device)
    real = torch.float64 if q.dtype == torch.float64 else torch.float32
    angles = positions.to(torch.float64)[..., None] * inv_freq            # (B, L, D/2)
    emb = torch.cat([angles, angles], dim=-1)                             # (B, L, D): j and j + D/2 share
    cos = (emb.cos() * attention_factor).to(real)[:, None]                # (B, 1, L, D)
    sin = (emb.sin() * attention_factor).to(real)[:, None]                # (B, 1, L, D)
    return _rotate_half_pairs(q, cos, sin), _rotate_half_pairs(k, cos, sin)
