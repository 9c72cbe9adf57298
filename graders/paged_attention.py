"""Cases for `paged_attention`: decode attention over a paged pool with permuted block ids, block
tables whose unused entries point at other sequences' blocks or at poisoned ones, contexts at and
just past block boundaries, block size 1, MHA / GQA / MQA, long contexts; every pool slot that holds
no token of its sequence is poisoned (keys +-inf, values +inf; NaN in one case), so reading past a
sequence's length shows; and write_kv through a slot mapping with padding slots, followed by
attention over what was written."""
from __future__ import annotations

import torch

from attn_drill.bank.api import Case, Ctx

INF = float("inf")


def _blocks_needed(n: int, bs: int) -> int:
    return (n + bs - 1) // bs


def _pool(ctx: Ctx, lens, bs, Hkv, D, spare_blocks=2, spare_cols=1, spare_last=False):
    """A pool holding S sequences of lengths `lens`, in permuted blocks.

    Returns key_cache, value_cache (num_blocks, bs, Hkv, D) float64, block_tables (S, max_blocks)
    int32, context_lens (S,) int32 and `used` (num_blocks, bs) bool: the slots that hold a token.
    Unused table entries point at random blocks; those of the first sequence, when its length is a
    multiple of bs, at fully used blocks of the others (so that reading them gives finite, wrong
    numbers). With spare_last, the pool's last block is one of the spare ones."""
    S = len(lens)
    need = [_blocks_needed(n, bs) for n in lens]
    num_blocks = sum(need) + spare_blocks
    ids = torch.randperm(num_blocks - 1 if spare_last else num_blocks, generator=ctx.gen)
    max_blocks = max(need) + spare_cols
    tables = torch.zeros(S, max_blocks, dtype=torch.int32)
    used = torch.zeros(num_blocks, bs, dtype=torch.bool)
    start = 0
    for i, n in enumerate(lens):
        own = ids[start:start + need[i]]
        start += need[i]
        tables[i, :need[i]] = own.int()
        for j in range(n):
            used[own[j // bs], j % bs] = True
    full = [b for b in range(num_blocks) if bool(used[b].all())]
    for i, n in enumerate(lens):
        k = max_blocks - need[i]
        if i == 0 and n % bs == 0 and full:
            mine = set(tables[0, :need[0]].tolist())
            others = [b for b in full if b not in mine] or full
            tables[i, need[i]:] = torch.tensor([others[ctx.int(0, len(others) - 1)] for _ in range(k)],
                                               dtype=torch.int32)
        else:
            tables[i, need[i]:] = ctx.randint(0, num_blocks, (k,)).int()
    key = ctx.randn(num_blocks, bs, Hkv, D)
    value = ctx.randn(num_blocks, bs, Hkv, D)
    return key, value, tables, torch.tensor(lens, dtype=torch.int32), used


def _poison(key, value, used):
    """Keys of empty slots +inf/-inf by channel (any score against them is NaN), values +inf."""
    D = key.shape[-1]
    signs = torch.where(torch.arange(D) % 2 == 0, INF, -INF).to(torch.float64)
    key, value = key.clone(), value.clone()
    key[~used] = signs
    value[~used] = INF
    return key, value


def _case(ctx: Ctx, name, lens, bs, Hq, Hkv, D, dtype, scale=None, traits=(), spare_blocks=2, spare_cols=1,
          nan=False, note=""):
    key, value, tables, context_lens, used = _pool(ctx, lens, bs, Hkv, D, spare_blocks, spare_cols)
    query = ctx.randn(len(lens), Hq, D)
    words = {"b1": len(lens) == 1, "h1": Hkv == 1 and Hq == 1, "long": max(lens) >= 64}
    kind = "MHA" if Hq == Hkv else ("MQA" if Hkv == 1 else "GQA")
    base = dict(name=name, target="paged_attention", dtype=dtype, grad=False,
                traits=tuple(traits) + tuple(w for w, on in words.items() if on and w not in traits),
                note=f"{kind} {Hq}/{Hkv}, block {bs}, contexts {list(lens)}" + (f", scale {scale}" if scale else "")
                + (f", {note}" if note else ""))
    if nan:
        # NaN poison needs the probe: a NaN input would not compare equal to itself in the engine's
        # check that inputs are left untouched
        return Case(inputs={"query": query, "key_cache": key, "value_cache": value, "block_tables": tables,
                            "context_lens": context_lens}, kwargs={"scale": scale},
                    probe="nan_poison", probe_args={"empty": ~used}, **base)
    key, value = _poison(key, value, used)
    return Case(inputs={"query": query, "key_cache": key, "value_cache": value, "block_tables": tables,
                        "context_lens": context_lens}, kwargs={"scale": scale}, **base)


def _write_case(ctx: Ctx, name, dtype):
    """write_kv of 6 rows (2 of them padding, slot -1) into a pool of 8 blocks of 8, a chunk of two
    tokens crossing a block boundary among them; then paged_attention over the pool. The pool's last
    slot, where a padding row would land as index -1, belongs to no sequence."""
    bs, Hq, Hkv, D = 8, 4, 2, 6
    lens = [6, 9, 1]                                     # after the write
    key, value, tables, context_lens, used = _pool(ctx, lens, bs, Hkv, D, spare_blocks=4, spare_last=True)
    # new tokens: seq 0 position 5, pad, seq 1 positions 7 and 8, pad, seq 2 position 0
    rows = [(0, 5), None, (1, 7), (1, 8), None, (2, 0)]
    slots = torch.tensor([-1 if r is None else int(tables[r[0], r[1] // bs]) * bs + r[1] % bs for r in rows])
    T = len(rows)
    return Case(name=name, target="write_kv",
                inputs={"key": ctx.randn(T, Hkv, D), "value": ctx.randn(T, Hkv, D), "key_cache": key,
                        "value_cache": value, "slot_mapping": slots, "query": ctx.randn(len(lens), Hq, D),
                        "block_tables": tables, "context_lens": context_lens},
                probe="write_then_attend", dtype=dtype, grad=False,
                output_names=("key_cache", "value_cache", "out"),
                note="slot mapping with -1 padding, a chunk across a block boundary, then attention")


def cases(ctx: Ctx) -> list[Case]:
    out = [
        _case(ctx, "gqa_fp64", [8, 1, 13], 4, 6, 2, 8, torch.float64, spare_cols=2),
        _case(ctx, "block_boundaries_fp64", [5, 6, 10, 11, 4], 5, 4, 2, 6, torch.float64, scale=0.3),
        _case(ctx, "mha_fp32", [7, 12, 3], 4, 3, 3, 5, torch.float32),
        _case(ctx, "mqa_b1_fp64", [9], 4, 4, 1, 7, torch.float64),
        _case(ctx, "block_size1_fp32", [3, 7, 1], 1, 4, 2, 4, torch.float32),
        _case(ctx, "long_context_fp32", [100, 67, 129], 16, 8, 2, 16, torch.float32),
        _case(ctx, "nan_poison_fp64", [6, 11], 4, 4, 2, 5, torch.float64, nan=True, note="NaN in empty slots"),
    ]
    S, Hkv, group, bs = ctx.int(1, 5), ctx.int(1, 3), ctx.int(1, 3), ctx.int(1, 9)
    lens = [ctx.int(1, 40) for _ in range(S)]
    out += [
        _case(ctx, "sizes_from_seed_fp64", lens, bs, Hkv * group, Hkv, ctx.int(2, 12), torch.float64),
        _case(ctx, "bf16", [17, 5, 24], 8, 4, 2, 16, torch.bfloat16),
        _write_case(ctx, "write_then_attend_fp64", torch.float64),
    ]
    if ctx.full:
        for i in range(6):
            S, Hkv, group, bs = ctx.int(1, 6), ctx.int(1, 4), ctx.int(1, 4), ctx.choice([1, 2, 3, 8, 16])
            lens = [ctx.int(1, 70) for _ in range(S)]
            dtype = ctx.choice([torch.float64, torch.float32, torch.bfloat16])
            out.append(_case(ctx, f"random{i}", lens, bs, Hkv * group, Hkv, ctx.int(1, 20), dtype,
                             scale=ctx.choice([None, 0.5]), spare_blocks=ctx.int(0, 4), spare_cols=ctx.int(0, 3),
                             nan=bool(i % 3 == 2)))
        out.append(_write_case(ctx, "write_then_attend_fp32", torch.float32))
        out.append(_write_case(ctx, "write_then_attend_bf16", torch.bfloat16))
    return out
