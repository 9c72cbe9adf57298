"""Cases for `mla`: the uncached forward (outputs and gradients) against a float64 reference; prefill
and chunks through the latent cache against one full pass; what the cache holds; and a
token-by-token decode that must stay on the latents (absorbed weights, no per-head keys or values
for the cached positions)."""
from __future__ import annotations

import torch

from attn_drill.bank.api import FLOAT32_LEVEL, Case, Ctx, Failure, float64_bound, traits, type_name
from attn_drill.i18n import pick

TARGET = "MultiHeadLatentAttention"


def _init(E, H, rq, r, dn, dr, dv, theta=10000.0):
    return dict(hidden_dim=E, num_heads=H, q_lora_rank=rq, kv_lora_rank=r, qk_nope_head_dim=dn,
                qk_rope_head_dim=dr, v_head_dim=dv, rope_theta=theta)


def _note(init, extra=""):
    i = init
    return (f"H={i['num_heads']} r={i['kv_lora_rank']} dn={i['qk_nope_head_dim']} dr={i['qk_rope_head_dim']} "
            f"dv={i['v_head_dim']}" + (f" {extra}" if extra else ""))


def _dv_traits(init):
    return traits(D=init["qk_nope_head_dim"] + init["qk_rope_head_dim"], Dv=init["v_head_dim"])


def _forward_case(ctx, name, B, L, init, dtype, scale=1.0):
    """One uncached forward: causal attention within x, gradients w.r.t. x and every parameter."""
    large = scale > 1
    return Case(name=name, target=TARGET, init=init, inputs={"x": ctx.randn(B, L, init["hidden_dim"], scale=scale)},
                dtype=dtype, note=_note(init, "uncached, causal" + (", large logits" if large else "")),
                traits=traits(B=B, L=L, H=init["num_heads"], mask="causal", large_logits=large) + _dv_traits(init))


def _decode_case(ctx, name, B, init, dtype, schedule, extra=0):
    """Prefill + chunks through the cache, then one cached pass of the whole sequence (no gradients)."""
    L = sum(schedule)
    return Case(name=name, target=TARGET, init=init, inputs={"x": ctx.randn(B, L, init["hidden_dim"])}, dtype=dtype,
                grad=False, probe="decode", probe_args={"schedule": list(schedule), "max_len": L + extra},
                output_names=("incremental", "full_forward"),
                note=_note(init, f"schedule {list(schedule)}, max_len {L + extra}"),
                traits=traits(B=B, Lq=min(schedule), Lk=L, H=init["num_heads"], mask="causal") + _dv_traits(init))


# ------------------------------------------------------------------------------------- the cache
def _unrotate(pe: torch.Tensor, theta: float) -> torch.Tensor:
    """Undo the interleaved rotation of rows 0.. of pe (B, T, dr): the k_pe before RoPE."""
    B, T, dr = pe.shape
    inv_freq = theta ** (-torch.arange(0, dr, 2, dtype=torch.float64) / dr)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq                       # (T, dr/2)
    a, b = pe[..., 0::2], pe[..., 1::2]
    out = torch.empty_like(pe)
    out[..., 0::2] = a * ang.cos() + b * ang.sin()
    out[..., 1::2] = -a * ang.sin() + b * ang.cos()
    return out


def check_cache(sub, ref, case) -> list:
    """After a chunked prefill + decode, kv_cache holds the normalised latents (B, max_len, r) and
    pe_cache the rotated k_pe (B, max_len, dr), the same as one full pass writes, up to float32-level
    rounding (the statement asks no step in float64)."""
    init, x = case.init, case.inputs["x"]
    B, L, _ = x.shape
    max_len, schedule = case.probe_args["max_len"], case.probe_args["schedule"]
    H, r, dr = init["num_heads"], init["kv_lora_rank"], init["qk_rope_head_dim"]
    dn, dv = init["qk_nope_head_dim"], init["v_head_dim"]
    if not isinstance(sub, dict):
        return [pick(f"the cache could not be read ({type_name(sub)})", f"无法读取缓存（{type_name(sub)}）")]
    kv, pe = sub.get("kv_cache"), sub.get("pe_cache")
    if not isinstance(kv, torch.Tensor):
        if isinstance(sub.get("k_cache"), torch.Tensor) or isinstance(sub.get("v_cache"), torch.Tensor):
            return [Failure(pick("after init_cache and forward there is no self.kv_cache, but there are self.k_cache / "
                                 "self.v_cache: the cache holds per-head keys and values. MLA caches only the latent "
                                 f"c_t ({r} numbers per token) and the shared rotated k_pe ({dr})",
                                 "调用 init_cache 和 forward 之后没有 self.kv_cache，却有 self.k_cache / "
                                 "self.v_cache：缓存里存的是每个头的 key 和 value。MLA 只缓存潜在向量 "
                                 f"c_t（每个 token {r} 个数）和各头共享的已旋转 k_pe（{dr} 个数）"),
                            mistake="cache_expanded_kv")]
        return [pick(f"after init_cache and forward, self.kv_cache is not a tensor ({type_name(kv)})",
                     f"调用 init_cache 和 forward 之后，self.kv_cache 不是张量（{type_name(kv)}）")]
    want = (B, max_len, r)
    if tuple(kv.shape) != want:
        shape = tuple(kv.shape)
        if kv.numel() > B * max_len * r and (H in shape[2:] or shape[-1] in (H * (dn + dv), dn + dv, H * dn, dn)):
            return [Failure(pick(f"self.kv_cache has shape {shape}: it holds per-head keys/values expanded "
                                 f"from the latent; it must be {want} (batch, max_len, kv_lora_rank), "
                                 f"the normalised latent only",
                                 f"self.kv_cache 的形状是 {shape}：它存的是由潜在向量展开得到的每个头的 key/value；"
                                 f"应为 {want} (batch, max_len, kv_lora_rank)，只存归一化后的潜在向量"),
                            mistake="cache_expanded_kv")]
        return [pick(f"self.kv_cache has shape {shape}, expected {want} (batch, max_len, kv_lora_rank)",
                     f"self.kv_cache 的形状是 {shape}，应为 {want} (batch, max_len, kv_lora_rank)")]
    if not isinstance(pe, torch.Tensor) or tuple(pe.shape) != (B, max_len, dr):
        got = tuple(pe.shape) if isinstance(pe, torch.Tensor) else type_name(pe)
        return [pick(f"self.pe_cache is {got}, expected a tensor of shape {(B, max_len, dr)} (batch, max_len, "
                     f"qk_rope_head_dim): one rotated k_pe per token, shared by all heads",
                     f"self.pe_cache 是 {got}，应为形状 {(B, max_len, dr)} (batch, max_len, qk_rope_head_dim) "
                     f"的张量：每个 token 一个已旋转的 k_pe，所有头共享")]
    failures = []
    bound = float64_bound(case)          # float32-level rounding (a float32 rotation or RMSNorm) passes
    want_kv = ref["kv_cache"][:, :L].to(torch.float64)
    err = float((kv[:, :L].detach().to(torch.float64) - want_kv).abs().max())
    if not err <= bound * max(1.0, float(want_kv.abs().max())):
        failures.append(pick(f"self.kv_cache[:, :{L}] after chunks {list(schedule)} differs from the latents of "
                             f"one full pass by up to {err:.3g}: "
                             f"store kv_a_layernorm(latent) for each token at its position",
                             f"按 chunk {list(schedule)} 处理之后，self.kv_cache[:, :{L}] 与一次完整前向得到的潜在向量"
                             f"最多相差 {err:.3g}：应把每个 token 的 kv_a_layernorm(latent) 存在它自己的位置上"))
    want_pe = ref["pe_cache"][:, :L].to(torch.float64)
    got_pe = pe[:, :L].detach().to(torch.float64)
    err = float((got_pe - want_pe).abs().max())
    if not err <= bound * max(1.0, float(want_pe.abs().max())):
        raw = _unrotate(want_pe, init.get("rope_theta", 10000.0))
        split = torch.cat([want_pe[..., 0::2], want_pe[..., 1::2]], dim=-1)   # [evens | odds]
        if float((got_pe - split).abs().max()) <= bound * max(1.0, float(split.abs().max())):
            failures.append(Failure(pick(
                "self.pe_cache holds the rotated k_pe de-interleaved, [evens | odds] (Hugging Face's layout with "
                "rope_interleave); write each rotated pair back to positions 2i and 2i+1",
                "self.pe_cache 存的已旋转 k_pe 是按奇偶分开的布局 [偶数位 | 奇数位]（Hugging Face 在 rope_interleave "
                "下的布局）；应把每个旋转后的维度对写回到位置 2i 和 2i+1"), mistake="pe_deinterleaved"))
        elif float((got_pe - raw).abs().max()) <= bound * max(1.0, float(raw.abs().max())):
            failures.append(pick("self.pe_cache holds k_pe before RoPE; cache it already rotated at its own position "
                                 "(it is never rotated again)",
                                 "self.pe_cache 存的是 RoPE 之前的 k_pe；应在它自己的位置上旋转后再缓存"
                                 "（之后不会再旋转）"))
        else:
            failures.append(pick(f"self.pe_cache[:, :{L}] after chunks {list(schedule)} differs from the rotated k_pe "
                                 f"of one full pass by up to {err:.3g}",
                                 f"按 chunk {list(schedule)} 处理之后，self.pe_cache[:, :{L}] 与一次完整前向得到的"
                                 f"已旋转 k_pe 最多相差 {err:.3g}"))
    return failures


def _cache_case(ctx, init):
    B, L, extra = 2, 9, 3
    schedule = [4, 1, 3, 1]
    return Case(name="cache_contents", target=TARGET, init=init, inputs={"x": ctx.randn(B, L, init["hidden_dim"])},
                probe="decode_state", grad=False, check=check_cache,
                probe_args={"schedule": schedule, "max_len": L + extra,
                            "attrs": ["kv_cache", "pe_cache", "k_cache", "v_cache"]},
                note=_note(init, "kv_cache / pe_cache vs one full pass"), traits=traits(B=B, L=L, mask="causal"))


# ------------------------------------------------------------------------ decode on the latents
def latent_limit(B: int, max_len: int, init: dict) -> int:
    """The largest tensor a decode step on the latents needs is about the cache itself: (B, max_len,
    r + dr), the kv_b weight viewed per head, or a step's scores; twice the largest of these. Per-head
    keys for the cached positions, (B, T, H, dn), are far larger at the sizes used here."""
    H, r, dr = init["num_heads"], init["kv_lora_rank"], init["qk_rope_head_dim"]
    dn, dv, E, rq = init["qk_nope_head_dim"], init["v_head_dim"], init["hidden_dim"], init["q_lora_rank"]
    biggest = max(B * max_len * (r + dr), H * (dn + dv) * r, H * (dn + dr) * rq, E * H * dv, B * H * max_len)
    return 2 * biggest


def check_latent(sub, ref, case) -> list:
    """A long token-by-token decode: the outputs match one float64 reference run, and no decode step
    makes a tensor much larger than the cache (per-head keys or values for the cached positions)."""
    init, x = case.init, case.inputs["x"]
    B, L, E = x.shape
    H, dn, dv = init["num_heads"], init["qk_nope_head_dim"], init["v_head_dim"]
    if not isinstance(sub, dict) or not isinstance(sub.get("out"), torch.Tensor):
        return [pick(f"the decode steps could not be read ({type_name(sub)})",
                     f"无法读取解码步骤的结果（{type_name(sub)}）")]
    out, truth = sub["out"], case.truth_obs["out"]
    if tuple(out.shape) != (B, L, E):
        return [pick(f"{L} decode steps of one token each returned shape {list(out.shape)} in all; "
                     f"expected {[B, L, E]}",
                     f"{L} 个每步一个 token 的解码步骤合起来返回的形状是 {list(out.shape)}；应为 {[B, L, E]}")]
    err = float((out.detach().to(torch.float64) - truth).abs().max())
    if not err <= FLOAT32_LEVEL * max(1.0, float(truth.abs().max())):
        return [pick(f"{L} decode steps of one token each (start_pos = 0, 1, ...) differ from the reference by up to "
                     f"{err:.3g}",
                     f"{L} 个每步一个 token 的解码步骤（start_pos = 0, 1, ...）与参考实现最多相差 {err:.3g}")]
    largest, shape, made_by = sub.get("largest"), sub.get("shape"), sub.get("made_by")
    if not isinstance(largest, int) or not isinstance(shape, list) or not all(isinstance(s, int) for s in shape):
        return [pick("the sizes of the tensors made while decoding could not be read",
                     "无法读取解码过程中创建的张量的大小")]
    limit = latent_limit(B, case.probe_args["max_len"], init)
    if largest <= limit:
        return []
    msg = pick(f"a decode step made a tensor of shape {shape} ({largest} elements, by `{str(made_by)[:40]}`); "
               f"with {L} cached tokens the latent cache holds {B * case.probe_args['max_len'] * init['kv_lora_rank']} "
               f"numbers and this case allows {limit}: attend on the latents, with W_UK folded into the query and "
               f"W_UV applied after the weights",
               f"某个解码步骤创建了形状为 {shape} 的张量（{largest} 个元素，由 `{str(made_by)[:40]}` 创建）；"
               f"缓存 {L} 个 token 时，潜在向量缓存只有 {B * case.probe_args['max_len'] * init['kv_lora_rank']} "
               f"个数，本用例最多允许 {limit}：应直接在潜在向量上做注意力，把 W_UK 吸收进 query，"
               f"并在注意力权重之后再乘 W_UV")
    per_head = H in shape or any(s in (H * dn, H * dv, H * (dn + dv)) for s in shape)
    return [Failure(msg, mistake="naive_decode") if L in shape and per_head else msg]


def _latent_case(ctx, name, B, L, init, extra=2):
    limit = latent_limit(B, L + extra, init)
    smallest_naive = B * L * init["num_heads"] * min(init["qk_nope_head_dim"], init["v_head_dim"])
    if smallest_naive <= limit:
        raise AssertionError(f"grader: {name} cannot tell a latent decode from per-head keys ({smallest_naive} "
                             f"<= {limit})")
    return Case(name=name, target=TARGET, init=init, inputs={"x": ctx.randn(B, L, init["hidden_dim"])},
                grad=False, probe="latent_decode", probe_args={"max_len": L + extra}, check=check_latent,
                note=_note(init, f"{L} decode steps on the latents"), traits=traits(B=B, Lq=1, Lk=L, mask="causal"))


def cases(ctx: Ctx) -> list[Case]:
    # the cases that name the most mistakes come first: a failing grade stops at its first failure
    base = _init(24, 3, 10, 9, 6, 4, 5)
    out = [
        _forward_case(ctx, "forward_fp64", 2, 7, base, torch.float64),
        _decode_case(ctx, "decode_chunks_fp64", 2, base, torch.float64, (4, 1, 3, 1, 2), extra=3),
        _cache_case(ctx, base),
        _latent_case(ctx, "latent_decode", 2, 24, _init(18, 8, 7, 5, 8, 4, 6)),
        _forward_case(ctx, "forward_b1_h1_fp64", 1, 5, _init(14, 1, 7, 11, 4, 6, 9, theta=500.0), torch.float64),
        _forward_case(ctx, "forward_l1_fp32", 3, 1, _init(18, 2, 5, 6, 8, 2, 3), torch.float32),
        _forward_case(ctx, "forward_long_fp32", 2, 67, _init(20, 4, 9, 7, 6, 4, 5), torch.float32),
        _forward_case(ctx, "forward_large_logits_fp32", 2, 6, base, torch.float32, scale=400.0),
        _forward_case(ctx, "forward_bf16", 2, 11, _init(22, 3, 12, 10, 6, 6, 7), torch.bfloat16),
    ]
    H, dr = ctx.int(1, 5), 2 * ctx.int(1, 4)
    drawn = _init(ctx.int(5, 29), H, ctx.int(3, 13), ctx.int(3, 13), 2 * ctx.int(1, 5), dr, ctx.int(2, 9),
                  theta=ctx.choice([100.0, 10000.0]))
    out += [
        _forward_case(ctx, "forward_drawn_sizes_fp64", ctx.int(1, 3), ctx.int(2, 13), drawn, torch.float64),
        _decode_case(ctx, "decode_b1_fp32", 1, _init(15, 2, 6, 5, 4, 4, 6, theta=100.0), torch.float32,
                     (3, 1, 1, 2, 1)),
        _decode_case(ctx, "decode_bf16", 2, _init(21, 3, 8, 10, 6, 2, 5), torch.bfloat16, (5, 2, 1, 1)),
    ]
    if ctx.full:
        for i in range(6):
            H, dr = ctx.int(1, 5), 2 * ctx.int(1, 4)
            init = _init(ctx.int(5, 33), H, ctx.int(3, 15), ctx.int(3, 15), 2 * ctx.int(1, 5), dr, ctx.int(2, 11),
                         theta=ctx.choice([100.0, 10000.0, 500000.0]))
            dtype = ctx.choice([torch.float64, torch.float32, torch.bfloat16])
            B, L = ctx.int(1, 3), ctx.int(1, 17)
            if i % 2 == 0:
                out.append(_forward_case(ctx, f"random_forward{i}", B, L, init, dtype))
            else:
                sched, left = [ctx.int(1, L)], L
                left -= sched[0]
                while left > 0:
                    n = min(left, ctx.int(1, 4))
                    sched.append(n)
                    left -= n
                out.append(_decode_case(ctx, f"random_decode{i}", B, init, dtype, sched, extra=ctx.int(0, 4)))
    return out
