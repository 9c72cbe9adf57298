"""Cases for `alibi`: the paper's slopes (non-power-of-two head counts too), causal ALiBi attention,
padding, large logits, dtypes, and a sequence longer than every earlier case."""
import math

import torch

from attn_drill.bank.api import Case, Ctx, Failure, padding_mask, type_name, traits
from attn_drill.i18n import pick

TARGET = "AlibiSelfAttention"

# The paper's slopes for 12 heads (8 from the 8-head sequence, then every other one of the 16-head sequence).
SLOPES_12 = [2 ** -1, 2 ** -2, 2 ** -3, 2 ** -4, 2 ** -5, 2 ** -6, 2 ** -7, 2 ** -8,
             2 ** -0.5, 2 ** -1.5, 2 ** -2.5, 2 ** -3.5]


def paper_slopes(n: int) -> list[float]:
    """The paper's get_slopes, written independently (recursive form)."""
    def pow2(m: int) -> list[float]:
        ratio = 2.0 ** (-(2.0 ** -(math.log2(m) - 3)))
        return [ratio ** (i + 1) for i in range(m)]

    if n & (n - 1) == 0:
        return pow2(n)
    c = 1 << (n.bit_length() - 1)
    return pow2(c) + paper_slopes(2 * c)[0::2][: n - c]


def _seed_slopes(n: int) -> list[float]:
    return [2 ** (-8 / n * (i + 1)) for i in range(n)]


def _off_by_one_slopes(n: int) -> list[float]:
    """The paper's layout with every exponent one too small (the first slope is 1)."""
    def rule(m: int) -> list[float]:
        return [2 ** (-8 / m * i) for i in range(m)]

    if n & (n - 1) == 0:
        return rule(n)
    c = 1 << (n.bit_length() - 1)
    return rule(c) + rule(2 * c)[0::2][: n - c]


def _close(got: torch.Tensor, want: list[float]) -> bool:
    w = torch.tensor(want, dtype=torch.float64)
    return got.shape == w.shape and torch.allclose(got, w, rtol=1e-6, atol=1e-9)


HEAD_COUNTS = (1, 2, 4, 8, 16, 3, 5, 6, 12, 24, 20)


def check_slopes(sub, ref, case) -> list:
    """sub: what get_alibi_slopes(n) returned for each n of HEAD_COUNTS."""
    failures = []
    for n, got in zip(HEAD_COUNTS, sub):
        if not isinstance(got, torch.Tensor):
            return [pick(f"get_alibi_slopes({n}) returned {type_name(got)}; return a tensor of shape ({n},)",
                         f"get_alibi_slopes({n}) 返回了 {type_name(got)}；应返回形状为 ({n},) 的张量")]
        got = got.detach().to("cpu", torch.float64).reshape(-1) if got.is_floating_point() else got
        if not got.is_floating_point() or got.numel() != n:
            return [pick(f"get_alibi_slopes({n}) returned {got.dtype} of shape {tuple(got.shape)}; "
                         f"return a float tensor of shape ({n},)",
                         f"get_alibi_slopes({n}) 返回了形状为 {tuple(got.shape)} 的 {got.dtype}；"
                         f"应返回形状为 ({n},) 的浮点张量")]
        want = paper_slopes(n)
        if n == 12 and not _close(torch.tensor(want, dtype=torch.float64), SLOPES_12):
            raise AssertionError("grader: paper_slopes(12) disagrees with the paper's values")
        if _close(got, want):
            continue
        shown = ", ".join(f"{v:.5f}" for v in got.tolist()[:12])
        expect = ", ".join(f"{v:.5f}" for v in want[:12])
        msg = pick(f"get_alibi_slopes({n}) = [{shown}]; expected [{expect}]",
                   f"get_alibi_slopes({n}) = [{shown}]；期望值为 [{expect}]")
        if _close(got, _seed_slopes(n)):
            failures.append(Failure(msg + pick(" (2^(-8/n*(i+1)) is the paper's rule only when n is a power of two)",
                                               "（只有 n 是 2 的幂时，2^(-8/n*(i+1)) 才是论文的规则）"),
                                    mistake="power_of_two_formula_for_every_count"))
        elif _close(got, _off_by_one_slopes(n)):
            failures.append(Failure(msg + pick(" (the first slope must be 2^(-8/n), not 1)",
                                               "（第一个斜率应为 2^(-8/n)，而不是 1）"),
                                    mistake="slopes_exponent_off_by_one"))
        else:
            failures.append(msg)
        break
    return failures


def _case(ctx: Ctx, name, B, L, H, D, dtype, pad=False, scale=1.0):
    E = H * D
    kwargs, notes = {}, [f"{H} heads", "causal"]
    if pad:
        kwargs["key_padding_mask"] = padding_mask(ctx.lengths(B, L), L)
        notes.append("pad")
    if scale > 1:
        notes.append("large logits")
    return Case(name=name, target=TARGET, init=dict(hidden_dim=E, num_heads=H, dropout=0.0),
                inputs={"x": ctx.randn(B, L, E, scale=scale)}, kwargs=kwargs, dtype=dtype,
                note=" ".join(notes), traits=traits(B=B, L=L, H=H, pad=pad, mask="causal", large_logits=scale > 1))


def cases(ctx: Ctx) -> list[Case]:
    out = [
        Case(name="slopes", target="get_alibi_slopes", probe="calls",
             probe_args={"calls": [{"args": [n]} for n in HEAD_COUNTS]}, check=check_slopes, grad=False,
             note="paper's slopes, 1-24 heads"),
        _case(ctx, "h6_fp64", 2, 7, 6, 3, torch.float64),
        _case(ctx, "b1_fp64", 1, 6, 2, 3, torch.float64),
        _case(ctx, "l1_fp64", 3, 1, 2, 3, torch.float64),
        _case(ctx, "random_fp64", ctx.int(2, 4), ctx.int(2, 13), ctx.int(2, 9), ctx.int(2, 5), torch.float64, pad=True),
        _case(ctx, "h12_pad_fp64", 3, 9, 12, 2, torch.float64, pad=True),
        _case(ctx, "h5_pad_fp32", 2, 13, 5, 4, torch.float32, pad=True),
        _case(ctx, "large_logits_fp32", 2, 6, 3, 9, torch.float32, scale=60.0),
        _case(ctx, "bf16", 2, 11, 3, 8, torch.bfloat16, pad=True),
        _case(ctx, "long_fp32", ctx.int(1, 2), ctx.int(64, 97), 6, 4, torch.float32, pad=True),
    ]
    if ctx.full:
        for i in range(6):
            B, L, H, D = ctx.int(1, 4), ctx.int(1, 40), ctx.int(1, 13), ctx.int(2, 9)
            dtype = ctx.choice([torch.float64, torch.float32, torch.bfloat16])
            out.append(_case(ctx, f"random{i}", B, L, H, D, dtype, pad=bool(ctx.int(0, 1))))
        out.append(_case(ctx, "long_l301_fp64", 2, 301, 12, 2, torch.float64, pad=True))
    return out
