"""Flash-decoding: one query token per sequence against a long KV cache cut into splits; each split
gives a partial output and its log-sum-exp, and the partials are merged exactly (reference solution
for `flash_decoding`)."""
import math

import torch


def split_partials(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, cache_lens: torch.Tensor,
                   split_size: int, scale: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The attention of one query per sequence over each split of its cache, on its own.

    q:                (B, Hq, D), the new token of each sequence
    k_cache, v_cache: (B, L, Hkv, D); positions >= cache_lens[b] of sequence b hold garbage
    cache_lens:       (B,) int64, the valid tokens of sequence b, 1 <= cache_lens[b] <= L
    split_size:       keys per split; split s holds cache positions s*split_size .. (s+1)*split_size - 1
    scale:            multiplier of the scores; None means 1 / sqrt(D)
    returns out_partial (S, B, Hq, D): softmax over the split's valid keys times their values
            lse_partial (S, B, Hq):    natural log of the sum of exp(scaled score) over those keys
            with S = ceil(L / split_size). A split with no valid key of sequence b has out 0, lse -inf.
    Query head h reads KV head h // (Hq // Hkv).
    """
    B, Hq, D = q.shape
    L, Hkv = k_cache.shape[1], k_cache.shape[2]
    G = Hq // Hkv                                                      # query heads per KV head
    if scale is None:
        scale = 1.0 / math.sqrt(D)
    S = math.ceil(L / split_size)
    qg = q.view(B, Hkv, G, D)                                          # (B, Hkv, G, D): head h = kv * G + g
    outs, lses = [], []
    for s in range(S):
        start, end = s * split_size, min((s + 1) * split_size, L)
        k = k_cache[:, start:end]                                      # (B, n, Hkv, D)
        v = v_cache[:, start:end]                                      # (B, n, Hkv, D)
        scores = torch.einsum("bhgd,bnhd->bhgn", qg, k) * scale        # (B, Hkv, G, n)
        pos = torch.arange(start, end, device=q.device)                # (n,)
        valid = pos[None, :] < cache_lens[:, None]                     # (B, n)
        scores = scores.masked_fill(~valid[:, None, None, :], float("-inf"))
        m = scores.amax(dim=-1, keepdim=True)                          # (B, Hkv, G, 1); -inf for an empty split
        m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))     # keep exp(score - m) at 0, not NaN
        p = torch.exp(scores - m)                                      # (B, Hkv, G, n), 0 on invalid keys
        l = p.sum(dim=-1)                                              # (B, Hkv, G); 0 for an empty split
        empty = l == 0
        out = torch.einsum("bhgn,bnhd->bhgd", p, v)                    # (B, Hkv, G, D), unnormalised
        out = out / torch.where(empty, torch.ones_like(l), l)[..., None]   # normalised; 0 where empty
        lse = m.squeeze(-1) + torch.log(l)                             # (B, Hkv, G); log 0 = -inf where empty
        outs.append(out.reshape(B, Hq, D))                             # (B, Hq, D)
        lses.append(lse.reshape(B, Hq))                                # (B, Hq)
    return torch.stack(outs), torch.stack(lses)                        # (S, B, Hq, D), (S, B, Hq)


def combine_partials(out_partial: torch.Tensor, lse_partial: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Merge the partials of disjoint splits into the attention over all of them.

    out_partial: (S, B, Hq, D), each normalised over its own split's keys (0 for an empty split)
    lse_partial: (S, B, Hq), natural log; -inf for an empty split. Every (b, h) has a non-empty split.
    returns out (B, Hq, D) = sum_s exp(lse_s - lse) out_s, and lse (B, Hq) = log sum_s exp(lse_s),
    computed with the largest lse_s taken out, so that no exp overflows.
    """
    M = lse_partial.amax(dim=0)                                        # (B, Hq), finite: a split is non-empty
    w = torch.exp(lse_partial - M)                                     # (S, B, Hq), in [0, 1]; 0 where empty
    total = w.sum(dim=0)                                               # (B, Hq), >= 1
    out = (w[..., None] * out_partial).sum(dim=0) / total[..., None]   # (B, Hq, D)
    lse = M + torch.log(total)                                         # (B, Hq)
    return out, lse


def flash_decoding(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, cache_lens: torch.Tensor,
                   split_size: int, scale: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Decode attention split over the cache: the partials of every split, merged.

    Arguments as in split_partials. Returns out (B, Hq, D) and lse (B, Hq): the attention of q over the
    first cache_lens[b] keys of sequence b and its log-sum-exp. Holds the scores of one split at a time.
    """
    out_partial, lse_partial = split_partials(q, k_cache, v_cache, cache_lens, split_size, scale)
    return combine_partials(out_partial, lse_partial)
