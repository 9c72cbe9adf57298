"""Cases for `split_heads`: split_heads and merge_heads, graded separately (outputs and gradients)."""
import torch

from attn_drill.bank.api import Case, Ctx, traits


def _split(ctx: Ctx, name: str, B: int, L: int, H: int, D: int, dtype) -> Case:
    return Case(name=name, target="split_heads", inputs={"x": ctx.randn(B, L, H * D)},
                kwargs={"num_heads": H}, dtype=dtype, note=f"H={H}",
                axes=("position", "head dim"), traits=traits(B=B, L=L, H=H))


def _merge(ctx: Ctx, name: str, B: int, L: int, H: int, D: int, dtype) -> Case:
    return Case(name=name, target="merge_heads", inputs={"x": ctx.randn(B, H, L, D)},
                dtype=dtype, note=f"H={H}", axes=("position", "feature"), traits=traits(B=B, L=L, H=H))


def cases(ctx: Ctx) -> list[Case]:
    out = [
        # L > 1 and H > 1 in the first case of each function: only then does a direct view differ.
        _split(ctx, "split_fp64", 2, 5, 3, 4, torch.float64),
        _split(ctx, "split_b1_fp32", 1, 7, 2, 3, torch.float32),
        _split(ctx, "split_l1_fp64", 3, 1, 4, 5, torch.float64),
        _split(ctx, "split_bf16", 2, 6, 5, 2, torch.bfloat16),
        _merge(ctx, "merge_fp64", 2, 5, 3, 4, torch.float64),
        _merge(ctx, "merge_b1_fp32", 1, 6, 4, 3, torch.float32),
        _merge(ctx, "merge_l1_fp64", 2, 1, 3, 7, torch.float64),
        _merge(ctx, "merge_bf16", 3, 4, 2, 5, torch.bfloat16),
        _split(ctx, "split_random_fp64", ctx.int(2, 4), ctx.int(2, 19), ctx.int(2, 6), ctx.int(2, 9), torch.float64),
        _merge(ctx, "merge_random_fp64", ctx.int(2, 4), ctx.int(2, 19), ctx.int(2, 6), ctx.int(2, 9), torch.float64),
        _split(ctx, "split_long_fp32", 1, ctx.int(64, 97), ctx.int(2, 4), ctx.int(2, 5), torch.float32),
        _merge(ctx, "merge_long_fp32", 1, ctx.int(64, 97), ctx.int(2, 4), ctx.int(2, 5), torch.float32),
    ]
    if ctx.full:
        for i in range(6):
            B, L, H, D = ctx.int(1, 4), ctx.int(1, 19), ctx.int(1, 6), ctx.int(1, 9)
            dtype = ctx.choice([torch.float64, torch.float32, torch.bfloat16])
            make = _split if i % 2 == 0 else _merge
            out.append(make(ctx, f"random{i}", B, L, H, D, dtype))
    return out
