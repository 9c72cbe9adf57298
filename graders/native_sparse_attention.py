"""Cases for `native_sparse_attention`: the block selection on its own (a bool mask per KV group,
compared exactly, so it is judged as a set) and the gated output of the three branches (outputs and
gradients): GQA, MHA and MQA, sequences whose last block is partial, shorter than one block and of
one token, a long one with many candidate blocks, a window of one key and one longer than the
sequence, block_count 3 (the forced blocks only), a given scale, and the three dtypes.

The queries of every case are redrawn, one (query, KV group) at a time, until the scores that
compete for the last free slot are further apart than the case dtype's rounding can move them
(computed here in float64 on the inputs rounded to that dtype): the blocks selected are the same for
every correct way of writing the scores, so no verdict rests on a near-tie."""
from __future__ import annotations

import torch

from attn_drill.bank.api import Case, Ctx, traits

# how far (relative to the size of the scores' terms) the scores competing for a slot stay apart
MARGIN = {torch.float64: 1e-9, torch.float32: 2e-5, torch.bfloat16: 0.012}

PROMISES = [
    ("select_blocks returns (B, T, Hkv, NB) bool, NB = ceil(T / block_size), the last block may be partial",
     "select_"),
    ("block 0, the query's own block and the block before it are always selected and count in block_count",
     "select_"),
    ("block_count = 3 selects the forced blocks only", "select_forced_only_fp64"),
    ("the other slots go to the past blocks with the largest sum over the group's heads of the compressed "
     "branch's weights; all of them when there are fewer", "select_"),
    ("one selection per KV group, shared by its query heads (query head h in group h // (Hq // Hkv))",
     "select_gqa_fp64"),
    ("scores that compete for a slot are never within rounding of each other (the cases are built so)",
     "_apart (every case)"),
    ("compressed keys and values are the means of complete blocks; block c is visible iff "
     "(c + 1) * block_size - 1 <= t", "nsa_"),
    ("the compressed branch is zero while no block is complete (t < block_size - 1)", "nsa_shorter_than_block_fp64"),
    ("the selection branch attends to the tokens s <= t of the selected blocks", "nsa_"),
    ("the window branch attends to the `window` latest keys t - window + 1 .. t", "nsa_window1_fp64"),
    ("a window longer than the sequence is plain causal attention", "nsa_mha_fp64"),
    ("the gates are three independent sigmoids of gate_logits, in the order (compressed, selected, window)",
     "nsa_"),
    ("scale None means 1 / sqrt(D); a given scale multiplies q.k in all branches", "nsa_scale_fp64"),
    ("select_blocks applies its own scale", "select_scale_gqa_fp64"),
    ("GQA, MHA (Hq == Hkv) and MQA (Hkv == 1); Dv may differ from D", "nsa_"),
    ("T = 1, a T shorter than one block, a partial last block, T >= 64", "nsa_"),
    ("gradients w.r.t. q, k, v and gate_logits", "nsa_"),
    ("float64, float32 and bfloat16 inputs keep their dtype", "nsa_bf16"),
    ("the inputs are left unchanged", "every case (the engine compares the inputs after the call)"),
]


def _group_scores(q, k, bs, scale):
    """float64: the selection score (B, T, Hkv, NC) of every complete block, and the size of the
    terms behind each (the softmax weights times the spread of the logits), for the margin."""
    B, T, Hq, D = q.shape
    Hkv = k.shape[2]
    G = Hq // Hkv
    n = T // bs
    k_cmp = k[:, :n * bs].reshape(B, n, bs, Hkv, D).mean(2).repeat_interleave(G, dim=2)   # (B, n, Hq, D)
    absk = k[:, :n * bs].abs().reshape(B, n, bs, Hkv, D).mean(2).repeat_interleave(G, dim=2)
    logits = torch.einsum("bthd,bchd->bthc", q, k_cmp) * scale                            # (B, T, Hq, n)
    spread = torch.einsum("bthd,bchd->bthc", q.abs(), absk) * scale                       # |terms| of a logit
    visible = ((torch.arange(n) + 1) * bs - 1)[None, :] <= torch.arange(T)[:, None]       # (T, n)
    logits = logits.masked_fill(~visible[:, None, :], float("-inf"))
    p = torch.softmax(logits, -1).nan_to_num(0.0)                                         # (B, T, Hq, n)
    worst = spread.masked_fill(~visible[:, None, :], 0.0).amax(-1, keepdim=True)          # (B, T, Hq, 1)
    err = p * (2 * worst + 2)                                                             # rounding scale
    return p.view(B, T, Hkv, G, n).sum(3), err.view(B, T, Hkv, G, n).sum(3)


def _apart(ctx: Ctx, q, k, bs, count, scale, dtype):
    """q with the heads of a (query, group) redrawn until, with the inputs rounded to dtype, the
    candidate scores on either side of the last free slot are further apart than the margin."""
    B, T, Hq, D = q.shape
    Hkv = k.shape[2]
    G = Hq // Hkv
    scale = D ** -0.5 if scale is None else scale
    if (T - 1) // bs < 3:
        return q                                                                          # no candidate block yet
    kk = k.to(dtype).double()
    own = torch.arange(T) // bs                                                           # (T,)
    free = count - 1 - (own >= 1).long() - (own >= 2).long()                              # slots left by the forced
    n_cand = (own - 2).clamp(min=0)                                                       # blocks 1 .. own - 2
    contested = (n_cand > free) & (free > 0)                                              # (T,)
    j = torch.arange(T // bs)[None, :]
    candidate = (j >= 1) & (j <= own[:, None] - 2)                                        # (T, n)
    at = free.clamp(min=1, max=T // bs - 1)[None, :, None, None] - 1                      # (1, T, 1, 1)
    for _ in range(200):
        score, err = _group_scores(q.to(dtype).double(), kk, bs, scale)                   # (B, T, Hkv, n)
        score = score.masked_fill(~candidate[:, None, :], float("-inf"))
        order = score.argsort(-1, descending=True)
        s, e = score.gather(-1, order), err.gather(-1, order)                             # best first
        idx = at.expand(B, T, Hkv, 1)
        gap = s.gather(-1, idx) - s.gather(-1, idx + 1)                                   # last in vs first out
        bad = (gap <= MARGIN[dtype] * (e.gather(-1, idx) + e.gather(-1, idx + 1)))[..., 0]
        bad &= contested[None, :, None]                                                   # (B, T, Hkv)
        if not bad.any():
            return q
        redo = bad.repeat_interleave(G, dim=2)[..., None]                                 # (B, T, Hq, 1)
        q = torch.where(redo, ctx.randn(B, T, Hq, D), q)
    raise RuntimeError("grader: could not keep the selection scores apart")


def _sizes_note(B, T, Hq, Hkv, D, Dv, bs, count, window=None, scale=None):
    kind = "MHA" if Hq == Hkv else ("MQA" if Hkv == 1 else "GQA")
    note = f"{kind} {Hq}/{Hkv}, T={T}, block {bs}, count {count}"
    if window is not None:
        note += f", window {window}"
    if scale is not None:
        note += f", scale {scale}"
    return note


def _select_case(ctx: Ctx, name, B, T, Hq, Hkv, D, bs, count, dtype, scale=None):
    q, k = ctx.randn(B, T, Hq, D), ctx.randn(B, T, Hkv, D)
    q = _apart(ctx, q, k, bs, count, scale, dtype)
    return Case(name=name, target="select_blocks", inputs={"q": q, "k": k},
                kwargs={"block_size": bs, "block_count": count, "scale": scale}, dtype=dtype, grad=False,
                note=_sizes_note(B, T, Hq, Hkv, D, D, bs, count, scale=scale) + ", the selected blocks",
                traits=traits(B=B, L=T, H=Hkv, mask="causal"))


def _nsa_case(ctx: Ctx, name, B, T, Hq, Hkv, D, Dv, bs, count, window, dtype, scale=None, gate_scale=1.5):
    q, k, v = ctx.randn(B, T, Hq, D), ctx.randn(B, T, Hkv, D), ctx.randn(B, T, Hkv, Dv)
    gates = ctx.randn(B, T, Hq, 3, scale=gate_scale)
    q = _apart(ctx, q, k, bs, count, scale, dtype)
    return Case(name=name, target="native_sparse_attention",
                inputs={"q": q, "k": k, "v": v, "gate_logits": gates},
                kwargs={"block_size": bs, "block_count": count, "window": window, "scale": scale}, dtype=dtype,
                note=_sizes_note(B, T, Hq, Hkv, D, Dv, bs, count, window, scale),
                traits=traits(B=B, L=T, H=Hq, D=D, Dv=Dv, mask="causal"))


def cases(ctx: Ctx) -> list[Case]:
    # the cases that tell the most mistakes apart come first: a failing grade stops at its first failure
    out = [
        _select_case(ctx, "select_gqa_fp64", 2, 29, 6, 2, 7, 4, 5, torch.float64),
        _nsa_case(ctx, "nsa_gqa_fp64", 2, 29, 6, 2, 7, 5, 4, 5, 6, torch.float64),
        _select_case(ctx, "select_forced_only_fp64", 1, 22, 2, 1, 6, 3, 3, torch.float64),
        _nsa_case(ctx, "nsa_mqa_b1_fp32", 1, 23, 3, 1, 7, 7, 3, 4, 5, torch.float32),
        _nsa_case(ctx, "nsa_mha_fp64", 2, 21, 2, 2, 6, 4, 5, 3, 40, torch.float64),
        _nsa_case(ctx, "nsa_window1_fp64", 1, 17, 4, 2, 5, 5, 3, 4, 1, torch.float64),
        _nsa_case(ctx, "nsa_shorter_than_block_fp64", 2, 3, 2, 1, 5, 3, 5, 3, 2, torch.float64),
        _nsa_case(ctx, "nsa_l1_fp64", 3, 1, 2, 2, 5, 5, 3, 3, 3, torch.float64),
        _nsa_case(ctx, "nsa_scale_fp64", 2, 19, 6, 3, 4, 6, 3, 5, 4, torch.float64, scale=0.8),
        _select_case(ctx, "select_long_fp32", 1, 70, 6, 2, 10, 5, 6, torch.float32),
        # a given scale, three query heads per group: the scale sharpens each head's softmax before the
        # group's sum, so it moves the ranking
        _select_case(ctx, "select_scale_gqa_fp64", 2, 27, 6, 2, 6, 4, 5, torch.float64, scale=1.5),
        _nsa_case(ctx, "nsa_long_fp32", 1, 70, 6, 2, 10, 9, 5, 6, 9, torch.float32),
    ]
    G, Hkv, bs = ctx.int(1, 3), ctx.int(1, 3), ctx.int(2, 6)
    T = ctx.int(1, 40)
    out += [
        _nsa_case(ctx, "nsa_sizes_from_seed_fp64", ctx.int(1, 3), T, G * Hkv, Hkv, ctx.int(2, 9), ctx.int(2, 9),
                  bs, ctx.int(3, 6), ctx.int(1, 12), torch.float64),
        _select_case(ctx, "select_bf16", 2, 26, 6, 3, 6, 3, 4, torch.bfloat16),
        _nsa_case(ctx, "nsa_bf16", 2, 26, 6, 3, 6, 7, 3, 4, 6, torch.bfloat16),
    ]
    if ctx.full:
        for i in range(6):
            G, Hkv, bs = ctx.int(1, 4), ctx.int(1, 3), ctx.int(1, 8)
            B, T = ctx.int(1, 3), ctx.int(1, 80)
            dtype = ctx.choice([torch.float64, torch.float32, torch.bfloat16])
            count, window = ctx.int(3, 8), ctx.int(1, 20)
            D, Dv = ctx.int(1, 12), ctx.int(1, 12)
            if dtype == torch.bfloat16:
                bs, T, D = max(bs, 3), min(T, 48), max(D, 4)   # bfloat16 cannot keep many close candidates apart
            scale = ctx.choice([None, 0.5])
            if i % 3 == 2:
                out.append(_select_case(ctx, f"select_random{i}", B, T, G * Hkv, Hkv, D, bs, count, dtype, scale))
            else:
                out.append(_nsa_case(ctx, f"nsa_random{i}", B, T, G * Hkv, Hkv, D, Dv, bs, count, window, dtype,
                                     scale))
    return out
