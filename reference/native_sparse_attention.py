"""Native sparse attention: a compressed, a selected and a sliding-window branch, gated (reference
solution for `native_sparse_attention`)."""
import torch


def _pool_blocks(x: torch.Tensor, block_size: int) -> torch.Tensor:
    """(B, T, H, D) -> (B, T // block_size, H, D): the mean of each complete block of tokens."""
    B, T, H, D = x.shape
    n = T // block_size                                                # complete blocks only
    blocks = x[:, :n * block_size].reshape(B, n, block_size, H, D)     # (B, n, bs, H, D)
    return blocks.mean(dim=2)                                          # (B, n, H, D)


def _compressed_probs(q: torch.Tensor, k: torch.Tensor, block_size: int, scale: float) -> torch.Tensor:
    """The compressed branch's attention weights (B, T, Hq, NC) over the NC = T // block_size
    compressed keys. Query t sees compressed block c iff the block is complete at t:
    (c + 1) * block_size - 1 <= t. A query that sees none gets a row of zeros."""
    B, T, Hq, D = q.shape
    Hkv = k.shape[2]
    group = Hq // Hkv                                                  # query heads per KV head
    k_cmp = _pool_blocks(k, block_size).repeat_interleave(group, dim=2)   # (B, NC, Hq, D)
    NC = k_cmp.shape[1]
    t = torch.arange(T, device=q.device)
    ends = (torch.arange(NC, device=q.device) + 1) * block_size - 1    # (NC,) last token of each block
    visible = ends[None, :] <= t[:, None]                              # (T, NC)
    any_visible = visible.any(dim=-1, keepdim=True)                    # (T, 1)
    scores = torch.einsum("bthd,bchd->bthc", q, k_cmp) * scale         # (B, T, Hq, NC)
    scores = scores.masked_fill(~visible[:, None, :], float("-inf"))
    scores = scores.masked_fill(~any_visible[:, None, :], 0.0)         # no complete block yet: no NaN row
    return torch.softmax(scores, dim=-1) * any_visible[:, None, :]     # (B, T, Hq, NC)


def select_blocks(
    q: torch.Tensor, k: torch.Tensor, block_size: int, block_count: int, scale: float | None = None,
) -> torch.Tensor:
    """The blocks each KV group's queries attend to in the selection branch.

    q:           (B, T, Hq, D); query head h belongs to KV group h // (Hq // Hkv)
    k:           (B, T, Hkv, D)
    block_size:  tokens per block; block j holds tokens j*bs .. (j+1)*bs - 1 (the last may be partial)
    block_count: n >= 3, the number of blocks selected per query and group, forced ones included
    scale:       multiplier of q.k; None means 1 / sqrt(D)
    returns      (B, T, Hkv, NB) bool, NB = ceil(T / block_size): True where block j is selected for
                 query t and group g. Forced: block 0, block t // bs (its own) and block t // bs - 1.
                 The other n - (number forced) slots go to the blocks 1 .. t // bs - 2 with the
                 highest score, the sum over the group's heads of the compressed branch's weights;
                 all of them when there are fewer.
    """
    B, T, Hq, D = q.shape
    Hkv = k.shape[2]
    group = Hq // Hkv
    if scale is None:
        scale = D ** -0.5
    NB = (T + block_size - 1) // block_size                            # selection blocks
    probs = _compressed_probs(q, k, block_size, scale)                 # (B, T, Hq, NC)
    score = probs.view(B, T, Hkv, group, probs.shape[-1]).sum(dim=3)   # (B, T, Hkv, NC): one per group
    score = torch.nn.functional.pad(score, (0, NB - score.shape[-1]))  # (B, T, Hkv, NB)

    own = torch.arange(T, device=q.device)[:, None] // block_size      # (T, 1) the query's block
    j = torch.arange(NB, device=q.device)[None, :]                     # (1, NB)
    forced = (j == 0) | (j == own) | (j == own - 1)                    # (T, NB)
    candidate = (j >= 1) & (j <= own - 2)                              # (T, NB) complete, in the past
    score = score.masked_fill(~candidate[:, None, :], float("-inf"))
    score = score.masked_fill(forced[:, None, :], float("inf"))
    top = score.topk(min(block_count, NB), dim=-1).indices             # (B, T, Hkv, n)
    selected = torch.zeros(B, T, Hkv, NB, dtype=torch.bool, device=q.device)
    selected.scatter_(-1, top, True)
    return selected & (forced | candidate)[:, None, :]                 # drop picks that are neither


def _masked_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor,
                      scale: float) -> torch.Tensor:
    """Softmax attention of q (B, T, Hq, D) over k, v (B, T, Hkv, *) where keep (B or 1, T, Hq or 1, T)
    is True; every row keeps at least one key. Returns (B, T, Hq, Dv)."""
    group = q.shape[2] // k.shape[2]
    k = k.repeat_interleave(group, dim=2)                              # (B, T, Hq, D)
    v = v.repeat_interleave(group, dim=2)                              # (B, T, Hq, Dv)
    scores = torch.einsum("bthd,bshd->bths", q, k) * scale             # (B, T, Hq, T)
    scores = scores.masked_fill(~keep, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.einsum("bths,bshd->bthd", weights, v)                 # (B, T, Hq, Dv)


def native_sparse_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, gate_logits: torch.Tensor,
    block_size: int, block_count: int, window: int, scale: float | None = None,
) -> torch.Tensor:
    """Causal NSA: o_t = sigmoid(g_cmp) o_cmp + sigmoid(g_slc) o_slc + sigmoid(g_win) o_win.

    q:           (B, T, Hq, D)
    k, v:        (B, T, Hkv, D), (B, T, Hkv, Dv); query head h reads KV head h // (Hq // Hkv)
    gate_logits: (B, T, Hq, 3), the gates of the (compressed, selected, window) branches before
                 their sigmoids (three independent gates, not a softmax)
    block_size, block_count: as in select_blocks
    window:      w >= 1; the window branch attends to the w latest keys t - w + 1 .. t
    scale:       multiplier of q.k in all three branches; None means 1 / sqrt(D)
    returns      (B, T, Hq, Dv)
    Compressed: attention over the means of the complete blocks of keys and values (zeros while no
    block is complete). Selected: attention over the tokens s <= t of the blocks select_blocks picks
    for the query's group.
    """
    B, T, Hq, D = q.shape
    Hkv = k.shape[2]
    group = Hq // Hkv
    if scale is None:
        scale = D ** -0.5
    pos = torch.arange(T, device=q.device)
    causal = pos[None, :] <= pos[:, None]                              # (T, T) key s <= query t

    # 1. compressed: the means of complete blocks
    probs = _compressed_probs(q, k, block_size, scale)                 # (B, T, Hq, NC)
    v_cmp = _pool_blocks(v, block_size).repeat_interleave(group, dim=2)   # (B, NC, Hq, Dv)
    o_cmp = torch.einsum("bthc,bchd->bthd", probs, v_cmp)              # (B, T, Hq, Dv)

    # 2. selected: the tokens of the chosen blocks, shared by the heads of a group
    selected = select_blocks(q, k, block_size, block_count, scale)     # (B, T, Hkv, NB)
    in_block = selected.repeat_interleave(block_size, dim=-1)[..., :T]  # (B, T, Hkv, T) key s's block chosen
    keep = in_block.repeat_interleave(group, dim=2) & causal[None, :, None, :]   # (B, T, Hq, T)
    o_slc = _masked_attention(q, k, v, keep, scale)

    # 3. sliding window: the w latest keys
    recent = causal & (pos[:, None] - pos[None, :] < window)           # (T, T)
    o_win = _masked_attention(q, k, v, recent[None, :, None, :], scale)

    g_cmp, g_slc, g_win = torch.sigmoid(gate_logits).unbind(dim=-1)    # (B, T, Hq) each
    return g_cmp[..., None] * o_cmp + g_slc[..., None] * o_slc + g_win[..., None] * o_win
