"""Cases for `gqa`: several query/KV head ratios, padding, 2-D and 3-D masks, large logits, dtypes."""
import torch

from attn_drill.bank.api import Case, Ctx, on_cuda, traits

TARGET = "GroupedQueryAttention"
# Scores near 1e3 in float32: two correct implementations that round in a different order can
# differ by a few times the reference's own error, so this case also allows 1e-3 relative.
LARGE_LOGIT_RTOL = 1e-3


def _case(ctx: Ctx, name, B, L, Hq, Hkv, D, dtype, pad=False, mask=None, scale=1.0, rtol=None):
    E = Hq * D
    kwargs, notes = {}, [f"{Hq}q/{Hkv}kv"]
    more, words = ctx.masks(B, L, pad, mask)
    kwargs.update(more)
    notes += words
    if scale > 1:
        notes.append("large logits")
    return Case(name=name, target=TARGET,
                init=dict(hidden_dim=E, num_query_heads=Hq, num_kv_heads=Hkv, dropout=0.0),
                inputs={"x": ctx.randn(B, L, E, scale=scale)}, kwargs=kwargs, dtype=dtype, rtol=rtol,
                note=" ".join(notes), traits=traits(B=B, L=L, H=Hq, pad=pad, mask=mask, large_logits=scale > 1))


def _random(ctx: Ctx, name, dtype, L, B=None):
    Hkv = ctx.int(1, 3)
    return _case(ctx, name, B or ctx.int(2, 4), L, Hkv * ctx.int(2, 3), Hkv, ctx.int(2, 6), dtype, pad=True,
                 mask=ctx.choice(["causal", "random3d"]))


def cases(ctx: Ctx) -> list[Case]:
    out = [
        _case(ctx, "q8_kv2_fp64", 2, 7, 8, 2, 3, torch.float64),
        _case(ctx, "q6_kv3_pad_fp64", 3, 9, 6, 3, 5, torch.float64, pad=True),
        _case(ctx, "q6_kv1_mqa_fp64", 2, 6, 6, 1, 4, torch.float64, mask="causal"),
        _case(ctx, "q4_kv4_mha_fp64", 2, 5, 4, 4, 3, torch.float64),
        _case(ctx, "b1_fp64", 1, 5, 6, 2, 3, torch.float64),
        _case(ctx, "l1_fp64", 3, 1, 6, 2, 3, torch.float64),
        _case(ctx, "q6_kv2_mask3d_fp32", 6, 8, 6, 2, 5, torch.float32, pad=True, mask="random3d"),
        _case(ctx, "large_logits_fp32", 2, 5, 4, 2, 9, torch.float32, scale=35.0, rtol=LARGE_LOGIT_RTOL),
        _case(ctx, "bf16", 2, 11, 8, 2, 6, torch.bfloat16, pad=True, mask="causal"),
        # sizes drawn from the seed, and a long sequence: nothing can be tuned to fixed small shapes
        _random(ctx, "random_fp64", torch.float64, ctx.int(2, 12)),
        _random(ctx, "long_fp32", torch.float32, ctx.int(64, 97), B=ctx.int(1, 2)),
    ]
    # the GPU tier: a larger padded causal case (Llama-like 32/8 heads) in float16 and under autocast
    big = _case(ctx, "big", 3, 61, 32, 8, 16, torch.float32, pad=True, mask="causal")
    out += [on_cuda(big, name="big_cuda_fp16"), on_cuda(big, autocast=torch.float16, name="big_cuda_autocast")]
    if ctx.full:
        for i in range(6):
            Hkv = ctx.int(1, 4)
            Hq = Hkv * ctx.int(1, 4)
            B, L, D = ctx.int(1, 4), ctx.int(1, 19), ctx.int(2, 9)
            dtype = ctx.choice([torch.float64, torch.float32, torch.bfloat16])
            out.append(_case(ctx, f"random{i}", B, L, Hq, Hkv, D, dtype, pad=bool(ctx.int(0, 1)),
                             mask=ctx.choice([None, "causal", "random3d"])))
    return out
