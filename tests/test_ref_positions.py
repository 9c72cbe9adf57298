"""Cross-checks of the position and dropout references (alibi, rope, t5_bias, dropout, sliding_window)
against independent implementations: the papers' own rules re-implemented, T5's printed bucket ids,
F.scaled_dot_product_attention with float and bool masks, Hugging Face's rotate_half with permuted
dims, autograd, and dropout statistics."""
import math

import pytest
import torch
import torch.nn.functional as F

from loading import load

ALIBI = load("alibi")
ROPE = load("rope")
T5 = load("t5_bias")
DROP = load("dropout")
SWA = load("sliding_window")


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _heads(module, x):
    """q, k, v of shape (B, H, L, D) from a module's merged qkv_proj."""
    B, L, E = x.shape
    H = module.num_heads
    q, k, v = F.linear(x, module.qkv_proj.weight).split(E, dim=-1)
    return [t.reshape(B, L, H, E // H).permute(0, 2, 1, 3) for t in (q, k, v)]


def _merge(module, o):
    B, H, L, D = o.shape
    return F.linear(o.permute(0, 2, 1, 3).reshape(B, L, H * D), module.out_proj.weight)


def _pad(lengths, L):
    return torch.arange(L)[None, :] >= torch.tensor(lengths)[:, None]


# ----------------------------------------------------------------------------------------- alibi
def _paper_get_slopes(n):
    """get_slopes from the ALiBi authors' code, re-typed."""
    def get_slopes_power_of_2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        ratio = start
        return [start * ratio ** i for i in range(n)]

    if math.log2(n).is_integer():
        return get_slopes_power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return get_slopes_power_of_2(closest) + _paper_get_slopes(2 * closest)[0::2][: n - closest]


@pytest.mark.parametrize("n", list(range(1, 33)) + [48, 64])
def test_alibi_slopes_match_paper(n):
    got = ALIBI.get_alibi_slopes(n)
    assert got.shape == (n,)
    torch.testing.assert_close(got, torch.tensor(_paper_get_slopes(n), dtype=torch.float64), rtol=1e-12, atol=0)


def test_alibi_slopes_known_values():
    want12 = [0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125, 0.00390625, 0.70711, 0.35355, 0.17678, 0.08839]
    torch.testing.assert_close(ALIBI.get_alibi_slopes(12), torch.tensor(want12, dtype=torch.float64),
                               rtol=0, atol=1e-5)
    torch.testing.assert_close(ALIBI.get_alibi_slopes(8), torch.tensor([2.0 ** -i for i in range(1, 9)],
                                                                       dtype=torch.float64), rtol=0, atol=0)


def test_alibi_seed_formula_is_wrong_only_off_powers_of_two():
    seed = lambda n: torch.tensor([2 ** (-8 / n * (i + 1)) for i in range(n)], dtype=torch.float64)
    for n in (1, 2, 4, 8, 16):
        torch.testing.assert_close(seed(n), ALIBI.get_alibi_slopes(n))
    assert (seed(6) - ALIBI.get_alibi_slopes(6)).abs().max() > 0.4
    assert (seed(12) - ALIBI.get_alibi_slopes(12)).abs().max() > 0.6


@pytest.mark.parametrize("B,L,H,D,lengths", [(2, 7, 6, 3, None), (3, 9, 12, 2, [9, 4, 1]), (1, 200, 5, 4, None)])
def test_alibi_attention_matches_sdpa_with_bias(B, L, H, D, lengths):
    torch.manual_seed(0)
    m = ALIBI.AlibiSelfAttention(H * D, H, dropout=0.0).double().eval()
    x = torch.randn(B, L, H * D, generator=_gen(1), dtype=torch.float64)
    pad = None if lengths is None else _pad(lengths, L)
    q, k, v = _heads(m, x)
    slopes = torch.tensor(_paper_get_slopes(H), dtype=torch.float64)
    j = torch.arange(L, dtype=torch.float64)
    bias = (slopes[:, None, None] * j).expand(H, L, L).clone()        # +m*j: same softmax as -m*(i-j) when causal
    bias = bias.masked_fill(~torch.ones(L, L, dtype=torch.bool).tril(), float("-inf"))
    bias = bias.expand(B, H, L, L)
    if pad is not None:
        bias = bias.masked_fill(pad[:, None, None, :], float("-inf"))
    want = _merge(m, F.scaled_dot_product_attention(q, k, v, attn_mask=bias))
    torch.testing.assert_close(m(x, key_padding_mask=pad), want, rtol=1e-10, atol=1e-12)


def test_alibi_bias_is_added_after_scaling():
    """With q = k = 0 the scores are the bias alone: the weights are softmax(-m (i - j)) exactly."""
    m = ALIBI.AlibiSelfAttention(4, 1, dropout=0.0).double().eval()
    with torch.no_grad():
        m.qkv_proj.weight.zero_()
        m.qkv_proj.weight[8:].copy_(torch.eye(4, dtype=torch.float64))  # v = x
        m.out_proj.weight.copy_(torch.eye(4, dtype=torch.float64))
    L = 5
    x = torch.randn(1, L, 4, generator=_gen(3), dtype=torch.float64)
    slope = 2.0 ** -8
    i, j = torch.arange(L)[:, None], torch.arange(L)[None, :]
    w = torch.softmax((-slope * (i - j)).double().masked_fill(j > i, float("-inf")), dim=-1)
    torch.testing.assert_close(m(x)[0], w @ x[0], rtol=1e-12, atol=1e-14)


# ------------------------------------------------------------------------------------------ rope
def _cos_sin(D, L, theta):
    inv = theta ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    ang = torch.arange(L, dtype=torch.float64)[:, None] * inv
    return torch.cos(ang), torch.sin(ang)


def _rotate_half_rope(x, D, L, theta):
    """Hugging Face layout: dims (i, i + D/2) form a pair."""
    cos, sin = _cos_sin(D, L, theta)
    cos, sin = torch.cat([cos, cos], -1), torch.cat([sin, sin], -1)
    x1, x2 = x[..., : D // 2], x[..., D // 2:]
    return x * cos + torch.cat([-x2, x1], -1) * sin


def _interleaved_via_rotate_half(x, theta):
    """Meta layout computed with rotate_half after permuting dims [0, 2, 4, ..., 1, 3, 5, ...]."""
    *_, L, D = x.shape
    perm = torch.cat([torch.arange(0, D, 2), torch.arange(1, D, 2)])
    inv = torch.argsort(perm)
    return _rotate_half_rope(x[..., perm], D, L, theta)[..., inv]


@pytest.mark.parametrize("D,L,theta", [(8, 13, 10000.0), (2, 1, 10000.0), (14, 9, 500.0), (16, 29, 500000.0)])
def test_rope_table(D, L, theta):
    cos, sin = _cos_sin(D, L, theta)
    got = ROPE.precompute_rope_freqs(D, L, theta)
    assert got.shape == (L, D // 2) and got.is_complex()
    torch.testing.assert_close(got.real.double(), cos, rtol=0, atol=1e-6)
    torch.testing.assert_close(got.imag.double(), sin, rtol=0, atol=1e-6)


def test_rope_worked_example():
    x = torch.zeros(1, 2, 4, dtype=torch.float64)
    x[0, 1] = torch.tensor([1.0, 0.0, 0.0, 1.0])
    got = ROPE.apply_rotary_pos_emb(x, ROPE.precompute_rope_freqs(4, 2).to(torch.complex128))[0, 1]
    want = torch.tensor([math.cos(1), math.sin(1), -math.sin(0.01), math.cos(0.01)], dtype=torch.float64)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-7)


@pytest.mark.parametrize("shape,theta", [((2, 3, 7, 8), 10000.0), ((5, 11, 14), 500.0), ((1, 1, 1, 6), 100.0)])
def test_rope_matches_rotate_half_with_permuted_dims(shape, theta):
    *_, L, D = shape
    x = torch.randn(*shape, generator=_gen(4), dtype=torch.float64)
    cos, sin = _cos_sin(D, L, theta)
    got = ROPE.apply_rotary_pos_emb(x, torch.complex(cos, sin))
    torch.testing.assert_close(got, _interleaved_via_rotate_half(x, theta), rtol=1e-12, atol=1e-12)
    if L > 1:  # the two layouts really are different on the same input
        assert (got - _rotate_half_rope(x, D, L, theta)).abs().max() > 1e-3


def test_rope_scores_depend_only_on_distance():
    D, L = 12, 17
    q, k = torch.randn(2, D, generator=_gen(5), dtype=torch.float64)
    cos, sin = _cos_sin(D, L, 10000.0)
    table = torch.complex(cos, sin)
    rq = ROPE.apply_rotary_pos_emb(q.expand(L, D).clone(), table)
    rk = ROPE.apply_rotary_pos_emb(k.expand(L, D).clone(), table)
    s = rq @ rk.T
    torch.testing.assert_close(s[3:, 3:], s[:-3, :-3], rtol=1e-12, atol=1e-12)
    assert (s[0, 1] - s[1, 0]).abs() > 1e-6           # but not symmetric: the sign of m - n matters


def test_rope_dtypes():
    x = torch.randn(2, 9, 10, generator=_gen(6), dtype=torch.float64)
    cos, sin = _cos_sin(10, 9, 10000.0)
    table = torch.complex(cos, sin)
    exact = _interleaved_via_rotate_half(x, 10000.0)
    got64 = ROPE.apply_rotary_pos_emb(x, table)
    assert got64.dtype == torch.float64
    torch.testing.assert_close(got64, exact, rtol=1e-13, atol=1e-13)
    got16 = ROPE.apply_rotary_pos_emb(x.bfloat16(), table)
    assert got16.dtype == torch.bfloat16
    torch.testing.assert_close(got16.double(), exact, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("B,L,H,D,theta,extra,lengths", [(2, 7, 3, 6, 10000.0, 0, None),
                                                         (3, 9, 2, 10, 100.0, 4, [9, 5, 1])])
def test_rope_attention_matches_sdpa(B, L, H, D, theta, extra, lengths):
    torch.manual_seed(1)
    m = ROPE.RoPESelfAttention(H * D, H, dropout=0.0).double().eval()
    x = torch.randn(B, L, H * D, generator=_gen(7), dtype=torch.float64)
    pad = None if lengths is None else _pad(lengths, L)
    q, k, v = _heads(m, x)
    q, k = _interleaved_via_rotate_half(q, theta), _interleaved_via_rotate_half(k, theta)   # V is not rotated
    keep = None if pad is None else ~pad[:, None, None, :]
    want = _merge(m, F.scaled_dot_product_attention(q, k, v, attn_mask=keep))
    cos, sin = _cos_sin(D, L + extra, theta)
    torch.testing.assert_close(m(x, torch.complex(cos, sin), key_padding_mask=pad), want, rtol=1e-10, atol=1e-12)


# -------------------------------------------------------------------------------------------- t5
ORACLE_REL = [-1, -5, -20, -100, -128, -200, 1, 200]


def test_t5_buckets_match_transformers_values():
    rel = torch.tensor(ORACLE_REL)
    bucket = T5.T5RelativeBias._relative_position_bucket
    assert bucket(rel, 32, 128, bidirectional=True).tolist() == [1, 5, 10, 15, 15, 15, 17, 31]
    assert bucket(rel, 32, 128, bidirectional=False).tolist() == [1, 5, 17, 30, 31, 31, 0, 0]


def _bucket_loop(r, bidirectional, nb, md):
    b = 0
    if bidirectional:
        nb //= 2
        b = nb if r > 0 else 0
        d = abs(r)
    else:
        d = max(0, -r)
    exact = nb // 2
    if d < exact:
        return b + d
    return b + min(nb - 1, exact + int(math.log(d / exact) / math.log(md / exact) * (nb - exact)))


@pytest.mark.parametrize("nb,md", [(32, 128), (12, 20), (10, 16), (8, 10)])
@pytest.mark.parametrize("bidirectional", [True, False])
def test_t5_buckets_match_float64_loop(nb, md, bidirectional):
    rel = torch.arange(-3 * md, 3 * md + 1)
    got = T5.T5RelativeBias._relative_position_bucket(rel, nb, md, bidirectional=bidirectional)
    assert got.dtype == torch.long
    assert got.tolist() == [_bucket_loop(r, bidirectional, nb, md) for r in rel.tolist()]
    assert 0 <= int(got.min()) and int(got.max()) < nb


def test_t5_bias_layout_and_gradient():
    torch.manual_seed(2)
    rb = T5.T5RelativeBias(3, 12, 20, bidirectional=True).double()
    L = 30
    bias = rb(L)
    assert bias.shape == (1, 3, L, L)
    table = rb.relative_bias.weight
    for i in (0, 7, 29):
        for j in (0, 5, 29):
            assert torch.equal(bias[0, :, i, j], table[_bucket_loop(j - i, True, 12, 20)])
    g = torch.randn(bias.shape, generator=_gen(8), dtype=torch.float64)
    (grad,) = torch.autograd.grad(bias, table, g)
    idx = torch.tensor([[_bucket_loop(j - i, True, 12, 20) for j in range(L)] for i in range(L)]).reshape(-1)
    want = torch.zeros_like(table).index_add_(0, idx, g[0].permute(1, 2, 0).reshape(-1, 3))
    torch.testing.assert_close(grad, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("bidirectional,lengths", [(True, None), (True, [26, 11, 3]), (False, [26, 20, 1])])
def test_t5_attention_matches_sdpa_unscaled(bidirectional, lengths):
    torch.manual_seed(3)
    B, L, H, D = 3, 26, 2, 4
    m = T5.T5Attention(H * D, H, num_buckets=12, max_distance=20, dropout=0.0,
                       bidirectional=bidirectional).double().eval()
    x = torch.randn(B, L, H * D, generator=_gen(9), dtype=torch.float64)
    pad = None if lengths is None else _pad(lengths, L)
    q, k, v = _heads(m, x)
    idx = torch.tensor([[_bucket_loop(j - i, bidirectional, 12, 20) for j in range(L)] for i in range(L)])
    bias = m.rel_bias.relative_bias.weight.detach()[idx].permute(2, 0, 1).expand(B, H, L, L).clone()
    if not bidirectional:
        bias = bias.masked_fill(~torch.ones(L, L, dtype=torch.bool).tril(), float("-inf"))
    if pad is not None:
        bias = bias.masked_fill(pad[:, None, None, :], float("-inf"))
    want = _merge(m, F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=1.0))
    torch.testing.assert_close(m(x, key_padding_mask=pad), want, rtol=1e-10, atol=1e-12)


# --------------------------------------------------------------------------------------- dropout
def _drop_inputs(seed=10, B=3, L=9, H=3, D=4):
    x = torch.randn(B, L, H * D, generator=_gen(seed), dtype=torch.float64)
    pad = _pad([L, 5, 2][:B], L)
    keep = torch.ones(L, L, dtype=torch.bool).tril()
    return x, pad, keep


def _sdpa_module(m, x, pad, keep):
    q, k, v = _heads(m, x)
    mask = keep[None, None] & ~pad[:, None, None, :]
    return _merge(m, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))


def test_dropout_eval_equals_plain_attention():
    torch.manual_seed(4)
    m = DROP.AttentionWithDropout(12, 3, attn_dropout=0.5, output_dropout=0.5).double().eval()
    x, pad, keep = _drop_inputs()
    want = _sdpa_module(m, x, pad, keep)
    torch.testing.assert_close(m(x, key_padding_mask=pad, attn_mask=keep), want, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(m(x, key_padding_mask=pad, attn_mask=keep.expand(3, 9, 9)), want,
                               rtol=1e-10, atol=1e-12)


def test_dropout_train_p0_equals_plain_attention():
    torch.manual_seed(5)
    m = DROP.AttentionWithDropout(12, 3, attn_dropout=0.0, output_dropout=0.0).double().train()
    x, pad, keep = _drop_inputs()
    torch.testing.assert_close(m(x, key_padding_mask=pad, attn_mask=keep), _sdpa_module(m, x, pad, keep),
                               rtol=1e-10, atol=1e-12)


def test_dropout_train_statistics():
    """Capture what goes in and out of each dropout: share zeroed ~ p (6 sigma), survivors x 1/(1-p)."""
    torch.manual_seed(6)
    p_attn, p_out = 0.3, 0.2
    m = DROP.AttentionWithDropout(24, 3, attn_dropout=p_attn, output_dropout=p_out).double().train()
    seen = {}
    m.attn_dropout.register_forward_hook(lambda mod, i, o: seen.__setitem__("attn", (i[0], o)))
    m.output_dropout.register_forward_hook(lambda mod, i, o: seen.__setitem__("out", (i[0], o)))
    x = torch.randn(64, 40, 24, generator=_gen(11), dtype=torch.float64)
    with torch.no_grad():
        m(x)
    for key, p, shape in (("attn", p_attn, (64, 3, 40, 40)), ("out", p_out, (64, 40, 24))):
        before, after = seen[key]
        assert before.shape == shape
        zero = after == 0
        n = zero.numel()
        assert n >= 6e4
        assert abs(float(zero.double().mean()) - p) < 6 * math.sqrt(p * (1 - p) / n)
        torch.testing.assert_close(after[~zero], before[~zero] / (1 - p), rtol=1e-12, atol=0)


def test_dropout_keeps_expected_output():
    """E[train output] = eval output: the mean of many dropped runs is within 6 standard errors."""
    torch.manual_seed(7)
    m = DROP.AttentionWithDropout(6, 2, attn_dropout=0.4, output_dropout=0.3).double()
    x = torch.randn(1, 5, 6, generator=_gen(12), dtype=torch.float64)
    want = m.eval()(x)
    m.train()
    with torch.no_grad():
        runs = m(x.expand(20000, 5, 6))
    mean, se = runs.mean(0), runs.std(0) / math.sqrt(runs.shape[0])
    assert ((mean - want[0]).abs() <= 6 * se + 1e-12).all()


# -------------------------------------------------------------------------------- sliding window
def test_sliding_window_mask_worked_example():
    causal = torch.tensor([[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [0, 1, 1, 0, 0], [0, 0, 1, 1, 0], [0, 0, 0, 1, 1]])
    bidir = torch.tensor([[1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [0, 1, 1, 1, 0], [0, 0, 1, 1, 1], [0, 0, 0, 1, 1]])
    got = SWA.create_sliding_window_mask(5, 2, "cpu")
    assert got.dtype == torch.bool and torch.equal(got, causal.bool())
    assert torch.equal(SWA.create_sliding_window_mask(5, 2, "cpu", bidirectional=True), bidir.bool())


@pytest.mark.parametrize("L,W", [(9, 3), (6, 1), (5, 8), (1, 2), (12, 5)])
def test_sliding_window_mask_counts(L, W):
    causal = SWA.create_sliding_window_mask(L, W, "cpu")
    bidir = SWA.create_sliding_window_mask(L, W, "cpu", bidirectional=True)
    for i in range(L):
        assert causal[i].nonzero().flatten().tolist() == list(range(max(0, i - W + 1), i + 1))
        assert bidir[i].nonzero().flatten().tolist() == list(range(max(0, i - W + 1), min(L, i + W)))
    hf = torch.ones(L, L, dtype=torch.bool).tril() & ~torch.ones(L, L, dtype=torch.bool).tril(-W)
    assert torch.equal(causal, hf)   # transformers-style: tril minus the band W or more positions back


@pytest.mark.parametrize("W,bidirectional,lengths", [(3, False, None), (4, False, [10, 8, 7]), (2, True, [10, 9, 9]),
                                                     (1, False, None), (12, True, None)])
def test_sliding_window_attention_matches_sdpa_bool_mask(W, bidirectional, lengths):
    torch.manual_seed(8)
    B, L, H, D = 3, 10, 2, 5
    m = SWA.SlidingWindowAttention(H * D, H, W, dropout=0.0, bidirectional=bidirectional).double().eval()
    x = torch.randn(B, L, H * D, generator=_gen(13), dtype=torch.float64)
    pad = _pad(lengths or [L] * B, L)
    i, j = torch.arange(L)[:, None], torch.arange(L)[None, :]
    band = ((i - j).abs() < W) if bidirectional else ((j <= i) & (j > i - W))
    q, k, v = _heads(m, x)
    want = _merge(m, F.scaled_dot_product_attention(q, k, v, attn_mask=band[None, None] & ~pad[:, None, None, :]))
    got = m(x, key_padding_mask=pad if lengths else None)
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)
