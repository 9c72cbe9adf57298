"""Cases for `chunked_attention`: ragged chunks, chunk > L, Lq != Lk, negative and large logits,
dtypes, and a bound on the largest tensor the submission may build (no full Lq x Lk scores)."""
import math

import torch

from attn_drill.bank.api import FLOAT32_LEVEL, Case, Ctx, Failure, MaxNumel, PeakMemory, on_cuda, type_name, traits
from attn_drill.i18n import pick

TARGET = "chunked_attention"


def _limit(B, H, Lq, Lk, D, Dv, chunk):
    """The largest tensor a chunked solution needs: a block of scores, or a Q/K/V/output-sized tensor."""
    return B * H * max(min(chunk, Lq) * min(chunk, Lk), Lq * D, Lq * Dv, Lk * D, Lk * Dv)


def _case(ctx: Ctx, name, B, H, Lq, Lk, D, Dv, chunk, dtype, scale=None, kind=""):
    if kind == "negative":
        # every score far below 0 (about -1000 .. -3000): exp(score - 0) underflows to 0
        Q = ctx.rand(B, H, Lq, D) + 1.0
        K = -(ctx.rand(B, H, Lk, D) + 1.0) * (1000.0 * math.sqrt(D) / D)
    else:
        # "large": scores of a few hundred up to ~1e3, where exp without max-subtraction overflows
        Q = ctx.randn(B, H, Lq, D, scale=150.0 if kind == "large" else 1.0)
        K = ctx.randn(B, H, Lk, D)
    V = ctx.randn(B, H, Lk, Dv)
    limit = _limit(B, H, Lq, Lk, D, Dv, chunk)
    trace = (MaxNumel(limit, what=pick(f"full {Lq}x{Lk} score matrix", f"完整的 {Lq}x{Lk} 分数矩阵")),) \
        if limit < B * H * Lq * Lk else ()
    notes = {"negative": "all scores << 0", "large": "large logits"}
    rtol = None
    if kind == "large" and dtype == torch.float32:
        # a score of size |s| is rounded by |s|·eps in float32, which moves the softmax (and its
        # gradients) relatively by as much: allow that, on top of the dtype's usual tolerance
        s = (scale or 1.0 / math.sqrt(D)) * torch.matmul(Q, K.transpose(-2, -1)).abs().max()
        rtol = max(1.3e-6, 2 * torch.finfo(torch.float32).eps * float(s))
    return Case(name=name, target=TARGET, inputs={"Q": Q, "K": K, "V": V},
                kwargs={"chunk_size": chunk, "scale": scale}, dtype=dtype, grad=False, trace=trace, rtol=rtol,
                note=f"chunk {chunk}" + (f", {notes[kind]}" if kind else ""),
                traits=traits(B=B, Lq=Lq, Lk=Lk, D=D, Dv=Dv, H=H, large_logits=kind == "large"))


def _memory_case(ctx: Ctx, L: int = 2048, D: int = 8, chunk: int = 128) -> Case:
    """A long sequence whose full score matrix (L x L in float64: 32 MiB) would dwarf one chunk's; its
    memory is measured by the OS, from outside the room, so any route (numpy, lists) counts."""
    case = _case(ctx, "memory_fp64", 1, 1, L, L, D, D, chunk, torch.float64)
    what = pick(f"full {L}x{L} score matrix", f"完整的 {L}x{L} 分数矩阵")
    case.trace = (PeakMemory(L * L * 8 // 2, what=what),)   # no op trace: its records would count too
    case.note += ", memory measured"
    return case


def _chunk_sizes(Lk: int) -> tuple[int, ...]:
    return (1, 2, 5, Lk - 1, Lk + 3)


def _chunk_free(sub, ref, case: Case):
    """The same inputs under several chunk sizes give the same answer as the reference."""
    Q, K, _ = case.probe_args["calls"][0]["args"]
    Lq, Lk = Q.shape[2], K.shape[2]
    want = ref[-1]
    fails = []
    for chunk, got in zip(_chunk_sizes(Lk), sub):
        if not isinstance(got, torch.Tensor) or got.shape != want.shape:
            shape = tuple(got.shape) if isinstance(got, torch.Tensor) else type_name(got)
            fails.append(pick(f"chunk_size={chunk}: returned {shape}, expected shape {tuple(want.shape)}",
                              f"chunk_size={chunk}：返回了 {shape}，期望形状 {tuple(want.shape)}"))
            continue
        err = float((got - want).abs().max()) if got.isfinite().all() else math.inf
        if not err <= FLOAT32_LEVEL * (1 + float(want.abs().max())):
            fails.append(Failure(pick(f"chunk_size={chunk} gives an answer {err:.3g} away from the full softmax "
                                      f"(Lq={Lq}, Lk={Lk}); the result must not depend on the chunk size",
                                      f"chunk_size={chunk} 的结果与完整 softmax 相差 {err:.3g}（Lq={Lq}，Lk={Lk}）；"
                                      f"结果不应依赖 chunk 大小")))
    return fails


def cases(ctx: Ctx) -> list[Case]:
    out = [
        _case(ctx, "ragged_fp64", 2, 3, 13, 13, 5, 5, 4, torch.float64),
        _case(ctx, "cross_fp64", 1, 2, 7, 17, 6, 3, 5, torch.float64, scale=0.8),
        _case(ctx, "chunk_gt_len_fp64", 2, 1, 11, 6, 4, 4, 32, torch.float64),
        _case(ctx, "one_query_fp32", 3, 2, 1, 9, 3, 3, 2, torch.float32),
        _case(ctx, "negative_scores_fp64", 2, 2, 9, 10, 4, 4, 3, torch.float64, kind="negative"),
        _case(ctx, "large_logits_fp32", 2, 2, 9, 14, 5, 5, 4, torch.float32, kind="large"),
        _case(ctx, "bf16", 2, 3, 12, 15, 8, 8, 5, torch.bfloat16),
        _case(ctx, "long_keys_fp32", 1, 2, 19, 23, 3, 3, 4, torch.float32),
        _case(ctx, "random_fp64", ctx.int(1, 3), ctx.int(1, 3), ctx.int(2, 17), ctx.int(2, 19), ctx.int(2, 7),
              ctx.int(2, 7), ctx.int(1, 9), torch.float64),
        _case(ctx, "long_fp32", 1, 2, ctx.int(64, 97), ctx.int(64, 113), 4, ctx.int(3, 6), ctx.int(8, 29),
              torch.float32),
    ]
    # the GPU tier: a longer sequence in float16 on CUDA, chunks of 32
    out.append(on_cuda(_case(ctx, "long", 2, 4, 157, 203, 64, 64, 32, torch.float32), name="long_cuda_fp16"))
    qkv = [ctx.randn(2, 2, 6, 4), ctx.randn(2, 2, 11, 4), ctx.randn(2, 2, 11, 3)]
    out.append(Case(name="chunk_size_free_fp64", target=TARGET, probe="calls",
                    probe_args={"calls": [{"args": qkv, "kwargs": {"chunk_size": c}} for c in _chunk_sizes(11)]
                                + [{"args": qkv, "kwargs": {"chunk_size": 11}}]},
                    dtype=torch.float64, grad=False, check=_chunk_free, note="chunk sizes 1, 2, 5, Lk-1, Lk+3"))
    if ctx.full:
        for i in range(6):
            B, H, Lq, Lk = ctx.int(1, 3), ctx.int(1, 4), ctx.int(1, 29), ctx.int(1, 31)
            D, Dv, chunk = ctx.int(2, 9), ctx.int(2, 9), ctx.int(1, 12)
            dtype = ctx.choice([torch.float64, torch.float32, torch.bfloat16])
            kind = ctx.choice(["", "", "large"]) if dtype != torch.bfloat16 else ""   # bf16 cannot hold scores ~1e3
            out.append(_case(ctx, f"random{i}", B, H, Lq, Lk, D, Dv, chunk, dtype,
                             scale=ctx.choice([None, 0.3, 1.1]), kind=kind))
    out.append(_memory_case(ctx))   # last: the cases above keep their inputs at every seed
    return out
