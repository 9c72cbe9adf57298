"""FLOPs and activation memory of one attention forward pass (reference solution for `attention_cost`)."""


def estimate_attention_cost(
    B: int, H: int, L: int, D: int, bytes_per_elem: int = 2, Lk: int | None = None
) -> tuple[int, int]:
    """Cost of softmax(scale * Q K^T) V for one layer, forward pass only.

    B: batch, H: heads, L: query length, D: head dim, Lk: key length (None means Lk = L).
    returns (flops, memory_bytes):
      flops:        the two matmuls Q K^T and P V, counting a multiply-add as 2 FLOPs
                    (the convention of torch.utils.flop_counter.FlopCounterMode); scaling,
                    softmax and masking count 0
      memory_bytes: the score matrix S and the probability matrix P, each (B, H, L, Lk),
                    at bytes_per_elem bytes per element
    """
    if Lk is None:
        Lk = L
    qk_flops = 2 * B * H * L * Lk * D      # S = Q K^T: (L, D) x (D, Lk) per head
    pv_flops = 2 * B * H * L * Lk * D      # O = P V:   (L, Lk) x (Lk, D) per head
    flops = qk_flops + pv_flops
    score_elems = B * H * L * Lk           # one (B, H, L, Lk) matrix
    memory_bytes = 2 * score_elems * bytes_per_elem   # S and P
    return flops, memory_bytes
