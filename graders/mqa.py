"""Cases for `mqa`: the MultiQueryAttention module, and kv_cache_bytes checked exactly."""
import torch

from attn_drill.bank.api import Case, Ctx, Failure, type_name, traits
from attn_drill.i18n import pick

TARGET = "MultiQueryAttention"
# Scores near 1e3 in float32: two correct implementations that round in a different order can
# differ by a few times the reference's own error, so this case also allows 1e-3 relative.
LARGE_LOGIT_RTOL = 1e-3

# Real model configurations: (name, layers, hidden, query heads, KV heads).
MODELS = [
    ("Llama-2-7B (MHA)", 32, 4096, 32, 32),
    ("Llama-3-8B (GQA)", 32, 4096, 32, 8),
    ("Llama-2-70B (GQA)", 80, 8192, 64, 8),
    ("Falcon-7B (MQA)", 32, 4544, 71, 1),
]


def _expected(layers, hidden, heads, kv_heads, seq, batch, nbytes):
    """The cache written the other way round: bytes of one K (or V) row per token, times tokens."""
    head_dim = hidden // heads
    one_tensor_per_layer = batch * seq * kv_heads * head_dim * nbytes   # the K cache of one layer
    return one_tensor_per_layer * 2 * layers                            # K and V, every layer


# What each known mistake returns, so a wrong answer can be named.
_WRONG = {
    "missing_kv_factor": lambda l, h, nh, kv, s, b, nb: _expected(l, h, nh, kv, s, b, nb) // 2,
    "missing_layers": lambda l, h, nh, kv, s, b, nb: _expected(1, h, nh, kv, s, b, nb),
    "query_heads_for_kv": lambda l, h, nh, kv, s, b, nb: _expected(l, h, nh, nh, s, b, nb),
    "bytes_per_elem_ignored": lambda l, h, nh, kv, s, b, nb: _expected(l, h, nh, kv, s, b, 1),
}


def _configs(ctx: Ctx, n: int):
    out = []
    for i in range(n):
        heads = ctx.choice([6, 12, 20, 40, 56])
        kv = ctx.choice([d for d in range(2, heads) if heads % d == 0])
        head_dim = ctx.choice([48, 64, 80, 96, 128])
        out.append(dict(num_layers=ctx.int(3, 61), hidden_dim=heads * head_dim, num_heads=heads,
                        num_kv_heads=kv, seq_len=ctx.int(17, 9000), batch_size=ctx.int(3, 13),
                        bytes_per_elem=(4, 2, 1)[i % 3]))      # fp32, bf16, fp8
    return out


def _args(cfg) -> tuple:
    return (cfg["num_layers"], cfg["hidden_dim"], cfg["num_heads"], cfg["num_kv_heads"],
            cfg["seq_len"], cfg["batch_size"], cfg["bytes_per_elem"])


def _bytes_case(name, configs, note):
    return Case(name=name, target="kv_cache_bytes", probe="calls",
                probe_args={"calls": [{"args": list(_args(c))} for c in configs]},
                check=_check_bytes(configs), note=note)


def _check_bytes(configs):
    def check(sub, ref, case):
        fails, seen = [], []
        for cfg, got in zip(configs, sub):
            args = _args(cfg)
            want = _expected(*args)
            if not isinstance(got, int) or isinstance(got, bool):
                fails.append(pick(f"kv_cache_bytes{args} returned {type_name(got)} {got!r}; return an int",
                                  f"kv_cache_bytes{args} 返回了 {type_name(got)} {got!r}；应返回 int"))
                continue
            if got != want:
                seen.append([mid for mid, fn in _WRONG.items() if fn(*args) == got])
                fails.append(pick(f"kv_cache_bytes(num_layers, hidden_dim, num_heads, num_kv_heads, seq_len, "
                                  f"batch_size, bytes_per_elem) = kv_cache_bytes{args} returned {got}, "
                                  f"expected {want}",
                                  f"kv_cache_bytes(num_layers, hidden_dim, num_heads, num_kv_heads, seq_len, "
                                  f"batch_size, bytes_per_elem) = kv_cache_bytes{args} 返回了 {got}，"
                                  f"期望值为 {want}"))
        if seen and all(s for s in seen):
            common = set.intersection(*(set(s) for s in seen))
            if len(common) == 1:
                return [Failure(fails[0] + pick(f" ({len(fails)} of {len(configs)} wrong)",
                                                f"（{len(configs)} 个配置中 {len(fails)} 个错误）"),
                                mistake=common.pop())]
        return fails[:3]
    return check


def _case(ctx: Ctx, name, B, L, H, D, dtype, pad=False, mask=None, scale=1.0, rtol=None):
    E = H * D
    kwargs, notes = {}, [f"{H} heads"]
    more, words = ctx.masks(B, L, pad, mask)
    kwargs.update(more)
    notes += words
    if scale > 1:
        notes.append("large logits")
    return Case(name=name, target=TARGET, init=dict(hidden_dim=E, num_heads=H, dropout=0.0),
                inputs={"x": ctx.randn(B, L, E, scale=scale)}, kwargs=kwargs, dtype=dtype, rtol=rtol,
                note=" ".join(notes), traits=traits(B=B, L=L, H=H, pad=pad, mask=mask, large_logits=scale > 1))


def cases(ctx: Ctx) -> list[Case]:
    real = [dict(num_layers=l, hidden_dim=h, num_heads=nh, num_kv_heads=kv, seq_len=s, batch_size=b,
                 bytes_per_elem=nb)
            for (_, l, h, nh, kv) in MODELS for (s, b, nb) in [(4096, 1, 2), (8192, 16, 2), (2048, 3, 1)]]
    out = [
        _case(ctx, "basic_fp64", 2, 7, 3, 5, torch.float64),
        _case(ctx, "b1_fp64", 1, 6, 4, 3, torch.float64),
        _case(ctx, "l1_fp64", 3, 1, 4, 3, torch.float64),
        _case(ctx, "random_fp64", ctx.int(2, 4), ctx.int(2, 12), ctx.int(2, 5), ctx.int(2, 6), torch.float64,
              pad=True, mask="random3d"),
        _case(ctx, "long_fp32", ctx.int(1, 2), ctx.int(64, 97), ctx.int(2, 4), ctx.int(2, 5), torch.float32,
              pad=True, mask="causal"),
        _case(ctx, "padding_fp64", 3, 9, 5, 4, torch.float64, pad=True),
        _case(ctx, "causal_fp32", 2, 6, 6, 3, torch.float32, mask="causal"),
        _case(ctx, "mask3d_pad_fp32", 3, 5, 2, 7, torch.float32, pad=True, mask="random3d"),
        _case(ctx, "large_logits_fp32", 2, 5, 3, 9, torch.float32, scale=35.0, rtol=LARGE_LOGIT_RTOL),
        _case(ctx, "bf16", 2, 11, 4, 8, torch.bfloat16, pad=True, mask="causal"),
        _bytes_case("kv_bytes_random", _configs(ctx, 8), "random GQA configs, 1/2/4 bytes"),
        _bytes_case("kv_bytes_real_models", real, "Llama-2-7B, Llama-3-8B, Llama-2-70B, Falcon-7B"),
    ]
    if ctx.full:
        out.append(_bytes_case("kv_bytes_random_more", _configs(ctx, 40), "more random configs"))
        for i in range(6):
            B, L, H, D = ctx.int(1, 4), ctx.int(1, 23), ctx.int(1, 6), ctx.int(2, 11)
            dtype = ctx.choice([torch.float64, torch.float32, torch.bfloat16])
            out.append(_case(ctx, f"random{i}", B, L, H, D, dtype, pad=bool(ctx.int(0, 1)),
                             mask=ctx.choice([None, "causal", "random3d"])))
    return out
