"""Cases for `kv_eviction`: top_positions with ties; H2O over a prompt and decode steps (random keys,
planted heavy hitters in the middle that differ per head and per batch element, keys that no query
attends to, whose scores tie at exactly 0, a one-token prompt, a prompt under the budget, no decode
step, a long run); SnapKV on prompts with planted keys, keys at the prefix's edges (where the pooling's
padding counts), max pooling (whose copies of one vote tie), zero votes that tie, GQA and MQA, a
prompt that fits the capacity, a kernel of 1, a long prompt.

Kept positions are compared exactly, so every case is drawn until no decision rests on a rounding:
at every cut, the last kept and the first evicted score differ by a margin the case dtype's rounding
cannot cross (relative to the largest score there), or tie exactly in a way every dtype reproduces
(H2O and average pooling: both scores exactly 0; max pooling: copies of one vote)."""
import math

import torch

from attn_drill.bank.api import Case, Ctx

MARGIN = {torch.float64: 1e-9, torch.float32: 2e-4, torch.bfloat16: 0.1}
DEAD = -3000.0                      # along dimension 0: a key no query attends to (weight exactly 0)

PROMISES = [
    ("top_positions returns the positions of the count largest scores, in increasing order", "top_"),
    ("among equal scores the earlier position is taken first", "top_ties"),
    ("h2o: the prompt runs causal attention over itself; each key's score sums its weight over every prompt query",
     "h2o_prefill_only_fp64"),
    ("h2o: a new token joins the cache before its attention and is cut after it", "h2o_"),
    ("h2o: the heavy tokens are chosen among those older than the recent window, per batch element and head",
     "h2o_planted"),
    ("h2o: a score keeps accumulating while its token stays in the cache", "h2o_"),
    ("h2o: ties between scores go to the earlier position", "h2o_ties"),
    ("h2o: no cut while the cache fits heavy_size + recent_size", "h2o_under_budget_fp64"),
    ("h2o: a one-token prompt", "h2o_prompt1_fp32"),
    ("h2o returns out (B, H, T, D), kept (B, H, C) increasing and score (B, H, C), C = min(T, budget)", "h2o_"),
    ("snapkv: votes of the last W queries on the prefix keys, softmax over every key they may see", "snapkv_"),
    ("snapkv: pooling with stride 1 and kernel_size // 2 zeros each side; the average divides by kernel_size",
     "snapkv_edges_fp64"),
    ("snapkv: max pooling", "snapkv_maxpool_fp64"),
    ("snapkv: kernel_size 1 is no pooling", "snapkv_kernel1_b1_fp64"),
    ("snapkv: capacity - W prefix positions plus the window, per query head (GQA and MQA)", "snapkv_"),
    ("snapkv: ties between pooled votes go to the earlier position", "snapkv_zero_ties_fp64"),
    ("snapkv: a prompt of at most capacity tokens is kept whole", "snapkv_fits_fp64"),
    ("snapkv: the prompt's output uses every key, and k_cache, v_cache hold the kept positions in order",
     "snapkv_"),
    ("float64, float32 and bfloat16 inputs: the same positions are kept", "bf16"),
    ("the inputs are left unchanged", "every case (the engine compares the inputs after the call)"),
]


def _rounded(t: torch.Tensor, dtype) -> torch.Tensor:
    return t.to(dtype).to(torch.float64)


def _clear(a: torch.Tensor, b: torch.Tensor, dtype, ties_ok) -> tuple[bool, bool]:
    """(clear, tied): the last kept score a and the first evicted b are apart by a margin relative to a
    (a score is a sum of positive weights, each rounded relative to itself), or tie in a way every dtype
    reproduces (ties_ok marks those ties); and whether such a tie decides somewhere."""
    gap = (a - b) >= MARGIN[dtype] * a.abs().clamp_min(1e-300)
    tie = (a == b) & ties_ok
    return bool((gap | tie).all()), bool(tie.any())


def _ordered(scores: torch.Tensor) -> torch.Tensor:
    return torch.sort(scores, dim=-1, descending=True, stable=True)


# ---------------------------------------------------------------- H2O
def _h2o_clear(q, k, P, heavy, recent, dtype) -> tuple[bool, bool]:
    """Whether every cut of an H2O run on these (rounded) inputs is decided by a clear margin or by a tie
    of two scores that are exactly 0, and whether such a tie decides a cut. The run is redone here in
    float64 (only the cached positions and scores are needed)."""
    B, H, T, D = q.shape
    scale = 1.0 / math.sqrt(D)
    budget = heavy + recent

    def cut(pos, score):
        n = pos.shape[-1]
        if n <= budget:
            return pos, score, (True, False)
        cand = score[..., :n - recent]
        srt = _ordered(cand)
        a, b = srt.values[..., heavy - 1], srt.values[..., heavy]
        ok = _clear(a, b, dtype, a == 0)
        keep = torch.cat([srt.indices[..., :heavy].sort(-1).values,
                          torch.arange(n - recent, n).expand(B, H, recent)], dim=-1)
        return pos.gather(-1, keep), score.gather(-1, keep), ok

    s = (q[:, :, :P] @ k[:, :, :P].transpose(-2, -1)) * scale
    s = s.masked_fill(~torch.ones(P, P, dtype=torch.bool).tril(), -math.inf)
    score = torch.softmax(s, -1).sum(2)
    pos = torch.arange(P).expand(B, H, P)
    pos, score, (ok, tied) = cut(pos, score)
    for t in range(P, T):
        if not ok:
            return False, tied
        pos = torch.cat([pos, torch.full((B, H, 1), t)], -1)
        kc = k.gather(2, pos[..., None].expand(-1, -1, -1, D))
        w = torch.softmax(torch.einsum("bhd,bhnd->bhn", q[:, :, t], kc) * scale, -1)
        score = torch.cat([score, torch.zeros(B, H, 1, dtype=score.dtype)], -1) + w
        pos, score, (ok, tie) = cut(pos, score)
        tied |= tie
    return ok, tied


def _h2o_draw(ctx: Ctx, B, H, T, D, kind, hitters, region, dead_share):
    q, k, v = ctx.randn(B, H, T, D), ctx.randn(B, H, T, D), ctx.randn(B, H, T, D)
    if kind in ("planted", "dead"):
        # every query leans on dimension 0; ordinary keys barely do; the heavy hitters, drawn per batch
        # element and head among the positions of `region` (not the first), lean on it strongly
        lo, hi = region
        q[..., 0] = 1.5 + 0.2 * ctx.randn(B, H, T)
        k[..., 0] = 0.3 * ctx.randn(B, H, T)
        k[..., 1:] *= 0.5
        for b in range(B):
            for h in range(H):
                spots = torch.randperm(hi - lo, generator=ctx.gen)[:hitters] + lo
                k[b, h, spots, 0] = 4.0 + ctx.rand(len(spots))
    if kind == "dead":
        # a share of the ordinary keys get weight exactly 0 from every query: their scores tie at 0
        ordinary = k[..., 0] < 2.0
        dead = (ctx.rand(B, H, T) < dead_share) & ordinary
        dead[:, :, :1] = False
        k[..., 0] = torch.where(dead, torch.full_like(k[..., 0], DEAD), k[..., 0])
    return q, k, v


def _h2o_case(ctx: Ctx, name, B, H, T, P, D, heavy, recent, dtype, kind="planted", hitters=2,
              region=None, dead_share=0.5, need_tie=False) -> Case:
    """region: where the heavy hitters go (default: anywhere but the first position and the last).
    need_tie: drawn until a tie of two zero scores decides a cut."""
    region = region or (1, T - 1)
    for _ in range(200):
        q, k, v = _h2o_draw(ctx, B, H, T, D, kind, hitters, region, dead_share)
        ok, tied = _h2o_clear(_rounded(q, dtype), _rounded(k, dtype), P, heavy, recent, dtype)
        if ok and (tied or not need_tie):
            break
    else:
        raise RuntimeError(f"grader: {name}: no draw whose H2O decisions are all clear")
    words = {"b1": B == 1, "h1": H == 1, "l1": P == 1, "long": T >= 64}
    return Case(name=name, target="h2o_attention", inputs={"q": q, "k": k, "v": v},
                kwargs={"prefill_len": P, "heavy_size": heavy, "recent_size": recent}, dtype=dtype, grad=False,
                output_names=("out", "kept", "score"),
                note=f"T={T}, prompt {P}, heavy {heavy} + recent {recent}, {kind} keys",
                traits=tuple(w for w, on in words.items() if on) + ("causal",))


# ---------------------------------------------------------------- SnapKV
def _pooled_votes(q, k, W, kernel, pooling):
    """SnapKV's pooled votes (B, Hq, T - W) on float64 inputs."""
    B, Hq, T, D = q.shape
    k = k.repeat_interleave(Hq // k.shape[1], dim=1)
    s = (q[:, :, T - W:] @ k.transpose(-2, -1)) / math.sqrt(D)          # (B, Hq, W, T)
    allowed = torch.arange(T)[None, :] <= torch.arange(T - W, T)[:, None]
    votes = torch.softmax(s.masked_fill(~allowed, -math.inf), -1)[..., :T - W].sum(2)
    pool = torch.nn.functional.avg_pool1d if pooling == "avgpool" else torch.nn.functional.max_pool1d
    return pool(votes.reshape(B * Hq, 1, T - W), kernel, 1, kernel // 2).reshape(B, Hq, T - W)


def _snap_clear(q, k, W, capacity, kernel, pooling, dtype) -> tuple[bool, bool]:
    T = q.shape[2]
    if T <= capacity:
        return True, False
    srt = _ordered(_pooled_votes(q, k, W, kernel, pooling)).values
    a, b = srt[..., capacity - W - 1], srt[..., capacity - W]
    # max pooling ties are copies of one vote; average pooling ties only where every vote is exactly 0
    ties_ok = torch.ones_like(a, dtype=torch.bool) if pooling == "maxpool" else a == 0
    return _clear(a, b, dtype, ties_ok)


def _snap_draw(ctx: Ctx, B, Hq, Hkv, T, D, W, kind, hitters, kernel):
    q, k, v = ctx.randn(B, Hq, T, D), ctx.randn(B, Hkv, T, D), ctx.randn(B, Hkv, T, D)
    n = T - W
    if kind in ("planted", "edges", "zeros"):
        q[..., 0] = 1.5 + 0.2 * ctx.randn(B, Hq, T)
        k[..., 0] = 0.3 * ctx.randn(B, Hkv, T)
        k[..., 1:] *= 0.5
        r = kernel // 2
        for b in range(B):
            for h in range(Hkv):
                if kind == "edges":
                    spots = torch.tensor([0, n - 1])          # both ends of the prefix: the padding counts
                else:
                    # apart by more than a kernel, and a whole kernel inside the prefix
                    step = max(1, (n - 2 * r) // hitters)
                    spots = torch.arange(hitters) * step + r + torch.randint(0, max(1, step - kernel), (hitters,),
                                                                             generator=ctx.gen)
                k[b, h, spots, 0] = 4.0 + ctx.rand(len(spots))
    if kind == "zeros":
        ordinary = k[..., 0] < 2.0
        dead = (ctx.rand(B, Hkv, T) < 0.8) & ordinary
        dead[..., n:] = False
        k[..., 0] = torch.where(dead, torch.full_like(k[..., 0], DEAD), k[..., 0])
    return q, k, v


def _snap_case(ctx: Ctx, name, B, Hq, Hkv, T, D, W, capacity, dtype, kernel=5, pooling="avgpool",
               kind="random", hitters=2, need_tie=False) -> Case:
    """need_tie: drawn until a tie (equal pooled votes) decides the cut somewhere."""
    for _ in range(200):
        q, k, v = _snap_draw(ctx, B, Hq, Hkv, T, D, W, kind, hitters, kernel)
        ok, tied = _snap_clear(_rounded(q, dtype), _rounded(k, dtype), W, capacity, kernel, pooling, dtype)
        if ok and (tied or not need_tie):
            break
    else:
        raise RuntimeError(f"grader: {name}: no draw whose SnapKV selection is clear")
    words = {"b1": B == 1, "h1": Hq == 1, "long": T >= 64}
    kv = "MHA" if Hq == Hkv else ("MQA" if Hkv == 1 else "GQA")
    return Case(name=name, target="snapkv_prefill", inputs={"q": q, "k": k, "v": v},
                kwargs={"window_size": W, "capacity": capacity, "kernel_size": kernel, "pooling": pooling},
                dtype=dtype, grad=False, output_names=("out", "kept", "k_cache", "v_cache"),
                note=f"{kv} {Hq}/{Hkv}, T={T}, window {W}, capacity {capacity}, {pooling} {kernel}, {kind} keys",
                traits=tuple(w for w, on in words.items() if on) + ("causal",))


# ---------------------------------------------------------------- top_positions
def _top_case(ctx: Ctx, name, shape, count, dtype, levels=4) -> Case:
    """Scores on a grid of a few values (exact in every dtype), so that many tie."""
    scores = ctx.randint(0, levels, shape).double() * 0.5 - 1.0
    return Case(name=name, target="top_positions", inputs={"scores": scores}, kwargs={"count": count},
                dtype=dtype, grad=False, note=f"{levels} distinct values, count {count}",
                traits=("b1",) if shape[0] == 1 else ())


def cases(ctx: Ctx) -> list[Case]:
    f64, f32, bf16 = torch.float64, torch.float32, torch.bfloat16
    T_long = ctx.int(70, 90)
    out = [
        _top_case(ctx, "top_ties_fp64", (3, 4, 13), 5, f64),
        _top_case(ctx, "top_ties_bf16", (2, 17), 9, bf16, levels=3),
        _top_case(ctx, "top_all_and_random_fp32", (1, 3, 11), 11, f32, levels=1000),
        _h2o_case(ctx, "h2o_random_fp64", 2, 3, 23, 9, 6, 3, 4, f64, kind="random"),
        _h2o_case(ctx, "h2o_planted_fp64", 2, 3, 30, 12, 8, 2, 4, f64),
        _h2o_case(ctx, "h2o_planted_fp32", 3, 2, 27, 10, 5, 3, 3, f32, hitters=3),
        _h2o_case(ctx, "h2o_ties_b1_fp64", 1, 4, 26, 10, 6, 4, 3, f64, kind="dead", need_tie=True),
        _h2o_case(ctx, "h2o_prompt1_fp32", 2, 2, 15, 1, 4, 2, 2, f32, kind="random"),
        _h2o_case(ctx, "h2o_under_budget_fp64", 2, 2, 6, 3, 5, 4, 3, f64, kind="random"),
        _h2o_case(ctx, "h2o_prefill_only_fp64", 2, 3, 17, 17, 6, 3, 5, f64),
        _h2o_case(ctx, "h2o_long_fp32", 1, 2, T_long, ctx.int(20, 30), 6, ctx.int(3, 6), ctx.int(4, 8), f32,
                  hitters=4),
        # bfloat16: every ordinary key is dead, so the cut is between large scores and zeros, or among zeros
        _h2o_case(ctx, "h2o_ties_bf16", 2, 2, 20, 8, 8, 3, 3, bf16, kind="dead", hitters=1, region=(1, 4),
                  dead_share=1.0, need_tie=True),
        _snap_case(ctx, "snapkv_gqa_fp64", 2, 4, 2, 40, 8, 6, 16, f64),
        _snap_case(ctx, "snapkv_planted_fp32", 2, 3, 3, 45, 6, 5, 15, f32, kind="planted"),
        _snap_case(ctx, "snapkv_edges_fp64", 2, 2, 1, 30, 6, 4, 10, f64, kind="edges"),
        _snap_case(ctx, "snapkv_maxpool_fp64", 1, 2, 2, 33, 6, 5, 14, f64, kernel=3, pooling="maxpool",
                   need_tie=True),
        _snap_case(ctx, "snapkv_zero_ties_fp64", 2, 2, 2, 36, 6, 4, 20, f64, kernel=3, kind="zeros",
                   need_tie=True),
        _snap_case(ctx, "snapkv_fits_fp64", 2, 2, 1, 12, 5, 4, 12, f64),
        _snap_case(ctx, "snapkv_kernel1_b1_fp64", 1, 3, 1, 21, 4, 3, 9, f64, kernel=1),
        _snap_case(ctx, "snapkv_mqa_long_fp32", 1, 4, 1, T_long + 10, 8, 8, 24, f32),
        _snap_case(ctx, "snapkv_bf16", 2, 2, 2, 40, 8, 4, 14, bf16, kind="planted"),
    ]
    if ctx.full:
        for i in range(8):
            dtype = ctx.choice([f64, f32, f32, bf16])
            B = ctx.int(1, 3)
            if i % 2 == 0 and dtype == bf16:
                # bfloat16: hitters right after the first token, and heavy slots for them and the first token,
                # so that every cut keeps those against ordinary keys by a wide margin
                hitters, recent = ctx.int(1, 3), ctx.int(1, 4)
                T = ctx.int(hitters + recent + 4, 40)
                P = ctx.int(hitters + recent + 2, T)
                out.append(_h2o_case(ctx, f"random{i}_h2o", B, ctx.int(1, 3), T, P, ctx.int(2, 9), hitters + 1,
                                     recent, dtype, hitters=hitters, region=(1, hitters + 1)))
            elif i % 2 == 0:
                T = ctx.int(2, 40)
                P = ctx.int(1, T)
                heavy, recent = ctx.int(1, 5), ctx.int(1, 5)
                kind = ctx.choice(["random", "planted", "dead"])
                out.append(_h2o_case(ctx, f"random{i}_h2o", B, ctx.int(1, 3), T, P, ctx.int(2, 9), heavy, recent,
                                     dtype, kind=kind, hitters=ctx.int(1, 3)))
            else:
                Hkv, G = ctx.int(1, 2), ctx.int(1, 3)
                W, kernel = ctx.int(1, 6), ctx.choice([1, 3, 5, 7])
                hitters = ctx.int(1, 3)
                pooling = ctx.choice(["avgpool", "maxpool"])
                if dtype == bf16:
                    # bfloat16: the kept prefix is exactly the hitters' pooling neighbourhoods
                    kind, capacity = "planted", W + hitters * kernel
                    T = capacity + 2 * hitters * kernel + ctx.int(0, 30)
                else:
                    kind, capacity = ctx.choice(["random", "planted"]), W + ctx.int(1, 12)
                    T = ctx.int(capacity - 2, capacity + 40)
                    if T - W < hitters * (kernel + 1) + kernel:
                        kind = "random"
                out.append(_snap_case(ctx, f"random{i}_snapkv", B, Hkv * G, Hkv, T, ctx.int(2, 9), W, capacity,
                                      dtype, kernel=kernel, pooling=pooling, kind=kind, hitters=hitters))
    return out
