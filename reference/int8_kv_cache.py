"""Symmetric int8 quantisation and an int8 KV cache (reference solution for `int8_kv_cache`)."""
import math

import torch
import torch.nn as nn

QMAX = 127      # symmetric int8 codes -127 .. 127; -128 is never produced
EPS = 1e-8      # the smallest absmax: an all-zero row gets a tiny positive scale, never 0 / 0


def _scale_dtype(dtype: torch.dtype) -> torch.dtype:
    """Scales and quantisation arithmetic: float64 for float64 data, float32 for anything narrower."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def quantize_int8(x: torch.Tensor, dim: int = -1, scale: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric int8 quantisation with absmax scales.

    x:     float tensor of any shape (bfloat16, float32 or float64)
    dim:   the axis whose entries share one scale. On keys of shape (B, H, L, D), dim=-1 gives one
           scale per token and head ("per token"), dim=-2 one per channel and head ("per channel").
    scale: None for dynamic scales, max|x| / 127 along `dim` (max|x| clamped to at least 1e-8);
           or a positive float, one static scale for every element (calibrated elsewhere), in which
           case values beyond 127 * scale saturate
    returns (q, scale)
      q      int8, the shape of x: clamp(round(x / scale), -127, 127), rounding half to even
      scale  the shape of x with size 1 along `dim`; float64 when x is float64, else float32
    The division and the rounding run in the scale's dtype.
    """
    sdt = _scale_dtype(x.dtype)
    xf = x.to(sdt)
    if scale is None:
        absmax = xf.abs().amax(dim=dim, keepdim=True)                 # size 1 along dim
        scale = absmax.clamp(min=EPS) / QMAX
    else:
        shape = list(x.shape)
        shape[dim] = 1
        scale = torch.full(shape, float(scale), dtype=sdt, device=x.device)
    q = torch.round(xf / scale).clamp(-QMAX, QMAX).to(torch.int8)   # torch.round: half to even
    return q, scale


def dequantize_int8(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """q int8, scale broadcastable to q -> q * scale, in the scale's dtype."""
    return q.to(scale.dtype) * scale


class Int8KVCache(nn.Module):
    """A KV cache that keeps keys and values as int8 codes with one scale per token and head.

    Int8KVCache(batch_size, num_heads, max_len, head_dim, dtype=torch.float32)
      buffers k_cache, v_cache: int8 (batch_size, num_heads, max_len, head_dim), zeros
      buffers k_scale, v_scale: (batch_size, num_heads, max_len, 1), zeros, float32
              (float64 when dtype is float64)
    forward(q, k, v, start_pos) -> (B, H, L, head_dim) in q's dtype
      q, k, v: (B, H, L, head_dim) in `dtype` (B = batch_size, H = num_heads), the queries, keys
               and values of the tokens at positions start_pos .. start_pos + L - 1
      Quantises k and v per token (quantize_int8 with dim=-1), stores codes and scales at those
      positions, then lets query i attend causally, with scale 1/sqrt(head_dim), to the keys and
      values of positions 0 .. start_pos + i, dequantised and cast to q's dtype.
      raises ValueError when start_pos + L > max_len
    """

    def __init__(self, batch_size: int, num_heads: int, max_len: int, head_dim: int,
                 dtype: torch.dtype = torch.float32):
        super().__init__()
        codes = (batch_size, num_heads, max_len, head_dim)
        scales = (batch_size, num_heads, max_len, 1)
        self.register_buffer("k_cache", torch.zeros(codes, dtype=torch.int8))
        self.register_buffer("v_cache", torch.zeros(codes, dtype=torch.int8))
        self.register_buffer("k_scale", torch.zeros(scales, dtype=_scale_dtype(dtype)))
        self.register_buffer("v_scale", torch.zeros(scales, dtype=_scale_dtype(dtype)))

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, start_pos: int = 0) -> torch.Tensor:
        B, H, L, D = q.shape
        max_len = self.k_cache.size(2)
        end = start_pos + L
        if end > max_len:
            raise ValueError(f"positions {start_pos}..{end - 1} do not fit in max_len={max_len}")

        k_q, k_s = quantize_int8(k, dim=-1)                            # (B, H, L, D) int8, (B, H, L, 1)
        v_q, v_s = quantize_int8(v, dim=-1)
        self.k_cache[:, :, start_pos:end] = k_q
        self.v_cache[:, :, start_pos:end] = v_q
        self.k_scale[:, :, start_pos:end] = k_s
        self.v_scale[:, :, start_pos:end] = v_s

        keys = dequantize_int8(self.k_cache[:, :, :end], self.k_scale[:, :, :end]).to(q.dtype)    # (B, H, end, D)
        values = dequantize_int8(self.v_cache[:, :, :end], self.v_scale[:, :, :end]).to(q.dtype)  # (B, H, end, D)

        scores = torch.matmul(q, keys.transpose(-2, -1)) / math.sqrt(D)     # (B, H, L, end)
        keep = torch.ones(L, end, dtype=torch.bool, device=q.device).tril(diagonal=start_pos)  # (L, end)
        scores = scores.masked_fill(keep.logical_not(), float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        return torch.matmul(weights, values)                                # (B, H, L, D)
