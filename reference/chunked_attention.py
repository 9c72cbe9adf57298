"""Attention computed block by block with an online softmax (reference solution for `chunked_attention`)."""
import math

import torch


def chunked_attention(
    Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, chunk_size: int = 256, scale: float | None = None
) -> torch.Tensor:
    """softmax(scale * Q K^T) V without ever building the full (Lq, Lk) score matrix.

    Q: (B, H, Lq, D), K: (B, H, Lk, D), V: (B, H, Lk, Dv)
    chunk_size: queries and keys are both cut into blocks of at most chunk_size rows
    scale: multiplier of the scores; None means 1 / sqrt(D)
    returns (B, H, Lq, Dv)
    """
    B, H, Lq, D = Q.shape
    Lk = K.shape[2]
    Dv = V.shape[3]
    if scale is None:
        scale = 1.0 / math.sqrt(D)

    out_chunks = []
    for i in range(0, Lq, chunk_size):
        q = Q[:, :, i:i + chunk_size]                                   # (B, H, cq, D)
        cq = q.shape[2]
        m = torch.full((B, H, cq, 1), float("-inf"), dtype=Q.dtype, device=Q.device)  # running max
        l = torch.zeros(B, H, cq, 1, dtype=Q.dtype, device=Q.device)                  # running sum
        acc = torch.zeros(B, H, cq, Dv, dtype=Q.dtype, device=Q.device)               # running P V
        for j in range(0, Lk, chunk_size):
            k = K[:, :, j:j + chunk_size]                               # (B, H, ck, D)
            v = V[:, :, j:j + chunk_size]                               # (B, H, ck, Dv)
            s = scale * torch.matmul(q, k.transpose(-2, -1))            # (B, H, cq, ck)
            m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))      # (B, H, cq, 1)
            alpha = torch.exp(m - m_new)                                # rescales the old sums
            p = torch.exp(s - m_new)                                    # (B, H, cq, ck)
            l = alpha * l + p.sum(dim=-1, keepdim=True)
            acc = alpha * acc + torch.matmul(p, v)                      # (B, H, cq, Dv)
            m = m_new
        out_chunks.append(acc / l)                                      # (B, H, cq, Dv)
    return torch.cat(out_chunks, dim=2)                                 # (B, H, Lq, Dv)
