"""Cases for `rope_cached_decode`: prefill + decode steps + chunks through the cache against one full
causal pass (both against a float64 reference), with RoPE tables of several thetas and lengths, and
what the cache holds (keys rotated once at their own positions, plain values)."""
from __future__ import annotations

import torch

from attn_drill.bank.api import FLOAT32_LEVEL, Case, Ctx, Failure, float64_bound, traits, type_name
from attn_drill.i18n import pick

TARGET = "RoPECachedAttention"


def rope_table(dim: int, rows: int, theta: float) -> torch.Tensor:
    """(rows, dim/2) complex128: exp(1j * t * theta^(-2i/dim)), from cos and sin in float64."""
    i = torch.arange(dim // 2, dtype=torch.float64)
    t = torch.arange(rows, dtype=torch.float64)[:, None]
    angle = t * theta ** (-2.0 * i / dim)
    return torch.complex(torch.cos(angle), torch.sin(angle))


def _case(ctx, name, B, H, D, dtype, schedule, extra=0, extra_rows=0, theta=10000.0, scale=1.0):
    L, E = sum(schedule), H * D
    max_len = L + extra
    large = scale > 1
    note = (f"schedule {list(schedule)}, max_len {max_len}, theta={theta:g}, {max_len + extra_rows}-row table"
            + (", large logits" if large else ""))
    return Case(name=name, target=TARGET, init=dict(hidden_dim=E, num_heads=H), dtype=dtype, grad=False,
                inputs={"x": ctx.randn(B, L, E, scale=scale), "freqs_cis": rope_table(D, max_len + extra_rows, theta)},
                probe="decode", probe_args={"schedule": list(schedule), "max_len": max_len},
                output_names=("incremental", "full_forward"), note=note,
                traits=traits(B=B, Lq=min(schedule), Lk=L, H=H, mask="causal", large_logits=large))


def _unrotate(keys: torch.Tensor, freqs_cis: torch.Tensor) -> torch.Tensor:
    """keys (B, H, T, D) turned back by the angles of freqs_cis[:T] (interleaved pairs)."""
    B, H, T, D = keys.shape
    kc = torch.view_as_complex(keys.to(torch.float64).reshape(B, H, T, D // 2, 2).contiguous())
    return torch.view_as_real(kc * freqs_cis[:T].conj()).reshape(B, H, T, D)


def check_cache(sub, ref, case) -> list:
    """k_cache holds the keys rotated at their own positions and v_cache the plain values, exactly as
    one full pass writes them, in (B, num_heads, max_len, head_dim) tensors. The case grades the
    rotation, which the statement asks in float64 for float64 x: float32-level error fails here."""
    x, freqs_cis = case.inputs["x"], case.inputs["freqs_cis"]
    B, L, E = x.shape
    H = case.init["num_heads"]
    max_len, schedule = case.probe_args["max_len"], case.probe_args["schedule"]
    want = (B, H, max_len, E // H)
    if not isinstance(sub, dict):
        return [pick(f"the cache could not be read ({type_name(sub)})", f"无法读取缓存（{type_name(sub)}）")]
    failures = []
    for name in ("k_cache", "v_cache"):
        got = sub.get(name)
        if not isinstance(got, torch.Tensor):
            failures.append(pick(f"after init_cache and forward, self.{name} is not a tensor ({type_name(got)})",
                                 f"调用 init_cache 和 forward 之后，self.{name} 不是张量（{type_name(got)}）"))
            continue
        if tuple(got.shape) != want:
            failures.append(pick(f"self.{name} has shape {tuple(got.shape)}, expected {want} "
                                 f"(batch, num_heads, max_len, head_dim)",
                                 f"self.{name} 的形状是 {tuple(got.shape)}，应为 {want} "
                                 f"(batch, num_heads, max_len, head_dim)"))
            continue
        got = got[:, :, :L].detach().to(torch.float64)
        expect = ref[name][:, :, :L].to(torch.float64)
        size = max(1.0, float(expect.abs().max()))
        err = float((got - expect).abs().max())
        if err <= float64_bound(case) * size:
            continue
        if err <= FLOAT32_LEVEL * size:
            failures.append(pick(f"self.{name}[:, :, :{L}] carries float32-level error ({err:.2g}) in a float64 case: "
                                 f"the statement asks the rotation to be computed in float64 when x is float64",
                                 f"self.{name}[:, :, :{L}] 在 float64 用例中带有 float32 级别的误差（{err:.2g}）："
                                 f"题目要求 x 为 float64 时在 float64 中计算旋转"))
            continue
        if name == "k_cache":
            raw = _unrotate(expect, freqs_cis)
            if float((got - raw).abs().max()) <= float64_bound(case) * size:
                failures.append(Failure(pick("self.k_cache holds the keys before RoPE (they are rotated when read): "
                                             "rotate each key once at its own position and cache it rotated",
                                             "self.k_cache 存的是 RoPE 之前的 key（读取时才旋转）：应在每个 key "
                                             "自己的位置上旋转一次，缓存旋转后的结果"),
                                        mistake="cache_unrotated_keys"))
                continue
        failures.append(pick(f"self.{name}[:, :, :{L}] after chunks {list(schedule)} differs from what one full pass "
                             f"caches by up to {err:.3g}",
                             f"按 chunk {list(schedule)} 处理之后，self.{name}[:, :, :{L}] 与一次完整前向缓存的内容"
                             f"最多相差 {err:.3g}"))
    return failures


def _cache_case(ctx: Ctx) -> Case:
    B, L, H, D = 2, 9, 3, 4
    return Case(name="cache_contents", target=TARGET, init=dict(hidden_dim=H * D, num_heads=H), grad=False,
                inputs={"x": ctx.randn(B, L, H * D), "freqs_cis": rope_table(D, L + 4, 10000.0)},
                probe="cache_state", probe_args={"schedule": [4, 1, 3, 1], "max_len": L + 2},
                check=check_cache, note="k_cache/v_cache vs one full pass", traits=traits(B=B, L=L),
                full_float64=True)


def cases(ctx: Ctx) -> list[Case]:
    out = [
        _case(ctx, "prefill6_chunks_fp64", 2, 3, 6, torch.float64, (6, 1, 3, 1), extra=2, extra_rows=5),
        _cache_case(ctx),
        _case(ctx, "token_by_token_b1_fp64", 1, 2, 4, torch.float64, (1, 1, 1, 1, 1), extra=4),
        _case(ctx, "len1_fp64", 3, 2, 10, torch.float64, (1,), extra=3, theta=100.0),
        _case(ctx, "long_prefill_chunks_fp32", 2, 2, 8, torch.float32, (40, 1, 5, 1, 16, 7), extra=3, extra_rows=9),
        _case(ctx, "large_logits_fp32", 2, 2, 8, torch.float32, (3, 1, 2), scale=25.0),
        _case(ctx, "h1_theta5e5_fp32", 2, 1, 14, torch.float32, (4, 2, 1, 2), extra=1, theta=500000.0),
        _case(ctx, "bf16", 2, 3, 8, torch.bfloat16, (5, 2, 1, 1, 3), extra=1),
    ]
    H, D = ctx.int(1, 4), 2 * ctx.int(1, 6)
    L = ctx.int(3, 17)
    out += [
        _case(ctx, "drawn_sizes_fp64", ctx.int(1, 3), H, D, torch.float64, ctx.chunks(L, ctx.int(1, L), 4),
              extra=ctx.int(0, 4), extra_rows=ctx.int(0, 6), theta=ctx.choice([100.0, 10000.0, 500000.0])),
    ]
    if ctx.full:
        for i in range(6):
            B, L, H, D = ctx.int(1, 4), ctx.int(2, 24), ctx.int(1, 5), 2 * ctx.int(1, 7)
            dtype = ctx.choice([torch.float64, torch.float32, torch.bfloat16])
            out.append(_case(ctx, f"random{i}", B, H, D, dtype, ctx.chunks(L, ctx.int(1, L), 4),
                             extra=ctx.int(0, 5), extra_rows=ctx.int(0, 5),
                             theta=ctx.choice([100.0, 10000.0, 500000.0])))
    return out
