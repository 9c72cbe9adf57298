"""Cases for `lightning_indexer`: the index scores (outputs and gradients) and the top-k indices
(sorted by a probe before they are compared, so they are judged as a set per query) with ties at
exactly zero (keys no index head scores above zero), negative scores, queries that see fewer keys
than topk, topk above the number of keys, queries at the end of a longer key sequence (a prefill
after a cache) and one decoding query; sparse_attention over given index sets in any order with -1
slots anywhere; and the two together.

The indexer's queries and weights are redrawn, one query at a time, until the top-k set of every
query is the same for every correct way of writing the scores in the case dtype (computed here in
float64 on the inputs rounded to that dtype): the scores on either side of the boundary are further
apart than rounding can move them, except exact zeros, which tie exactly and go to the earlier key."""
from __future__ import annotations

import torch

from attn_drill.bank.api import Case, Ctx, traits

# how far apart (relative to the size of the scores' terms) the scores on either side of the top-k stay
MARGIN = {torch.float64: 1e-9, torch.float32: 2e-5, torch.bfloat16: 0.02}

PROMISES = [
    ("scores (B, Lq, Lk) = H^-0.5 d^-0.5 sum_h w_h relu(q_h . k_s), for every pair, the future included",
     "indexer_"),
    ("scores may be negative (signed head weights); they rank below exact zeros", "indexer_ties_fp64"),
    ("query i sits at position Lk - Lq + i and sees the keys s <= Lk - Lq + i", "indexer_cache_fp32"),
    ("indices (B, Lq, topk) int64: the visible keys with the largest scores, judged as a set", "indexer_"),
    ("equal scores go to the earlier key", "indexer_ties_fp64"),
    ("fewer visible keys than topk: all of them, then -1", "indexer_"),
    ("topk larger than Lk", "indexer_topk_above_length_fp64"),
    ("no two scores on either side of the top-k boundary are within rounding of each other, except exact zeros "
     "(the cases are built so)", "_apart (every indexer case)"),
    ("gradients of the scores w.r.t. q_index, k_index and weights", "indexer_"),
    ("sparse_attention attends to the named keys only, the same for every head", "sparse_"),
    ("indices in any order, -1 slots anywhere in a row", "sparse_"),
    ("scale None means 1 / sqrt(D); a given scale multiplies q.k", "sparse_scale_fp64"),
    ("Dv may differ from D", "sparse_fp64"),
    ("gradients w.r.t. q, k and v", "sparse_"),
    ("lightning_indexer's indices are valid input to sparse_attention", "pipeline_fp64"),
    ("B = 1 and a single decoding query (Lq = 1)", "indexer_decode_b1_fp64, sparse_decode_b1_fp64"),
    ("Lq < Lk (queries after a cache)", "indexer_cache_fp32, sparse_cache_fp32"),
    ("a long sequence (64 keys or more)", "indexer_long_fp32, sparse_long_fp32"),
    ("float64, float32 and bfloat16 inputs keep their dtype", "indexer_bf16, indexer_ties_bf16, sparse_bf16"),
    ("the inputs are left unchanged", "every case (the engine compares the inputs after the call)"),
]


def _robust(q, k, w, topk, dtype):
    """(B, Lq) bool: the queries whose top-k set no rounding in dtype can change."""
    B, Lq, H, d = q.shape
    Lk = k.shape[1]
    q, k, w = q.to(dtype).double(), k.to(dtype).double(), w.to(dtype).double()
    c = H ** -0.5 * d ** -0.5
    dots = torch.einsum("bihd,bsd->bihs", q, k)                                   # (B, Lq, H, Lk)
    size = torch.einsum("bihd,bsd->bihs", q.abs(), k.abs())                       # |terms| of each dot
    scores = torch.einsum("bih,bihs->bis", w, dots.clamp(min=0)) * c              # (B, Lq, Lk)
    spread = torch.einsum("bih,bihs->bis", w.abs(), size) * c
    zero = (dots < -MARGIN[dtype] * size).all(dim=2)                              # exactly 0 in any dtype
    lo = torch.where(zero, 0.0, scores - MARGIN[dtype] * spread)
    hi = torch.where(zero, 0.0, scores + MARGIN[dtype] * spread)
    visible = torch.arange(Lk)[None, :] <= (torch.arange(Lq) + Lk - Lq)[:, None]  # (Lq, Lk)
    order = scores.masked_fill(~visible, float("-inf")).sort(dim=-1, descending=True, stable=True).indices
    rank = torch.empty_like(order).scatter_(-1, order, torch.arange(Lk).expand_as(order))
    chosen = (rank < topk) & visible                                              # (B, Lq, Lk)
    left = visible & ~chosen
    # every chosen key must stay above every key left out, or both be exact zeros
    ok = (lo[..., :, None] > hi[..., None, :]) | (zero[..., :, None] & zero[..., None, :])
    ok |= ~(chosen[..., :, None] & left[..., None, :])
    return ok.all(-1).all(-1)


def _apart(ctx: Ctx, q, k, w, topk, dtype, draw):
    """q and w with a query redrawn (by draw(n) -> (q rows (n, H, d), w rows (n, H))) until every
    query's top-k set is robust."""
    for _ in range(300):
        bad = ~_robust(q, k, w, topk, dtype)                                      # (B, Lq)
        if not bad.any():
            return q, w
        nq, nw = draw(int(bad.sum()))
        q, w = q.clone(), w.clone()
        q[bad], w[bad] = nq, nw
    raise RuntimeError("grader: could not keep the index scores apart")


def _indexer_case(ctx: Ctx, name, B, Lq, Lk, H, d, topk, dtype, ties=False):
    if ties:
        # one direction u per batch element: the queries point along it, half of the keys against it, so
        # that every index head scores those keys below zero (exact ties at 0)
        u = torch.nn.functional.normalize(ctx.randn(B, 1, d), dim=-1) * 2.0      # (B, 1, d)
        against = ctx.rand(B, Lk) < 0.5
        k = torch.where(against[..., None], -u + 0.3 * ctx.randn(B, Lk, d), ctx.randn(B, Lk, d))
        q = u[:, :, None, :] * ctx.rand(B, Lq, H, 1) + 0.3 * ctx.randn(B, Lq, H, d)
        w = ctx.randn(B, Lq, H).abs() * torch.where(ctx.rand(B, Lq, H) < 0.25, -1.0, 1.0)
        q, w = _apart_ties(ctx, q, k, w, topk, dtype, u)
    else:
        q, k, w = ctx.randn(B, Lq, H, d), ctx.randn(B, Lk, d), ctx.randn(B, Lq, H)
        q, w = _apart(ctx, q, k, w, topk, dtype, lambda n: (ctx.randn(n, H, d), ctx.randn(n, H)))
    note = f"H={H}, d={d}, Lq={Lq}, Lk={Lk}, topk {topk}" + (", ties at 0" if ties else "")
    return Case(name=name, target="lightning_indexer", inputs={"q_index": q, "k_index": k, "weights": w},
                kwargs={"topk": topk}, probe="sorted_indices", dtype=dtype, output_names=("scores", "indices"),
                note=note, traits=traits(B=B, Lq=Lq, Lk=Lk, H=H, mask="causal"))


def _apart_ties(ctx: Ctx, q, k, w, topk, dtype, u):
    """_apart for the ties case: a redrawn query keeps its batch element's direction u."""
    B, Lq, H, d = q.shape
    for _ in range(300):
        bad = ~_robust(q, k, w, topk, dtype)
        if not bad.any():
            return q, w
        q, w = q.clone(), w.clone()
        for b in range(B):
            n = int(bad[b].sum())
            if n:
                q[b, bad[b]] = u[b, 0] * ctx.rand(n, H, 1) + 0.3 * ctx.randn(n, H, d)
                w[b, bad[b]] = ctx.randn(n, H).abs() * torch.where(ctx.rand(n, H) < 0.25, -1.0, 1.0)
    raise RuntimeError("grader: could not keep the index scores apart")


def _index_sets(ctx: Ctx, B, Lq, Lk, topk):
    """(B, Lq, topk) int64: for each query distinct visible keys (all of them or fewer, at random),
    in random order, with -1 in the other slots, anywhere in the row."""
    rows = torch.full((B, Lq, topk), -1, dtype=torch.long)
    for b in range(B):
        for i in range(Lq):
            visible = Lk - Lq + i + 1
            n = min(topk, visible)
            if n > 1 and ctx.rand(1).item() < 0.3:
                n = ctx.int(1, n)
            keys = torch.randperm(visible, generator=ctx.gen)[:n]
            row = torch.cat([keys, torch.full((topk - n,), -1, dtype=torch.long)])
            rows[b, i] = row[torch.randperm(topk, generator=ctx.gen)]
    return rows


def _sparse_case(ctx: Ctx, name, B, Lq, Lk, H, D, Dv, topk, dtype, scale=None):
    inputs = {"q": ctx.randn(B, Lq, H, D), "k": ctx.randn(B, Lk, H, D), "v": ctx.randn(B, Lk, H, Dv),
              "indices": _index_sets(ctx, B, Lq, Lk, topk)}
    return Case(name=name, target="sparse_attention", inputs=inputs, kwargs={"scale": scale}, dtype=dtype,
                note=f"H={H}, Lq={Lq}, Lk={Lk}, {topk} slots" + (f", scale {scale}" if scale else ""),
                traits=traits(B=B, Lq=Lq, Lk=Lk, H=H, D=D, Dv=Dv, mask="causal"))


def _pipeline_case(ctx: Ctx, name, B, L, H, D, H_I, d, topk, dtype):
    q_index, k_index, w = ctx.randn(B, L, H_I, d), ctx.randn(B, L, d), ctx.randn(B, L, H_I)
    q_index, w = _apart(ctx, q_index, k_index, w, topk, dtype, lambda n: (ctx.randn(n, H_I, d), ctx.randn(n, H_I)))
    inputs = {"q": ctx.randn(B, L, H, D), "k": ctx.randn(B, L, H, D), "v": ctx.randn(B, L, H, D),
              "q_index": q_index, "k_index": k_index, "weights": w}
    return Case(name=name, target="sparse_attention", inputs=inputs, probe="pipeline", probe_args={"topk": topk},
                dtype=dtype, note=f"indexer (H_I={H_I}, d={d}, topk {topk}) then sparse_attention (H={H})",
                traits=traits(B=B, L=L, H=H, mask="causal"))


def cases(ctx: Ctx) -> list[Case]:
    # the cases that tell the most mistakes apart come first: a failing grade stops at its first failure
    out = [
        _indexer_case(ctx, "indexer_fp64", 2, 13, 13, 5, 6, 5, torch.float64),
        _indexer_case(ctx, "indexer_ties_fp64", 2, 15, 15, 3, 5, 7, torch.float64, ties=True),
        _indexer_case(ctx, "indexer_cache_fp32", 2, 5, 23, 3, 7, 6, torch.float32),
        _sparse_case(ctx, "sparse_fp64", 2, 12, 12, 3, 7, 5, 5, torch.float64),
        _indexer_case(ctx, "indexer_decode_b1_fp64", 1, 1, 9, 2, 7, 4, torch.float64),
        _indexer_case(ctx, "indexer_topk_above_length_fp64", 2, 4, 4, 3, 5, 6, torch.float64),
        _indexer_case(ctx, "indexer_long_fp32", 1, 70, 70, 3, 10, 13, torch.float32),
        _sparse_case(ctx, "sparse_cache_fp32", 2, 4, 20, 2, 6, 6, 7, torch.float32),
        _sparse_case(ctx, "sparse_decode_b1_fp64", 1, 1, 10, 3, 5, 5, 4, torch.float64),
        _sparse_case(ctx, "sparse_long_fp32", 1, 66, 66, 3, 6, 5, 11, torch.float32),
        _sparse_case(ctx, "sparse_scale_fp64", 2, 9, 9, 2, 4, 3, 3, torch.float64, scale=0.3),
        _pipeline_case(ctx, "pipeline_fp64", 2, 11, 3, 6, 4, 5, 4, torch.float64),
    ]
    H, d = ctx.int(1, 5), ctx.int(2, 9)
    Lk = ctx.int(1, 30)
    out += [
        _indexer_case(ctx, "indexer_sizes_from_seed_fp64", ctx.int(1, 3), ctx.int(1, Lk), Lk, H, d, ctx.int(1, 9),
                      torch.float64),
        _indexer_case(ctx, "indexer_bf16", 2, 17, 17, 3, 6, 5, torch.bfloat16),
        _indexer_case(ctx, "indexer_ties_bf16", 1, 14, 14, 2, 6, 6, torch.bfloat16, ties=True),
        _sparse_case(ctx, "sparse_bf16", 2, 10, 10, 3, 6, 7, 4, torch.bfloat16),
    ]
    if ctx.full:
        for i in range(6):
            B, Lk, H = ctx.int(1, 3), ctx.int(1, 70), ctx.int(1, 6)
            Lq, topk = ctx.int(1, Lk), ctx.int(1, 20)
            dtype = ctx.choice([torch.float64, torch.float32, torch.bfloat16])
            if dtype == torch.bfloat16:
                Lk, Lq = min(Lk, 24), min(Lq, 24)          # bfloat16 cannot keep many close scores apart
            if i % 2 == 0:
                out.append(_indexer_case(ctx, f"indexer_random{i}", B, Lq, Lk, H, ctx.int(1, 10), topk, dtype,
                                         ties=i == 4))
            else:
                out.append(_sparse_case(ctx, f"sparse_random{i}", B, Lq, Lk, H, ctx.int(1, 10), ctx.int(1, 10),
                                        topk, dtype, scale=ctx.choice([None, 0.5])))
        out.append(_pipeline_case(ctx, "pipeline_bf16", 2, 14, 2, 8, 3, 6, 4, torch.bfloat16))
    return out
