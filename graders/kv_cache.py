"""Cases for `kv_cache`: prefill + decode (token by token and in chunks) against the full causal
forward, the cache contents, and the error when a write passes max_len.

The drivers and checks here are generic over the class name and its cache layout; the
`gqa_kv_cache` grader reuses them.
"""
from __future__ import annotations

import torch

from attn_drill.api import Case, Ctx, Failure

TARGET = "SelfAttentionWithCache"


def decode_run(schedule: tuple[int, ...], max_len: int):
    """A `run=` driver: init_cache, then call forward on consecutive chunks of x.

    schedule: chunk lengths summing to L, e.g. (4, 1, 1, 3) = prefill 4 tokens, decode 2 tokens
    one by one, then a chunk of 3. Returns (incremental, full_forward): the chunk outputs
    concatenated along the sequence, and one causal forward over all of x from a fresh cache.
    """
    def run(module, x):
        B, L, _ = x.shape
        assert sum(schedule) == L, (schedule, L)
        module.init_cache(B, max_len, x.device)
        outs, pos = [], 0
        for n in schedule:
            outs.append(module(x[:, pos:pos + n], pos))
            pos += n
        incremental = torch.cat(outs, dim=1)                  # (B, L, E)
        module.init_cache(B, max_len, x.device)
        full = module(x, 0)                                   # (B, L, E)
        return incremental, full
    run.schedule = schedule
    return run


def _build(module, target, init, seed, dtype=torch.float64):
    torch.manual_seed(seed)
    return getattr(module, target)(**init).to(dtype).eval()


def _copy_params(src, dst) -> str | None:
    try:
        dst.load_state_dict(src.state_dict(), strict=True)
    except RuntimeError as exc:
        names = ", ".join(f"{k}{tuple(v.shape)}" for k, v in src.state_dict().items())
        return f"could not load the reference's parameters ({names}) into your module: {exc}"
    return None


def cache_check(target: str, cache_heads_attr: str, query_heads_attr: str | None = None,
                stores_query_heads_mistake: str | None = None):
    """A `check=` function: after a chunked prefill + decode, the cache must hold the same K and V
    as one full pass of the reference, in a (B, kv_heads, max_len, head_dim) tensor."""
    def check(sub, ref, case):
        x = case.inputs["x"].to(torch.float64)
        schedule, max_len = case.kwargs["schedule"], case.kwargs["max_len"]
        B, L, _ = x.shape
        ref_m = _build(ref, target, case.init, case.seed)
        sub_m = _build(sub, target, case.init, case.seed)
        problem = _copy_params(ref_m, sub_m)
        if problem:
            return [problem]
        with torch.no_grad():
            ref_m.init_cache(B, max_len, x.device)
            ref_m(x, 0)                                       # one full pass
            sub_m.init_cache(B, max_len, x.device)
            pos = 0
            for n in schedule:
                sub_m(x[:, pos:pos + n], pos)
                pos += n
        heads = getattr(ref_m, cache_heads_attr)
        D = ref_m.head_dim
        want = (B, heads, max_len, D)
        failures = []
        for name in ("k_cache", "v_cache"):
            got = getattr(sub_m, name, None)
            if not isinstance(got, torch.Tensor):
                failures.append(f"after init_cache and forward, self.{name} is not a tensor ({type(got).__name__})")
                continue
            if tuple(got.shape) != want:
                if (stores_query_heads_mistake and query_heads_attr and
                        tuple(got.shape) == (B, getattr(ref_m, query_heads_attr), max_len, D)):
                    failures.append(Failure(
                        f"self.{name} has shape {tuple(got.shape)}: it stores one copy per query head; "
                        f"it must be {want}, one entry per KV head, broadcast at attention time",
                        mistake=stores_query_heads_mistake))
                else:
                    failures.append(f"self.{name} has shape {tuple(got.shape)}, expected {want} "
                                    f"(batch, {cache_heads_attr}, max_len, head_dim)")
                continue
            expect = getattr(ref_m, name)[:, :, :L]
            err = (got[:, :, :L].to(torch.float64) - expect).abs().max().item()
            if not err <= 1e-9:
                failures.append(f"self.{name}[:, :, :{L}] after chunks {list(schedule)} differs from the "
                                f"keys/values of one full pass by up to {err:.3g}: each chunk must be "
                                f"written at positions start_pos .. start_pos + L - 1")
        return failures
    return check


def overflow_check(target: str, mistake: str):
    """A `check=` function: filling the cache exactly to max_len works; one position more raises a
    ValueError whose message names max_len."""
    def check(sub, ref, case):
        x = case.inputs["x"].to(torch.float64)
        max_len = case.kwargs["max_len"]
        B = x.shape[0]
        sub_m = _build(sub, target, case.init, case.seed)
        with torch.no_grad():
            sub_m.init_cache(B, max_len, x.device)
            try:
                sub_m(x[:, :max_len - 2], 0)
                sub_m(x[:, max_len - 2:max_len], max_len - 2)
            except Exception as exc:  # noqa: BLE001 - any error here is the user's
                return [f"filling the cache exactly to max_len={max_len} (a prefill of {max_len - 2} "
                        f"tokens, then 2 more at start_pos={max_len - 2}) raised "
                        f"{type(exc).__name__}: {exc}; only positions >= max_len overflow"]
            failures = []
            for start, n in ((max_len, 1), (max_len - 1, 3)):
                sub_m.init_cache(B, max_len, x.device)
                sub_m(x[:, :start], 0)
                try:
                    sub_m(x[:, :n], start)
                except ValueError as exc:
                    if str(max_len) not in str(exc):
                        failures.append(Failure(
                            f"writing {n} token(s) at start_pos={start} with max_len={max_len} raised "
                            f"ValueError('{exc}'), which does not say what max_len is",
                            mistake=mistake))
                    continue
                except Exception as exc:  # noqa: BLE001
                    failures.append(Failure(
                        f"writing {n} token(s) at start_pos={start} with max_len={max_len} raised "
                        f"{type(exc).__name__}: {str(exc)[:160]}; check start_pos + L against max_len "
                        f"first and raise a ValueError that names max_len", mistake=mistake))
                    continue
                failures.append(Failure(
                    f"writing {n} token(s) at start_pos={start} with max_len={max_len} raised no error; "
                    f"raise a ValueError that names max_len", mistake=mistake))
            return failures
    return check


def schedule_for(ctx: Ctx, L: int, prefill: int, max_chunk: int) -> tuple[int, ...]:
    """A prefill of `prefill` tokens, then random chunks of 1..max_chunk tokens."""
    out, left = [prefill], L - prefill
    while left > 0:
        n = min(left, ctx.int(1, max_chunk))
        out.append(n)
        left -= n
    return tuple(out)


def _case(ctx, name, B, L, H, D, dtype, schedule, extra=0, scale=1.0):
    E = H * D
    note = f"schedule {list(schedule)}, max_len {L + extra}" + (", large logits" if scale > 1 else "")
    return Case(name=name, target=TARGET, init=dict(hidden_dim=E, num_heads=H, dropout=0.0),
                inputs={"x": ctx.randn(B, L, E, scale=scale)}, dtype=dtype, grad=False,
                run=decode_run(schedule, L + extra), output_names=("incremental", "full_forward"),
                note=note)


def cases(ctx: Ctx) -> list[Case]:
    out = [
        _case(ctx, "prefill3_decode_fp64", 2, 7, 3, 5, torch.float64, (3, 1, 1, 1, 1)),
        _case(ctx, "token_by_token_b1_fp64", 1, 5, 2, 3, torch.float64, (1, 1, 1, 1, 1), extra=4),
        _case(ctx, "prefill_chunks_fp32", 3, 11, 2, 7, torch.float32, (4, 3, 1, 3), extra=2),
        _case(ctx, "len1_fp64", 2, 1, 2, 4, torch.float64, (1,), extra=3),
        _case(ctx, "large_logits_fp32", 2, 6, 2, 9, torch.float32, (2, 1, 3), scale=60.0),
        _case(ctx, "bf16", 2, 9, 3, 8, torch.bfloat16, (5, 2, 1, 1), extra=1),
        Case(name="cache_contents", target=TARGET, init=dict(hidden_dim=12, num_heads=3, dropout=0.0),
             inputs={"x": ctx.randn(2, 7, 12)}, kwargs={"schedule": (3, 2, 1, 1), "max_len": 10},
             check=cache_check(TARGET, "num_heads"), note="k_cache/v_cache vs one full pass"),
        Case(name="max_len_overflow", target=TARGET, init=dict(hidden_dim=10, num_heads=2, dropout=0.0),
             inputs={"x": ctx.randn(2, 8, 10)}, kwargs={"max_len": 6},
             check=overflow_check(TARGET, "no_max_len_check"), note="write past max_len"),
    ]
    if ctx.full:
        for i in range(6):
            B, L, H, D = ctx.int(1, 4), ctx.int(2, 19), ctx.int(1, 5), ctx.int(2, 9)
            dtype = ctx.choice([torch.float64, torch.float32, torch.bfloat16])
            sched = schedule_for(ctx, L, ctx.int(1, L), 4)
            out.append(_case(ctx, f"random{i}", B, L, H, D, dtype, sched, extra=ctx.int(0, 5)))
    return out
