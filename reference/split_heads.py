"""Splitting hidden states into attention heads and merging them back (reference for `split_heads`)."""
import torch


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Split the feature axis into heads.

    x: (B, L, num_heads * head_dim), where feature h * head_dim + d belongs to head h
    returns (B, num_heads, L, head_dim)
    """
    B, L, E = x.shape
    H = num_heads
    if E % H != 0:
        raise ValueError(f"feature size {E} is not divisible by num_heads={H}")
    D = E // H
    x = x.view(B, L, H, D)          # (B, L, H, D): each position's features, grouped by head
    return x.transpose(1, 2)        # (B, H, L, D)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """The inverse of split_heads.

    x: (B, num_heads, L, head_dim)
    returns (B, L, num_heads * head_dim), head h in features h * head_dim ... (h + 1) * head_dim - 1
    """
    B, H, L, D = x.shape
    x = x.transpose(1, 2)                   # (B, L, H, D)
    return x.contiguous().view(B, L, H * D)  # (B, L, H * D)
