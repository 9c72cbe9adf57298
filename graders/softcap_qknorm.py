"""Cases for `softcap_qknorm`: the soft cap (logits beyond the cap, a small cap), RMSNorm (rows whose
mean square is near eps), capped causal attention (Gemma 2's cap of 50 on logits in the hundreds, small
caps where a mask applied before the cap shows, padding), and the whole layer: QK-norm alone, the cap
alone with a query_pre_attn_scalar unlike head_dim, both at once, GQA / MHA / MQA, one token, a long
sequence, small-norm rows. The QK-norm weights are set to random values by the probe: with unit weights
a norm after RoPE gives the same answer as one before it."""
import torch

from attn_drill.bank.api import Case, Ctx, Failure, padding_mask, traits, type_name
from attn_drill.i18n import pick

PROMISES = [
    ("soft_cap(x, cap) = cap * tanh(x / cap)", "soft_cap_"),
    ("rms_norm: weight * x / sqrt(mean(x^2) + eps), eps inside the square root", "rms_norm_small_rows_fp64"),
    ("rms_norm: float16/bfloat16 normalised in float32, cast back before the weight", "rms_norm_"),
    ("capped_attention: scores = q k^T * scaling, then the cap, then the causal and padding mask",
     "core_small_cap_pad_fp64"),
    ("capped_attention: softcap None means no cap", "core_no_cap_fp64"),
    ("layer: q_proj, k_proj, v_proj, o_proj without bias; q_norm.weight and k_norm.weight (head_dim,)", "layer_"),
    ("layer: q_norm.weight and k_norm.weight are ones when built", "layer_norms_as_built"),
    ("layer: RMSNorm per head over head_dim, one weight shared by the heads, on q and k only", "layer_qknorm"),
    ("layer: the norm comes before RoPE", "layer_qknorm"),
    ("layer: scaling = query_pre_attn_scalar ** -0.5, head_dim ** -0.5 when None", "layer_gemma_cap_fp64"),
    ("layer: qk_norm=False has no norm and no norm parameters", "layer_gemma_cap_fp64"),
    ("layer: GQA, query head h reads KV head h // (num_heads // num_kv_heads)", "layer_"),
    ("layer: key_padding_mask True = padding", "layer_both_small_cap_pad_fp64"),
    ("layer: RoPE rotate-half at positions 0 .. L-1 with rope_theta", "layer_theta_mqa_fp64"),
    ("layer: rms_norm_eps is used", "layer_small_rows_eps_fp64"),
    ("outputs and gradients in float64, float32 and bfloat16", "bf16"),
]


def _cap_case(ctx: Ctx, name, shape, cap, dtype, scale):
    return Case(name=name, target="soft_cap", inputs={"x": ctx.randn(*shape, scale=scale)}, kwargs={"cap": cap},
                dtype=dtype, note=f"cap {cap:g}, |x| ~ {scale:g}", traits=("large_logits",) if scale > 30 else ())


def _norm_case(ctx: Ctx, name, shape, eps, dtype, scale=1.0):
    return Case(name=name, target="rms_norm",
                inputs={"x": ctx.randn(*shape, scale=scale), "weight": 0.5 + ctx.rand(shape[-1])},
                kwargs={"eps": eps}, dtype=dtype, note=f"eps {eps:g}" + (f", |x| ~ {scale:g}" if scale != 1 else ""),
                traits=traits(B=shape[0], L=shape[1]))


def _core_case(ctx: Ctx, name, B, H, L, D, dtype, scaling, softcap, pad=False, scale=1.0, rtol=None):
    q, k, v = ctx.randn(B, H, L, D, scale=scale), ctx.randn(B, H, L, D, scale=scale), ctx.randn(B, H, L, D)
    kwargs = {"scaling": scaling, "softcap": softcap}
    if pad:
        kwargs["key_padding_mask"] = padding_mask(ctx.lengths(B, L), L)
    large = float((q @ k.transpose(-2, -1)).abs().max()) * scaling > 50
    return Case(name=name, target="capped_attention", inputs={"q": q, "k": k, "v": v}, kwargs=kwargs, dtype=dtype,
                rtol=rtol, note=f"scaling {scaling:.3g}, " + (f"cap {softcap:g}" if softcap else "no cap")
                + (", pad" if pad else ""),
                traits=traits(B=B, L=L, H=H, pad=pad, mask="causal", large_logits=large))


def _layer_case(ctx: Ctx, name, B, L, hidden, H, Hkv, D, dtype, qk_norm=True, softcap=None, qpas=None,
                pad=False, scale=1.0, theta=10000.0, eps=1e-6, rtol=None):
    init = dict(hidden_size=hidden, num_heads=H, num_kv_heads=Hkv, head_dim=D, qk_norm=qk_norm, softcap=softcap,
                query_pre_attn_scalar=qpas, rope_theta=theta, rms_norm_eps=eps)
    kwargs = {"key_padding_mask": padding_mask(ctx.lengths(B, L), L)} if pad else {}
    probe = {}
    if qk_norm:
        probe = dict(probe="with_params",
                     probe_args={"params": {"q_norm.weight": 0.5 + ctx.rand(D), "k_norm.weight": 0.5 + ctx.rand(D)}})
    words = [f"{H}q/{Hkv}kv D={D}", "qk-norm" if qk_norm else "no norm", f"cap {softcap:g}" if softcap else "no cap"]
    words += [f"query_pre_attn_scalar {qpas:g}"] if qpas else []
    words += (["pad"] if pad else []) + ([f"|x| ~ {scale:g}"] if scale != 1 else []) + \
        ([f"theta {theta:g}"] if theta != 1e4 else []) + ([f"eps {eps:g}"] if eps != 1e-6 else [])
    return Case(name=name, target="SoftcapQKNormAttention", init=init,
                inputs={"x": ctx.randn(B, L, hidden, scale=scale)}, kwargs=kwargs, dtype=dtype, rtol=rtol,
                note=", ".join(words),
                traits=traits(B=B, L=L, H=H, pad=pad, mask="causal", large_logits=scale > 3 and not qk_norm),
                **probe)


def check_as_built(sub, ref, case) -> list:
    if not isinstance(sub, dict):
        return [pick(f"the probe expected the norm weights back; got {type_name(sub)}",
                     f"探针期望得到归一化的权重；实际得到 {type_name(sub)}")]
    D = case.init["head_dim"]
    fails = []
    for name in ("q_norm.weight", "k_norm.weight"):
        w = sub.get(name)
        if not isinstance(w, torch.Tensor):
            fails.append(pick(f"the module has no parameter `{name}`; name it as the statement says",
                              f"模块没有参数 `{name}`；请按题目的命名"))
        elif tuple(w.shape) != (D,) or not bool((w.double() == 1).all()):
            zeros = tuple(w.shape) == (D,) and not bool(w.any())
            span = f"[{float(w.min()):.3g}, {float(w.max()):.3g}]" if w.numel() else "[]"
            fails.append(Failure(pick(
                f"as built, {name} should be ones of shape ({D},) (RMSNorm multiplies by the weight itself); "
                f"it is {list(w.shape)} with values in {span}",
                f"构建时 {name} 应为形状 ({D},) 的全 1（RMSNorm 乘的是权重本身）；实际形状为 {list(w.shape)}，"
                f"取值在 {span}"), mistake="norm_weights_zeros" if zeros else None))
    return fails


def cases(ctx: Ctx) -> list[Case]:
    f64, f32, bf16 = torch.float64, torch.float32, torch.bfloat16
    L_long = ctx.int(64, 80)
    Hkv = ctx.int(1, 3)
    H, D = Hkv * ctx.int(1, 3), 2 * ctx.int(2, 6)
    out = [
        _cap_case(ctx, "soft_cap_fp64", (3, 7, 9), 50.0, f64, scale=60.0),
        _cap_case(ctx, "soft_cap_small_cap_fp32", (4, 11), 2.5, f32, scale=3.0),
        _cap_case(ctx, "soft_cap_bf16", (2, 5, 8), 30.0, bf16, scale=40.0),
        _norm_case(ctx, "rms_norm_fp64", (2, 5, 3, 8), 1e-6, f64),
        # mean(x^2) ~ 1e-6: eps inside the square root and eps outside it differ here
        _norm_case(ctx, "rms_norm_small_rows_fp64", (2, 4, 2, 6), 1e-6, f64, scale=1e-3),
        _norm_case(ctx, "rms_norm_bf16", (3, 6, 2, 10), 1e-6, bf16),
        # x² above float16's largest value (65504): only a norm computed in float32 survives
        _norm_case(ctx, "rms_norm_fp16_large", (2, 5, 2, 8), 1e-6, torch.float16, scale=400.0),
        _core_case(ctx, "core_gemma_fp64", 2, 3, 9, 8, f64, 1 / 16, 50.0, scale=6.0),
        _core_case(ctx, "core_small_cap_pad_fp64", 3, 2, 7, 5, f64, 5 ** -0.5, 2.0, pad=True, scale=2.0),
        _core_case(ctx, "core_no_cap_fp64", 2, 2, 6, 4, f64, 0.5, None),
        # a cap of 50 over scores in the hundreds: float32 rounds scores of 50 by ~3e-6 relative
        _core_case(ctx, "core_large_logits_fp32", 2, 2, 10, 6, f32, 6 ** -0.5, 50.0, scale=10.0, rtol=1e-5),
        _core_case(ctx, "core_bf16", 2, 2, 8, 8, bf16, 8 ** -0.5, 3.0, scale=2.0),
        _layer_case(ctx, "layer_qknorm_gqa_fp64", 2, 9, 24, 4, 2, 8, f64),
        _layer_case(ctx, "layer_gemma_cap_fp64", 2, 8, 20, 2, 1, 8, f64, qk_norm=False, softcap=50.0, qpas=20.0,
                    scale=6.0),
        _layer_case(ctx, "layer_both_small_cap_pad_fp64", 3, 7, 18, 3, 3, 6, f64, softcap=2.0, pad=True),
        _layer_case(ctx, "layer_theta_mqa_fp64", 2, 6, 16, 4, 1, 4, f64, softcap=5.0, qpas=12.0, theta=50.0),
        # rows of q and k with a mean square near eps = 1e-5: where eps goes shows
        _layer_case(ctx, "layer_small_rows_eps_fp64", 2, 5, 12, 2, 2, 6, f64, scale=1e-2, eps=1e-5),
        _layer_case(ctx, "layer_one_token_fp64", 2, 1, 12, 2, 1, 6, f64, softcap=3.0),
        _layer_case(ctx, "layer_qknorm_long_b1_fp32", 1, L_long, H * D, H, Hkv, D, f32, softcap=4.0),
        _layer_case(ctx, "layer_gemma_large_fp32", 2, 6, 16, 2, 2, 8, f32, qk_norm=False, softcap=50.0, qpas=16.0,
                    scale=8.0, rtol=1e-5),
        _layer_case(ctx, "layer_bf16", 2, 10, 16, 4, 2, 8, bf16, softcap=3.0, pad=True),
        Case(name="layer_norms_as_built", target="SoftcapQKNormAttention",
             init=dict(hidden_size=16, num_heads=4, num_kv_heads=2, head_dim=6, qk_norm=True, softcap=None,
                       query_pre_attn_scalar=None, rope_theta=10000.0, rms_norm_eps=1e-6),
             inputs={"x": ctx.randn(1, 3, 16)}, grad=False, probe="as_built", check=check_as_built,
             traits=traits(B=1, L=3, H=4, mask="causal"), note="the QK-norm weights as the module builds them"),
    ]
    if ctx.full:
        for i in range(7):
            Hkv = ctx.int(1, 3)
            H, D = Hkv * ctx.int(1, 3), 2 * ctx.int(1, 5)
            B, L = ctx.int(1, 4), ctx.int(1, 20)
            dtype = ctx.choice([f64, f32, bf16])
            qk_norm = bool(ctx.int(0, 2))
            softcap = ctx.choice([None, 2.0, 5.0, 50.0])
            scale = 6.0 if (softcap == 50.0 and not qk_norm and dtype == f64) else 1.0
            out.append(_layer_case(ctx, f"random{i}", B, L, ctx.int(4, 24), H, Hkv, D, dtype, qk_norm=qk_norm,
                                   softcap=softcap, qpas=ctx.choice([None, float(ctx.int(4, 40))]),
                                   pad=bool(ctx.int(0, 1)), scale=scale, theta=ctx.choice([100.0, 10000.0]),
                                   eps=ctx.choice([1e-5, 1e-6])))
    return out
