"""Cases for `gqa_kv_cache`: prefill + decode against the full causal forward, a cache that holds
only the KV heads, the KV-head broadcast order, and the error past max_len.

Reuses the drivers and checks of the `kv_cache` grader (same folder).
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import torch

from attn_drill.bank.api import Case, Ctx, traits

_spec = importlib.util.spec_from_file_location("_kv_cache_grader", Path(__file__).with_name("kv_cache.py"))
_kv = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_kv)

TARGET = "GQAWithCache"


def _case(ctx, name, B, L, Hq, Hkv, D, dtype, schedule, extra=0, scale=1.0, probe="decode"):
    E = Hq * D
    note = (f"Hq {Hq}, Hkv {Hkv}, schedule {list(schedule)}, max_len {L + extra}"
            + (", large logits" if scale > 1 else ""))
    return Case(name=name, target=TARGET,
                init=dict(hidden_dim=E, num_query_heads=Hq, num_kv_heads=Hkv, dropout=0.0),
                inputs={"x": ctx.randn(B, L, E, scale=scale)}, dtype=dtype, grad=False,
                probe=probe, probe_args={"schedule": schedule, "max_len": L + extra},
                output_names=("incremental", "full_forward"), note=note,
                traits=traits(B=B, L=L, H=Hq, mask="causal", large_logits=scale > 1))


def _random(ctx: Ctx, name, dtype, L, prefill=None):
    Hkv = ctx.int(1, 3)
    sched = tuple(ctx.chunks(L, prefill or ctx.int(1, L), 4))
    return _case(ctx, name, ctx.int(1, 3), L, Hkv * ctx.int(1, 3), Hkv, ctx.int(2, 5), dtype, sched,
                 extra=ctx.int(0, 5))


def cases(ctx: Ctx) -> list[Case]:
    out = [
        _case(ctx, "prefill3_decode_fp64", 2, 7, 6, 3, 2, torch.float64, (3, 1, 1, 1, 1)),
        _case(ctx, "token_by_token_b1_fp64", 1, 5, 6, 2, 3, torch.float64, (1, 1, 1, 1, 1), extra=4),
        _case(ctx, "prefill_chunks_fp32", 3, 11, 4, 2, 5, torch.float32, (4, 3, 1, 3), extra=2),
        _case(ctx, "mqa_len1_fp64", 2, 1, 3, 1, 4, torch.float64, (1,), extra=3),
        _case(ctx, "large_logits_fp32", 2, 6, 6, 2, 3, torch.float32, (2, 1, 3), scale=60.0),
        _case(ctx, "mha_equal_heads_fp32", 2, 5, 3, 3, 3, torch.float32, (2, 2, 1), extra=1),
        _case(ctx, "bf16", 2, 9, 6, 3, 4, torch.bfloat16, (5, 2, 1, 1), extra=1),
        _case(ctx, "reinit_fp64", 3, 9, 6, 2, 3, torch.float64, (4, 1, 2, 2), extra=3, probe="decode_reinit"),
        _random(ctx, "random_fp64", torch.float64, ctx.int(3, 13)),
        _random(ctx, "long_fp32", torch.float32, ctx.int(64, 81), prefill=ctx.int(40, 60)),
        _kv.cache_case(TARGET, dict(hidden_dim=18, num_query_heads=6, num_kv_heads=2, dropout=0.0),
                       ctx.randn(2, 7, 18), (3, 2, 1, 1), 10, ["num_kv_heads", "num_query_heads"],
                       _kv.cache_check("num_kv_heads", "num_query_heads", "cache_stores_query_heads"),
                       "k_cache/v_cache: (B, num_kv_heads, max_len, head_dim), vs one full pass"),
        _kv.overflow_case(TARGET, dict(hidden_dim=12, num_query_heads=4, num_kv_heads=2, dropout=0.0),
                          ctx.randn(2, 8, 12), 6, _kv.overflow_check("no_max_len_check")),
    ]
    if ctx.full:
        for i in range(6):
            Hkv = ctx.int(1, 3)
            Hq = Hkv * ctx.int(1, 3)
            B, L, D = ctx.int(1, 4), ctx.int(2, 19), ctx.int(2, 7)
            dtype = ctx.choice([torch.float64, torch.float32, torch.bfloat16])
            sched = tuple(ctx.chunks(L, ctx.int(1, L), 4))
            out.append(_case(ctx, f"random{i}", B, L, Hq, Hkv, D, dtype, sched, extra=ctx.int(0, 5)))
    return out
