"""Cases for `kv_cache`: prefill + decode (token by token and in chunks) against the full causal
forward, the cache contents, and the error when a write passes max_len.

The drivers are the kit's (decode, decode_state, decode_overflow); the checks here are generic
over the cache layout, and the `gqa_kv_cache` grader reuses them.
"""
from __future__ import annotations

import torch

from attn_drill.bank.api import Case, Ctx, Failure, type_name, traits
from attn_drill.i18n import pick

TARGET = "SelfAttentionWithCache"


def cache_check(cache_heads_attr: str, query_heads_attr: str | None = None,
                stores_query_heads_mistake: str | None = None):
    """A `check=` on the probe `decode_state`: after a chunked prefill + decode, the cache must hold the
    same K and V as the reference's, in a (B, kv_heads, max_len, head_dim) tensor."""
    def check(sub, ref, case):
        x = case.inputs["x"]
        schedule, max_len = case.probe_args["schedule"], case.probe_args["max_len"]
        B, L, _ = x.shape
        heads, D = ref[cache_heads_attr], ref["head_dim"]
        want = (B, heads, max_len, D)
        failures = []
        for name in ("k_cache", "v_cache"):
            got = sub.get(name)
            if not isinstance(got, torch.Tensor):
                failures.append(pick(f"after init_cache and forward, self.{name} is not a tensor ({type_name(got)})",
                                     f"调用 init_cache 和 forward 之后，self.{name} 不是张量（{type_name(got)}）"))
                continue
            if tuple(got.shape) != want:
                if (stores_query_heads_mistake and query_heads_attr and
                        tuple(got.shape) == (B, ref[query_heads_attr], max_len, D)):
                    failures.append(Failure(pick(
                        f"self.{name} has shape {tuple(got.shape)}: it stores one copy per query head; "
                        f"it must be {want}, one entry per KV head, broadcast at attention time",
                        f"self.{name} 的形状为 {tuple(got.shape)}：它为每个 query 头各存了一份；"
                        f"应为 {want}，每个 KV 头只存一份，计算注意力时再广播"),
                        mistake=stores_query_heads_mistake))
                else:
                    failures.append(pick(f"self.{name} has shape {tuple(got.shape)}, expected {want} "
                                         f"(batch, {cache_heads_attr}, max_len, head_dim)",
                                         f"self.{name} 的形状为 {tuple(got.shape)}，期望 {want}"
                                         f"（batch, {cache_heads_attr}, max_len, head_dim）"))
                continue
            expect = ref[name][:, :, :L].to(torch.float64)
            err = (got[:, :, :L].to(torch.float64) - expect).abs().max().item()
            if not err <= 1e-9:
                failures.append(pick(f"self.{name}[:, :, :{L}] after chunks {list(schedule)} differs from the "
                                     f"keys/values of one full pass by up to {err:.3g}: each chunk must be "
                                     f"written at positions start_pos .. start_pos + L - 1",
                                     f"按 chunk {list(schedule)} 运行后，self.{name}[:, :, :{L}] 与一次完整前向的 "
                                     f"key/value 最多相差 {err:.3g}：每个 chunk 都应写到位置 "
                                     f"start_pos .. start_pos + L - 1"))
        return failures
    return check


def cache_case(target, init, x, schedule, max_len, attrs, check, note):
    return Case(name="cache_contents", target=target, init=init, inputs={"x": x}, probe="decode_state",
                probe_args={"schedule": schedule, "max_len": max_len,
                            "attrs": ["k_cache", "v_cache", "head_dim", *attrs]},
                check=check, note=note)


def overflow_check(mistake: str):
    """A `check=` on the probe `decode_overflow`: filling the cache exactly to max_len works; one
    position more raises a ValueError whose message names max_len."""
    def check(sub, ref, case):
        max_len = case.probe_args["max_len"]
        fill, *edges = sub
        if "error" in fill:
            return [pick(f"filling the cache exactly to max_len={max_len} (a prefill of {max_len - 2} "
                         f"tokens, then 2 more at start_pos={max_len - 2}) raised "
                         f"{fill['error']}: {fill['message']}; only positions >= max_len overflow",
                         f"把缓存恰好填满到 max_len={max_len}（先 prefill {max_len - 2} 个 token，"
                         f"再在 start_pos={max_len - 2} 写入 2 个）时抛出了 "
                         f"{fill['error']}: {fill['message']}；只有位置 >= max_len 才算溢出")]
        failures = []
        # "no check" only when no write past max_len raised: one edge raising and another not is a
        # bound off by one, not a check left out
        unchecked = mistake if not any(r.get("error") == "ValueError" for r in edges) else None
        for (start, n), r in zip(((max_len, 1), (max_len - 1, 3)), edges):
            what = pick(f"writing {n} token(s) at start_pos={start} with max_len={max_len}",
                        f"在 start_pos={start} 写入 {n} 个 token（max_len={max_len}）")
            if r.get("error") == "ValueError":
                if str(max_len) not in r["message"]:
                    failures.append(Failure(pick(f"{what} raised ValueError('{r['message']}'), which does not say "
                                                 f"what max_len is",
                                                 f"{what}时抛出了 ValueError('{r['message']}')，但消息中没有说明 "
                                                 f"max_len 是多少"), mistake=mistake))
            elif "error" in r:
                failures.append(Failure(pick(f"{what} raised {r['error']}: {r['message'][:160]}; check start_pos + L "
                                             f"against max_len first and raise a ValueError that names max_len",
                                             f"{what}时抛出了 {r['error']}: {r['message'][:160]}；应先检查 "
                                             f"start_pos + L 是否超过 max_len，并抛出写明 max_len 的 ValueError"),
                                        mistake=unchecked))
            else:
                failures.append(Failure(pick(f"{what} raised no error; raise a ValueError that names max_len",
                                             f"{what}时没有抛出错误；应抛出写明 max_len 的 ValueError"),
                                        mistake=unchecked))
        return failures
    return check


def overflow_case(target, init, x, max_len, check):
    return Case(name="max_len_overflow", target=target, init=init, inputs={"x": x}, probe="decode_overflow",
                probe_args={"max_len": max_len}, check=check, note="write past max_len")


def _case(ctx, name, B, L, H, D, dtype, schedule, extra=0, scale=1.0, probe="decode"):
    E = H * D
    note = f"schedule {list(schedule)}, max_len {L + extra}" + (", large logits" if scale > 1 else "")
    return Case(name=name, target=TARGET, init=dict(hidden_dim=E, num_heads=H, dropout=0.0),
                inputs={"x": ctx.randn(B, L, E, scale=scale)}, dtype=dtype, grad=False,
                probe=probe, probe_args={"schedule": schedule, "max_len": L + extra},
                output_names=("incremental", "full_forward"), note=note,
                traits=traits(B=B, L=L, H=H, mask="causal", large_logits=scale > 1))


def _random(ctx: Ctx, name, dtype, L, prefill=None):
    sched = tuple(ctx.chunks(L, prefill or ctx.int(1, L), 4))
    return _case(ctx, name, ctx.int(1, 3), L, ctx.int(1, 4), ctx.int(2, 6), dtype, sched, extra=ctx.int(0, 5))


def cases(ctx: Ctx) -> list[Case]:
    out = [
        _case(ctx, "prefill3_decode_fp64", 2, 7, 3, 5, torch.float64, (3, 1, 1, 1, 1)),
        _case(ctx, "token_by_token_b1_fp64", 1, 5, 2, 3, torch.float64, (1, 1, 1, 1, 1), extra=4),
        _case(ctx, "prefill_chunks_fp32", 3, 11, 2, 7, torch.float32, (4, 3, 1, 3), extra=2),
        _case(ctx, "len1_fp64", 2, 1, 2, 4, torch.float64, (1,), extra=3),
        _case(ctx, "large_logits_fp32", 2, 6, 2, 9, torch.float32, (2, 1, 3), scale=60.0),
        _case(ctx, "bf16", 2, 9, 3, 8, torch.bfloat16, (5, 2, 1, 1), extra=1),
        _case(ctx, "reinit_fp64", 3, 9, 2, 4, torch.float64, (4, 1, 2, 2), extra=3, probe="decode_reinit"),
        _random(ctx, "random_fp64", torch.float64, ctx.int(3, 13)),
        _random(ctx, "long_fp32", torch.float32, ctx.int(64, 81), prefill=ctx.int(40, 60)),
        cache_case(TARGET, dict(hidden_dim=12, num_heads=3, dropout=0.0), ctx.randn(2, 7, 12), (3, 2, 1, 1), 10,
                   ["num_heads"], cache_check("num_heads"), "k_cache/v_cache vs one full pass"),
        overflow_case(TARGET, dict(hidden_dim=10, num_heads=2, dropout=0.0), ctx.randn(2, 8, 10), 6,
                      overflow_check("no_max_len_check")),
    ]
    if ctx.full:
        for i in range(6):
            B, L, H, D = ctx.int(1, 4), ctx.int(2, 19), ctx.int(1, 5), ctx.int(2, 9)
            dtype = ctx.choice([torch.float64, torch.float32, torch.bfloat16])
            sched = tuple(ctx.chunks(L, ctx.int(1, L), 4))
            out.append(_case(ctx, f"random{i}", B, L, H, D, dtype, sched, extra=ctx.int(0, 5)))
    return out
