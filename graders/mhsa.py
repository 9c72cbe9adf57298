"""Cases for `mhsa`: shapes, padding, 2-D and 3-D attention masks, large logits, dtypes."""
import torch

from attn_drill.bank.api import Case, Ctx, on_cuda, traits

TARGET = "MultiHeadSelfAttention"


def _case(ctx: Ctx, name, B, L, H, D, dtype, pad=False, mask=None, scale=1.0):
    E = H * D
    kwargs, notes = {}, []
    more, words = ctx.masks(B, L, pad, mask)
    kwargs.update(more)
    notes += words
    return Case(name=name, target=TARGET, init=dict(hidden_dim=E, num_heads=H, dropout=0.0),
                inputs={"x": ctx.randn(B, L, E, scale=scale)}, kwargs=kwargs, dtype=dtype,
                note="+".join(notes) or ("large logits" if scale > 1 else ""),
                traits=traits(B=B, L=L, H=H, pad=pad, mask=mask, large_logits=scale > 1))


def cases(ctx: Ctx) -> list[Case]:
    out = [
        _case(ctx, "basic_fp64", 2, 7, 3, 5, torch.float64),
        _case(ctx, "b1_fp64", 1, 6, 2, 3, torch.float64),
        _case(ctx, "l1_fp64", 3, 1, 2, 3, torch.float64),
        _case(ctx, "padding_fp64", 3, 9, 2, 7, torch.float64, pad=True),
        _case(ctx, "causal_fp32", 2, 6, 4, 5, torch.float32, mask="causal"),
        _case(ctx, "mask3d_pad_fp32", 3, 5, 3, 6, torch.float32, pad=True, mask="random3d"),
        _case(ctx, "large_logits_fp32", 2, 5, 2, 9, torch.float32, scale=60.0),
        _case(ctx, "bf16", 2, 11, 3, 8, torch.bfloat16, pad=True),
        # sizes drawn from the seed, and a long sequence: nothing can be tuned to fixed small shapes
        _case(ctx, "random_fp64", ctx.int(2, 4), ctx.int(2, 13), ctx.int(2, 4), ctx.int(2, 7), torch.float64,
              pad=True, mask="random3d"),
        _case(ctx, "long_fp32", ctx.int(1, 2), ctx.int(64, 97), ctx.int(2, 3), ctx.int(3, 6), torch.float32,
              pad=True, mask="causal"),
    ]
    # the GPU tier: float16, and float32 under float16 autocast, on a larger padded causal case
    big = _case(ctx, "large_causal_pad", 4, 77, 6, 16, torch.float32, pad=True, mask="causal")
    out += [on_cuda(big, name="big_cuda_fp16"), on_cuda(big, autocast=torch.float16, name="big_cuda_autocast")]
    if ctx.full:
        for i in range(6):
            B, L, H, D = ctx.int(1, 4), ctx.int(1, 23), ctx.int(1, 5), ctx.int(2, 11)
            dtype = ctx.choice([torch.float64, torch.float32, torch.bfloat16])
            out.append(_case(ctx, f"random{i}", B, L, H, D, dtype, pad=bool(ctx.int(0, 1)),
                             mask=ctx.choice([None, "causal", "random3d"])))
    return out
