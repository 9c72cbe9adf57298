"""DeepSeek sparse attention: the lightning indexer's scores, its causal top-k, and attention over the
selected keys only (reference solution for `lightning_indexer`)."""
import torch


def lightning_indexer(
    q_index: torch.Tensor, k_index: torch.Tensor, weights: torch.Tensor, topk: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Index scores and the top-k keys of each query.

    q_index: (B, Lq, H, d), the indexer's queries, H index heads
    k_index: (B, Lk, d), one indexer key per token, shared by all index heads
    weights: (B, Lq, H), a signed weight per query and index head
    topk:    k >= 1
    Query i sits at position Lk - Lq + i (the queries are the last Lq tokens) and sees keys s <= it.
    returns (scores, indices):
      scores  (B, Lq, Lk): I[b, i, s] = H^-0.5 d^-0.5 sum_h weights[b, i, h] relu(q_index[b, i, h] . k_index[b, s]),
              for every pair, the future included (causality belongs to the selection)
      indices (B, Lq, k) int64: the k visible keys with the largest I; equal scores go to the earlier
              key; when fewer than k keys are visible, all of them and then -1. Judged as a set.
    """
    B, Lq, H, d = q_index.shape
    Lk = k_index.shape[1]
    dots = torch.einsum("bihd,bsd->bihs", q_index, k_index) * d ** -0.5   # (B, Lq, H, Lk)
    scores = torch.einsum("bih,bihs->bis", weights, torch.relu(dots))      # (B, Lq, Lk)
    scores = scores * H ** -0.5

    query_pos = torch.arange(Lq, device=scores.device) + (Lk - Lq)     # (Lq,) bottom-right aligned
    visible = torch.arange(Lk, device=scores.device)[None, :] <= query_pos[:, None]   # (Lq, Lk)
    masked = scores.detach().masked_fill(~visible, float("-inf"))     # (B, Lq, Lk)
    order = torch.sort(masked, dim=-1, descending=True, stable=True).indices   # ties: earlier key first
    order = order[..., :topk]                                          # (B, Lq, min(k, Lk))
    picked = visible.expand(B, Lq, Lk).gather(-1, order)               # a future key only when too few
    indices = torch.full((B, Lq, topk), -1, dtype=torch.long, device=scores.device)
    indices[..., :order.shape[-1]] = torch.where(picked, order, -1)
    return scores, indices


def sparse_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, indices: torch.Tensor, scale: float | None = None,
) -> torch.Tensor:
    """Attention of each query over the keys its indices name, and no others.

    q:       (B, Lq, H, D)
    k, v:    (B, Lk, H, D), (B, Lk, H, Dv)
    indices: (B, Lq, k) int64, distinct key positions in any order, -1 for an empty slot; every row
             names at least one key. The same keys serve every head.
    scale:   multiplier of q.k; None means 1 / sqrt(D)
    returns  (B, Lq, H, Dv)
    """
    B, Lq, H, D = q.shape
    if scale is None:
        scale = D ** -0.5
    valid = indices >= 0                                               # (B, Lq, k)
    rows = torch.arange(B, device=q.device)[:, None, None]             # (B, 1, 1)
    k_sel = k[rows, indices.clamp(min=0)]                              # (B, Lq, k, H, D) -1 read as key 0 ...
    v_sel = v[rows, indices.clamp(min=0)]                              # (B, Lq, k, H, Dv)
    scores = torch.einsum("bihd,bikhd->bihk", q, k_sel) * scale        # (B, Lq, H, k)
    scores = scores.masked_fill(~valid[:, :, None, :], float("-inf"))  # ... and masked out here
    weights = torch.softmax(scores, dim=-1)
    return torch.einsum("bihk,bikhd->bihd", weights, v_sel)            # (B, Lq, H, Dv)
