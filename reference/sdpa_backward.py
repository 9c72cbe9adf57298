"""The backward pass of scaled dot-product attention, by hand (reference solution for `sdpa_backward`)."""
import torch


def scaled_dot_product_attention_backward(
    dO: torch.Tensor, Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, P: torch.Tensor, scale: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients of O = P V with P = softmax(scale * Q K^T + mask) over the key axis.

    dO: (B, H, Lq, Dv)  gradient of the loss w.r.t. the output O
    Q:  (B, H, Lq, D)
    K:  (B, H, Lk, D)
    V:  (B, H, Lk, Dv)
    P:  (B, H, Lq, Lk)  the attention weights of the forward pass (0 where a key was masked)
    scale: the multiplier of the scores (1 / sqrt(D) by default in the forward pass)
    returns dQ (B, H, Lq, D), dK (B, H, Lk, D), dV (B, H, Lk, Dv)
    """
    dV = torch.matmul(P.transpose(-2, -1), dO)                 # (B, H, Lk, Dv)
    dP = torch.matmul(dO, V.transpose(-2, -1))                 # (B, H, Lq, Lk)
    # softmax backward, row by row: dS = P * (dP - sum_k P * dP)
    row_dot = torch.sum(P * dP, dim=-1, keepdim=True)          # (B, H, Lq, 1)
    dS = P * (dP - row_dot)                                    # (B, H, Lq, Lk)
    dQ = scale * torch.matmul(dS, K)                           # (B, H, Lq, D)
    dK = scale * torch.matmul(dS.transpose(-2, -1), Q)         # (B, H, Lk, D)
    return dQ, dK, dV
