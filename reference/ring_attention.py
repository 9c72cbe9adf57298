"""Ring attention simulated on one machine: every device holds one block of the sequence, K/V blocks
travel around the ring, and each device merges its partial results exactly through their
log-sum-exps (reference solution for `ring_attention`)."""
import math

import torch


def block_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float,
                    causal: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention of one block of queries over one block of keys, normalised within the block.

    q: (B, H, Lq, D), k: (B, H, Lk, D), v: (B, H, Lk, Dv)
    scale: multiplier of the scores, S = scale * q k^T
    causal: keep key j for query i only when j <= i (a device's own block, where Lq == Lk)
    returns out (B, H, Lq, Dv) = softmax(S) V over this block's keys,
            lse (B, H, Lq) = log(sum_j exp(S_ij)), natural log, of the scaled (and masked) scores
    """
    Lq, Lk = q.shape[2], k.shape[2]
    s = scale * torch.matmul(q, k.transpose(-2, -1))                  # (B, H, Lq, Lk)
    if causal:
        keep = torch.ones(Lq, Lk, dtype=torch.bool, device=q.device).tril()
        s = s.masked_fill(~keep, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)                                  # (B, H, Lq)
    p = torch.softmax(s, dim=-1)                                      # (B, H, Lq, Lk), rows sum to 1
    out = torch.matmul(p, v)                                          # (B, H, Lq, Dv)
    return out, lse


def merge_partials(out_a: torch.Tensor, lse_a: torch.Tensor, out_b: torch.Tensor,
                   lse_b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Two partial attentions of the same queries over disjoint sets of keys, merged into one.

    out_a, out_b: (B, H, L, Dv), each normalised over its own keys; lse_a, lse_b: (B, H, L), natural log
    returns out (B, H, L, Dv) and lse (B, H, L): the attention over both sets of keys.
    lse = -inf marks a partial without keys (its out is 0): merging it returns the other partial.
    At most one of lse_a, lse_b may be -inf in a row.
    """
    lse = torch.logaddexp(lse_a, lse_b)                               # (B, H, L)
    w_a = torch.exp(lse_a - lse).unsqueeze(-1)                        # (B, H, L, 1): share of a's keys
    w_b = torch.exp(lse_b - lse).unsqueeze(-1)                        # (B, H, L, 1): share of b's keys
    out = w_a * out_a + w_b * out_b                                   # (B, H, L, Dv)
    return out, lse


def ring_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_sizes: list[int],
                   causal: bool = False, scale: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention over N simulated devices; device r holds the r-th block of q, k and v.

    q, k: (B, H, L, D), v: (B, H, L, Dv)
    block_sizes: N positive ints summing to L, the rows each device holds, in sequence order
    causal: device r uses its own block with the causal mask, the blocks of devices j < r whole, and
            skips the blocks of devices j > r
    scale: multiplier of the scores; None means 1 / sqrt(D)
    At step t = 0 .. N-1 device r holds the K/V block of device (r - t) mod N (step 0: its own) and
    merges it into its running (out, lse); then every device passes its K/V block to device r + 1.
    returns out (B, H, L, Dv) and lse (B, H, L), natural log: full attention and its log-sum-exp
    """
    D = q.shape[-1]
    if scale is None:
        scale = 1.0 / math.sqrt(D)
    N = len(block_sizes)
    q_blocks = torch.split(q, block_sizes, dim=2)                     # N x (B, H, L_r, D)
    kv_blocks = list(zip(torch.split(k, block_sizes, dim=2), torch.split(v, block_sizes, dim=2)))
    outs, lses = [None] * N, [None] * N                               # each device's running partial
    for t in range(N):
        for r in range(N):
            j = (r - t) % N                                           # the device whose K/V block r holds now
            if causal and j > r:
                continue                                              # every key there is after every query of r
            k_j, v_j = kv_blocks[j]
            out_j, lse_j = block_attention(q_blocks[r], k_j, v_j, scale, causal=causal and j == r)
            if t == 0:
                outs[r], lses[r] = out_j, lse_j                       # step 0: the device's own block
            else:
                outs[r], lses[r] = merge_partials(outs[r], lses[r], out_j, lse_j)
    return torch.cat(outs, dim=2), torch.cat(lses, dim=2)             # (B, H, L, Dv), (B, H, L)
