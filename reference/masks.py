"""Padding and attention masks applied together, with a rule for fully masked rows (reference for `masks`)."""
import math

import torch


def apply_masks(attn_scores: torch.Tensor, key_padding_mask: torch.Tensor | None = None,
                attn_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Set every masked score to -inf and return the new scores (the input is not modified).

    attn_scores:      (B, H, Lq, Lk)
    key_padding_mask: (B, Lk) bool, True = padding: that key is masked for every head and query
    attn_mask:        (Lq, Lk) or (B, Lq, Lk), bool or 0/1, True/1 = keep; a 3-D mask is per batch
                      element and the same for every head
    returns           (B, H, Lq, Lk)
    """
    if key_padding_mask is not None:
        pad = key_padding_mask[:, None, None, :]                          # (B, 1, 1, Lk)
        attn_scores = attn_scores.masked_fill(pad, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dim() == 3:
            attn_mask = attn_mask.unsqueeze(1)                            # (B, 1, Lq, Lk)
        attn_scores = attn_scores.masked_fill(attn_mask == 0, float("-inf"))  # (Lq, Lk) broadcasts as is
    return attn_scores


def masked_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                     key_padding_mask: torch.Tensor | None = None,
                     attn_mask: torch.Tensor | None = None) -> torch.Tensor:
    """softmax(Q Kᵀ / sqrt(D) + masks) V, with both masks applied by apply_masks.

    q: (B, H, Lq, D); k, v: (B, H, Lk, D); masks as in apply_masks
    returns (B, H, Lq, D). A query row with no kept key outputs exactly 0 (and gets finite,
    zero gradients), like F.scaled_dot_product_attention.
    """
    B, H, Lq, D = q.shape
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(D)          # (B, H, Lq, Lk)
    scores = apply_masks(scores, key_padding_mask, attn_mask)
    no_key = torch.isneginf(scores).all(dim=-1, keepdim=True)            # (B, H, Lq, 1)
    scores = scores.masked_fill(no_key, 0.0)       # a finite row, so the softmax below is not NaN
    weights = torch.softmax(scores, dim=-1)                                # (B, H, Lq, Lk)
    weights = weights.masked_fill(no_key, 0.0)     # rows without a key attend to nothing
    return torch.matmul(weights, v)                                        # (B, H, Lq, D)
