"""Cases for `causal`: the mask itself (checked directly), then the module with padding, large
logits and three dtypes."""
import torch

from attn_drill.bank.api import Case, Ctx, Failure, padding_mask, type_name, traits
from attn_drill.i18n import pick

TARGET = "CausalSelfAttention"


def _keep(mask: torch.Tensor) -> torch.Tensor:
    """Any dtype to bool, True = keep (nonzero / True)."""
    return mask != 0 if mask.dtype != torch.bool else mask


MASK_LENGTHS = (1, 2, 5, 9, 64)


def _check_mask(sub, ref, case) -> list:
    """sub: generate_causal_mask(L, cpu) for each L of MASK_LENGTHS."""
    fails = []
    for L, mask in zip(MASK_LENGTHS, sub):
        if not isinstance(mask, torch.Tensor):
            return [pick(f"generate_causal_mask({L}, device) returned {type_name(mask)}, expected a tensor",
                         f"generate_causal_mask({L}, device) 返回了 {type_name(mask)}，应返回张量")]
        if tuple(mask.shape) != (L, L):
            return [pick(f"generate_causal_mask({L}, device) has shape {tuple(mask.shape)}, expected ({L}, {L})",
                         f"generate_causal_mask({L}, device) 的形状为 {tuple(mask.shape)}，期望 ({L}, {L})")]
        if mask.device.type != "cpu":
            fails.append(pick(f"the mask is on {mask.device}, expected the device that was passed in (cpu)",
                              f"掩码位于 {mask.device}，应位于传入的设备上（cpu）"))
        keep = _keep(mask)
        full = torch.ones(L, L, dtype=torch.bool)
        if torch.equal(keep, torch.tril(full)):
            continue
        if torch.equal(keep, torch.triu(full)):
            return [Failure(pick(f"generate_causal_mask({L}) keeps j >= i (upper triangle): every query sees "
                                 "the future and not the past",
                                 f"generate_causal_mask({L}) 保留的是 j >= i（上三角）：每个 query 看到的是"
                                 "未来而不是过去"), mistake="triu_instead_of_tril")]
        if torch.equal(keep, torch.tril(full, diagonal=-1)):
            return [Failure(pick(f"generate_causal_mask({L}) masks the diagonal: position i cannot attend to "
                                 "itself and row 0 keeps no key at all",
                                 f"generate_causal_mask({L}) 把对角线也遮掉了：位置 i 无法注意到自身，"
                                 "第 0 行一个 key 都不保留"), mistake="diagonal_excluded")]
        bad = (keep != torch.tril(full)).nonzero()[0].tolist()
        return [pick(f"generate_causal_mask({L}) is wrong at [i={bad[0]}, j={bad[1]}]: entry [i, j] must be "
                     "1/True exactly when j <= i",
                     f"generate_causal_mask({L}) 在 [i={bad[0]}, j={bad[1]}] 处有误：[i, j] 当且仅当 j <= i 时"
                     "应为 1/True")]
    return fails


def _case(ctx: Ctx, name, B, L, H, D, dtype, pad=False, scale=1.0) -> Case:
    E = H * D
    kwargs, notes = {}, ["causal"]
    if pad:
        kwargs["key_padding_mask"] = padding_mask(ctx.lengths(B, L), L)
        notes.append("pad")
    return Case(name=name, target=TARGET, init=dict(hidden_dim=E, num_heads=H, dropout=0.0),
                inputs={"x": ctx.randn(B, L, E, scale=scale)}, kwargs=kwargs, dtype=dtype,
                note="+".join(notes) + (" large logits" if scale > 1 else ""),
                traits=traits(B=B, L=L, H=H, pad=pad, mask="causal", large_logits=scale > 1))


def cases(ctx: Ctx) -> list[Case]:
    out = [
        Case(name="mask_values", target="generate_causal_mask", probe="calls",
             probe_args={"calls": [{"args": [L, torch.device("cpu")]} for L in MASK_LENGTHS]},
             check=_check_mask, note="mask only"),
        _case(ctx, "basic_fp64", 2, 7, 3, 5, torch.float64),
        _case(ctx, "b1_fp64", 1, 6, 2, 3, torch.float64),
        _case(ctx, "l1_fp64", 3, 1, 2, 3, torch.float64),
        _case(ctx, "random_fp64", ctx.int(2, 4), ctx.int(2, 13), ctx.int(2, 4), ctx.int(2, 7), torch.float64, pad=True),
        _case(ctx, "long_fp32", ctx.int(1, 2), ctx.int(64, 97), 2, ctx.int(3, 6), torch.float32, pad=True),
        _case(ctx, "padding_fp64", 3, 9, 2, 7, torch.float64, pad=True),
        _case(ctx, "pad_fp32", 2, 6, 4, 5, torch.float32, pad=True),
        _case(ctx, "large_logits_fp32", 2, 5, 2, 9, torch.float32, scale=60.0),
        # scores past -1e4 on kept keys: a finite fill (-1e4, -1e9 is fine) would outweigh them
        _case(ctx, "huge_logits_fp64", 2, 6, 2, 9, torch.float64, scale=400.0),
        _case(ctx, "bf16", 2, 11, 3, 8, torch.bfloat16, pad=True),
    ]
    if ctx.full:
        for i in range(6):
            B, L, H, D = ctx.int(1, 4), ctx.int(1, 23), ctx.int(1, 5), ctx.int(2, 11)
            dtype = ctx.choice([torch.float64, torch.float32, torch.bfloat16])
            out.append(_case(ctx, f"random{i}", B, L, H, D, dtype, pad=bool(ctx.int(0, 1))))
    return out
