"""Cases for `moba`: the block selection on its own (a bool mask per head, compared exactly, so it is
judged as a set) and the attention over the selected blocks (outputs and gradients): sequences whose
last block is partial, shorter than one block and of one token, a long one, blocks of one token,
topk = 1 (the own block only) and topk at least the number of blocks (full causal attention),
a given scale, and the three dtypes.

The queries of every case are redrawn, one (query, head) at a time, until the gates that compete for
the last free slot are further apart than the case dtype's rounding can move them (computed here in
float64 on the inputs rounded to that dtype): the blocks selected are the same for every correct way
of writing the gates, so no verdict rests on a near-tie."""
from __future__ import annotations

import torch

from attn_drill.bank.api import Case, Ctx, traits

# how far (relative to the size of the gates' terms) the gates competing for a slot stay apart
MARGIN = {torch.float64: 1e-9, torch.float32: 2e-5, torch.bfloat16: 0.012}

PROMISES = [
    ("moba_select returns (B, T, H, NB) bool, NB = ceil(T / chunk_size), the last block may be partial",
     "select_"),
    ("the query's own block t // chunk_size is always selected and counts among the topk", "select_"),
    ("the other topk - 1 slots go to the past blocks with the largest q . mean(k over the block), no scale",
     "select_"),
    ("all past blocks are taken when there are fewer than topk - 1; a future block never", "select_"),
    ("selection per head", "select_fp64"),
    ("gates that compete for a slot are never within rounding of each other (the cases are built so)",
     "_apart (every case)"),
    ("topk = 1 is attention inside the own block only", "moba_topk1_fp64"),
    ("topk >= NB is plain causal attention", "moba_topk_all_fp64"),
    ("one softmax over the tokens s <= t of the selected blocks (causal inside the own block)", "moba_"),
    ("chunk_size 1: every token is a block", "moba_chunk1_fp64"),
    ("scale None means 1 / sqrt(D); a given scale multiplies q.k (not the gate)", "moba_scale_fp64"),
    ("Dv may differ from D", "moba_fp64"),
    ("T = 1, a T shorter than one block, a partial last block, T >= 64", "moba_"),
    ("gradients w.r.t. q, k and v", "moba_"),
    ("float64, float32 and bfloat16 inputs keep their dtype", "moba_bf16"),
    ("the inputs are left unchanged", "every case (the engine compares the inputs after the call)"),
]


def _apart(ctx: Ctx, q, k, C, topk, dtype):
    """q with a (query, head) redrawn until, with the inputs rounded to dtype, the gates of the past
    blocks on either side of the last free slot are further apart than the margin."""
    B, T, H, D = q.shape
    n = T // C                                                                  # complete blocks
    own = torch.arange(T) // C                                                  # (T,)
    free = topk - 1
    contested = (own > free) & (free > 0)                                       # more past blocks than slots
    if n < 2 or not contested.any():
        return q
    kk = k.to(dtype).double()[:, :n * C].reshape(B, n, C, H, D)
    k_mean, k_abs = kk.mean(2), kk.abs().mean(2)                                # (B, n, H, D)
    past = torch.arange(n)[None, :] < own[:, None]                              # (T, n)
    at = torch.full((1, T, 1, 1), min(free, n - 1) - 1) if free > 0 else None
    for _ in range(200):
        qq = q.to(dtype).double()
        gate = torch.einsum("bthd,bjhd->bthj", qq, k_mean)                      # (B, T, H, n)
        err = torch.einsum("bthd,bjhd->bthj", qq.abs(), k_abs)                  # |terms| of a gate
        gate = gate.masked_fill(~past[:, None, :], float("-inf"))
        order = gate.argsort(-1, descending=True)
        g, e = gate.gather(-1, order), err.gather(-1, order)                    # best first
        idx = at.expand(B, T, H, 1)
        gap = g.gather(-1, idx) - g.gather(-1, idx + 1)                         # last in vs first out
        bad = (gap <= MARGIN[dtype] * (e.gather(-1, idx) + e.gather(-1, idx + 1)))[..., 0]
        bad &= contested[None, :, None]                                         # (B, T, H)
        if not bad.any():
            return q
        q = torch.where(bad[..., None], ctx.randn(B, T, H, D), q)
    raise RuntimeError("grader: could not keep the gates apart")


def _note(B, T, H, C, topk, scale=None):
    return f"H={H}, T={T}, chunk {C}, topk {topk}" + (f", scale {scale}" if scale is not None else "")


def _select_case(ctx: Ctx, name, B, T, H, D, C, topk, dtype):
    q, k = ctx.randn(B, T, H, D), ctx.randn(B, T, H, D)
    q = _apart(ctx, q, k, C, topk, dtype)
    return Case(name=name, target="moba_select", inputs={"q": q, "k": k},
                kwargs={"chunk_size": C, "topk": topk}, dtype=dtype, grad=False,
                note=_note(B, T, H, C, topk) + ", the selected blocks", traits=traits(B=B, L=T, H=H, mask="causal"))


def _moba_case(ctx: Ctx, name, B, T, H, D, Dv, C, topk, dtype, scale=None):
    q, k, v = ctx.randn(B, T, H, D), ctx.randn(B, T, H, D), ctx.randn(B, T, H, Dv)
    q = _apart(ctx, q, k, C, topk, dtype)
    return Case(name=name, target="moba_attention", inputs={"q": q, "k": k, "v": v},
                kwargs={"chunk_size": C, "topk": topk, "scale": scale}, dtype=dtype,
                note=_note(B, T, H, C, topk, scale), traits=traits(B=B, L=T, H=H, D=D, Dv=Dv, mask="causal"))


def cases(ctx: Ctx) -> list[Case]:
    # the cases that tell the most mistakes apart come first: a failing grade stops at its first failure
    out = [
        _moba_case(ctx, "moba_fp64", 2, 31, 3, 7, 5, 4, 3, torch.float64),
        _select_case(ctx, "select_fp64", 2, 31, 3, 7, 4, 3, torch.float64),
        _moba_case(ctx, "moba_b1_fp32", 1, 26, 2, 6, 6, 3, 4, torch.float32),
        _moba_case(ctx, "moba_topk1_fp64", 2, 14, 2, 5, 3, 3, 1, torch.float64),
        _moba_case(ctx, "moba_topk_all_fp64", 1, 13, 2, 5, 3, 4, 6, torch.float64),
        _moba_case(ctx, "moba_chunk1_fp64", 2, 11, 2, 3, 5, 1, 3, torch.float64),
        _moba_case(ctx, "moba_shorter_than_block_fp64", 2, 5, 2, 6, 3, 7, 2, torch.float64),
        _moba_case(ctx, "moba_l1_fp64", 3, 1, 2, 5, 5, 3, 2, torch.float64),
        _moba_case(ctx, "moba_scale_fp64", 2, 17, 2, 6, 6, 3, 3, torch.float64, scale=0.7),
        _select_case(ctx, "select_long_fp32", 1, 72, 3, 9, 5, 4, torch.float32),
        _moba_case(ctx, "moba_long_fp32", 1, 72, 3, 9, 7, 5, 4, torch.float32),
    ]
    H, C = ctx.int(1, 4), ctx.int(1, 7)
    out += [
        _moba_case(ctx, "moba_sizes_from_seed_fp64", ctx.int(1, 3), ctx.int(1, 40), H, ctx.int(2, 9), ctx.int(2, 9),
                   C, ctx.int(1, 5), torch.float64),
        _select_case(ctx, "select_bf16", 2, 27, 3, 6, 3, 3, torch.bfloat16),
        _moba_case(ctx, "moba_bf16", 2, 27, 3, 6, 7, 3, 3, torch.bfloat16),
    ]
    if ctx.full:
        for i in range(6):
            B, T, H, C = ctx.int(1, 3), ctx.int(1, 80), ctx.int(1, 4), ctx.int(1, 9)
            D, Dv, topk = ctx.int(1, 12), ctx.int(1, 12), ctx.int(1, 6)
            dtype = ctx.choice([torch.float64, torch.float32, torch.bfloat16])
            if dtype == torch.bfloat16:
                C, T, D = max(C, 2), min(T, 48), max(D, 4)   # bfloat16 cannot keep many close gates apart
            if i % 3 == 2:
                out.append(_select_case(ctx, f"select_random{i}", B, T, H, D, C, topk, dtype))
            else:
                out.append(_moba_case(ctx, f"moba_random{i}", B, T, H, D, Dv, C, topk, dtype,
                                      scale=ctx.choice([None, 0.5])))
    return out
