"""Cases for `int8_kv_cache`: quantize_int8 per token and per channel (outlier channels), exact
half-to-even ties, a static scale that saturates, all-zero rows, dequantize_int8; the Int8KVCache
driven through a prefill, decode steps and chunks against attention over the dequantised cache; its
storage (int8 codes, nothing else as large); and its error against unquantised attention, within the
bound the quantisation implies.

The data of every case is kept away from rounding ties (x / scale within 1e-3 of k + 1/2) unless
the case is about ties, so that every correct way of writing the division rounds the same."""
from __future__ import annotations

import math

import torch

from attn_drill.bank.api import FLOAT32_LEVEL, Case, Ctx, Failure, type_name
from attn_drill.i18n import pick

TIE_MARGIN = 1e-3


# ---------------------------------------------------------------- data
def _away_from_ties(x: torch.Tensor, dim: int, dtype, scale: float | None = None) -> torch.Tensor:
    """x with every element whose x / scale (computed from x rounded to dtype) lies within TIE_MARGIN
    of a half-integer shrunk a little, until none does. The absmax of each row stays put."""
    for _ in range(40):
        xr = x.to(dtype).to(torch.float64)
        s = xr.abs().amax(dim=dim, keepdim=True).clamp(min=1e-8) / 127 if scale is None else scale
        t = xr / s
        bad = ((t - t.floor()) - 0.5).abs() < TIE_MARGIN
        if not bad.any():
            return x
        x = torch.where(bad, x * 0.993, x)
    raise RuntimeError("grader: could not move the data away from rounding ties")


def _outliers(ctx: Ctx, shape, dim_c: int = -1, factors=(20.0, 10.0)) -> torch.Tensor:
    """randn data with a few outlier channels (along the last axis) scaled up, as keys often have."""
    x = ctx.randn(*shape)
    D = shape[-1]
    for i, f in enumerate(factors):
        x[..., (3 * i + 1) % D] *= f
    return x


def _quant_case(ctx, name, x, dim, dtype, note, scale=None, traits=()):
    x = _away_from_ties(x, dim, dtype, scale)
    kwargs = {"dim": dim} if scale is None else {"dim": dim, "scale": scale}
    return Case(name=name, target="quantize_int8", inputs={"x": x}, kwargs=kwargs, dtype=dtype, grad=False,
                output_names=("q", "scale"), traits=tuple(traits), note=note)


def _mixed_signs(ctx, shape):
    """Rows whose most negative entry is larger in size than their largest positive one (and some
    rows all negative): absmax needs the abs."""
    x = ctx.randn(*shape)
    x[..., 0] = -4.0 - ctx.rand(*shape[:-1])
    x[0, ..., :] = -(x[0, ..., :].abs() + 0.1)
    return x


def _ties() -> torch.Tensor:
    """Rows with absmax 127 (scale exactly 1) and entries k + 1/2: every entry is a rounding tie."""
    halves = torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5, 4.5, 10.5, -11.5, 126.5, -126.5],
                          dtype=torch.float64)
    rows = torch.stack([halves.roll(i) for i in range(5)])           # (5, 12)
    top = torch.tensor([127.0, -127.0, 127.0, 127.0, -127.0], dtype=torch.float64)[:, None]
    return torch.cat([rows, top], dim=1)                               # (5, 13)


def _ties_case(name, dtype):
    return Case(name=name, target="quantize_int8", inputs={"x": _ties()}, kwargs={"dim": -1},
                dtype=dtype, grad=False, output_names=("q", "scale"),
                note="x / scale = k + 1/2 exactly: round half to even")


def _dequant_case(ctx, name, shape, dim, dtype):
    q = ctx.randint(-127, 128, shape).to(torch.int8)
    sshape = list(shape)
    sshape[dim] = 1
    scale = ctx.rand(*sshape) * 0.1 + 1e-3
    return Case(name=name, target="dequantize_int8", inputs={"q": q, "scale": scale}, dtype=dtype, grad=False,
                note=f"codes {list(shape)}, scales {sshape}")


# ---------------------------------------------------------------- zero rows
def check_zero_rows(sub, ref, case) -> list:
    """sub: the probe `zero_rows`: quantize_int8 on data with all-zero rows, and dequantize_int8."""
    zero = case.probe_args["zero_rows"]
    q, scale, back = (sub.get(k) if isinstance(sub, dict) else None for k in ("q", "scale", "back"))
    if not all(isinstance(t, torch.Tensor) for t in (q, scale, back)):
        return [pick(f"quantize_int8 / dequantize_int8 did not return tensors ({type_name(q)}, {type_name(scale)}, "
                     f"{type_name(back)})",
                     f"quantize_int8 / dequantize_int8 没有返回张量（{type_name(q)}，{type_name(scale)}，"
                     f"{type_name(back)}）")]
    want_q, want_scale = ref["q"], ref["scale"]
    if q.shape != want_q.shape or scale.shape != want_scale.shape:
        return [pick(f"quantize_int8 returned q {list(q.shape)} and scale {list(scale.shape)}; expected "
                     f"{list(want_q.shape)} and {list(want_scale.shape)}",
                     f"quantize_int8 返回的 q 为 {list(q.shape)}，scale 为 {list(scale.shape)}；期望 "
                     f"{list(want_q.shape)} 和 {list(want_scale.shape)}")]
    s = scale.double()[zero]
    if not bool(torch.isfinite(s).all()) or not bool((s > 0).all()):
        bad = float(s[~(torch.isfinite(s) & (s > 0))][0])
        return [Failure(pick(f"an all-zero row got scale {bad}: max|x| / 127 is 0 there, so x / scale is 0 / 0 = NaN. "
                             f"Clamp max|x| (e.g. to at least 1e-8) before dividing",
                             f"全零行的 scale 为 {bad}：该行的 max|x| / 127 为 0，于是 x / scale 是 0 / 0 = NaN。"
                             f"应在相除之前对 max|x| 做 clamp（例如至少取 1e-8）"), mistake="no_zero_guard")]
    if q.dtype != torch.int8 or bool((q[zero] != 0).any()):
        return [pick(f"an all-zero row must quantise to codes 0 (int8); "
                     f"got {q[zero].flatten()[:6].tolist()} ({q.dtype})",
                     f"全零行应量化为编码 0（int8）；实际为 {q[zero].flatten()[:6].tolist()}（{q.dtype}）")]
    if not bool(torch.isfinite(back.double()).all()) or bool((back.double()[zero] != 0).any()):
        return [pick("dequantize_int8 of an all-zero row must give zeros",
                     "对全零行做 dequantize_int8 应得到全零")]
    if not torch.equal(q, want_q):
        return [pick(f"the codes of the rows that are not zero differ from clamp(round(x / scale), -127, 127) in "
                     f"{int((q != want_q).sum())} of {q.numel()} places",
                     f"非零行的编码与 clamp(round(x / scale), -127, 127) 不一致：{q.numel()} 个位置中有 "
                     f"{int((q != want_q).sum())} 处不同")]
    return []


def _zero_case(ctx, name, dtype):
    x = ctx.randn(4, 3, 10)
    zero = torch.zeros(4, 3, dtype=torch.bool)
    zero[0, 1] = zero[2, 0] = zero[3, 2] = True
    x[zero] = 0.0
    x = _away_from_ties(x, -1, dtype)
    return Case(name=name, target="quantize_int8", inputs={"x": x}, probe="zero_rows",
                probe_args={"zero_rows": zero}, check=check_zero_rows, dtype=dtype, grad=False,
                note="three all-zero rows")


# ---------------------------------------------------------------- the cache
def _qkv(ctx, B, H, L, D, dtype, outliers=False, scale=1.0):
    q = ctx.randn(B, H, L, D, scale=scale)
    k = _outliers(ctx, (B, H, L, D)) if outliers else ctx.randn(B, H, L, D)
    v = ctx.randn(B, H, L, D)
    return q, _away_from_ties(k, -1, dtype), _away_from_ties(v, -1, dtype)


def _cache_case(ctx, name, B, H, L, D, dtype, schedule, extra=0, outliers=False, traits=(), scale=1.0):
    q, k, v = _qkv(ctx, B, H, L, D, dtype, outliers, scale)
    words = {"b1": B == 1, "l1": L == 1, "h1": H == 1}
    return Case(name=name, target="Int8KVCache", inputs={"q": q, "k": k, "v": v}, probe="run_cache",
                probe_args={"schedule": list(schedule), "max_len": L + extra}, dtype=dtype, grad=False,
                traits=tuple(traits) + tuple(w for w, on in words.items() if on),
                note=f"schedule {list(schedule)}, max_len {L + extra}" + (", outlier key channels" if outliers else ""))


def check_storage(sub, ref, case) -> list:
    """sub: the probe `storage`: the cache's four buffers after the schedule, and the bytes of every
    tensor the cache object holds."""
    if not isinstance(sub, dict):
        return [pick(f"the probe could not read the cache ({type_name(sub)})",
                     f"探针无法读取缓存（{type_name(sub)}）")]
    B, H, max_len, D = case.probe_args["sizes"]
    sdt = torch.float64 if case.dtype == torch.float64 else torch.float32
    L = sum(case.probe_args["schedule"])
    fails = []
    for name in ("k_cache", "v_cache"):
        t = sub.get(name)
        if not isinstance(t, torch.Tensor):
            return [pick(f"after forward, self.{name} is {type_name(t)}; it must be an int8 tensor "
                         f"({B}, {H}, {max_len}, {D})",
                         f"forward 之后，self.{name} 是 {type_name(t)}；它必须是形状为 "
                         f"({B}, {H}, {max_len}, {D}) 的 int8 张量")]
        if t.dtype != torch.int8 and not t.is_floating_point():
            return [pick(f"self.{name} is {str(t.dtype).replace('torch.', '')}; "
                         f"it must be torch.int8 (signed codes -127 .. 127)",
                         f"self.{name} 是 {str(t.dtype).replace('torch.', '')}；它必须是 torch.int8"
                         f"（有符号编码 -127 .. 127）")]
        if t.dtype != torch.int8:
            return [Failure(pick(f"self.{name} is {str(t.dtype).replace('torch.', '')}: the cache keeps floats, "
                                 f"so it saves no memory. Store the int8 codes (dtype torch.int8, 1 byte each) "
                                 f"and the scales, and dequantise when attending",
                                 f"self.{name} 是 {str(t.dtype).replace('torch.', '')}：缓存里存的是浮点数，"
                                 f"一点内存也没省。应存储 int8 编码（dtype torch.int8，每个 1 字节）和 scale，"
                                 f"计算注意力时再反量化"), mistake="cache_stores_float")]
        if tuple(t.shape) != (B, H, max_len, D):
            return [pick(f"self.{name} has shape {list(t.shape)}; expected {[B, H, max_len, D]}",
                         f"self.{name} 的形状为 {list(t.shape)}；期望 {[B, H, max_len, D]}")]
        if not torch.equal(t[:, :, :L], ref[name][:, :, :L]):
            diff = int((t[:, :, :L] != ref[name][:, :, :L]).sum())
            fails.append(pick(f"self.{name}[:, :, :{L}] holds other codes than quantize_int8(k or v, dim=-1) of the "
                              f"tokens written (in {diff} places)",
                              f"self.{name}[:, :, :{L}] 中的编码与已写入 token 的 quantize_int8(k or v, dim=-1) "
                              f"不一致（共 {diff} 处）"))
    for name in ("k_scale", "v_scale"):
        t = sub.get(name)
        if not isinstance(t, torch.Tensor) or tuple(t.shape) != (B, H, max_len, 1) or t.dtype != sdt:
            got = (f"{str(t.dtype).replace('torch.', '')} {list(t.shape)}" if isinstance(t, torch.Tensor)
                   else type_name(t))
            return fails + [pick(f"self.{name} is {got}; expected {str(sdt).replace('torch.', '')} "
                                 f"{[B, H, max_len, 1]} (one scale per token and head)",
                                 f"self.{name} 是 {got}；期望 {str(sdt).replace('torch.', '')} "
                                 f"{[B, H, max_len, 1]}（每个 token、每个头一个 scale）")]
        want = ref[name][:, :, :L].double()
        if not torch.allclose(t[:, :, :L].double(), want, rtol=1e-6, atol=0):
            fails.append(pick(f"self.{name}[:, :, :{L}] differs from the per-token scales max|x| / 127",
                              f"self.{name}[:, :, :{L}] 与逐 token 的 scale max|x| / 127 不一致"))
    held = sub.get("bytes")
    budget = 2 * B * H * max_len * D + 2 * B * H * max_len * (8 if sdt == torch.float64 else 4)
    if not isinstance(held, int) or held > budget + 4096:
        fails.append(pick(f"the cache object holds {held} bytes of tensors; "
                          f"int8 codes and {str(sdt).replace('torch.', '')} scales need {budget}. "
                          f"Keep no float copy of the keys or values in the cache",
                          f"缓存对象持有 {held} 字节的张量；int8 编码加上 {str(sdt).replace('torch.', '')} 的 scale "
                          f"只需 {budget} 字节。不要在缓存里保留 key 或 value 的浮点副本"))
    return fails


def check_overflow(sub, ref, case) -> list:
    """sub: the probe `overflow`: filling the cache exactly to max_len works; writing past it (one token
    at start_pos = max_len, three at max_len - 1) raises ValueError."""
    max_len = case.probe_args["max_len"]
    if not isinstance(sub, list) or len(sub) != 3 or not all(isinstance(r, dict) for r in sub):
        return [pick(f"the probe could not drive the cache ({type_name(sub)})",
                     f"探针无法驱动缓存（{type_name(sub)}）")]
    fill, *edges = sub
    if "error" in fill:
        return [pick(f"filling the cache exactly to max_len={max_len} (a prefill of {max_len - 2} tokens, then 2 "
                     f"at start_pos={max_len - 2}) raised {fill['error']}: {str(fill.get('message'))[:160]}; "
                     f"only start_pos + L > max_len overflows",
                     f"把缓存恰好填满到 max_len={max_len}（先 prefill {max_len - 2} 个 token，再在 "
                     f"start_pos={max_len - 2} 写入 2 个）时抛出了 {fill['error']}: {str(fill.get('message'))[:160]}；"
                     f"只有 start_pos + L > max_len 才算溢出")]
    fails = []
    # "no check" only when no write past max_len raised: one raising and another not is a bound off by one
    unchecked = None if any(r.get("error") == "ValueError" for r in edges) else "no_max_len_check"
    for (start, n), r in zip(((max_len, 1), (max_len - 1, 3)), edges):
        what = pick(f"writing {n} token(s) at start_pos={start} with max_len={max_len}",
                    f"在 start_pos={start} 写入 {n} 个 token（max_len={max_len}）")
        if r.get("error") == "ValueError":
            continue
        got = (pick(f"raised {r['error']}: {str(r.get('message'))[:160]}", f"抛出了 {r['error']}: "
                    f"{str(r.get('message'))[:160]}") if "error" in r else pick("raised no error", "没有抛出错误"))
        fails.append(Failure(pick(f"{what} {got}; check start_pos + L against max_len before writing and raise "
                                  f"ValueError",
                                  f"{what}时{got}；应在写入之前检查 start_pos + L 是否超过 max_len，并抛出 ValueError"),
                             mistake=unchecked))
    return fails


def check_bound(sub, ref, case) -> list:
    """The output against attention over the dequantised cache (tight), and against attention over
    the original keys and values, within the bound the quantisation implies:
      score error per key   |delta_j| <= sum_c |q_c| s_k,j / 2 / sqrt(D) = Delta (s: per-token scale)
      output error          |o^ - o| <= (exp(2 Delta) - 1) max_j |v^_j| + max_j s_v,j / 2"""
    if not isinstance(sub, torch.Tensor):
        return [pick(f"the cache's forward returned {type_name(sub)}, not a tensor",
                     f"缓存的 forward 返回了 {type_name(sub)}，而不是张量")]
    q, k, v = (case.inputs[n].to(case.dtype).double() for n in ("q", "k", "v"))
    B, H, L, D = q.shape
    truth = case.truth_obs.value if hasattr(case.truth_obs, "value") else case.truth_obs
    if tuple(sub.shape) != (B, H, L, D):
        return [pick(f"the cache's outputs have shape {list(sub.shape)}; expected {[B, H, L, D]}",
                     f"缓存的输出形状为 {list(sub.shape)}；期望 {[B, H, L, D]}")]
    got = sub.double()
    if not bool(torch.isfinite(got).all()):
        return [pick("the cache's output has NaN or inf values", "缓存的输出中有 NaN 或 inf")]
    s_k = k.abs().amax(-1, keepdim=True).clamp(min=1e-8) / 127                   # (B, H, L, 1)
    s_v = v.abs().amax(-1, keepdim=True).clamp(min=1e-8) / 127
    v_hat = torch.round(v / s_v).clamp(-127, 127) * s_v
    keep = torch.ones(L, L, dtype=torch.bool).tril()
    plain = torch.softmax((q @ k.transpose(-2, -1) / math.sqrt(D)).masked_fill(~keep, float("-inf")), -1) @ v
    delta = (q.abs().sum(-1, keepdim=True) * s_k.transpose(-2, -1) / 2 / math.sqrt(D))   # (B, H, L, L)
    delta = delta.masked_fill(~keep, 0).amax(-1, keepdim=True)                           # (B, H, L, 1)
    v_max = (v_hat.abs().amax(-1).unsqueeze(-2) * keep).amax(-1, keepdim=True)          # (B, H, L, 1)
    s_max = (s_v.transpose(-2, -1) * keep).amax(-1, keepdim=True)                       # (B, H, L, 1)
    bound = torch.expm1(2 * delta) * v_max + s_max / 2
    excess = ((got - plain).abs() - bound).amax()
    err_q = float((got - truth.double()).abs().max())
    scale = float(truth.double().abs().max())
    tight = FLOAT32_LEVEL if case.dtype == torch.float64 else 2e-5
    if float(excess) > 0:
        return [pick(f"the output differs from attention over the original keys and values by more than the int8 "
                     f"quantisation allows (by {float(excess):.3g} beyond the bound); the codes or scales are wrong",
                     f"输出与在原始 key、value 上计算的注意力之差超出了 int8 量化所允许的范围"
                     f"（超出误差界 {float(excess):.3g}）；编码或 scale 有误")]
    if err_q > tight * max(1.0, scale):
        # the bound is loose with outlier channels: it does not tell a quantisation slip from a wrong
        # mask, so the message names both places to look, not one cause
        return [pick(f"the output is within the quantisation bound of unquantised attention, but differs from "
                     f"attention over the dequantised cache by {err_q:.3g}: either the codes and scales differ "
                     f"from quantize_int8(k or v, dim=-1), or query i does not see exactly the cached positions "
                     f"0 .. start_pos + i",
                     f"输出与未量化注意力之差在量化误差界之内，但与在反量化缓存上计算的注意力相差 {err_q:.3g}："
                     f"要么编码和 scale 与 quantize_int8(k 或 v, dim=-1) 不一致，要么 query i 看到的缓存位置"
                     f"不恰好是 0 .. start_pos + i")]
    return []


# ---------------------------------------------------------------- the cases
def cases(ctx: Ctx) -> list[Case]:
    out = [
        _quant_case(ctx, "per_token_fp64", _mixed_signs(ctx, (2, 3, 9, 8)), -1, torch.float64,
                    "per token (dim=-1), rows with large negative entries"),
        _quant_case(ctx, "per_channel_outliers_fp32", _outliers(ctx, (2, 2, 70, 12)), -2, torch.float32,
                    "per channel (dim=-2) over 70 tokens, outlier channels x20 and x10", traits=("long",)),
        _ties_case("ties_half_even_fp64", torch.float64),
        _quant_case(ctx, "static_scale_saturates_fp64", ctx.randn(3, 5, 11, scale=4.0), -1, torch.float64,
                    "static scale 0.05: |x| up to ~15 saturates at +-127", scale=0.05),
        _quant_case(ctx, "per_token_bf16", ctx.randn(3, 5, 16), -1, torch.bfloat16, "per token"),
        _zero_case(ctx, "zero_rows_fp32", torch.float32),
        _dequant_case(ctx, "dequantize_fp64", (2, 3, 7, 5), -1, torch.float64),
    ]
    dims = ctx.int(1, 4), ctx.int(1, 12), ctx.int(1, 9)
    out.append(_quant_case(ctx, "sizes_from_seed_fp32", ctx.randn(*dims), ctx.choice([-1, -2, 0]), torch.float32,
                           f"shape {list(dims)}"))
    out += [
        _cache_case(ctx, "cache_decode_fp64", 2, 3, 11, 8, torch.float64, (5, 1, 1, 1, 3), extra=4),
        _cache_case(ctx, "cache_b1_l1_fp64", 1, 2, 1, 6, torch.float64, (1,), extra=2),
        _cache_case(ctx, "cache_long_fp32", 2, 2, 80, 16, torch.float32, (64, 1, 1, 14), traits=("long",)),
        _cache_case(ctx, "cache_bf16", 2, 3, 9, 8, torch.bfloat16, (4, 2, 1, 2), extra=1),
    ]
    q, k, v = _qkv(ctx, 2, 2, 24, 16, torch.float32, outliers=True)
    out.append(Case(name="cache_error_bound_fp32", target="Int8KVCache", inputs={"q": q, "k": k, "v": v},
                    probe="run_cache", probe_args={"schedule": [16, 1, 1, 6], "max_len": 24}, check=check_bound,
                    dtype=torch.float32, grad=False, note="outlier key channels; vs unquantised attention"))
    q, k, v = _qkv(ctx, 2, 3, 9, 8, torch.float32)
    out.append(Case(name="cache_storage_fp32", target="Int8KVCache", inputs={"q": q, "k": k, "v": v},
                    probe="storage", probe_args={"schedule": [5, 1, 3], "sizes": [2, 3, 20, 8]}, check=check_storage,
                    dtype=torch.float32, grad=False, note="int8 codes, scales, bytes held"))
    q, k, v = _qkv(ctx, 1, 2, 7, 4, torch.float32)
    out.append(Case(name="cache_overflow_fp32", target="Int8KVCache", inputs={"q": q, "k": k, "v": v},
                    probe="overflow", probe_args={"max_len": 7}, check=check_overflow, dtype=torch.float32,
                    grad=False, traits=("b1",), note="start_pos + L > max_len raises ValueError"))
    if ctx.full:
        for i in range(5):
            shape = [ctx.int(1, 4) for _ in range(ctx.int(1, 2))] + [ctx.int(1, 20), ctx.int(1, 33)]
            dtype = ctx.choice([torch.float64, torch.float32, torch.bfloat16])
            dim = ctx.choice([-1, -2])
            scale = ctx.choice([None, None, 0.02])
            out.append(_quant_case(ctx, f"random_quant{i}", _outliers(ctx, shape) if i % 2 else ctx.randn(*shape),
                                   dim, dtype, f"dim={dim}" + (f", static scale {scale}" if scale else ""),
                                   scale=scale))
        for i in range(5):
            B, H, L, D = ctx.int(1, 3), ctx.int(1, 4), ctx.int(1, 40), ctx.int(1, 24)
            dtype = ctx.choice([torch.float64, torch.float32, torch.bfloat16])
            out.append(_cache_case(ctx, f"random_cache{i}", B, H, L, D, dtype, ctx.chunks(L, ctx.int(1, L), 4),
                                   extra=ctx.int(0, 4), outliers=bool(i % 2)))
        out.append(_dequant_case(ctx, "dequantize_channels_fp32", (3, 9, 6), -2, torch.float32))
        out.append(_zero_case(ctx, "zero_rows_bf16", torch.bfloat16))
    return out
