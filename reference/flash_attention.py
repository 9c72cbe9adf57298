"""FlashAttention as a torch.autograd.Function: blocked forward, recomputing backward
(reference solution for `flash_attention`)."""
import math

import torch


class FlashAttention(torch.autograd.Function):
    """O = softmax(scale * Q K^T) V, computed in (block_size x block_size) tiles.

    forward(ctx, Q, K, V, scale, block_size)
      Q: (B, H, Lq, D), K: (B, H, Lk, D), V: (B, H, Lk, Dv)
      scale: multiplier of the scores (a float)
      block_size: rows per query block and per key block
      returns O: (B, H, Lq, Dv)
    Saved for backward: Q, K, V, O and the row log-sum-exp LSE (B, H, Lq, 1), never P.
    backward(ctx, dO) returns dQ, dK, dV, None, None.
    """

    @staticmethod
    def forward(ctx, Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, scale: float, block_size: int):
        B, H, Lq, D = Q.shape
        Lk = K.shape[2]
        Dv = V.shape[3]
        O = torch.empty(B, H, Lq, Dv, dtype=Q.dtype, device=Q.device)
        LSE = torch.empty(B, H, Lq, 1, dtype=Q.dtype, device=Q.device)
        for i in range(0, Lq, block_size):
            q = Q[:, :, i:i + block_size]                                # (B, H, bq, D)
            bq = q.shape[2]
            m = torch.full((B, H, bq, 1), float("-inf"), dtype=Q.dtype, device=Q.device)  # running max
            l = torch.zeros(B, H, bq, 1, dtype=Q.dtype, device=Q.device)                  # running sum
            acc = torch.zeros(B, H, bq, Dv, dtype=Q.dtype, device=Q.device)               # running P V
            for j in range(0, Lk, block_size):
                k = K[:, :, j:j + block_size]                            # (B, H, bk, D)
                v = V[:, :, j:j + block_size]                            # (B, H, bk, Dv)
                s = scale * torch.matmul(q, k.transpose(-2, -1))         # (B, H, bq, bk)
                m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))   # (B, H, bq, 1)
                alpha = torch.exp(m - m_new)
                p = torch.exp(s - m_new)                                 # (B, H, bq, bk)
                l = alpha * l + p.sum(dim=-1, keepdim=True)
                acc = alpha * acc + torch.matmul(p, v)                   # (B, H, bq, Dv)
                m = m_new
            O[:, :, i:i + block_size] = acc / l
            LSE[:, :, i:i + block_size] = m + torch.log(l)
        ctx.save_for_backward(Q, K, V, O, LSE)
        ctx.scale = scale
        ctx.block_size = block_size
        return O

    @staticmethod
    def backward(ctx, dO: torch.Tensor):
        Q, K, V, O, LSE = ctx.saved_tensors
        scale, block_size = ctx.scale, ctx.block_size
        Lq, Lk = Q.shape[2], K.shape[2]
        dQ = torch.zeros_like(Q)
        dK = torch.zeros_like(K)
        dV = torch.zeros_like(V)
        Drow = torch.sum(dO * O, dim=-1, keepdim=True)                   # (B, H, Lq, 1): rowsum(dO * O)
        for i in range(0, Lq, block_size):
            q = Q[:, :, i:i + block_size]                                # (B, H, bq, D)
            do = dO[:, :, i:i + block_size]                              # (B, H, bq, Dv)
            lse = LSE[:, :, i:i + block_size]                            # (B, H, bq, 1)
            d = Drow[:, :, i:i + block_size]                             # (B, H, bq, 1)
            for j in range(0, Lk, block_size):
                k = K[:, :, j:j + block_size]                            # (B, H, bk, D)
                v = V[:, :, j:j + block_size]                            # (B, H, bk, Dv)
                s = scale * torch.matmul(q, k.transpose(-2, -1))         # (B, H, bq, bk)
                p = torch.exp(s - lse)                                   # the forward's P, recomputed
                dV[:, :, j:j + block_size] += torch.matmul(p.transpose(-2, -1), do)   # (B, H, bk, Dv)
                dp = torch.matmul(do, v.transpose(-2, -1))               # (B, H, bq, bk)
                ds = p * (dp - d)                                        # (B, H, bq, bk)
                dQ[:, :, i:i + block_size] += scale * torch.matmul(ds, k)                 # (B, H, bq, D)
                dK[:, :, j:j + block_size] += scale * torch.matmul(ds.transpose(-2, -1), q)  # (B, H, bk, D)
        return dQ, dK, dV, None, None


def flash_attention(
    Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, scale: float | None = None, block_size: int = 16
) -> torch.Tensor:
    """softmax(scale * Q K^T) V through FlashAttention; scale None means 1 / sqrt(D)."""
    if scale is None:
        scale = 1.0 / math.sqrt(Q.shape[-1])
    return FlashAttention.apply(Q, K, V, scale, block_size)
