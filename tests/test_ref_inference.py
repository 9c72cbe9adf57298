"""Cross-checks of the inference-group references against independent implementations:
SDPA (causal, GQA with enable_gqa=True), nn.MultiheadAttention, a float64 attention written here,
matplotlib's own image data, and the grader's own wrong implementations."""
from __future__ import annotations

import math
import warnings

import pytest
import torch
import torch.nn.functional as F

from loading import load

def _load(kind: str, pid: str):
    return load(pid, kind)


@pytest.fixture(scope="module")
def kv():
    return _load("reference", "kv_cache")


@pytest.fixture(scope="module")
def gqa():
    return _load("reference", "gqa_kv_cache")


def _decode(module, x, schedule, max_len):
    module.init_cache(x.shape[0], max_len, x.device)
    outs, pos = [], 0
    for n in schedule:
        outs.append(module(x[:, pos:pos + n], pos))
        pos += n
    return torch.cat(outs, dim=1)


# ---------------------------------------------------------------- kv_cache
@pytest.mark.parametrize("schedule,extra", [((7,), 0), ((3, 1, 1, 1, 1), 2), ((1,) * 7, 0), ((2, 4, 1), 5)])
def test_kv_cache_matches_causal_sdpa(kv, schedule, extra):
    torch.manual_seed(1)
    B, L, H, D = 2, 7, 3, 5
    E = H * D
    m = kv.SelfAttentionWithCache(E, H, dropout=0.0).double().eval()
    x = torch.randn(B, L, E, dtype=torch.float64)
    with torch.no_grad():
        got = _decode(m, x, schedule, L + extra)
        q, k, v = (t.view(B, L, H, D).transpose(1, 2) for t in (x @ m.qkv_proj.weight.T).split(E, dim=-1))
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        want = o.transpose(1, 2).reshape(B, L, E) @ m.out_proj.weight.T
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)
        # the cache holds the keys and values of all L positions, zeros after them
        torch.testing.assert_close(m.k_cache[:, :, :L], k)
        torch.testing.assert_close(m.v_cache[:, :, :L], v)
        assert m.k_cache.shape == (B, H, L + extra, D)
        assert not m.k_cache[:, :, L:].any()


def test_kv_cache_chunk_needs_bottom_right_mask(kv):
    """A chunk after a prefix must see the prefix and its own earlier tokens only."""
    torch.manual_seed(2)
    m = kv.SelfAttentionWithCache(8, 2, dropout=0.0).double().eval()
    x = torch.randn(1, 6, 8, dtype=torch.float64)
    with torch.no_grad():
        full = _decode(m, x, (6,), 6)
        chunked = _decode(m, x, (2, 4), 6)
        # changing a later token must not change earlier outputs (causality)
        x2 = x.clone()
        x2[:, 4] += 1.0
        later = _decode(m, x2, (2, 4), 6)
    torch.testing.assert_close(full, chunked)
    torch.testing.assert_close(later[:, :4], chunked[:, :4])
    assert not torch.allclose(later[:, 4:], chunked[:, 4:])


def test_kv_cache_overflow_message(kv):
    m = kv.SelfAttentionWithCache(6, 2, dropout=0.0).eval()
    x = torch.randn(1, 5, 6)
    m.init_cache(1, 4, "cpu")
    with torch.no_grad():
        m(x[:, :4], 0)                       # exactly full: fine
        with pytest.raises(ValueError, match="max_len=4"):
            m(x[:, :1], 4)


# ---------------------------------------------------------------- gqa_kv_cache
@pytest.mark.parametrize("Hq,Hkv", [(6, 2), (6, 3), (4, 1), (3, 3)])
def test_gqa_cache_matches_sdpa_enable_gqa(gqa, Hq, Hkv):
    torch.manual_seed(3)
    B, L, D = 2, 7, 4
    E = Hq * D
    m = gqa.GQAWithCache(E, Hq, Hkv, dropout=0.0).double().eval()
    x = torch.randn(B, L, E, dtype=torch.float64)
    with torch.no_grad():
        got = _decode(m, x, (3, 1, 2, 1), L + 1)
        q = (x @ m.q_proj.weight.T).view(B, L, Hq, D).transpose(1, 2)
        k = (x @ m.k_proj.weight.T).view(B, L, Hkv, D).transpose(1, 2)
        v = (x @ m.v_proj.weight.T).view(B, L, Hkv, D).transpose(1, 2)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        want = o.transpose(1, 2).reshape(B, L, E) @ m.out_proj.weight.T
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)
    assert m.k_cache.shape == (B, Hkv, L + 1, D) and m.v_cache.shape == (B, Hkv, L + 1, D)
    torch.testing.assert_close(m.k_cache[:, :, :L], k)


def test_gqa_repeat_order_is_wrong(gqa):
    """The `.repeat` mutant is a real difference, so the grader's case can catch it."""
    torch.manual_seed(4)
    kv_heads = torch.randn(1, 2, 3, 4)
    good = kv_heads.repeat_interleave(3, dim=1)
    assert torch.equal(good[:, 4], kv_heads[:, 4 // 3])
    assert not torch.equal(kv_heads.repeat(1, 3, 1, 1), good)


# ---------------------------------------------------------------- mixed_precision
@pytest.fixture(scope="module")
def mp():
    return _load("reference", "mixed_precision")


def _manual_attention(x, wqkv, wo, H, pad=None, keep=None):
    B, L, E = x.shape
    D = E // H
    q, k, v = (t.view(B, L, H, D).transpose(1, 2) for t in (x @ wqkv.T).split(E, dim=-1))
    s = q @ k.transpose(-2, -1) / math.sqrt(D)
    if pad is not None:
        s = s.masked_fill(pad[:, None, None, :], float("-inf"))
    if keep is not None:
        s = s.masked_fill(~keep, float("-inf"))
    return (s.softmax(-1) @ v).transpose(1, 2).reshape(B, L, E) @ wo.T


def test_mixed_precision_fp64_is_exact_and_bf16_close(mp):
    torch.manual_seed(5)
    B, L, H, D = 2, 6, 3, 8
    E = H * D
    m = mp.MixedPrecisionAttention(E, H, dropout=0.0).eval()
    x = torch.randn(B, L, E)
    pad = torch.arange(L)[None, :] >= torch.tensor([L, 3])[:, None]
    keep = torch.ones(L, L, dtype=torch.bool).tril()
    want = _manual_attention(x.double(), m.qkv_proj.weight.double(), m.out_proj.weight.double(), H, pad, keep)
    with torch.no_grad():
        got64 = m.double()(x.double(), key_padding_mask=pad, attn_mask=keep)
        m.float()
        got = m(x, key_padding_mask=pad, attn_mask=keep)
    torch.testing.assert_close(got64, want, rtol=1e-10, atol=1e-12)
    assert got.dtype == torch.float32
    err = (got.double() - want).abs().max().item()
    assert 1e-6 < err < 0.05                  # bf16 projections: low-precision error, but only that


def test_mixed_precision_core_ops_in_fp32_and_projections_in_bf16(mp):
    from torch.utils._python_dispatch import TorchDispatchMode

    class Rec(TorchDispatchMode):
        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            return False  # never compiled; avoids importing torch._dynamo

        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append((str(func), [a.dtype for a in args if isinstance(a, torch.Tensor)]))
            return func(*args, **(kwargs or {}))

    m = mp.MixedPrecisionAttention(12, 3, dropout=0.0).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # no deprecation warnings
        with torch.no_grad(), Rec() as rec:
            m(torch.randn(2, 5, 12))
    soft = [d for n, d in rec.ops if "softmax" in n]
    bmm = [d for n, d in rec.ops if n.startswith("aten.bmm")]
    mm = [d for n, d in rec.ops if n.startswith("aten.mm")]
    assert soft and all(d[0] == torch.float32 for d in soft)
    assert bmm and all(d[0] == torch.float32 for d in bmm)
    assert mm and all(d[0] == torch.bfloat16 for d in mm)


def test_mixed_precision_fp16_overflow_only_without_upcast(mp):
    """Large logits overflow a float16 Q Kᵀ but not the reference's float32 core."""
    torch.manual_seed(6)
    m = mp.MixedPrecisionAttention(24, 3, dropout=0.0, amp_dtype=torch.float16).half().eval()
    x = (torch.randn(2, 7, 24) * 200).half()
    with torch.no_grad():
        out = m(x)
        q, k, _ = m.qkv_proj(x).split(24, dim=-1)
        naive = q.view(2, 7, 3, 8).transpose(1, 2) @ k.view(2, 7, 3, 8).transpose(1, 2).transpose(-2, -1)
    assert torch.isfinite(out).all()
    assert not torch.isfinite(naive).all()      # the case really exercises the overflow


# ---------------------------------------------------------------- attention_heatmap
def test_heatmap_figure_contents(tmp_path):
    import matplotlib
    matplotlib.use("Agg", force=True)
    hm = _load("reference", "attention_heatmap")
    torch.manual_seed(7)
    w = torch.softmax(torch.randn(3, 5), -1)
    toks = ["a", "b", "c", "d", "e"]
    path = tmp_path / "h.png"
    fig = hm.plot_attention_weights(w, 2, 4, tokens=toks, save_path=str(path))
    ax = [a for a in fig.axes if a.images][0]
    assert (ax.images[0].get_array() == w.numpy()).all()
    assert "Layer 2" in ax.get_title() and "Head 4" in ax.get_title()
    assert [t.get_text() for t in ax.get_xticklabels()] == toks
    assert [t.get_text() for t in ax.get_yticklabels()] == toks[2:]
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    grid = hm.plot_attention_heads(torch.softmax(torch.randn(5, 4, 4), -1), 1)
    assert len([a for a in grid.axes if a.images]) == 5


# ---------------------------------------------------------------- mha_unit_test
def test_unit_test_reference_passes_correct_and_catches_every_bug():
    ref = _load("reference", "mha_unit_test")
    grader = _load("probes", "mha_unit_test")
    mhsa = _load("reference", "mhsa")
    ref.check_against_official(mhsa.MultiHeadSelfAttention, torch.nn.MultiheadAttention)
    ref.check_against_official(grader.make_mhsa(None), torch.nn.MultiheadAttention)
    for bug in grader.NON_MASK_BUGS + grader.MASK_BUGS:
        with pytest.raises(AssertionError):
            ref.check_against_official(grader.make_mhsa(bug), torch.nn.MultiheadAttention)


def test_grader_correct_mhsa_matches_official_module():
    """The grader's 'correct' implementation agrees with nn.MultiheadAttention (independent oracle)."""
    grader = _load("probes", "mha_unit_test")
    torch.manual_seed(8)
    B, L, E, H = 2, 5, 12, 3
    mine = grader.make_mhsa(None)(E, H, dropout=0.0).double().eval()
    off = torch.nn.MultiheadAttention(E, H, bias=False, batch_first=True).double().eval()
    with torch.no_grad():
        off.in_proj_weight.copy_(mine.qkv_proj.weight)
        off.out_proj.weight.copy_(mine.out_proj.weight)
        x = torch.randn(B, L, E, dtype=torch.float64)
        pad = torch.arange(L)[None, :] >= torch.tensor([L, 3])[:, None]
        keep = torch.ones(L, L, dtype=torch.bool).tril()
        want, _ = off(x, x, x, key_padding_mask=pad, attn_mask=~keep, need_weights=False)
        torch.testing.assert_close(mine(x, key_padding_mask=pad, attn_mask=keep), want)
