"""Cases for `llama_block`: RMSNorm (a case where eps matters), the SwiGLU MLP, causal GQA attention
with rotate-half RoPE (several head ratios, padding, one token, large logits), and the whole pre-norm
decoder layer (Llama-like sizes, MHA, a long sequence, other theta and eps, dtypes). The RMSNorm
weights are set to random values by the probe, since ones would hide mistakes."""
import torch

from attn_drill.bank.api import Case, Ctx, padding_mask

NORMS = ("input_layernorm.weight", "post_attention_layernorm.weight")


def _traits(B, L, H=None, pad=False, scale=1.0, causal=False):
    return tuple(t for t, on in (("b1", B == 1), ("l1", L == 1), ("h1", H == 1), ("pad", pad),
                                 ("long", L >= 64), ("large_logits", scale > 1), ("causal", causal)) if on)


def _norm_case(ctx: Ctx, name, B, L, E, eps, dtype, scale=1.0):
    return Case(name=name, target="RMSNorm", init=dict(dim=E, eps=eps), inputs={"x": ctx.randn(B, L, E, scale=scale)},
                dtype=dtype, probe="with_params", probe_args={"params": {"weight": 1.0 + ctx.randn(E)}},
                note=f"eps={eps:g}" + (f", |x| ~ {scale:g}" if scale != 1.0 else ""), traits=_traits(B, L))


def _mlp_case(ctx: Ctx, name, B, L, E, inter, dtype):
    return Case(name=name, target="LlamaMLP", init=dict(hidden_dim=E, intermediate_dim=inter),
                inputs={"x": ctx.randn(B, L, E)}, dtype=dtype, note=f"{E} -> {inter} -> {E}", traits=_traits(B, L))


def _pad_kwargs(ctx: Ctx, B, L, pad):
    return {"key_padding_mask": padding_mask(ctx.lengths(B, L), L)} if pad else {}


def _attn_case(ctx: Ctx, name, B, L, H, Hkv, D, dtype, pad=False, theta=10000.0, scale=1.0, rtol=None):
    E = H * D
    notes = [f"{H}q/{Hkv}kv D={D}"] + (["pad"] if pad else []) + ([f"theta={theta:g}"] if theta != 1e4 else []) + \
        (["large logits"] if scale > 1 else [])
    return Case(name=name, target="LlamaAttention",
                init=dict(hidden_dim=E, num_heads=H, num_kv_heads=Hkv, rope_theta=theta),
                inputs={"x": ctx.randn(B, L, E, scale=scale)}, kwargs=_pad_kwargs(ctx, B, L, pad), dtype=dtype,
                note=" ".join(notes), traits=_traits(B, L, H, pad, scale, causal=True), rtol=rtol)


def _layer_case(ctx: Ctx, name, B, L, H, Hkv, D, inter, dtype, pad=False, theta=10000.0, eps=1e-5,
                norm_scale=1.0, rtol=None):
    E = H * D
    params = {n: norm_scale * (1.0 + ctx.randn(E)) for n in NORMS}
    notes = [f"{H}q/{Hkv}kv D={D} ffn={inter}"] + (["pad"] if pad else []) + \
        ([f"theta={theta:g}"] if theta != 1e4 else []) + ([f"eps={eps:g}"] if eps != 1e-5 else []) + \
        (["large logits"] if norm_scale > 1 else [])
    return Case(name=name, target="LlamaDecoderLayer",
                init=dict(hidden_dim=E, num_heads=H, num_kv_heads=Hkv, intermediate_dim=inter, rope_theta=theta,
                          rms_norm_eps=eps),
                inputs={"x": ctx.randn(B, L, E)}, kwargs=_pad_kwargs(ctx, B, L, pad), dtype=dtype,
                probe="with_params", probe_args={"params": params}, note=" ".join(notes),
                traits=_traits(B, L, H, pad, norm_scale, causal=True), rtol=rtol)


def cases(ctx: Ctx) -> list[Case]:
    out = [
        _norm_case(ctx, "rmsnorm_fp64", 2, 5, 12, 1e-5, torch.float64),
        _norm_case(ctx, "rmsnorm_eps_matters_b1_fp64", 1, 3, 10, 1e-3, torch.float64, scale=0.03),
        _norm_case(ctx, "rmsnorm_bf16", 3, 7, 20, 1e-6, torch.bfloat16),
        # x² above float16's largest value (65504): only a norm computed in float32 survives
        _norm_case(ctx, "rmsnorm_fp16_large", 2, 5, 16, 1e-6, torch.float16, scale=400.0),
        _mlp_case(ctx, "mlp_fp64", 2, 6, 12, 20, torch.float64),
        _attn_case(ctx, "attn_q6_kv2_fp64", 2, 7, 6, 2, 4, torch.float64),
        _attn_case(ctx, "attn_q4_kv1_pad_fp64", 3, 9, 4, 1, 6, torch.float64, pad=True, theta=500.0),
        _attn_case(ctx, "attn_l1_fp64", 2, 1, 2, 2, 10, torch.float64),
        # scores in the hundreds in float32: correct solutions that round in another order differ by a
        # few times the reference's own error, so this case also allows 1e-3 relative
        _attn_case(ctx, "attn_large_logits_fp32", 2, 6, 2, 1, 8, torch.float32, scale=10.0, rtol=1e-3),
        _layer_case(ctx, "layer_q6_kv2_fp64", 2, 9, 6, 2, 8, 40, torch.float64),
        _layer_case(ctx, "layer_mha_pad_fp64", 3, 8, 3, 3, 10, 22, torch.float64, pad=True, theta=500000.0,
                    eps=1e-6),
    ]
    # a long padded sequence, sizes drawn from the seed
    Hkv = ctx.int(1, 3)
    H, D = Hkv * ctx.int(1, 3), 2 * ctx.int(2, 5)
    out.append(_layer_case(ctx, "layer_long_fp32", 2, ctx.int(64, 72), H, Hkv, D, ctx.int(10, 40), torch.float32,
                           pad=True))
    out += [
        _layer_case(ctx, "layer_large_logits_fp32", 2, 7, 4, 2, 6, 18, torch.float32, norm_scale=5.0, rtol=1e-3),
        _layer_case(ctx, "layer_bf16", 2, 11, 4, 2, 8, 28, torch.bfloat16, pad=True),
    ]
    if ctx.full:
        for i in range(6):
            Hkv = ctx.int(1, 3)
            H, D = Hkv * ctx.int(1, 3), 2 * ctx.int(1, 5)
            B, L = ctx.int(1, 4), ctx.int(1, 20)
            dtype = ctx.choice([torch.float64, torch.float32, torch.bfloat16])
            out.append(_layer_case(ctx, f"random{i}", B, L, H, Hkv, D, ctx.int(3, 33), dtype,
                                   pad=bool(ctx.int(0, 1)), theta=ctx.choice([100.0, 10000.0, 500000.0]),
                                   eps=ctx.choice([1e-5, 1e-6])))
    return out
