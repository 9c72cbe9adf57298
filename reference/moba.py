"""Mixture of Block Attention: each query attends to its own block and the top-scoring past blocks
(reference solution for `moba`)."""
import torch


def moba_select(q: torch.Tensor, k: torch.Tensor, chunk_size: int, topk: int) -> torch.Tensor:
    """The blocks each query attends to, per head.

    q, k:       (B, T, H, D)
    chunk_size: C, tokens per block; block j holds tokens j*C .. (j+1)*C - 1 (the last may be partial)
    topk:       k >= 1 blocks per query and head, its own block included
    returns     (B, T, H, NB) bool, NB = ceil(T / C): True where query t of head h attends to block j.
                The query's own block t // C is always selected; the other k - 1 slots go to the past
                blocks j < t // C with the largest gate q_t . mean(k over block j) (no scale), all of
                them when there are fewer; future blocks never.
    """
    B, T, H, D = q.shape
    C = chunk_size
    NB = (T + C - 1) // C                                              # blocks, the last may be partial
    n_full = T // C                                                    # a past block is always complete
    k_mean = k[:, :n_full * C].reshape(B, n_full, C, H, D).mean(dim=2)  # (B, n_full, H, D)
    gate = torch.einsum("bthd,bjhd->bthj", q, k_mean)                  # (B, T, H, n_full)
    gate = torch.nn.functional.pad(gate, (0, NB - n_full))             # (B, T, H, NB)

    own = torch.arange(T, device=q.device)[:, None] // C               # (T, 1) the query's block
    j = torch.arange(NB, device=q.device)[None, :]                     # (1, NB)
    past = j < own                                                     # (T, NB) candidates
    current = j == own                                                 # (T, NB) always kept
    gate = gate.masked_fill(~past[:, None, :], float("-inf"))
    gate = gate.masked_fill(current[:, None, :], float("inf"))
    top = gate.topk(min(topk, NB), dim=-1).indices                     # (B, T, H, k)
    selected = torch.zeros(B, T, H, NB, dtype=torch.bool, device=q.device)
    selected.scatter_(-1, top, True)
    return selected & (past | current)[:, None, :]                     # -inf picks are future blocks: drop


def moba_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, chunk_size: int, topk: int, scale: float | None = None,
) -> torch.Tensor:
    """Causal MoBA: one softmax over the tokens s <= t of the blocks moba_select picks.

    q, k:   (B, T, H, D)
    v:      (B, T, H, Dv)
    scale:  multiplier of q.k; None means 1 / sqrt(D)
    returns (B, T, H, Dv)
    """
    B, T, H, D = q.shape
    if scale is None:
        scale = D ** -0.5
    pos = torch.arange(T, device=q.device)
    causal = pos[None, :] <= pos[:, None]                              # (T, T) key s <= query t
    selected = moba_select(q, k, chunk_size, topk)                     # (B, T, H, NB)
    in_block = selected.repeat_interleave(chunk_size, dim=-1)[..., :T]  # (B, T, H, T) key s's block chosen
    keep = in_block.transpose(1, 2) & causal                           # (B, H, T, T)
    scores = torch.einsum("bthd,bshd->bhts", q, k) * scale             # (B, H, T, T)
    scores = scores.masked_fill(~keep, float("-inf"))
    weights = torch.softmax(scores, dim=-1)                            # one softmax over all kept keys
    return torch.einsum("bhts,bshd->bthd", weights, v)                 # (B, T, H, Dv)
