"""Reference checks for the attention variants: cross_attention, einsum_attention, gqa, mqa,
attention_pooling. Each reference is compared with an independent implementation
(nn.MultiheadAttention with copied weights, F.scaled_dot_product_attention, tensors built by hand)
and with the properties its statement promises."""
from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from loading import failures, load

ROOT = Path(__file__).resolve().parents[1]
IDS = ["cross_attention", "einsum_attention", "gqa", "mqa", "attention_pooling"]
FORBIDDEN = {"scaled_dot_product_attention", "MultiheadAttention", "multi_head_attention_forward",
             "flex_attention"}


REF = {pid: load(pid) for pid in IDS}
f64 = torch.float64


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _randn(g, *shape):
    return torch.randn(*shape, generator=g, dtype=f64)


def _pad(lengths, L):
    return torch.arange(L)[None, :] >= torch.tensor(lengths)[:, None]      # (B, L), True = pad


def _calls(pid: str) -> list[str]:
    tree = ast.parse((ROOT / "reference" / f"{pid}.py").read_text())
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            names.append(f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", ""))
        if isinstance(node, ast.Attribute):
            names.append(node.attr)
    return names


@pytest.mark.parametrize("pid", IDS)
def test_reference_avoids_forbidden_apis(pid):
    assert not FORBIDDEN & set(_calls(pid))


# ---------------------------------------------------------------- cross_attention

def _cross(E, enc, H, seed=0):
    torch.manual_seed(seed)
    return REF["cross_attention"].CrossAttention(E, enc, H, dropout=0.0).double().eval()


def _cross_oracle(m, dec, enc_h, kpm):
    E, enc = m.q_proj.weight.shape[0], m.k_proj.weight.shape[1]
    mha = nn.MultiheadAttention(E, m.num_heads, bias=False, kdim=enc, vdim=enc, batch_first=True).double()
    with torch.no_grad():
        mha.q_proj_weight.copy_(m.q_proj.weight)
        mha.k_proj_weight.copy_(m.k_proj.weight)
        mha.v_proj_weight.copy_(m.v_proj.weight)
        mha.out_proj.weight.copy_(m.out_proj.weight)
    return mha(dec, enc_h, enc_h, key_padding_mask=kpm, need_weights=False)[0]


@pytest.mark.parametrize("B,Lq,Lk,H,D,enc,lengths", [
    (2, 5, 9, 3, 4, 7, None),          # Lq < Lk
    (3, 11, 6, 2, 5, 13, [6, 2, 4]),   # Lq > Lk, encoder padding
    (1, 1, 7, 3, 3, 5, [4]),           # one decoder position
    (2, 4, 1, 4, 3, 6, None),          # one encoder position
])
def test_cross_attention_matches_mha(B, Lq, Lk, H, D, enc, lengths):
    g = _gen(1)
    m = _cross(H * D, enc, H)
    dec, enc_h = _randn(g, B, Lq, H * D), _randn(g, B, Lk, enc)
    kpm = None if lengths is None else _pad(lengths, Lk)
    torch.testing.assert_close(m(dec, enc_h, kpm), _cross_oracle(m, dec, enc_h, kpm), rtol=1e-10, atol=1e-12)


def test_cross_attention_has_no_causal_mask():
    g = _gen(2)
    m = _cross(12, 7, 3)
    dec, enc_h = _randn(g, 2, 5, 12), _randn(g, 2, 9, 7)
    base = m(dec, enc_h)
    enc2 = enc_h.clone()
    enc2[:, -1] += 1.0                             # the last source token
    moved = (m(dec, enc2) - base).abs().amax(dim=(0, 2))
    assert (moved > 1e-6).all(), "every decoder position, the first included, must see the last encoder position"


def test_cross_attention_queries_are_independent_and_padding_is_ignored():
    g = _gen(3)
    m = _cross(10, 6, 2)
    dec, enc_h = _randn(g, 3, 4, 10), _randn(g, 3, 8, 6)
    kpm = _pad([8, 3, 5], 8)
    base = m(dec, enc_h, kpm)
    dec2 = dec.clone()
    dec2[:, 2] += 3.0
    out2 = m(dec2, enc_h, kpm)
    keep = [0, 1, 3]
    torch.testing.assert_close(out2[:, keep], base[:, keep])   # no mixing between decoder positions
    enc2 = torch.where(kpm[..., None], _randn(g, 3, 8, 6) * 50, enc_h)
    torch.testing.assert_close(m(dec, enc2, kpm), base)        # padded encoder positions do nothing


# ---------------------------------------------------------------- einsum_attention

def _sdpa_bool(q, k, v, scale=None, keep=None):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=keep, scale=scale)


@pytest.mark.parametrize("B,H,Lq,Lk,D,Dv,scale,mask", [
    (2, 3, 5, 7, 6, 6, None, None),
    (2, 2, 6, 4, 5, 9, None, None),            # Dv != D
    (1, 3, 4, 9, 7, 7, 0.21, None),            # explicit scale is a multiplier
    (1, 2, 1, 6, 5, 3, 1.7, None),
    (2, 2, 5, 8, 4, 4, None, "causal"),
    (3, 2, 6, 5, 7, 5, 0.7, "per_batch"),
    (2, 3, 4, 7, 6, 10, None, "full"),
])
def test_einsum_matches_sdpa_with_grads(B, H, Lq, Lk, D, Dv, scale, mask):
    g = _gen(4)
    q, k, v = _randn(g, B, H, Lq, D), _randn(g, B, H, Lk, D), _randn(g, B, H, Lk, Dv)
    keep = None
    if mask == "causal":
        keep = torch.ones(Lq, Lk, dtype=torch.bool).tril()
    elif mask in ("per_batch", "full"):
        keep = torch.rand(B, 1 if mask == "per_batch" else H, Lq, Lk, generator=g) > 0.45
        keep[..., 0] = True
    ins = [t.clone().requires_grad_(True) for t in (q, k, v)]
    ora = [t.clone().requires_grad_(True) for t in (q, k, v)]
    out = REF["einsum_attention"].scaled_dot_product_einsum(*ins, scale=scale, mask=keep)
    want = _sdpa_bool(*ora, scale=scale, keep=keep)
    torch.testing.assert_close(out, want, rtol=1e-10, atol=1e-12)
    up = _randn(g, *want.shape)
    got_g = torch.autograd.grad(out, ins, up)
    want_g = torch.autograd.grad(want, ora, up)
    for a, b in zip(got_g, want_g):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_einsum_scale_convention():
    g = _gen(5)
    q, k, v = _randn(g, 1, 2, 3, 16), _randn(g, 1, 2, 5, 16), _randn(g, 1, 2, 5, 4)
    fn = REF["einsum_attention"].scaled_dot_product_einsum
    torch.testing.assert_close(fn(q, k, v), fn(q, k, v, scale=0.25))         # 1/sqrt(16)
    assert not torch.allclose(fn(q, k, v, scale=4.0), fn(q, k, v))           # not a divisor
    # scale=0 gives uniform weights: the mean of the values
    torch.testing.assert_close(fn(q, k, v, scale=0.0), v.mean(dim=2, keepdim=True).expand(1, 2, 3, 4))


def test_einsum_is_written_with_two_einsums():
    calls = _calls("einsum_attention")
    assert calls.count("einsum") >= 2
    assert "matmul" not in calls and "bmm" not in calls


# ---------------------------------------------------------------- gqa

def _gqa(E, Hq, Hkv, seed=0):
    torch.manual_seed(seed)
    return REF["gqa"].GroupedQueryAttention(E, Hq, Hkv, dropout=0.0).double().eval()


def _gqa_oracle(m, x, kpm=None, keep=None):
    """SDPA with enable_gqa=True on hand-made projections; masks merged into one bool keep-mask."""
    B, L, _ = x.shape
    Hq, Hkv, D = m.num_query_heads, m.num_kv_heads, m.head_dim
    q = (x @ m.q_proj.weight.T).view(B, L, Hq, D).permute(0, 2, 1, 3)
    k = (x @ m.k_proj.weight.T).view(B, L, Hkv, D).permute(0, 2, 1, 3)
    v = (x @ m.v_proj.weight.T).view(B, L, Hkv, D).permute(0, 2, 1, 3)
    allow = torch.ones(B, 1, L, L, dtype=torch.bool)
    if kpm is not None:
        allow = allow & ~kpm[:, None, None, :]
    if keep is not None:
        allow = allow & (keep if keep.dim() == 2 else keep[:, None])
    o = F.scaled_dot_product_attention(q, k, v, attn_mask=allow, enable_gqa=True)
    return o.permute(0, 2, 1, 3).reshape(B, L, Hq * D) @ m.out_proj.weight.T


@pytest.mark.parametrize("Hq,Hkv", [(8, 2), (6, 3), (6, 2), (6, 1), (4, 4)])
@pytest.mark.parametrize("masks", ["none", "pad_causal", "pad_3d"])
def test_gqa_matches_sdpa_enable_gqa(Hq, Hkv, masks):
    g = _gen(6)
    B, L, D = 3, 7, 3
    m = _gqa(Hq * D, Hq, Hkv)
    x = _randn(g, B, L, Hq * D)
    kpm = keep = None
    if masks != "none":
        kpm = _pad([7, 3, 5], L)
        if masks == "pad_causal":
            keep = torch.ones(L, L, dtype=torch.bool).tril()
        else:
            keep = torch.rand(B, L, L, generator=g) > 0.4
            keep[..., 0] = True
    torch.testing.assert_close(m(x, kpm, keep), _gqa_oracle(m, x, kpm, keep), rtol=1e-10, atol=1e-12)


def test_gqa_query_head_h_reads_kv_head_h_div_nrep():
    Hq, Hkv, D, L = 6, 3, 4, 5
    n_rep = Hq // Hkv
    m = _gqa(Hq * D, Hq, Hkv, seed=1)
    with torch.no_grad():
        m.out_proj.weight.copy_(torch.eye(Hq * D, dtype=f64))   # output = heads side by side
    x = _randn(_gen(7), 2, L, Hq * D)
    base = m(x)
    for j in range(Hkv):
        with torch.no_grad():
            m.v_proj.weight[j * D:(j + 1) * D] += 1.0            # change KV head j only
        diff = (m(x) - base).abs().view(2, L, Hq, D).amax(dim=(0, 1, 3))
        with torch.no_grad():
            m.v_proj.weight[j * D:(j + 1) * D] -= 1.0
        changed = [h for h in range(Hq) if diff[h] > 1e-9]
        assert changed == [h for h in range(Hq) if h // n_rep == j]


def test_gqa_with_all_heads_is_mha():
    g = _gen(8)
    H, D, L = 4, 3, 6
    m = _gqa(H * D, H, H)
    x = _randn(g, 2, L, H * D)
    kpm = _pad([6, 4], L)
    keep = torch.ones(L, L, dtype=torch.bool).tril()
    mha = nn.MultiheadAttention(H * D, H, bias=False, batch_first=True).double()
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([m.q_proj.weight, m.k_proj.weight, m.v_proj.weight]))
        mha.out_proj.weight.copy_(m.out_proj.weight)
    want = mha(x, x, x, key_padding_mask=kpm, attn_mask=~keep, need_weights=False)[0]
    torch.testing.assert_close(m(x, kpm, keep), want, rtol=1e-10, atol=1e-12)


def test_gqa_with_one_kv_head_is_mqa():
    g = _gen(9)
    H, D, L = 5, 4, 7
    m = _gqa(H * D, H, 1)
    torch.manual_seed(3)
    mq = REF["mqa"].MultiQueryAttention(H * D, H, dropout=0.0).double().eval()
    mq.load_state_dict(m.state_dict())                      # same names and shapes
    x = _randn(g, 2, L, H * D)
    kpm = _pad([7, 2], L)
    torch.testing.assert_close(m(x, kpm), mq(x, kpm), rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------- mqa

@pytest.mark.parametrize("H,D,masks", [(3, 5, "none"), (6, 3, "pad_causal"), (2, 7, "pad_3d"), (1, 4, "none")])
def test_mqa_matches_sdpa_single_kv_head(H, D, masks):
    g = _gen(10)
    B, L = 3, 6
    torch.manual_seed(4)
    m = REF["mqa"].MultiQueryAttention(H * D, H, dropout=0.0).double().eval()
    x = _randn(g, B, L, H * D)
    kpm = keep = None
    if masks != "none":
        kpm = _pad([6, 1, 4], L)
        keep = (torch.ones(L, L, dtype=torch.bool).tril() if masks == "pad_causal"
                else torch.rand(B, L, L, generator=g) > 0.5)
        if keep.dim() == 3:
            keep[..., 0] = True
    q = (x @ m.q_proj.weight.T).view(B, L, H, D).transpose(1, 2)
    k = (x @ m.k_proj.weight.T)[:, None]                     # (B, 1, L, D)
    v = (x @ m.v_proj.weight.T)[:, None]
    allow = torch.ones(B, 1, L, L, dtype=torch.bool)
    if kpm is not None:
        allow = allow & ~kpm[:, None, None, :] & (keep if keep.dim() == 2 else keep[:, None])
    o = F.scaled_dot_product_attention(q, k, v, attn_mask=allow, enable_gqa=True)
    want = o.transpose(1, 2).reshape(B, L, H * D) @ m.out_proj.weight.T
    torch.testing.assert_close(m(x, kpm, keep), want, rtol=1e-10, atol=1e-12)
    assert sum(p.numel() for p in m.k_proj.parameters()) == H * D * D   # a single key head


GiB = 1024 ** 3


def test_kv_cache_bytes_real_models():
    f = REF["mqa"].kv_cache_bytes
    # Llama-2-7B: 32 layers, 4096 hidden, 32 heads (MHA); 4096 tokens, batch 1, fp16: 2 GiB
    assert f(32, 4096, 32, 32, 4096, 1, 2) == 2 * GiB
    # Llama-3-8B: 8 KV heads: a quarter; at 8192 tokens, batch 16: 16 GiB
    assert f(32, 4096, 32, 8, 4096, 1, 2) == GiB // 2
    assert f(32, 4096, 32, 8, 8192, 16, 2) == 16 * GiB
    # Llama-2-70B: 80 layers, 8192 hidden, 64 heads, 8 KV heads: 320 KiB per token in fp16
    assert f(80, 8192, 64, 8, 1, 1, 2) == 320 * 1024
    # MQA keeps 1/num_heads of the MHA cache
    assert f(32, 4096, 32, 1, 4096, 1, 2) * 32 == f(32, 4096, 32, 32, 4096, 1, 2)
    assert isinstance(f(32, 4096, 32, 8, 4096, 1), int)


def test_kv_cache_bytes_counts_real_tensors():
    """Build the cache tensors of small models and add up their bytes."""
    f = REF["mqa"].kv_cache_bytes
    g = _gen(11)
    for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.float64):
        layers, heads = int(torch.randint(1, 5, (), generator=g)), 6
        kv = [1, 2, 3, 6][int(torch.randint(0, 4, (), generator=g))]
        head_dim, seq, batch = (int(torch.randint(2, 9, (), generator=g)),
                                int(torch.randint(1, 30, (), generator=g)), 3)
        cache = [(torch.empty(batch, kv, seq, head_dim, dtype=dtype),
                  torch.empty(batch, kv, seq, head_dim, dtype=dtype)) for _ in range(layers)]
        total = sum(t.numel() * t.element_size() for pair in cache for t in pair)
        assert f(layers, heads * head_dim, heads, kv, seq, batch, torch.empty(0, dtype=dtype).element_size()) == total


def test_mqa_grader_names_kv_mistakes():
    gmod = load("mqa", "graders")
    from attn_drill.bank.api import Ctx
    checks = [c for c in gmod.cases(Ctx(5)) if c.check is not None]
    ref = REF["mqa"]
    for c in checks:
        assert failures("mqa", c, ref) == []

    class Wrong:
        def __init__(self, fn):
            self.kv_cache_bytes = fn

    wrong = {
        "missing_kv_factor": lambda l, h, nh, kv, s, b, nb=2: l * kv * (h // nh) * s * b * nb,
        "missing_layers": lambda l, h, nh, kv, s, b, nb=2: 2 * kv * (h // nh) * s * b * nb,
        "query_heads_for_kv": lambda l, h, nh, kv, s, b, nb=2: 2 * l * h * s * b * nb,
        "bytes_per_elem_ignored": lambda l, h, nh, kv, s, b, nb=2: 2 * l * kv * (h // nh) * s * b,
    }
    for mid, fn in wrong.items():
        fails = failures("mqa", checks[0], Wrong(fn))
        assert fails and getattr(fails[0], "mistake", None) == mid, (mid, fails)
    float_fails = failures("mqa", checks[0], Wrong(lambda *a: float(ref.kv_cache_bytes(*a))))
    assert float_fails                                         # an int is required


# ---------------------------------------------------------------- attention_pooling

def _pool(E, H, seed=0):
    torch.manual_seed(seed)
    return REF["attention_pooling"].AttentionPooling(E, H).double().eval()


@pytest.mark.parametrize("B,L,H,D,lengths", [
    (3, 7, 1, 10, None), (2, 9, 3, 5, None), (4, 8, 1, 6, [8, 2, 5, 1]), (3, 11, 4, 3, [11, 6, 9]), (1, 1, 2, 5, None),
])
def test_attention_pooling_matches_mha(B, L, H, D, lengths):
    E = H * D
    m = _pool(E, H)
    x = _randn(_gen(12), B, L, E)
    mask = None if lengths is None else _pad(lengths, L)
    mha = nn.MultiheadAttention(E, H, bias=True, batch_first=True).double()
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([torch.eye(E, dtype=f64), m.key_proj.weight, m.value_proj.weight]))
        mha.in_proj_bias.zero_()
        mha.out_proj.weight.copy_(m.out_proj.weight)
        mha.out_proj.bias.copy_(m.out_proj.bias)
    query = m.query.expand(B, 1, E)
    want = mha(query, x, x, key_padding_mask=mask, need_weights=False)[0].squeeze(1)
    torch.testing.assert_close(m(x, mask), want, rtol=1e-10, atol=1e-12)


def test_attention_pooling_one_head_is_the_seed_formula_and_heads_matter():
    E, B, L = 12, 2, 6
    x = _randn(_gen(13), B, L, E)
    one = _pool(E, 1)
    k, v = x @ one.key_proj.weight.T, x @ one.value_proj.weight.T
    w = torch.softmax((k @ one.query.view(E)) / math.sqrt(E), dim=-1)          # (B, L)
    want = (w[..., None] * v).sum(dim=1) @ one.out_proj.weight.T + one.out_proj.bias
    torch.testing.assert_close(one(x), want)
    three = _pool(E, 3)
    three.load_state_dict(one.state_dict())
    assert not torch.allclose(three(x), one(x)), "num_heads=3 must split the heads"


def test_attention_pooling_padding_gets_zero_weight():
    m = _pool(8, 2)
    g = _gen(14)
    x = _randn(g, 3, 9, 8)
    mask = _pad([9, 4, 1], 9)
    base = m(x, mask)
    x2 = torch.where(mask[..., None], _randn(g, 3, 9, 8) * 100, x)
    torch.testing.assert_close(m(x2, mask), base)
    # a row with one real position pools exactly that position's value
    v0 = x[2, 0] @ m.value_proj.weight.T
    torch.testing.assert_close(base[2], v0 @ m.out_proj.weight.T + m.out_proj.bias)
