"""Cases for `t5_bias`: the bucket function (oracle values and a wide range, both directions), the bias
table and its gradients, and T5 attention (encoder and causal decoder), padding, large logits, dtypes."""
import math

import torch

from attn_drill.bank.api import Case, Ctx, Failure, padding_mask, type_name, traits
from attn_drill.i18n import pick

# Printed by Hugging Face transformers' T5Attention._relative_position_bucket (32 buckets, max distance 128).
ORACLE_REL = [-1, -5, -20, -100, -128, -200, 1, 200]
ORACLE = {True: [1, 5, 10, 15, 15, 15, 17, 31], False: [1, 5, 17, 30, 31, 31, 0, 0]}


def bucket(rel: torch.Tensor, bidirectional: bool, num_buckets: int, max_distance: int,
           linear: bool = False, clamp: bool = True, direction: bool = True) -> torch.Tensor:
    """The T5 bucket rule, written independently in float64, one element at a time."""
    out = []
    for r in rel.reshape(-1).tolist():
        nb, b = num_buckets, 0
        if bidirectional:
            nb //= 2
            if r > 0 and direction:
                b = nb
            d = abs(r)
        else:
            d = max(-r, 0)
        exact = nb // 2
        if d < exact:
            b += d
        else:
            if linear:
                v = exact + (d - exact) * (nb - exact) // (max_distance - exact)
            else:
                v = exact + int(math.log(d / exact) / math.log(max_distance / exact) * (nb - exact))
            b += min(v, nb - 1) if clamp else v
        out.append(b)
    return torch.tensor(out, dtype=torch.long).reshape(rel.shape)


# (mistake, flags, (English, Chinese)): the language is picked when a message is built
VARIANTS = (
    ("linear_buckets", dict(linear=True), ("distances beyond the exact range must be spaced logarithmically",
                                           "超出精确区间的距离必须按对数间隔分桶")),
    ("missing_clamp", dict(clamp=False), ("distances at or beyond max_distance must share the last bucket",
                                          "达到或超过 max_distance 的距离必须共用最后一个桶")),
    ("no_direction_offset", dict(direction=False),
     ("bidirectional: keys after the query must use the upper half of the buckets (+ num_buckets // 2)",
      "双向模式：query 之后的 key 必须使用上半部分的桶（+ num_buckets // 2）")),
)


def _call(rel, bidirectional, num_buckets, max_distance) -> dict:
    """One call of T5RelativeBias._relative_position_bucket, as probe data."""
    return {"args": [rel], "kwargs": {"num_buckets": num_buckets, "max_distance": max_distance,
                                      "bidirectional": bidirectional}}


def _bucket_case(name, calls, check, note):
    return Case(name=name, target="T5RelativeBias", probe="calls",
                probe_args={"attr": "_relative_position_bucket", "calls": calls}, check=check, grad=False,
                note=note)


def _judge(got, rel, want, bidirectional, nb, md, what) -> list:
    mode = pick("bidirectional", "双向") if bidirectional else pick("causal", "因果")
    if not isinstance(got, torch.Tensor) or got.dtype not in (torch.long, torch.int32, torch.int64):
        kind = got.dtype if isinstance(got, torch.Tensor) else type_name(got)
        return [pick(f"_relative_position_bucket returned {kind}; return integer bucket ids (torch.long)",
                     f"_relative_position_bucket 返回了 {kind}；应返回整数桶号（torch.long）")]
    if got.shape != rel.shape:
        return [pick(f"_relative_position_bucket returned shape {tuple(got.shape)} for input {tuple(rel.shape)}",
                     f"_relative_position_bucket 对形状为 {tuple(rel.shape)} 的输入返回了形状 {tuple(got.shape)}")]
    got = got.long().cpu()
    if torch.equal(got, want):
        return []
    i = int((got != want).nonzero()[0][0])
    msg = pick(f"{what} ({mode}, num_buckets={nb}, max_distance={md}): relative position {int(rel[i])} "
               f"gave bucket {int(got[i])}, expected {int(want[i])}",
               f"{what}（{mode}，num_buckets={nb}，max_distance={md}）：相对位置 {int(rel[i])} "
               f"得到桶 {int(got[i])}，应为 {int(want[i])}")
    for mistake, flags, why in VARIANTS:
        if torch.equal(got, bucket(rel, bidirectional, nb, md, **flags)):
            why = pick(*why)
            return [Failure(pick(f"{msg}; {why}", f"{msg}；{why}"), mistake=mistake)]
    return [msg]


ORACLE_CALLS = [_call(torch.tensor(ORACLE_REL), b, 32, 128) for b in (True, False)]
RANGES = [(nb, md, b) for nb, md in ((32, 128), (12, 20), (10, 16)) for b in (True, False)]


def check_oracle(sub, ref, case) -> list:
    rel = torch.tensor(ORACLE_REL)
    for bidirectional, got in zip((True, False), sub):
        want = torch.tensor(ORACLE[bidirectional])
        fails = _judge(got, rel, want, bidirectional, 32, 128, pick("T5's own bucket values", "T5 自己的桶号"))
        if fails:
            return fails
    return []


def check_range(sub, ref, case) -> list:
    for (nb, md, bidirectional), got in zip(RANGES, sub):
        rel = torch.arange(-3 * md, 3 * md + 1)
        fails = _judge(got, rel, bucket(rel, bidirectional, nb, md), bidirectional, nb, md,
                       pick("bucket ids over a range of distances", "一段距离范围内的桶号"))
        if fails:
            return fails
    return []


def check_grad(sub, ref, case) -> list:
    """The bias must come from the table's parameters, so that training can change it (probe: bias_grads)."""
    if not sub.get("requires_grad"):
        return [Failure(pick("T5RelativeBias(...)(9) does not depend on any parameter (no grad_fn): the bias table "
                             "would never learn; index the nn.Embedding without detach() or torch.no_grad()",
                             "T5RelativeBias(...)(9) 不依赖任何参数（没有 grad_fn）：偏置表永远学不到东西；"
                             "查 nn.Embedding 时不要用 detach() 或 torch.no_grad()"),
                        mistake="bias_detached")]
    if not sub.get("any_grad"):
        return [Failure(pick("no parameter of T5RelativeBias receives a gradient from the bias",
                             "T5RelativeBias 的参数都没有从偏置得到梯度"),
                        mistake="bias_detached")]
    return []


def _bias_case(name, H, L, nb, md, bidirectional, dtype):
    return Case(name=name, target="T5RelativeBias",
                init=dict(num_heads=H, num_buckets=nb, max_distance=md, bidirectional=bidirectional),
                dtype=dtype, inputs={"seq_len": L},
                note=f"bias only, {'bidir' if bidirectional else 'causal'} {nb}/{md}", axes=("query", "key"))


def _attn_case(ctx: Ctx, name, B, L, H, D, dtype, nb=32, md=128, bidirectional=True, pad=False, scale=1.0):
    E = H * D
    kwargs, notes = {}, ["encoder" if bidirectional else "causal", f"{nb}/{md}"]
    if pad:
        kwargs["key_padding_mask"] = padding_mask(ctx.lengths(B, L), L)
        notes.append("pad")
    if scale > 1:
        notes.append("large logits")
    return Case(name=name, target="T5Attention",
                init=dict(hidden_dim=E, num_heads=H, num_buckets=nb, max_distance=md, dropout=0.0,
                          bidirectional=bidirectional),
                inputs={"x": ctx.randn(B, L, E, scale=scale)}, kwargs=kwargs, dtype=dtype,
                note=" ".join(notes), traits=traits(B=B, L=L, H=H, pad=pad, large_logits=scale > 1,
                                                    mask=None if bidirectional else "causal"))


def cases(ctx: Ctx) -> list[Case]:
    out = [
        _bucket_case("bucket_oracle", ORACLE_CALLS, check_oracle, "T5's own bucket ids"),
        _bucket_case("bucket_range", [_call(torch.arange(-3 * md, 3 * md + 1), b, nb, md) for nb, md, b in RANGES],
                     check_range, "all distances, both modes"),
        Case(name="bias_has_grad", target="T5RelativeBias", probe="bias_grads", check=check_grad, grad=False,
             note="table gets gradients"),
        _bias_case("bias_bidir_fp64", 3, 9, 32, 128, True, torch.float64),
        _bias_case("bias_causal_small_fp64", 2, 30, 12, 20, False, torch.float64),
        _bias_case("bias_long_l150_fp32", 4, 150, 32, 128, True, torch.float32),
        _attn_case(ctx, "attn_fp64", 2, 7, 3, 5, torch.float64),
        _attn_case(ctx, "attn_b1_fp64", 1, 6, 2, 3, torch.float64),
        _attn_case(ctx, "attn_l1_fp64", 3, 1, 2, 3, torch.float64),
        _attn_case(ctx, "attn_random_fp64", ctx.int(2, 4), ctx.int(2, 30), ctx.int(1, 3), ctx.int(2, 6), torch.float64,
                   nb=12, md=20, bidirectional=bool(ctx.int(0, 1)), pad=True),
        _attn_case(ctx, "attn_long_fp32", 1, ctx.int(64, 97), 2, ctx.int(3, 5), torch.float32, nb=16, md=40, pad=True),
        _attn_case(ctx, "attn_pad_small_buckets_fp64", 3, 26, 2, 4, torch.float64, nb=12, md=20, pad=True),
        _attn_case(ctx, "attn_causal_fp32", 2, 21, 3, 4, torch.float32, nb=10, md=16, bidirectional=False),
        _attn_case(ctx, "attn_large_logits_fp32", 2, 6, 2, 9, torch.float32, scale=17.0),
        _attn_case(ctx, "attn_causal_pad_bf16", 2, 11, 3, 8, torch.bfloat16, bidirectional=False, pad=True),
    ]
    if ctx.full:
        for i in range(6):
            B, L, H, D = ctx.int(1, 4), ctx.int(1, 40), ctx.int(1, 5), ctx.int(2, 9)
            dtype = ctx.choice([torch.float64, torch.float32, torch.bfloat16])
            nb, md = ctx.choice([(32, 128), (12, 20), (8, 10), (16, 24)])
            out.append(_attn_case(ctx, f"random{i}", B, L, H, D, dtype, nb=nb, md=md,
                                  bidirectional=bool(ctx.int(0, 1)), pad=bool(ctx.int(0, 1))))
    return out
