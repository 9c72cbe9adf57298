"""Cases for `linear_attention`: the feature map, then the parallel, recurrent and chunked forms
against one float64 reference (so each form equals the others), with an eps large enough to see where
it goes, features near zero (where the default eps matters), large inputs, L = 1 and a long sequence,
chunks that do not divide L or exceed it, and bounds on the largest tensor the recurrent and chunked
forms may build (no L x L matrix, no stack of every state)."""
import math

import torch

from attn_drill.bank.api import FLOAT32_LEVEL, Case, Ctx, Failure, MaxNumel, PeakMemory, traits, type_name
from attn_drill.i18n import pick

FORMS = ("linear_attention_parallel", "linear_attention_recurrent", "linear_attention_chunked")


def _qkv(ctx: Ctx, B, H, L, D, Dv, kind=""):
    if kind == "near_zero":
        # phi(q) = exp(q) ~ 6e-6 and phi(k) ~ 0.1: the denominator is a few 1e-6, so eps = 1e-6 counts
        q = ctx.randn(B, H, L, D, scale=0.3) - 12.0
        k = ctx.randn(B, H, L, D) - 2.5
    else:
        # "large": features up to about 20, products phi(q).phi(k) in the hundreds
        s = 6.0 if kind == "large" else 1.0
        q, k = ctx.randn(B, H, L, D, scale=s), ctx.randn(B, H, L, D, scale=s)
    return {"q": q, "k": k, "v": ctx.randn(B, H, L, Dv)}


def _limit(form, B, H, L, D, Dv, chunk=None):
    """The largest tensor a form needs. Recurrent: one state, or a q/k/v/output-sized tensor. Chunked:
    n = ceil(L / C) chunks, each with a C x C block of scores, C rows of q/k/v and one D x Dv state,
    all n at once at most (a vectorised version pads L up to n * C)."""
    if form == "linear_attention_recurrent":
        return B * H * max(L * D, L * Dv, D * Dv)
    if form == "linear_attention_chunked":
        c = min(chunk, L)
        n = math.ceil(L / c)
        return B * H * n * max(c * c, c * D, c * Dv, D * Dv)
    return None


def _case(ctx: Ctx, name, form, B, H, L, D, Dv, dtype, eps=None, chunk=None, kind="", memory=True,
          grad=True) -> Case:
    inputs = _qkv(ctx, B, H, L, D, Dv, kind)
    kwargs = {}
    if chunk is not None:
        kwargs["chunk_size"] = chunk
    if eps is not None:
        kwargs["eps"] = eps
    limit = _limit(form, B, H, L, D, Dv, chunk)
    trace = ()
    if memory and limit is not None and limit < B * H * L * L:
        what = (pick(f"{L}x{L} matrix of feature products, no stack of all {L} states",
                     f"大小为 {L}x{L} 的特征乘积矩阵，也不要把全部 {L} 个状态堆叠起来") if form.endswith("recurrent")
                else pick(f"{L}x{L} matrix of feature products: one block of chunk_size x chunk_size per chunk",
                          f"大小为 {L}x{L} 的特征乘积矩阵：每个 chunk 只用一个 chunk_size x chunk_size 的块"))
        trace = (MaxNumel(limit, what=what),)
    notes = [form.replace("linear_attention_", "")]
    if chunk is not None:
        notes.append(f"chunk {chunk}")
    if eps is not None:
        notes.append(f"eps {eps}")
    if kind:
        notes.append({"near_zero": "features near 0", "large": "large inputs"}[kind])
    if not grad:
        notes.append("forward only")
    return Case(name=name, target=form, inputs=inputs, kwargs=kwargs, dtype=dtype, trace=trace, grad=grad,
                note=", ".join(notes),
                traits=traits(B=B, L=L, D=D, Dv=Dv, H=H, mask="causal", large_logits=kind == "large"))


def _chunk_sizes(L: int) -> tuple[int, ...]:
    return (1, 3, L - 1, L, L + 4)


def _chunk_free(sub, ref, case: Case):
    """One input under several chunk sizes: every answer equals the float64 reference's."""
    want = case.truth_obs
    L = case.probe_args["calls"][0]["args"][0].shape[2]
    if not isinstance(sub, list) or len(sub) != len(want):
        return [pick(f"the probe expected {len(want)} results, got {type_name(sub)}",
                     f"探针期望得到 {len(want)} 个结果，实际得到 {type_name(sub)}")]
    fails = []
    for chunk, got, w in zip(_chunk_sizes(L), sub, want):
        if not isinstance(got, torch.Tensor) or got.shape != w.shape:
            shape = list(got.shape) if isinstance(got, torch.Tensor) else type_name(got)
            fails.append(pick(f"chunk_size={chunk}: returned {shape}, expected shape {list(w.shape)}",
                              f"chunk_size={chunk}：返回了 {shape}，期望形状 {list(w.shape)}"))
            continue
        err = float((got.double() - w).abs().max()) if torch.isfinite(got).all() else math.inf
        if not err <= FLOAT32_LEVEL * (1 + float(w.abs().max())):
            fails.append(Failure(pick(f"chunk_size={chunk} gives an answer {err:.3g} away from the float64 reference "
                                      f"(L={L}); the output must not depend on the chunk size",
                                      f"chunk_size={chunk} 的结果与 float64 参考实现相差 {err:.3g}（L={L}）；"
                                      f"输出不应依赖 chunk 大小")))
    return fails


def _memory_case(ctx: Ctx, name: str, form: str, L: int = 2048, D: int = 8, chunk: int | None = None) -> Case:
    """A long sequence whose L x L feature products (float64: 32 MiB) would dwarf the state; its
    memory is measured by the OS, from outside the room, so any route (numpy, lists) counts."""
    case = _case(ctx, name, form, 1, 1, L, D, D, torch.float64, chunk=chunk, grad=False)
    what = pick(f"{L}x{L} matrix of feature products", f"大小为 {L}x{L} 的特征乘积矩阵")
    case.trace = (PeakMemory(L * L * 8 // 2, what=what),)     # no op trace: its records would count too
    case.note += ", memory measured"
    return case


def cases(ctx: Ctx) -> list[Case]:
    par, rec, chk = FORMS
    f64, f32, bf16 = torch.float64, torch.float32, torch.bfloat16
    L_long = ctx.int(64, 80)
    out = [
        Case(name="feature_map_fp64", target="feature_map", inputs={"x": ctx.randn(2, 3, 7, 5, scale=3.0)},
             note="elu + 1, both signs"),
        Case(name="feature_map_bf16", target="feature_map", inputs={"x": ctx.randn(3, 11, scale=2.0)},
             dtype=bf16, note="elu + 1"),
        _case(ctx, "parallel_fp64", par, 2, 3, 11, 6, 5, f64),
        _case(ctx, "parallel_eps_fp64", par, 1, 2, 9, 4, 3, f64, eps=0.5),
        _case(ctx, "parallel_near_zero_fp64", par, 2, 2, 8, 5, 4, f64, kind="near_zero"),
        _case(ctx, "parallel_large_fp64", par, 2, 2, 10, 4, 6, f64, kind="large"),
        _case(ctx, "parallel_l1_fp64", par, 3, 2, 1, 4, 3, f64, eps=0.25),
        _case(ctx, "parallel_bf16", par, 2, 3, 12, 8, 8, bf16),
        _case(ctx, "recurrent_fp64", rec, 2, 2, 15, 4, 3, f64, eps=0.3),
        _case(ctx, "recurrent_near_zero_fp64", rec, 1, 3, 9, 5, 2, f64, kind="near_zero", memory=False),
        # a long loop: its backward is the same as on short ones, and costs a few thousand ops
        _case(ctx, "recurrent_long_fp32", rec, 1, 2, L_long, 6, 5, f32, memory=False, grad=False),
        _case(ctx, "recurrent_l1_fp64", rec, 2, 1, 1, 3, 4, f64, eps=0.25),
        _case(ctx, "recurrent_bf16", rec, 2, 2, 11, 4, 4, bf16, memory=False),
        _case(ctx, "chunked_ragged_fp64", chk, 2, 2, 19, 4, 3, f64, eps=0.2, chunk=4),
        _case(ctx, "chunked_chunk_gt_len_fp64", chk, 1, 3, 7, 3, 5, f64, chunk=16),
        _case(ctx, "chunked_near_zero_fp64", chk, 2, 1, 14, 5, 3, f64, chunk=5, kind="near_zero", memory=False),
        _case(ctx, "chunked_long_fp32", chk, 2, 2, L_long + 3, 5, 4, f32, chunk=ctx.int(6, 11), memory=False),
        _case(ctx, "chunked_large_fp64", chk, 1, 2, 15, 4, 4, f64, chunk=4, kind="large", memory=False),
        _case(ctx, "chunked_bf16", chk, 2, 2, 21, 6, 6, bf16, chunk=6, memory=False),
    ]
    qkv = list(_qkv(ctx, 2, 2, 10, 3, 4).values())
    out.append(Case(name="chunk_size_free_fp64", target=chk, probe="calls", grad=False,
                    probe_args={"calls": [{"args": qkv, "kwargs": {"chunk_size": c, "eps": 0.1}}
                                          for c in _chunk_sizes(10)]},
                    check=_chunk_free, note="chunk sizes 1, 3, L-1, L, L+4"))
    if ctx.full:
        for i in range(9):
            form = FORMS[i % 3]
            B, H, L, D, Dv = ctx.int(1, 3), ctx.int(1, 4), ctx.int(1, 40), ctx.int(1, 9), ctx.int(1, 9)
            dtype = ctx.choice([f64, f32, bf16])
            # large inputs and features near zero in float64 only: there is no exp to overflow here, and
            # in float32 they only measure how each correct order of the sums rounds
            kind = ctx.choice(["", "", "large", "near_zero"]) if dtype == f64 else ""
            chunk = ctx.int(1, 12) if form == chk else None
            eps = ctx.choice([None, 1e-3, 0.4])
            if L == 1:
                eps = 0.25   # one key: the gradients w.r.t. q and k are proportional to eps, keep them well-conditioned
            out.append(_case(ctx, f"random{i}_{form.replace('linear_attention_', '')}", form, B, H, L, D, Dv,
                             dtype, eps=eps, chunk=chunk, kind=kind))
    # last: the cases above keep their inputs at every seed
    out.append(_memory_case(ctx, "recurrent_memory_fp64", FORMS[1]))
    out.append(_memory_case(ctx, "chunked_memory_fp64", FORMS[2], chunk=128))
    return out
