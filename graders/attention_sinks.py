"""Cases for `attention_sinks`: the sink + window mask, and a StreamingLLM cache driven over streams
longer than the cache (token by token, in chunks, one long prefill), positions inside the cache,
no sinks, more sinks than window, large logits, dtypes; and what the cache holds after a stream."""
import torch

from attn_drill.bank.api import Case, Ctx, Failure, type_name
from attn_drill.i18n import pick

TARGET = "StreamingAttention"


# ---------------------------------------------------------------- the mask
def sink_mask(L: int, S: int, W: int) -> torch.Tensor:
    """The stated mask, built with loops (independent of the reference)."""
    keep = torch.zeros(L, L, dtype=torch.bool)
    for i in range(L):
        for j in range(i + 1):
            keep[i, j] = j < S or i - j < W
    return keep


def _mask_variants(L: int, S: int, W: int) -> list:
    pos = torch.arange(L)
    i, j = pos[:, None], pos[None, :]
    return [
        ("mask_sinks_not_causal", ((j <= i) & (i - j < W)) | (j < S),
         pick("the sinks are visible to queries before them; a sink is a key like any other and needs j <= i",
              "位于 sink 之前的 query 也能看到 sink；sink 和其他 key 一样，也要满足 j <= i")),
        ("mask_window_off_by_one", (j <= i) & ((j < S) | (i - j <= W)),
         pick("each query sees window_size + 1 recent keys; the window holds window_size keys, the query's own "
              "position included (i - j < window_size)",
              "每个 query 能看到最近的 window_size + 1 个 key；窗口只含 window_size 个 key，"
              "其中包括 query 自身的位置（i - j < window_size）")),
    ]


MASKS = ((9, 2, 3), (6, 0, 2), (7, 3, 1), (5, 4, 8), (1, 4, 4), (12, 1, 5), (10, 3, 3), (11, 5, 2))


def check_mask(sub, ref, case) -> list:
    """sub: streaming_mask(L, S, W) for each entry of MASKS."""
    for (L, S, W), got in zip(MASKS, sub):
        call = f"streaming_mask({L}, num_sinks={S}, window_size={W})"
        if not isinstance(got, torch.Tensor):
            return [pick(f"{call} returned {type_name(got)}; return a bool tensor",
                         f"{call} 返回了 {type_name(got)}；应返回 bool 张量")]
        if tuple(got.shape) != (L, L):
            return [pick(f"{call} has shape {tuple(got.shape)}; expected ({L}, {L}) (queries on rows)",
                         f"{call} 的形状为 {tuple(got.shape)}；期望 ({L}, {L})（每行对应一个 query）")]
        if got.dtype != torch.bool:
            return [pick(f"{call} has dtype {got.dtype}; return a bool tensor (True = may attend)",
                         f"{call} 的 dtype 为 {got.dtype}；应返回 bool 张量（True 表示可以注意）")]
        got = got.cpu()
        want = sink_mask(L, S, W)
        if torch.equal(got, want):
            continue
        i = next(r for r in range(L) if not torch.equal(got[r], want[r]))
        msg = pick(f"{call}: query {i} sees keys {got[i].nonzero().flatten().tolist()}, expected "
                   f"{want[i].nonzero().flatten().tolist()}",
                   f"{call}：query {i} 能看到的 key 为 {got[i].nonzero().flatten().tolist()}，期望 "
                   f"{want[i].nonzero().flatten().tolist()}")
        for mistake, mask, why in _mask_variants(L, S, W):
            if torch.equal(got, mask):
                return [Failure(pick(f"{msg}; {why}", f"{msg}；{why}"), mistake=mistake)]
        if torch.equal(got, want.logical_not()):
            return [msg + pick("; the mask is inverted (True must mean 'may attend')",
                               "；掩码取反了（True 应表示“可以注意”）")]
        return [msg]
    return []


# ---------------------------------------------------------------- the cache after a stream
def kept_tokens(T: int, S: int, W: int) -> list:
    """Stream indices the cache holds after T tokens: the sinks and the W most recent."""
    return [j for j in range(T) if j < S or j >= T - W]


def _rope(x: torch.Tensor, theta: float) -> torch.Tensor:
    """x (B, H, n, D) rotated at positions 0 .. n-1 in the rotate-half layout, in float64."""
    n, D = x.shape[-2], x.shape[-1]
    half = D // 2
    inv = theta ** (-2.0 * torch.arange(half, dtype=torch.float64) / D)
    ang = torch.arange(n, dtype=torch.float64)[:, None] * inv[None, :]      # (n, D/2)
    c, s = ang.cos(), ang.sin()
    a, b = x[..., :half].double(), x[..., half:].double()
    return torch.cat([a * c - b * s, a * s + b * c], dim=-1)


def check_state(sub, ref, case) -> list:
    """sub: k_cache, v_cache, cache_index after the stream, and the module's own keys and values."""
    if not isinstance(sub, dict):
        return [pick(f"the probe returned {type_name(sub)}", f"探针返回了 {type_name(sub)}")]
    x = case.inputs["x"]
    B, T, _ = x.shape
    init = case.init
    S, W, H = init["num_sinks"], init["window_size"], init["num_heads"]
    D = init["hidden_dim"] // H
    schedule = case.probe_args["schedule"]
    want = kept_tokens(T, S, W)
    n = len(want)
    where = pick(f"after streaming {T} tokens in chunks {list(schedule)} (num_sinks={S}, window_size={W})",
                 f"按 chunk {list(schedule)} 流式输入 {T} 个 token 后（num_sinks={S}，window_size={W}）")
    idx = sub.get("cache_index")
    if not isinstance(idx, torch.Tensor):
        return [pick(f"{where}, self.cache_index is {type_name(idx)}; keep a (n,) int64 tensor with the stream "
                     f"index of each cached token",
                     f"{where}，self.cache_index 是 {type_name(idx)}；应保存一个 (n,) 的 int64 张量，"
                     f"记录每个缓存 token 在流中的索引")]
    got = idx.flatten().tolist() if idx.dim() == 1 else None
    if got != want:
        msg = pick(f"{where}, self.cache_index is {idx.tolist()}; expected {want} (the sinks, then the newest tokens)",
                   f"{where}，self.cache_index 为 {idx.tolist()}；期望 {want}（先是 sink，再是最新的 token）")
        rolling = list(range(max(0, T - S - W), T))
        wider = [j for j in range(T) if j < S or j >= T - W - 1]
        if got == rolling and rolling != want:
            return [Failure(msg + pick(": the sinks were evicted like any other token",
                                       "：sink 像普通 token 一样被逐出了"), mistake="evict_sinks")]
        if got == wider and wider != want:
            return [Failure(msg + pick(": the cache keeps one token too many (the window counts the current token)",
                                       "：缓存多保留了一个 token（窗口已包含当前 token）"),
                            mistake="window_off_by_one")]
        return [msg]
    failures = []
    keys, values = sub.get("keys"), sub.get("values")
    if not (isinstance(keys, torch.Tensor) and isinstance(values, torch.Tensor)
            and tuple(keys.shape) == (B, H, T, D) and tuple(values.shape) == (B, H, T, D)):
        return [pick("k_proj / v_proj did not give (B, L, hidden_dim) projections of the stream",
                     "k_proj / v_proj 没有给出整个流的 (B, L, hidden_dim) 投影")]
    keys, values = keys.double()[:, :, want], values.double()[:, :, want]
    for name, expect, what in (("v_cache", values, pick("the values of the cached tokens", "value")),
                               ("k_cache", keys, pick("the keys of the cached tokens, before RoPE",
                                                      "key（RoPE 之前的）"))):
        t = sub.get(name)
        if not isinstance(t, torch.Tensor):
            failures.append(pick(f"{where}, self.{name} is {type_name(t)}; keep a (B, num_heads, n, head_dim) tensor",
                                 f"{where}，self.{name} 是 {type_name(t)}；"
                                 f"应保存一个 (B, num_heads, n, head_dim) 的张量"))
            continue
        if tuple(t.shape) != (B, H, n, D):
            failures.append(pick(f"{where}, self.{name} has shape {tuple(t.shape)}; expected {(B, H, n, D)} "
                                 f"(batch, heads, cached tokens, head_dim)",
                                 f"{where}，self.{name} 的形状为 {tuple(t.shape)}；期望 {(B, H, n, D)}"
                                 f"（batch、头、缓存的 token、head_dim）"))
            continue
        t = t.double()
        scale = float(expect.abs().max()) + 1e-30

        def close(a):
            return float((t - a).abs().max()) <= 1e-9 * scale
        if close(expect):
            continue
        if name == "k_cache" and close(_rope(expect, init["rope_theta"])):
            continue   # keys kept rotated at their current cache positions: the same cache
        failures.append(pick(f"{where}, self.{name} does not hold {what} {want}, oldest first",
                             f"{where}，self.{name} 没有按从旧到新的顺序保存缓存 token {want} 的 {what}"))
    return failures


# ---------------------------------------------------------------- cases
def _case(ctx: Ctx, name, B, H, D, S, W, schedule, dtype, scale=1.0, theta=10000.0, traits=(), rtol=None):
    E, L = H * D, sum(schedule)
    shown = schedule if len(schedule) <= 8 else schedule[:7] + ["..."]
    note = f"S={S} W={W} cache {S + W}, stream {L} in {shown}" + (", large logits" if scale > 1 else "")
    traits = tuple(traits) + (("b1",) if B == 1 else ()) + (("h1",) if H == 1 else ()) + \
        (("l1",) if L == 1 else ()) + (("long",) if L >= 64 else ())
    return Case(name=name, target=TARGET,
                init=dict(hidden_dim=E, num_heads=H, num_sinks=S, window_size=W, rope_theta=theta),
                inputs={"x": ctx.randn(B, L, E, scale=scale)}, dtype=dtype, probe="stream",
                probe_args={"schedule": list(schedule)}, note=note, traits=traits, rtol=rtol)


def cases(ctx: Ctx) -> list[Case]:
    out = [
        Case(name="mask", target="streaming_mask", check=check_mask, grad=False, probe="calls",
             probe_args={"calls": [{"args": [L, S, W]} for L, S, W in MASKS]}, note="sink + window mask"),
        _case(ctx, "one_prefill_fp64", 2, 3, 4, 1, 3, [9], torch.float64),
        _case(ctx, "prefill2_decode_fp64", 2, 1, 6, 1, 2, [2, 1, 1, 1], torch.float64),
        _case(ctx, "prefill_then_chunks_b1_fp64", 1, 2, 10, 3, 4, [9, 1, 4], torch.float64),
    ]
    # a long stream with sizes drawn from the seed
    H, D, S, W = ctx.int(1, 3), 2 * ctx.int(2, 4), ctx.int(1, 4), ctx.int(3, 9)
    L = ctx.int(64, 70)
    out.append(_case(ctx, "long_stream_fp32", 2, H, D, S, W, ctx.chunks(L, ctx.int(1, 20), 16), torch.float32))
    out += [
        _case(ctx, "no_sinks_fp64", 2, 3, 6, 0, 4, [5, 1, 3], torch.float64),
        _case(ctx, "one_token_fp64", 3, 2, 6, 4, 3, [1], torch.float64),
        # scores near 1e3 in float32: correct solutions that round in another order differ by a few
        # times the reference's own error, so this case also allows 1e-3 relative
        _case(ctx, "large_logits_fp32", 2, 2, 8, 2, 6, [4, 1, 6], torch.float32, scale=30.0,
              traits=("large_logits",), rtol=1e-3),
        _case(ctx, "more_sinks_than_window_bf16", 2, 3, 8, 4, 3, [6, 1, 7], torch.bfloat16,
              theta=500.0),
        Case(name="cache_state", target=TARGET,
             init=dict(hidden_dim=12, num_heads=2, num_sinks=2, window_size=5, rope_theta=10000.0),
             inputs={"x": ctx.randn(2, 14, 12)}, probe="stream_state", probe_args={"schedule": [6, 1, 4, 3]},
             check=check_state, grad=False, note="k_cache / v_cache / cache_index after 14 tokens"),
    ]
    if ctx.full:
        for i in range(6):
            B, H, D = ctx.int(1, 3), ctx.int(1, 4), 2 * ctx.int(1, 5)
            S, W = ctx.int(0, 5), ctx.int(1, 8)
            L = ctx.int(1, 40)
            dtype = ctx.choice([torch.float64, torch.float32, torch.bfloat16])
            theta = ctx.choice([100.0, 10000.0, 500000.0])
            out.append(_case(ctx, f"random{i}", B, H, D, S, W, ctx.chunks(L, ctx.int(1, L), 5), dtype,
                             theta=theta))
    return out
