"""Cases for `attention_pooling`: one and several heads, per-row padding, length 1, large logits."""
import torch

from attn_drill.bank.api import Case, Ctx, padding_mask, traits

TARGET = "AttentionPooling"
# Scores near 1e3 in float32: two correct implementations that round in a different order can
# differ by a few times the reference's own error, so this case also allows 1e-3 relative.
LARGE_LOGIT_RTOL = 1e-3


def _case(ctx: Ctx, name, B, L, H, D, dtype, pad=False, scale=1.0, rtol=None):
    E = H * D
    kwargs, notes = {}, [f"{H} head{'s' if H > 1 else ''}"]
    if pad:
        kwargs["mask"] = padding_mask(ctx.lengths(B, L), L)        # (B, L), True = pad
        notes.append("pad")
    if scale > 1:
        notes.append("large logits")
    return Case(name=name, target=TARGET, init=dict(hidden_dim=E, num_heads=H),
                inputs={"x": ctx.randn(B, L, E, scale=scale)}, kwargs=kwargs, dtype=dtype, rtol=rtol,
                note=" ".join(notes), axes=("head", "position"),
                traits=traits(B=B, L=L, H=H, pad=pad, large_logits=scale > 1))


def cases(ctx: Ctx) -> list[Case]:
    out = [
        _case(ctx, "one_head_fp64", 3, 7, 1, 10, torch.float64),
        _case(ctx, "three_heads_fp64", 2, 9, 3, 5, torch.float64),
        _case(ctx, "pad_one_head_fp64", 4, 8, 1, 6, torch.float64, pad=True),
        _case(ctx, "pad_heads_fp64", 3, 11, 4, 3, torch.float64, pad=True),
        _case(ctx, "b1_fp64", 1, 6, 2, 5, torch.float64),
        _case(ctx, "l1_fp64", 3, 1, 2, 5, torch.float64),
        _case(ctx, "random_fp64", ctx.int(2, 5), ctx.int(2, 13), ctx.int(1, 4), ctx.int(2, 7), torch.float64, pad=True),
        _case(ctx, "long_fp32", ctx.int(1, 3), ctx.int(64, 97), ctx.int(1, 3), ctx.int(3, 6), torch.float32, pad=True),
        _case(ctx, "pad_heads_fp32", 5, 6, 2, 7, torch.float32, pad=True),
        _case(ctx, "large_logits_fp32", 2, 9, 3, 6, torch.float32, scale=600.0, rtol=LARGE_LOGIT_RTOL),
        _case(ctx, "bf16", 3, 13, 3, 8, torch.bfloat16, pad=True),
    ]
    if ctx.full:
        for i in range(6):
            B, L, H, D = ctx.int(1, 5), ctx.int(1, 23), ctx.int(1, 5), ctx.int(2, 11)
            dtype = ctx.choice([torch.float64, torch.float32, torch.bfloat16])
            out.append(_case(ctx, f"random{i}", B, L, H, D, dtype, pad=bool(ctx.int(0, 1))))
    return out
