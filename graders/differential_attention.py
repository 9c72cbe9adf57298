"""Cases for `differential_attention`: the lambda_init schedule, and causal differential attention
with RoPE over several head counts and depths, padding, one head, one token, a long sequence,
large logits, dtypes. The norm weight and the lambda vectors are set to random values by the probe."""
import math

import torch

from attn_drill.bank.api import Case, Ctx, Failure, padding_mask
from attn_drill.i18n import pick

TARGET = "DifferentialAttention"
DEPTHS = tuple(range(12))


def check_schedule(sub, ref, case) -> list:
    """sub: lambda_init_schedule(depth) for each depth of DEPTHS."""
    for depth, got in zip(DEPTHS, sub):
        call = f"lambda_init_schedule({depth})"
        if isinstance(got, torch.Tensor) and got.numel() == 1:
            got = float(got)
        if not isinstance(got, (int, float)):
            return [pick(f"{call} returned {type(got).__name__}; return a Python float",
                         f"{call} 返回了 {type(got).__name__}；应返回 Python float")]
        want = 0.8 - 0.6 * math.exp(-0.3 * depth)
        if abs(got - want) <= 1e-12:
            continue
        msg = pick(f"{call} is {got:.6g}; expected 0.8 - 0.6 * exp(-0.3 * {depth}) = {want:.6g}",
                   f"{call} 为 {got:.6g}；期望值为 0.8 - 0.6 * exp(-0.3 * {depth}) = {want:.6g}")
        if abs(got - (0.8 - 0.6 * math.exp(-0.3 * (depth - 1)))) <= 1e-12:
            return [Failure(msg + pick(" (depth is the 0-based layer index: the first layer has lambda_init 0.2)",
                                       "（depth 是从 0 开始的层索引：第一层的 lambda_init 为 0.2）"),
                            mistake="depth_one_based")]
        if abs(got - (0.8 - 0.6 * math.exp(-0.3 * (depth + 1)))) <= 1e-12:
            return [Failure(msg + pick(" (with the 0-based depth, the formula's (l - 1) is depth itself, "
                                       "not depth + 1)",
                                       "（depth 从 0 开始时，公式中的 (l - 1) 就是 depth 本身，而不是 depth + 1）"),
                            mistake="depth_plus_one")]
        return [msg]
    return []


def _params(ctx: Ctx, d: int) -> dict:
    """Norm weight around 1 and lambda vectors large enough that exp() and their signs matter."""
    out = {"subln.weight": 1.0 + 0.3 * ctx.randn(2 * d)}
    for name in ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2"):
        out[name] = 0.45 * ctx.randn(d)
    return out


def _case(ctx: Ctx, name, B, L, H, d, depth, dtype, pad=False, scale=1.0, theta=10000.0, rtol=None,
          traits=()):
    E = 2 * H * d
    kwargs, notes = {}, [f"H={H} d={d} depth={depth}"]
    if pad:
        kwargs["key_padding_mask"] = padding_mask(ctx.lengths(B, L), L)
        notes.append("pad")
    if theta != 10000.0:
        notes.append(f"theta={theta:g}")
    if scale > 1:
        notes.append("large logits")
    traits = tuple(traits) + (("b1",) if B == 1 else ()) + (("l1",) if L == 1 else ()) + \
        (("h1",) if H == 1 else ()) + (("pad",) if pad else ()) + (("long",) if L >= 64 else ()) + ("causal",)
    return Case(name=name, target=TARGET, init=dict(hidden_dim=E, num_heads=H, depth=depth, rope_theta=theta),
                inputs={"x": ctx.randn(B, L, E, scale=scale)}, kwargs=kwargs, dtype=dtype,
                probe="with_params", probe_args={"params": _params(ctx, d)}, note=" ".join(notes),
                traits=traits, rtol=rtol)


def cases(ctx: Ctx) -> list[Case]:
    out = [
        Case(name="lambda_init_schedule", target="lambda_init_schedule", check=check_schedule, grad=False,
             probe="calls", probe_args={"calls": [{"args": [d]} for d in DEPTHS]}, note="depths 0..11"),
        _case(ctx, "h3_depth2_fp64", 2, 7, 3, 8, 2, torch.float64),
        _case(ctx, "pad_depth0_fp64", 3, 9, 2, 6, 0, torch.float64, pad=True, theta=500.0),
        _case(ctx, "one_head_fp64", 2, 11, 1, 10, 1, torch.float64),
        _case(ctx, "b1_l1_fp64", 1, 1, 2, 4, 5, torch.float64),
    ]
    # a long padded sequence, sizes drawn from the seed
    H, d, depth = ctx.int(1, 3), 2 * ctx.int(1, 4), ctx.int(0, 11)
    out.append(_case(ctx, "long_fp32", 2, ctx.int(64, 72), H, d, depth, torch.float32, pad=True))
    out += [
        # scores in the hundreds in float32: correct solutions that round in another order differ by a
        # few times the reference's own error, so this case also allows 1e-3 relative
        _case(ctx, "large_logits_fp32", 2, 6, 2, 6, 3, torch.float32, scale=12.0, rtol=1e-3,
              traits=("large_logits",)),
        _case(ctx, "bf16", 2, 13, 3, 4, 3, torch.bfloat16, pad=True),
    ]
    if ctx.full:
        for i in range(6):
            B, L, H, d = ctx.int(1, 4), ctx.int(1, 20), ctx.int(1, 4), 2 * ctx.int(1, 5)
            dtype = ctx.choice([torch.float64, torch.float32, torch.bfloat16])
            out.append(_case(ctx, f"random{i}", B, L, H, d, ctx.int(0, 23), dtype, pad=bool(ctx.int(0, 1)),
                             theta=ctx.choice([100.0, 10000.0, 500000.0])))
    return out
