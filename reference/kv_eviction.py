"""Two KV-cache eviction policies: H2O (heavy hitters plus a recent window, decided at every decode
step from accumulated attention) and SnapKV (one selection at the end of the prompt, voted by an
observation window and pooled) (reference solution for `kv_eviction`)."""
import math

import torch
import torch.nn.functional as F


def top_positions(scores: torch.Tensor, count: int) -> torch.Tensor:
    """The positions of the `count` largest scores along the last dim, in increasing order.

    scores: (..., n) float; count: 0 <= count <= n
    returns (..., count) int64. Among equal scores the earlier position is taken first.
    """
    order = torch.sort(scores, dim=-1, descending=True, stable=True).indices   # (..., n), ties keep position order
    return order[..., :count].sort(dim=-1).values                              # (..., count), increasing


def _evict(pos: torch.Tensor, score: torch.Tensor, heavy_size: int, recent_size: int):
    """H2O's eviction: keep the heavy_size best-scored tokens older than the recent window, and the window.

    pos, score: (B, H, n), the cached positions (increasing) and their accumulated attention
    returns the same for the kept tokens, (B, H, min(n, heavy_size + recent_size))
    """
    B, H, n = pos.shape
    if n <= heavy_size + recent_size:
        return pos, score
    old = n - recent_size                                              # slots 0 .. old-1 are candidates
    heavy = top_positions(score[..., :old], heavy_size)               # (B, H, heavy_size), increasing
    recent = torch.arange(old, n, device=pos.device).expand(B, H, recent_size)   # (B, H, recent_size)
    keep = torch.cat([heavy, recent], dim=-1)                          # (B, H, heavy + recent), increasing
    return pos.gather(-1, keep), score.gather(-1, keep)


def h2o_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, prefill_len: int, heavy_size: int,
                  recent_size: int, scale: float | None = None):
    """Prompt, then one token per step, with the H2O cache (per batch element and head).

    q, k, v:     (B, H, T, D); tokens 0 .. prefill_len-1 are the prompt, each later token one decode step
    prefill_len: 1 <= prefill_len <= T; heavy_size, recent_size >= 1; scale None means 1 / sqrt(D)
    The prompt runs causal attention over itself; each key's score is its attention summed over every
    prompt query, and the cache is then cut to the budget. At step t the new token joins the cache,
    attends over it, its weights are added to the scores (the new token's own weight starts its score),
    and the cache is cut again: the heavy_size best-scored tokens older than the last recent_size, and
    those last recent_size. The cache is never larger than heavy_size + recent_size after a cut.
    returns out (B, H, T, D): every token's attention output
            kept (B, H, C) int64: the positions in the cache after the last token, increasing,
                 C = min(T, heavy_size + recent_size)
            score (B, H, C): their accumulated attention
    """
    B, H, T, D = q.shape
    P = prefill_len
    if scale is None:
        scale = 1.0 / math.sqrt(D)

    # the prompt: causal attention, every query row adds its weights to the keys' scores
    s = torch.matmul(q[:, :, :P], k[:, :, :P].transpose(-2, -1)) * scale   # (B, H, P, P)
    causal = torch.ones(P, P, dtype=torch.bool, device=q.device).tril()
    w = torch.softmax(s.masked_fill(~causal, float("-inf")), dim=-1)        # (B, H, P, P)
    outs = [torch.matmul(w, v[:, :, :P])]                                   # (B, H, P, D)
    score = w.sum(dim=2)                                                    # (B, H, P): summed over queries
    pos = torch.arange(P, device=q.device).expand(B, H, P)                  # (B, H, P)
    pos, score = _evict(pos, score, heavy_size, recent_size)                # cut after the prompt

    # decode: one token per step
    for t in range(P, T):
        pos = torch.cat([pos, torch.full((B, H, 1), t, dtype=pos.dtype, device=q.device)], dim=-1)  # (B, H, n)
        idx = pos.unsqueeze(-1).expand(-1, -1, -1, D)                      # (B, H, n, D)
        kc, vc = k.gather(2, idx), v.gather(2, idx)                         # (B, H, n, D): the cache
        s = torch.einsum("bhd,bhnd->bhn", q[:, :, t], kc) * scale           # (B, H, n)
        w = torch.softmax(s, dim=-1)                                        # (B, H, n)
        outs.append(torch.einsum("bhn,bhnd->bhd", w, vc).unsqueeze(2))     # (B, H, 1, D)
        score = torch.cat([score, torch.zeros_like(score[..., :1])], dim=-1) + w   # (B, H, n)
        pos, score = _evict(pos, score, heavy_size, recent_size)            # cut after the step
    return torch.cat(outs, dim=2), pos, score                              # (B, H, T, D), (B, H, C) x 2


def snapkv_prefill(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window_size: int, capacity: int,
                   kernel_size: int = 5, pooling: str = "avgpool", scale: float | None = None):
    """The prompt's attention, and the cache SnapKV keeps of it.

    q:    (B, Hq, T, D); k, v: (B, Hkv, T, D); query head h reads KV head h // (Hq // Hkv)
    window_size W < capacity; kernel_size odd; pooling "avgpool" or "maxpool"; scale None: 1 / sqrt(D)
    The observation window is the last W queries. Each prefix key (positions 0 .. T-W-1) gets the
    attention those queries give it (softmax over all the keys they may see), summed over the window;
    the votes are pooled along the positions (stride 1, kernel_size // 2 zeros of padding each side,
    average divided by kernel_size); the capacity - W best pooled prefix positions are kept, and the
    window. Selection is per query head. If T <= capacity everything is kept.
    returns out (B, Hq, T, D): causal attention of the prompt over all its keys (nothing evicted yet)
            kept (B, Hq, C) int64: kept positions, increasing, C = min(T, capacity)
            k_cache, v_cache (B, Hq, C, D): the keys and values at those positions
    """
    B, Hq, T, D = q.shape
    Hkv = k.shape[1]
    G = Hq // Hkv
    W = window_size
    if scale is None:
        scale = 1.0 / math.sqrt(D)
    k = k.repeat_interleave(G, dim=1)                                  # (B, Hq, T, D): head h <- h // G
    v = v.repeat_interleave(G, dim=1)                                  # (B, Hq, T, D)

    s = torch.matmul(q, k.transpose(-2, -1)) * scale                   # (B, Hq, T, T)
    causal = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
    w = torch.softmax(s.masked_fill(~causal, float("-inf")), dim=-1)    # (B, Hq, T, T)
    out = torch.matmul(w, v)                                           # (B, Hq, T, D)
    if T <= capacity:
        kept = torch.arange(T, device=q.device).expand(B, Hq, T)
        return out, kept, k, v

    obs = w[:, :, T - W:, :T - W]                                      # (B, Hq, W, T-W): window queries, prefix keys
    votes = obs.sum(dim=2)                                             # (B, Hq, T-W)
    flat = votes.reshape(B * Hq, 1, T - W)                             # (B*Hq, 1, T-W)
    if pooling == "avgpool":
        pooled = F.avg_pool1d(flat, kernel_size, stride=1, padding=kernel_size // 2)   # count_include_pad
    elif pooling == "maxpool":
        pooled = F.max_pool1d(flat, kernel_size, stride=1, padding=kernel_size // 2)
    else:
        raise ValueError(f"pooling must be 'avgpool' or 'maxpool', not {pooling!r}")
    pooled = pooled.reshape(B, Hq, T - W)                              # (B, Hq, T-W)
    prefix = top_positions(pooled, capacity - W)                       # (B, Hq, capacity - W), increasing
    window = torch.arange(T - W, T, device=q.device).expand(B, Hq, W)  # (B, Hq, W)
    kept = torch.cat([prefix, window], dim=-1)                         # (B, Hq, capacity), increasing
    idx = kept.unsqueeze(-1).expand(-1, -1, -1, D)                     # (B, Hq, capacity, D)
    return out, kept, k.gather(2, idx), v.gather(2, idx)
