"""Cases for `einsum_attention`: default and explicit scale, Dv != D, Lq != Lk, broadcast masks."""
import torch

from attn_drill.bank.api import Case, Ctx, traits

TARGET = "scaled_dot_product_einsum"
# Scores near 1e3 in float32: two correct implementations that round in a different order can
# differ by a few times the reference's own error, so this case also allows 1e-3 relative.
LARGE_LOGIT_RTOL = 1e-3


def _random_keep(ctx: Ctx, *shape):
    """Bool keep-mask with key 0 always kept and the last key always dropped (needs Lk >= 2)."""
    keep = ctx.rand(*shape) > 0.45
    keep[..., 0] = True
    keep[..., -1] = False
    return keep


def _case(ctx: Ctx, name, B, H, Lq, Lk, D, Dv, dtype, scale=None, mask=None, big=1.0, rtol=None):
    kwargs, notes = {}, []
    if scale is not None:
        kwargs["scale"] = scale
        notes.append(f"scale={scale:g}")
    if mask == "causal":
        kwargs["mask"] = torch.ones(Lq, Lk, dtype=torch.bool).tril()       # (Lq, Lk), top-left aligned
        notes.append("causal (Lq, Lk)")
    elif mask == "per_batch":
        kwargs["mask"] = _random_keep(ctx, B, 1, Lq, Lk)                     # (B, 1, Lq, Lk)
        notes.append("random (B, 1, Lq, Lk)")
    elif mask == "full":
        kwargs["mask"] = _random_keep(ctx, B, H, Lq, Lk)                     # (B, H, Lq, Lk)
        notes.append("random (B, H, Lq, Lk)")
    if big > 1:
        notes.append("large logits")
    return Case(name=name, target=TARGET, init=None,
                inputs={"query": ctx.randn(B, H, Lq, D, scale=big),
                        "key": ctx.randn(B, H, Lk, D, scale=big),
                        "value": ctx.randn(B, H, Lk, Dv)},
                kwargs=kwargs, dtype=dtype, rtol=rtol, note=" ".join(notes),
                traits=traits(B=B, Lq=Lq, Lk=Lk, D=D, Dv=Dv, H=H, large_logits=big > 1,
                              mask="causal" if mask == "causal" else ("mask3d" if mask else None)))


def cases(ctx: Ctx) -> list[Case]:
    out = [
        _case(ctx, "basic_fp64", 2, 3, 5, 7, 6, 6, torch.float64),
        _case(ctx, "dv_differs_fp64", 2, 2, 6, 4, 5, 9, torch.float64),
        _case(ctx, "explicit_scale_fp64", 1, 3, 4, 9, 7, 7, torch.float64, scale=0.21),
        _case(ctx, "b1_lq1_fp64", 1, 2, 1, 6, 5, 3, torch.float64),
        _case(ctx, "causal_fp64", 2, 2, 5, 8, 4, 4, torch.float64, mask="causal"),
        _case(ctx, "per_batch_mask_fp32", 3, 2, 6, 5, 7, 5, torch.float32, mask="per_batch"),
        _case(ctx, "full_mask_scale_fp32", 2, 3, 4, 7, 6, 10, torch.float32, scale=0.7, mask="full"),
        _case(ctx, "large_logits_fp32", 2, 2, 5, 6, 9, 9, torch.float32, big=18.0, rtol=LARGE_LOGIT_RTOL),
        _case(ctx, "bf16", 2, 3, 7, 11, 8, 8, torch.bfloat16, mask="per_batch"),
        _case(ctx, "random_fp64", ctx.int(2, 3), ctx.int(1, 4), ctx.int(2, 11), ctx.int(2, 13), ctx.int(2, 9),
              ctx.int(2, 9), torch.float64, mask="full"),
        _case(ctx, "long_fp32", 1, 2, ctx.int(64, 97), ctx.int(64, 97), ctx.int(3, 6), ctx.int(3, 6), torch.float32,
              mask="per_batch"),
    ]
    if ctx.full:
        for i in range(6):
            B, H, Lq, Lk = ctx.int(1, 3), ctx.int(1, 4), ctx.int(1, 13), ctx.int(2, 17)
            D, Dv = ctx.int(2, 12), ctx.int(2, 12)
            dtype = ctx.choice([torch.float64, torch.float32, torch.bfloat16])
            scale = ctx.choice([None, 0.33, 1.7])
            mask = ctx.choice([None, "causal", "per_batch", "full"])
            out.append(_case(ctx, f"random{i}", B, H, Lq, Lk, D, Dv, dtype, scale=scale, mask=mask))
    return out
