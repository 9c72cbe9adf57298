"""Scaled dot-product attention written with torch.einsum (reference for `einsum_attention`)."""
import math

import torch


def scaled_dot_product_einsum(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                              scale: float | None = None,
                              mask: torch.Tensor | None = None) -> torch.Tensor:
    """Attention softmax(scale * Q Kᵀ) V, both contractions written with torch.einsum.

    query: (B, H, Lq, D)
    key:   (B, H, Lk, D)
    value: (B, H, Lk, Dv)
    scale: the factor the scores are MULTIPLIED by (as in F.scaled_dot_product_attention);
           None means 1 / sqrt(D)
    mask:  bool, broadcastable to (B, H, Lq, Lk), True = may attend
    returns (B, H, Lq, Dv)
    """
    D = query.size(-1)
    if scale is None:
        scale = 1.0 / math.sqrt(D)
    scores = torch.einsum("bhqd,bhkd->bhqk", query, key) * scale    # (B, H, Lq, Lk)
    if mask is not None:
        scores = scores.masked_fill(mask.logical_not(), float("-inf"))
    weights = torch.softmax(scores, dim=-1)                         # over keys
    return torch.einsum("bhqk,bhke->bhqe", weights, value)          # (B, H, Lq, Dv)
