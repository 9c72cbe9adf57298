"""Cases for `flash_decoding`: the partials of each split of a cache (ragged last split, splits past a
sequence's length, which are empty, garbage past every length), the exact merge of partials (empty
splits, log-sum-exps in the hundreds, hundreds apart, a single split), and the whole decode against
full attention over each sequence's valid keys: GQA, MHA and MQA, cache lengths of 1, split size 1
and larger than the cache, large logits, long caches, and a bound on the largest tensor an op may
output (one split's scores at a time; the cache is never copied once per query head)."""
import math

import torch

from attn_drill.bank.api import Case, Ctx, MaxNumel
from attn_drill.i18n import pick

F32_EPS = torch.finfo(torch.float32).eps
INF = float("inf")

PROMISES = [
    ("split_partials returns out_partial (S, B, Hq, D) and lse_partial (S, B, Hq), S = ceil(L / split_size)",
     "partials_"),
    ("the last split may be shorter than split_size", "partials_gqa_fp64"),
    ("a split with no valid key of a sequence has out 0 and lse -inf", "partials_"),
    ("lse is the natural log of the sum of exp of the scaled scores", "partials_"),
    ("scale None means 1 / sqrt(D); a given scale multiplies the scores", "decode_gqa_fp64"),
    ("split_partials applies its own scale", "partials_scale_fp64"),
    ("query head h reads KV head h // (Hq // Hkv): GQA, MHA and MQA", "decode_"),
    ("positions at or past cache_lens[b] hold garbage and get no weight", "partials_"),
    ("cache_lens[b] may be 1", "decode_gqa_fp64"),
    ("split_size may be 1, and may exceed L (one split)", "decode_split_size1_fp64"),
    ("combine_partials returns the attention over all splits and its log-sum-exp", "combine_"),
    ("combine_partials stays finite with log-sum-exps in the hundreds and hundreds apart",
     "combine_large_lse_fp64"),
    ("an empty split (lse -inf, out 0) adds nothing to the merge", "combine_fp64"),
    ("flash_decoding equals full attention over the first cache_lens[b] keys, and its log-sum-exp", "decode_"),
    ("no op outputs more than B * max(L * Hkv * D, S * Hq * D, Hq * split_size) elements", "memory"),
    ("float64, float32 and bfloat16 inputs keep their dtype", "bf16"),
    ("the inputs are left unchanged", "every case (the engine compares the inputs after the call)"),
]


def _large_rtol(q, k, scale, dtype):
    """float32 rounds a score of size |s| by |s|·eps, which moves the softmax relatively by as much."""
    if dtype != torch.float32:
        return None
    s = scale * torch.einsum("bhd,bnkd->bhn", q, k).abs().max()
    return max(1.3e-6, 2 * F32_EPS * float(s))


def _cache(ctx: Ctx, B, L, Hkv, D, lens):
    """K and V caches (B, L, Hkv, D) whose positions past each length hold large garbage."""
    k, v = ctx.randn(B, L, Hkv, D), ctx.randn(B, L, Hkv, D)
    junk = torch.arange(L)[None, :] >= torch.tensor(lens)[:, None]   # (B, L)
    n = int(junk.sum())
    if n:
        k[junk] = ctx.randn(n, Hkv, D, scale=20.0)
        v[junk] = ctx.randn(n, Hkv, D, scale=50.0)
    return k, v


def _limit(B, L, Hq, Hkv, D, split):
    """The largest tensor a split-at-a-time decode needs: a copy of the cache, all the partial outputs,
    or one split's scores."""
    S = math.ceil(L / split)
    return B * max(L * Hkv * D, S * Hq * D, Hq * split)


def _traits(B, lens, L, Hq, large=False):
    words = {"b1": B == 1, "l1": min(lens) == 1, "long": L >= 64, "h1": Hq == 1, "pad": len(set(lens)) > 1,
             "large_logits": large}
    return tuple(w for w, on in words.items() if on)


def _decode_case(ctx: Ctx, name, target, lens, L, Hq, Hkv, D, split, dtype, scale=None, large=False,
                 memory=False) -> Case:
    B = len(lens)
    q = ctx.randn(B, Hq, D, scale=20.0 if large else 1.0)
    k, v = _cache(ctx, B, L, Hkv, D, lens)
    s = scale if scale is not None else 1.0 / math.sqrt(D)
    rtol = _large_rtol(q, k[:, :min(lens)], s, dtype) if large else None
    trace = ()
    if memory:
        limit = _limit(B, L, Hq, Hkv, D, split)
        assert B * Hq * L > limit, f"{name}: the memory rule cannot tell the full score row apart"
        trace = (MaxNumel(limit, what=pick(f"full score row over the {L}-token cache, or the cache copied per "
                                           f"query head: hold one split of {split} keys at a time",
                                           f"覆盖全部 {L} 个 token 的整行分数，或按 query 头复制的 cache："
                                           f"每次只保留一个 {split} 个 key 的 split")),)
    kind = "MHA" if Hq == Hkv else ("MQA" if Hkv == 1 else "GQA")
    probe = dict(probe="partials", output_names=("out_partial", "lse_partial", "empty")) \
        if target == "split_partials" else dict(output_names=("out", "lse"))
    return Case(name=name, target=target,
                inputs={"q": q, "k_cache": k, "v_cache": v, "cache_lens": torch.tensor(lens, dtype=torch.int64)},
                kwargs={"split_size": split, "scale": scale}, dtype=dtype, grad=False, rtol=rtol, trace=trace,
                note=f"{kind} {Hq}/{Hkv}, L={L}, split {split}, lens {list(lens)}"
                + (f", scale {scale}" if scale else "") + (", large logits" if large else ""),
                traits=_traits(B, lens, L, Hq, large), **probe)


def _combine_case(ctx: Ctx, name, S, B, Hq, D, dtype, spread=3.0, center=0.0, empty=0.3) -> Case:
    """Partials of S splits; about `empty` of them hold no key (lse -inf, out 0), never all of a row."""
    lse = center + ctx.randn(S, B, Hq, scale=spread)
    out = ctx.randn(S, B, Hq, D)
    none = ctx.rand(S, B, Hq) < empty
    keep = ctx.randint(0, S, (B, Hq))                                 # one split per row is never empty
    none[keep, torch.arange(B)[:, None], torch.arange(Hq)[None, :]] = False
    lse[none], out[none] = -INF, 0.0
    note = f"{S} splits" + (", empty splits" if bool(none.any()) else "") + \
        (f", lse ~ {center:g}" if center else "") + (", lse far apart" if spread > 10 else "")
    words = {"b1": B == 1, "h1": Hq == 1, "large_logits": center > 100 or spread > 10}
    return Case(name=name, target="combine_partials", inputs={"out_partial": out, "lse_partial": lse},
                dtype=dtype, grad=False, output_names=("out", "lse"), note=note,
                traits=tuple(w for w, on in words.items() if on))


def _lens(ctx: Ctx, B, L, low=1):
    """B cache lengths in [low, L], the first equal to L."""
    return [L] + [ctx.int(low, L) for _ in range(B - 1)]


def cases(ctx: Ctx) -> list[Case]:
    f64, f32, bf16 = torch.float64, torch.float32, torch.bfloat16
    P, FD = "split_partials", "flash_decoding"
    L_long = ctx.int(100, 140)
    L_mem = ctx.int(130, 160)
    out = [
        _decode_case(ctx, "partials_gqa_fp64", P, [37, 21, 9], 37, 6, 2, 8, 10, f64),
        _decode_case(ctx, "partials_mha_ragged_fp32", P, [17, 4, 12], 17, 3, 3, 5, 6, f32),
        _decode_case(ctx, "partials_memory_fp64", P, _lens(ctx, 2, 96), 96, 10, 1, 4, 6, f64, memory=True),
        _decode_case(ctx, "partials_bf16", P, [30, 11], 30, 4, 2, 8, 8, bf16),
        _decode_case(ctx, "partials_scale_fp64", P, [23, 9, 16], 23, 4, 2, 6, 5, f64, scale=0.9),
        _combine_case(ctx, "combine_fp64", 5, 2, 3, 4, f64),
        _combine_case(ctx, "combine_large_lse_fp64", 3, 2, 2, 3, f64, center=800.0, spread=2.0),
        _combine_case(ctx, "combine_far_apart_fp32", 4, 3, 2, 5, f32, spread=150.0),
        _combine_case(ctx, "combine_single_split_b1_fp64", 1, 1, 3, 4, f64, empty=0.0),
        _combine_case(ctx, "combine_bf16", 6, 2, 4, 8, bf16),
        _decode_case(ctx, "decode_gqa_fp64", FD, [29, 1, 16, 8], 29, 8, 2, 6, 7, f64, scale=0.3),
        _decode_case(ctx, "decode_one_split_b1_fp64", FD, [13], 13, 4, 1, 5, 32, f64),
        _decode_case(ctx, "decode_split_size1_fp64", FD, [6, 3], 6, 2, 2, 3, 1, f64),
        _decode_case(ctx, "decode_large_logits_fp32", FD, [23, 14], 23, 4, 2, 6, 5, f32, large=True),
        _decode_case(ctx, "decode_long_mqa_fp32", FD, _lens(ctx, 3, L_long, 60), L_long, 12, 1, 4, 7, f32,
                     memory=True),
        _decode_case(ctx, "decode_memory_gqa_fp64", FD, _lens(ctx, 2, L_mem, 1), L_mem, 12, 2, 4, 9, f64,
                     memory=True),
    ]
    B, Hkv, G, L = ctx.int(1, 4), ctx.int(1, 3), ctx.int(1, 4), ctx.int(2, 50)
    out += [
        _decode_case(ctx, "decode_sizes_from_seed_fp64", FD, _lens(ctx, B, L), L, Hkv * G, Hkv, ctx.int(2, 12),
                     ctx.int(1, 12), f64),
        _decode_case(ctx, "decode_bf16", FD, [40, 25], 40, 4, 2, 8, 12, bf16),
    ]
    if ctx.full:
        for i in range(9):
            dtype = ctx.choice([f64, f32, bf16])
            B, Hkv, G, D = ctx.int(1, 4), ctx.int(1, 3), ctx.int(1, 4), ctx.int(1, 12)
            if i % 3 == 1:
                S = ctx.int(1, 8)
                spread = ctx.choice([1.0, 5.0, 100.0]) if dtype != bf16 else 3.0
                center = ctx.choice([0.0, 0.0, 500.0]) if dtype == f64 else 0.0
                out.append(_combine_case(ctx, f"random{i}_combine", S, B, Hkv * G, D, dtype, spread=spread,
                                         center=center, empty=ctx.choice([0.0, 0.3, 0.6])))
                continue
            L = ctx.int(1, 90)
            target = P if i % 3 == 0 else FD
            large = dtype == f32 and ctx.int(0, 2) == 0
            lens = _lens(ctx, B, L)
            # a merge run split after split rounds once per split: in bfloat16, 88 of them drift by
            # about 0.1, past the dtype's tolerance though the merge is right, so bfloat16 keeps <= 8 splits
            split = ctx.int(-(-L // 8), 20) if dtype == bf16 else ctx.int(1, 20)
            out.append(_decode_case(ctx, f"random{i}_{'partials' if target == P else 'decode'}", target,
                                    lens, L, Hkv * G, Hkv, D, split, dtype,
                                    scale=ctx.choice([None, 0.5]), large=large))
    return out
