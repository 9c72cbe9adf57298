"""Cases for `flash_attention`: forward and hand-written gradients against autograd, gradcheck, what
the forward saves (the row log-sum-exp, never P), and no full score matrix in either pass."""
import math

import torch

from attn_drill.bank.api import Case, Ctx, Failure, MaxNumel, PeakMemory, on_cuda, traits
from attn_drill.i18n import pick

TARGET = "flash_attention"


def _limit(B, H, Lq, Lk, D, Dv, block):
    """The largest tensor a blocked solution needs: a tile of scores, or a Q/K/V/O-sized tensor."""
    return B * H * max(min(block, Lq) * min(block, Lk), Lq * D, Lq * Dv, Lk * D, Lk * Dv)


def _qkv(ctx: Ctx, B, H, Lq, Lk, D, Dv, kind=""):
    if kind == "negative":
        # every score far below 0 (about -1000 .. -4000): exp(score - 0) underflows to 0
        Q = ctx.rand(B, H, Lq, D) + 1.0
        K = -(ctx.rand(B, H, Lk, D) + 1.0) * (1000.0 * math.sqrt(D) / D)
    else:
        # "large": scores of a few hundred up to ~1e3, where exp without max-subtraction overflows
        Q = ctx.randn(B, H, Lq, D, scale=150.0 if kind == "large" else 1.0)
        K = ctx.randn(B, H, Lk, D)
    return Q, K, ctx.randn(B, H, Lk, Dv)


def _case(ctx: Ctx, name, B, H, Lq, Lk, D, Dv, block, dtype, scale=None, kind=""):
    Q, K, V = _qkv(ctx, B, H, Lq, Lk, D, Dv, kind)
    limit = _limit(B, H, Lq, Lk, D, Dv, block)
    trace = (MaxNumel(limit, what=pick(f"full {Lq}x{Lk} score matrix", f"完整的 {Lq}x{Lk} 分数矩阵")),) \
        if limit < B * H * Lq * Lk else ()
    notes = {"negative": "all scores << 0", "large": "large logits"}
    rtol = None
    if kind == "large" and dtype == torch.float32:
        # a score of size |s| is rounded by |s|·eps in float32, which moves the softmax (and its
        # gradients) relatively by as much: allow that, on top of the dtype's usual tolerance
        s = (scale or 1.0 / math.sqrt(D)) * torch.matmul(Q, K.transpose(-2, -1)).abs().max()
        rtol = max(1.3e-6, 2 * torch.finfo(torch.float32).eps * float(s))
    # all-negative rows: the forward is what can break there (a running max started at 0 gives 0 / 0)
    return Case(name=name, target=TARGET, inputs={"Q": Q, "K": K, "V": V},
                kwargs={"scale": scale, "block_size": block}, dtype=dtype, trace=trace, rtol=rtol,
                grad=kind != "negative",
                note=f"block {block}" + (f", {notes[kind]}" if kind else ""),
                traits=traits(B=B, Lq=Lq, Lk=Lk, D=D, Dv=Dv, H=H, large_logits=kind == "large"))


def _gradcheck(sub, ref, case: Case):
    """sub: whether torch.autograd.gradcheck of the submission's own backward passed (probe `gradcheck`)."""
    if sub is not True:
        Q, K, V = (case.inputs[n] for n in ("Q", "K", "V"))
        kw = case.kwargs
        return [Failure(pick(f"torch.autograd.gradcheck (float64, Q {tuple(Q.shape)}, K {tuple(K.shape)}, "
                             f"V {tuple(V.shape)}, scale {kw['scale']}, block_size {kw['block_size']}) fails: your "
                             f"backward does not match finite differences of your own forward",
                             f"torch.autograd.gradcheck（float64，Q {tuple(Q.shape)}，K {tuple(K.shape)}，"
                             f"V {tuple(V.shape)}，scale {kw['scale']}，block_size {kw['block_size']}）未通过："
                             f"你写的反向与对你自己的前向做有限差分的结果不一致"))]
    return []


def _saved(sub, ref, case: Case):
    """The forward keeps O(L) statistics per row (log-sum-exp), never P or any Lq x Lk tensor (probe `saved`)."""
    B, H, Lq, D = case.inputs["Q"].shape
    Lk, Dv = case.inputs["K"].shape[2], case.inputs["V"].shape[3]
    if not sub["is_tensor"] or sub["grad_fn"] is None:
        return [pick("flash_attention returned no tensor with a grad_fn: call FlashAttention.apply(...)",
                     "flash_attention 没有返回带 grad_fn 的张量：应调用 FlashAttention.apply(...)")]
    if not sub["is_function"]:
        return [pick("FlashAttention must be a subclass of torch.autograd.Function",
                     "FlashAttention 必须是 torch.autograd.Function 的子类")]
    if sub["grad_fn"] != "FlashAttentionBackward":
        return [pick(f"the output's grad_fn is {sub['grad_fn']}, so autograd differentiates your ops; "
                     f"flash_attention must return FlashAttention.apply(...) so that your own backward runs",
                     f"输出的 grad_fn 是 {sub['grad_fn']}，说明求导的是 autograd 而不是你的代码；"
                     f"flash_attention 必须返回 FlashAttention.apply(...)，这样运行的才是你自己的 backward")]
    shapes = [tuple(s) for s in sub["shapes"]]
    full = B * H * Lq * Lk
    budget = B * H * (2 * Lq * D + 2 * Lk * D + Lq * Dv + Lk * Dv + 2 * Lq)   # Q, K, V, O, stats, slack
    fails = []
    big = [s for s in shapes if math.prod(s) >= full]
    if big:
        fails.append(Failure(pick(f"the forward saves a tensor of shape {list(big[0])} for backward; save the row "
                                  f"log-sum-exp (B, H, Lq, 1) instead of P and recompute P block by block",
                                  f"前向为反向保存了形状为 {list(big[0])} 的张量；应保存每行的 log-sum-exp "
                                  f"(B, H, Lq, 1) 而不是 P，在反向中逐块重算 P")))
    total = sum(math.prod(s) for s in shapes)
    if not big and total > budget:
        fails.append(Failure(pick(f"the forward saves {total} elements for backward ({len(shapes)} tensors); "
                                  f"Q, K, V, O and one statistic per row need at most {budget}: do not keep "
                                  f"blocks of P",
                                  f"前向为反向保存了 {total} 个元素（{len(shapes)} 个张量）；Q、K、V、O "
                                  f"加上每行一个统计量最多只需 {budget} 个：不要保存 P 的块")))
    return fails


def _memory_case(ctx: Ctx, L: int = 2048, D: int = 8, block: int = 128) -> Case:
    """A long sequence whose full score matrix (L x L in float64: 32 MiB) would dwarf what a blocked
    forward holds; its memory is measured by the OS, from outside the room, so any route counts."""
    Q, K, V = _qkv(ctx, 1, 1, L, L, D, D)
    what = pick(f"full {L}x{L} score matrix", f"完整的 {L}x{L} 分数矩阵")
    return Case(name="memory_fp64", target=TARGET, inputs={"Q": Q, "K": K, "V": V},
                kwargs={"scale": None, "block_size": block}, dtype=torch.float64, grad=False,
                trace=(PeakMemory(L * L * 8 // 2, what=what),),   # no op trace: its records would count too
                note=f"block {block}, memory measured", traits=traits(B=1, Lq=L, Lk=L, D=D, Dv=D, H=1))


def cases(ctx: Ctx) -> list[Case]:
    out = [
        _case(ctx, "ragged_fp64", 2, 3, 13, 13, 5, 5, 4, torch.float64),
        _case(ctx, "cross_fp64", 1, 2, 7, 17, 6, 3, 5, torch.float64, scale=0.8),
        _case(ctx, "block_gt_len_fp32", 2, 1, 11, 6, 4, 4, 32, torch.float32),
        _case(ctx, "one_query_fp64", 3, 2, 1, 9, 3, 3, 2, torch.float64, scale=1.7),
        _case(ctx, "negative_scores_fp64", 2, 2, 9, 10, 4, 4, 3, torch.float64, kind="negative"),
        _case(ctx, "large_logits_fp32", 2, 2, 9, 14, 5, 5, 4, torch.float32, kind="large"),
        _case(ctx, "bf16", 2, 3, 12, 15, 8, 8, 5, torch.bfloat16),
        _case(ctx, "long_keys_fp32", 1, 2, 19, 23, 3, 3, 4, torch.float32),
        _case(ctx, "random_fp64", ctx.int(1, 3), ctx.int(1, 3), ctx.int(2, 15), ctx.int(2, 17), ctx.int(2, 6),
              ctx.int(2, 6), ctx.int(1, 9), torch.float64),
        _case(ctx, "long_fp32", 1, 2, ctx.int(64, 81), ctx.int(64, 97), 4, ctx.int(3, 5), ctx.int(16, 29),
              torch.float32),
    ]
    # the GPU tier: a longer sequence in float16 on CUDA, blocks of 32
    out.append(on_cuda(_case(ctx, "long", 2, 4, 157, 203, 64, 64, 32, torch.float32), name="long_cuda_fp16"))
    Q, K, V = _qkv(ctx, 1, 2, 4, 5, 3, 2)
    out.append(Case(name="gradcheck_fp64", target=TARGET, inputs={"Q": Q, "K": K, "V": V},
                    kwargs={"scale": 0.7, "block_size": 2}, grad=False, probe="gradcheck", check=_gradcheck,
                    note="torch.autograd.gradcheck, fast mode"))
    Q, K, V = _qkv(ctx, 1, 2, 12, 40, 2, 2)
    out.append(Case(name="saves_lse_not_p_fp64", target=TARGET, inputs={"Q": Q, "K": K, "V": V},
                    kwargs={"scale": None, "block_size": 8}, grad=False, probe="saved", check=_saved,
                    note="what ctx keeps for backward"))
    if ctx.full:
        for i in range(6):
            B, H, Lq, Lk = ctx.int(1, 3), ctx.int(1, 4), ctx.int(1, 29), ctx.int(1, 31)
            D, Dv, block = ctx.int(2, 9), ctx.int(2, 9), ctx.int(1, 12)
            dtype = ctx.choice([torch.float64, torch.float32, torch.bfloat16])
            kind = ctx.choice(["", "", "large"]) if dtype != torch.bfloat16 else ""   # bf16 cannot hold scores ~1e3
            out.append(_case(ctx, f"random{i}", B, H, Lq, Lk, D, Dv, block, dtype,
                             scale=ctx.choice([None, 0.3, 1.1]), kind=kind))
    out.append(_memory_case(ctx))   # last: the cases above keep their inputs at every seed
    return out
