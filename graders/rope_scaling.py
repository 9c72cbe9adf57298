"""Cases for `rope_scaling`: the scaled frequency tables and attention factors (linear, dynamic NTK,
YaRN with and without truncation and mscale, Llama 3) on small configs and on real ones
(Llama-3.1-8B, DeepSeek-V3), then the rotation of q and k with per-row positions, GQA-style head
counts, a decode step at a large position and a long context at positions past 32 000."""
from __future__ import annotations

import torch

from attn_drill.bank.api import Case, Ctx, traits

YARN_A = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32}
LLAMA3_A = {"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            "original_max_position_embeddings": 32}
DYNAMIC_A = {"rope_type": "dynamic", "factor": 4.0, "max_position_embeddings": 32}

# (name, dim, theta, scaling, seq_len): one call of scaled_inv_freq each; the output [0] is inv_freq, [1] the factor
TABLES = (
    ("freqs_unscaled", 16, 10000.0, None, None),
    ("freqs_linear", 16, 10000.0, {"rope_type": "linear", "factor": 4.0}, None),
    ("freqs_dynamic_within_max", 16, 10000.0, DYNAMIC_A, 28),
    ("freqs_dynamic_no_seq_len", 12, 10000.0, DYNAMIC_A, None),
    ("freqs_dynamic_past_max", 16, 10000.0, DYNAMIC_A, 64),
    ("freqs_yarn", 16, 10000.0, YARN_A, None),
    ("freqs_yarn_no_truncate", 16, 10000.0, {**YARN_A, "truncate": False}, None),
    ("freqs_yarn_dim32", 32, 10000.0, {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 256,
                                       "beta_fast": 32, "beta_slow": 1}, None),
    ("freqs_yarn_deepseek_v3", 64, 10000.0, {"rope_type": "yarn", "factor": 40.0, "beta_fast": 32, "beta_slow": 1,
                                             "mscale": 1.0, "mscale_all_dim": 1.0,
                                             "original_max_position_embeddings": 4096}, None),
    ("freqs_yarn_mscale_ratio", 16, 10000.0, {"rope_type": "yarn", "factor": 40.0, "mscale": 1.0,
                                              "mscale_all_dim": 0.707, "original_max_position_embeddings": 32}, None),
    ("freqs_llama3", 16, 10000.0, LLAMA3_A, None),
    ("freqs_llama31_8b", 128, 500000.0, {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                         "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}, None),
    ("freqs_dim6_theta100", 6, 100.0, {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 20},
     None),
)

# scalings the random cases choose from
SCALINGS = (None, {"rope_type": "linear", "factor": 2.5}, DYNAMIC_A, YARN_A, LLAMA3_A,
            {"rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 64, "beta_fast": 24,
             "beta_slow": 2, "truncate": False})


def _tables_case() -> Case:
    """scaled_inv_freq on every config of TABLES, judged as outputs named after the configs."""
    return Case(name="freq_tables", target="scaled_inv_freq", grad=False, probe="calls",
                probe_args={"calls": [{"args": [dim, theta, scaling, seq_len]}
                                      for _, dim, theta, scaling, seq_len in TABLES]},
                output_names=tuple(t[0] for t in TABLES),
                note="inv_freq and attention_factor: " + ", ".join(t[0][len("freqs_"):] for t in TABLES))


def _positions(ctx: Ctx, B: int, L: int, start: int = 0, spread: int = 0) -> torch.Tensor:
    """(B, L) int64: row b holds start + offset_b + arange(L), offsets 0 for row 0, up to `spread`."""
    offsets = [0] + [ctx.int(0, spread) for _ in range(B - 1)]
    return torch.stack([start + o + torch.arange(L) for o in offsets])


def _apply_case(ctx, name, B, H, Hk, L, D, dtype, scaling, theta=10000.0, start=0, spread=0, scale=1.0):
    kind = scaling["rope_type"] if scaling else "none"
    pos = _positions(ctx, B, L, start, spread)
    note = f"{kind} theta={theta:g} positions {int(pos.min())}..{int(pos.max())}"
    if scale > 1:
        note += f", inputs x{scale:g}"
    return Case(name=name, target="apply_scaled_rope", dtype=dtype,
                inputs={"q": ctx.randn(B, H, L, D, scale=scale), "k": ctx.randn(B, Hk, L, D, scale=scale),
                        "positions": pos},
                kwargs={"theta": theta, "scaling": scaling}, output_names=("q_rot", "k_rot"), note=note,
                traits=traits(B=B, L=L, H=H))


def cases(ctx: Ctx) -> list[Case]:
    out = [_tables_case()]
    D = 2 * ctx.int(2, 9)
    out += [
        _apply_case(ctx, "apply_yarn_fp64", 2, 3, 1, 7, 8, torch.float64, YARN_A, spread=6),
        _apply_case(ctx, "apply_dynamic_decode_l1_fp64", 2, 2, 1, 1, 12, torch.float64, DYNAMIC_A, start=100,
                    spread=9),
        _apply_case(ctx, "apply_llama3_b1_fp32", 1, 2, 2, 9, 16, torch.float32, LLAMA3_A, start=20),
        _apply_case(ctx, "apply_linear_bf16", 2, 3, 3, 11, 12, torch.bfloat16,
                    {"rope_type": "linear", "factor": 2.0}, spread=3),
        _apply_case(ctx, "apply_unscaled_fp32", 3, 1, 1, 5, 10, torch.float32, None, theta=500000.0, spread=40),
        _apply_case(ctx, "apply_yarn_long_context_fp32", 1, 2, 1, 70, 16, torch.float32,
                    {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 4096}, start=32000),
        _apply_case(ctx, "apply_large_values_fp32", 2, 2, 1, 6, 8, torch.float32, YARN_A, scale=60.0),
        _apply_case(ctx, "apply_drawn_sizes_fp64", ctx.int(1, 3), ctx.int(1, 4), 1, ctx.int(1, 12), D, torch.float64,
                    ctx.choice(SCALINGS), theta=ctx.choice([100.0, 10000.0, 500000.0]), start=ctx.int(0, 50),
                    spread=ctx.int(0, 20)),
        _apply_case(ctx, "apply_dynamic_bf16", 2, 2, 2, 13, 8, torch.bfloat16, DYNAMIC_A, start=30, spread=5),
    ]
    if ctx.full:
        for i in range(8):
            B, H, L, D = ctx.int(1, 4), ctx.int(1, 4), ctx.int(1, 23), 2 * ctx.int(2, 9)  # dynamic needs D > 2
            Hk = ctx.choice([1, H])
            dtype = ctx.choice([torch.float64, torch.float32, torch.bfloat16])
            out.append(_apply_case(ctx, f"random{i}", B, H, Hk, L, D, dtype, ctx.choice(SCALINGS),
                                   theta=ctx.choice([100.0, 10000.0, 500000.0]), start=ctx.choice([0, 7, 300, 5000]),
                                   spread=ctx.int(0, 30)))
    return out
