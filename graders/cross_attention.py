"""Cases for `cross_attention`: Lq != Lk both ways, encoder_dim != decoder_dim, encoder padding."""
import torch

from attn_drill.bank.api import Case, Ctx, padding_mask, traits

TARGET = "CrossAttention"
# Scores near 1e3 in float32: two correct implementations that round in a different order can
# differ by a few times the reference's own error, so this case also allows 1e-3 relative.
LARGE_LOGIT_RTOL = 1e-3


def _case(ctx: Ctx, name, B, Lq, Lk, H, D, enc_dim, dtype, pad=False, scale=1.0, rtol=None):
    E = H * D
    kwargs = {}
    notes = [f"Lq={Lq} Lk={Lk}"]
    if pad:
        kwargs["key_padding_mask"] = padding_mask(ctx.lengths(B, Lk), Lk)   # (B, Lk), encoder side
        notes.append("encoder pad")
    if scale > 1:
        notes.append("large logits")
    return Case(name=name, target=TARGET,
                init=dict(decoder_dim=E, encoder_dim=enc_dim, num_heads=H, dropout=0.0),
                inputs={"decoder_hidden": ctx.randn(B, Lq, E, scale=scale),
                        "encoder_hidden": ctx.randn(B, Lk, enc_dim, scale=scale)},
                kwargs=kwargs, dtype=dtype, rtol=rtol, note=" ".join(notes),
                traits=traits(B=B, Lq=Lq, Lk=Lk, H=H, pad=pad, large_logits=scale > 1))


def cases(ctx: Ctx) -> list[Case]:
    out = [
        _case(ctx, "short_decoder_fp64", 2, 5, 9, 3, 4, 7, torch.float64),
        _case(ctx, "long_decoder_fp64", 3, 11, 6, 2, 5, 13, torch.float64),
        _case(ctx, "b1_lq1_fp64", 1, 1, 7, 3, 3, 5, torch.float64),
        _case(ctx, "encoder_pad_fp64", 3, 6, 10, 2, 7, 9, torch.float64, pad=True),
        _case(ctx, "lk1_fp32", 2, 4, 1, 4, 3, 6, torch.float32),
        _case(ctx, "encoder_pad_fp32", 4, 7, 5, 3, 5, 11, torch.float32, pad=True),
        _case(ctx, "large_logits_fp32", 2, 3, 8, 2, 9, 10, torch.float32, scale=30.0, rtol=LARGE_LOGIT_RTOL),
        _case(ctx, "bf16", 2, 9, 12, 3, 8, 20, torch.bfloat16, pad=True),
        _case(ctx, "b1_fp64", 1, 4, 6, 2, 3, 5, torch.float64),
        _case(ctx, "random_fp64", ctx.int(2, 4), ctx.int(2, 11), ctx.int(2, 13), ctx.int(1, 4), ctx.int(2, 6),
              ctx.int(3, 17), torch.float64, pad=True),
        _case(ctx, "long_fp32", ctx.int(1, 2), ctx.int(64, 81), ctx.int(66, 97), 2, ctx.int(2, 5), ctx.int(3, 11),
              torch.float32, pad=True),
    ]
    if ctx.full:
        for i in range(6):
            B, Lq, Lk = ctx.int(1, 4), ctx.int(1, 19), ctx.int(1, 23)
            H, D, enc = ctx.int(1, 5), ctx.int(2, 11), ctx.int(3, 30)
            dtype = ctx.choice([torch.float64, torch.float32, torch.bfloat16])
            out.append(_case(ctx, f"random{i}", B, Lq, Lk, H, D, enc, dtype, pad=bool(ctx.int(0, 1))))
    return out
