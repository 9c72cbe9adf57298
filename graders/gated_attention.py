"""Cases for `gated_attention`: Qwen3-Next style output-gated GQA with zero-centred QK-norm and partial
RoPE: several head ratios, rotary fractions and thetas, without QK-norm, padding, one token, a long
sequence, large logits, dtypes. The QK-norm weights are set to random values by the probe (as built
they are zeros, which would hide where the norm sits and what it multiplies by)."""
import torch

from attn_drill.bank.api import Case, Ctx, padding_mask

TARGET = "GatedAttention"


def _case(ctx: Ctx, name, B, L, E, H, Hkv, D, factor, dtype, qk_norm=True, pad=False, theta=10000.0,
          eps=1e-6, scale=1.0, norm_weight=0.3, rtol=None):
    kwargs, notes = {}, [f"{H}q/{Hkv}kv D={D} rot={int(D * factor)}"]
    if pad:
        kwargs["key_padding_mask"] = padding_mask(ctx.lengths(B, L), L)
        notes.append("pad")
    if not qk_norm:
        notes.append("no qk-norm")
    if theta != 10000.0:
        notes.append(f"theta={theta:g}")
    large = scale > 1 or norm_weight > 1
    if large:
        notes.append("large logits")
    params = {}
    if qk_norm:
        params = {"q_norm.weight": norm_weight * ctx.randn(D), "k_norm.weight": norm_weight * ctx.randn(D)}
        if norm_weight > 1:     # (1 + w) of a few units: large scores through the norm
            params = {n: w.abs() + 2.0 for n, w in params.items()}
    traits = tuple(t for t, on in (("b1", B == 1), ("l1", L == 1), ("h1", H == 1), ("pad", pad),
                                   ("long", L >= 64), ("large_logits", large)) if on) + ("causal",)
    return Case(name=name, target=TARGET,
                init=dict(hidden_dim=E, num_heads=H, num_kv_heads=Hkv, head_dim=D, partial_rotary_factor=factor,
                          rope_theta=theta, rms_norm_eps=eps, qk_norm=qk_norm),
                inputs={"x": ctx.randn(B, L, E, scale=scale)}, kwargs=kwargs, dtype=dtype,
                probe="with_params", probe_args={"params": params}, note=" ".join(notes), traits=traits, rtol=rtol)


def _rotary(ctx: Ctx) -> tuple:
    """(head_dim, partial_rotary_factor) with an even rotary part: 2 to 6 rotated dims, a quarter, half or all."""
    rot, factor = 2 * ctx.int(1, 3), ctx.choice([0.25, 0.5, 1.0])
    return int(rot / factor), factor


def cases(ctx: Ctx) -> list[Case]:
    out = [
        _case(ctx, "q4_kv2_fp64", 2, 6, 32, 4, 2, 16, 0.25, torch.float64),
        _case(ctx, "q3_kv1_pad_fp64", 3, 9, 20, 3, 1, 12, 0.5, torch.float64, pad=True, theta=500.0),
        _case(ctx, "no_qk_norm_fp64", 2, 7, 18, 2, 2, 10, 0.4, torch.float64, qk_norm=False),
        _case(ctx, "b1_l1_fp64", 1, 1, 12, 2, 1, 8, 0.25, torch.float64),
        _case(ctx, "one_head_full_rotary_fp64", 2, 5, 9, 1, 1, 6, 1.0, torch.float64, eps=1e-5),
    ]
    # a long padded sequence, sizes drawn from the seed
    Hkv = ctx.int(1, 2)
    H, (D, factor) = Hkv * ctx.int(1, 3), _rotary(ctx)
    out.append(_case(ctx, "long_fp32", 2, ctx.int(64, 72), ctx.int(10, 30), H, Hkv, D, factor, torch.float32,
                     pad=True))
    out += [
        # scores in the hundreds in float32: correct solutions that round in another order differ by a
        # few times the reference's own error, so these cases also allow 1e-3 relative
        _case(ctx, "large_logits_fp32", 2, 6, 16, 2, 1, 8, 0.5, torch.float32, qk_norm=False, scale=8.0, rtol=1e-3),
        _case(ctx, "large_norm_weight_fp32", 2, 7, 24, 4, 2, 16, 0.25, torch.float32, norm_weight=3.0, rtol=1e-3),
        _case(ctx, "bf16", 2, 11, 24, 4, 2, 8, 0.5, torch.bfloat16, pad=True),
    ]
    if ctx.full:
        for i in range(6):
            Hkv = ctx.int(1, 3)
            H, (D, factor) = Hkv * ctx.int(1, 3), _rotary(ctx)
            B, L, E = ctx.int(1, 4), ctx.int(1, 20), ctx.int(4, 30)
            dtype = ctx.choice([torch.float64, torch.float32, torch.bfloat16])
            out.append(_case(ctx, f"random{i}", B, L, E, H, Hkv, D, factor, dtype,
                             qk_norm=bool(ctx.int(0, 1)), pad=bool(ctx.int(0, 1)),
                             theta=ctx.choice([100.0, 10000.0, 500000.0])))
    return out
