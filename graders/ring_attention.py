"""Cases for `ring_attention`: one block's attention and log-sum-exp, the exact merge of two partials
(far-apart log-sum-exps, empty partials), and the ring over N simulated devices against full attention,
causal included, with uneven blocks, one device, blocks of one row and a long sequence, and a bound
on the largest tensor the ring may build (one block of scores, never the L x L matrix)."""
import math

import torch

from attn_drill.bank.api import Case, Ctx, MaxNumel, PeakMemory, traits
from attn_drill.i18n import pick

F32_EPS = torch.finfo(torch.float32).eps


def _large_rtol(q, k, scale, dtype):
    """float32 rounds a score of size |s| by |s|·eps, which moves the softmax (and its gradients)
    relatively by as much: allow that, on top of the dtype's usual tolerance."""
    if dtype != torch.float32:
        return None
    s = scale * torch.matmul(q, k.transpose(-2, -1)).abs().max()
    return max(1.3e-6, 2 * F32_EPS * float(s))


def _lse_kept(dtype) -> tuple[str, ...]:
    """In bfloat16 the statement lets `lse` come back in float32, as flash-attn's softmax_lse does."""
    return ("lse",) if dtype in (torch.bfloat16, torch.float16) else ()


def _block_case(ctx: Ctx, name, B, H, Lq, Lk, D, Dv, dtype, scale, causal=False, large=False) -> Case:
    q = ctx.randn(B, H, Lq, D, scale=30.0 if large else 1.0)
    k, v = ctx.randn(B, H, Lk, D), ctx.randn(B, H, Lk, Dv)
    rtol = _large_rtol(q, k, scale, dtype) if large else None
    return Case(name=name, target="block_attention", inputs={"q": q, "k": k, "v": v},
                kwargs={"scale": scale, "causal": causal}, dtype=dtype, rtol=rtol, output_names=("out", "lse"),
                float32_outputs=_lse_kept(dtype),
                note="block" + (", causal" if causal else "") + (", large logits" if large else ""),
                traits=traits(B=B, Lq=Lq, Lk=Lk, D=D, Dv=Dv, H=H, mask="causal" if causal else None,
                              large_logits=large))


def _merge_case(ctx: Ctx, name, B, H, L, Dv, dtype, spread=3.0, empty=False) -> Case:
    lse_a, lse_b = ctx.randn(B, H, L, scale=spread), ctx.randn(B, H, L, scale=spread)
    out_a, out_b = ctx.randn(B, H, L, Dv), ctx.randn(B, H, L, Dv)
    note = "merge"
    if empty:
        # some rows of a, and others of b, hold no key yet: lse = -inf and out = 0 there
        none_a = ctx.rand(B, H, L) < 0.3
        none_b = (ctx.rand(B, H, L) < 0.3) & ~none_a
        lse_a[none_a], lse_b[none_b] = -math.inf, -math.inf
        out_a[none_a], out_b[none_b] = 0.0, 0.0
        note += ", empty partials (lse = -inf)"
    if spread > 10:
        note += ", lse far apart"
    return Case(name=name, target="merge_partials",
                inputs={"out_a": out_a, "lse_a": lse_a, "out_b": out_b, "lse_b": lse_b}, dtype=dtype,
                float32_outputs=_lse_kept(dtype),
                output_names=("out", "lse"), note=note,
                traits=traits(B=B, L=L, H=H, large_logits=spread > 10))


def _split(ctx: Ctx, L: int, N: int) -> list[int]:
    """N positive block sizes summing to L, uneven."""
    cuts = sorted(torch.randperm(L - 1, generator=ctx.gen)[:N - 1].add(1).tolist())
    edges = [0] + cuts + [L]
    return [b - a for a, b in zip(edges, edges[1:])]


def _ring_case(ctx: Ctx, name, B, H, blocks, D, Dv, dtype, causal, scale=None, large=False, memory=True) -> Case:
    L = sum(blocks)
    q = ctx.randn(B, H, L, D, scale=30.0 if large else 1.0)
    k, v = ctx.randn(B, H, L, D), ctx.randn(B, H, L, Dv)
    s = scale if scale is not None else 1.0 / math.sqrt(D)
    rtol = _large_rtol(q, k, s, dtype) if large else None
    limit = B * H * max(max(blocks) ** 2, L * D, L * Dv)
    trace = (MaxNumel(limit, what=pick(f"{L}x{L} score matrix: hold one block of scores at a time",
                                       f"完整的 {L}x{L} 分数矩阵：每次只保留一个块的分数")),) \
        if memory and limit < B * H * L * L else ()
    return Case(name=name, target="ring_attention", inputs={"q": q, "k": k, "v": v},
                kwargs={"block_sizes": list(blocks), "causal": causal, "scale": scale}, dtype=dtype, rtol=rtol,
                trace=trace, output_names=("out", "lse"),
                float32_outputs=_lse_kept(dtype),
                note=f"blocks {list(blocks)}" + (", causal" if causal else "") + (", large logits" if large else ""),
                traits=traits(B=B, L=L, D=D, Dv=Dv, H=H, mask="causal" if causal else None, large_logits=large))


def _memory_case(ctx: Ctx, blocks=(256,) * 8, D: int = 8) -> Case:
    """A long ring whose full score matrix (L x L in float64: 32 MiB) would dwarf one block's; its memory
    is measured by the OS, from outside the room, so any route (numpy, lists) counts."""
    case = _ring_case(ctx, "ring_memory_fp64", 1, 1, list(blocks), D, D, torch.float64, causal=True)
    L = sum(blocks)
    what = pick(f"full {L}x{L} score matrix", f"完整的 {L}x{L} 分数矩阵")
    case.trace = (PeakMemory(L * L * 8 // 2, what=what),)     # no op trace: its records would count too
    case.grad, case.note = False, f"blocks {len(blocks)} x {blocks[0]}, causal, memory measured"
    return case


def cases(ctx: Ctx) -> list[Case]:
    f64, f32, bf16 = torch.float64, torch.float32, torch.bfloat16
    L_long = ctx.int(64, 90)
    out = [
        _block_case(ctx, "block_fp64", 2, 3, 7, 11, 5, 4, f64, scale=0.6),
        _block_case(ctx, "block_causal_fp64", 1, 2, 9, 9, 4, 3, f64, scale=0.45, causal=True),
        _block_case(ctx, "block_large_logits_fp32", 2, 2, 6, 9, 5, 5, f32, scale=1 / math.sqrt(5), large=True),
        _block_case(ctx, "block_one_query_fp32", 3, 1, 1, 5, 3, 2, f32, scale=1.3),
        _block_case(ctx, "block_bf16", 2, 2, 8, 10, 8, 8, bf16, scale=0.35),
        _merge_case(ctx, "merge_fp64", 2, 3, 7, 4, f64),
        _merge_case(ctx, "merge_far_apart_fp32", 2, 2, 9, 3, f32, spread=150.0),
        _merge_case(ctx, "merge_empty_fp64", 2, 2, 10, 3, f64, empty=True),
        _merge_case(ctx, "merge_bf16", 1, 3, 8, 5, bf16),
        _ring_case(ctx, "ring_fp64", 2, 2, [7, 8, 1, 13], 6, 5, f64, causal=False),
        _ring_case(ctx, "ring_causal_fp64", 2, 2, [7, 8, 1, 13], 6, 5, f64, causal=True, scale=0.7),
        _ring_case(ctx, "ring_one_device_fp64", 1, 2, [9], 4, 3, f64, causal=True),
        _ring_case(ctx, "ring_rows_of_one_fp64", 2, 1, [1, 1, 1], 3, 2, f64, causal=True),
        _ring_case(ctx, "ring_causal_long_fp32", 1, 2, _split(ctx, L_long, ctx.int(3, 6)), 5, 4, f32,
                   causal=True, memory=False),
        _ring_case(ctx, "ring_large_logits_fp32", 2, 2, [5, 3, 6], 4, 4, f32, causal=True, large=True),
        _ring_case(ctx, "ring_bf16", 2, 2, [6, 4, 7], 8, 8, bf16, causal=True),
    ]
    if ctx.full:
        for i in range(9):
            dtype = ctx.choice([f64, f32, bf16])
            B, H, D, Dv = ctx.int(1, 3), ctx.int(1, 3), ctx.int(1, 9), ctx.int(1, 9)
            # large logits in float32 only: bfloat16 rounds scores in the hundreds by whole units
            large = dtype == f32 and ctx.int(0, 2) == 0
            if i % 3 == 0:
                Lq, Lk = ctx.int(1, 13), ctx.int(1, 13)
                causal = bool(ctx.int(0, 1))
                out.append(_block_case(ctx, f"random{i}_block", B, H, Lk if causal else Lq, Lk, D, Dv, dtype,
                                       scale=ctx.choice([0.3, 0.8, 1.4]), causal=causal, large=large))
            elif i % 3 == 1:
                out.append(_merge_case(ctx, f"random{i}_merge", B, H, ctx.int(1, 12), Dv, dtype,
                                       spread=ctx.choice([1.0, 5.0, 100.0]) if dtype != bf16 else 3.0,
                                       empty=bool(ctx.int(0, 1))))
            else:
                L = ctx.int(1, 40)
                blocks = _split(ctx, L, ctx.int(1, min(L, 6)))
                out.append(_ring_case(ctx, f"random{i}_ring", B, H, blocks, D, Dv, dtype,
                                      causal=bool(ctx.int(0, 1)), scale=ctx.choice([None, 0.5]), large=large))
    out.append(_memory_case(ctx))   # last: the cases above keep their inputs at every seed
    return out
