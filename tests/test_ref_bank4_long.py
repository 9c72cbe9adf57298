"""Cross-checks of the long-context references (linear_attention, ring_attention, packed_sequences)
against independent implementations: brute-force loops over (i, j), the fast-transformers form of the
normaliser, F.scaled_dot_product_attention on the whole sequence and per document, flex_attention with a
document mask_mod (CPU, float64), and the known traps (the sigmoid merge from -inf, the overflowing
first merge form, RoPE hiding a missing position reset)."""
import math
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from loading import load

LIN = load("linear_attention")
RING = load("ring_attention")
PACK = load("packed_sequences")


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _randn(g, *shape, scale=1.0):
    return torch.randn(*shape, generator=g, dtype=torch.float64) * scale


class _Largest(TorchDispatchMode):
    """The largest tensor any aten op outputs, views left out."""

    SKIP = ("aten.view", "aten._unsafe_view", "aten.expand", "aten.t.", "aten.transpose", "aten.permute",
            "aten.detach", "aten.alias", "aten.slice", "aten.select", "aten.unsqueeze", "aten.squeeze",
            "aten.split", "aten.unbind", "aten.as_strided")

    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not str(func).startswith(self.SKIP):
            for t in (out if isinstance(out, (tuple, list)) else (out,)):
                if isinstance(t, torch.Tensor):
                    self.largest = max(self.largest, t.numel())
        return out


# --------------------------------------------------------------------------- linear_attention
def _linear_brute(q, k, v, eps):
    """out_i = sum_{j<=i} (phi(q_i).phi(k_j)) v_j / (sum_{j<=i} phi(q_i).phi(k_j) + eps), one (i, j) at a time,
    with phi written as x + 1 above zero and exp(x) below."""
    def phi(x):
        return torch.where(x > 0, x + 1, torch.exp(x.clamp(max=0)))
    B, H, L, D = q.shape
    out = torch.zeros(B, H, L, v.shape[-1], dtype=q.dtype)
    for b in range(B):
        for h in range(H):
            for i in range(L):
                num = torch.zeros(v.shape[-1], dtype=q.dtype)
                den = torch.zeros((), dtype=q.dtype)
                for j in range(i + 1):
                    w = torch.dot(phi(q[b, h, i]), phi(k[b, h, j]))
                    num += w * v[b, h, j]
                    den += w
                out[b, h, i] = num / (den + eps)
    return out


def test_linear_feature_map_is_elu_plus_one():
    x = torch.linspace(-12, 12, 241, dtype=torch.float64)
    want = torch.where(x > 0, x + 1, torch.exp(x.clamp(max=0)))
    torch.testing.assert_close(LIN.feature_map(x), want, rtol=1e-10, atol=1e-15)
    assert (LIN.feature_map(x) > 0).all()


def test_linear_worked_example():
    q = torch.tensor([0.0, 0.0], dtype=torch.float64).view(1, 1, 2, 1)
    k = torch.tensor([0.0, 1.0], dtype=torch.float64).view(1, 1, 2, 1)
    v = torch.tensor([3.0, 6.0], dtype=torch.float64).view(1, 1, 2, 1)
    for out in (LIN.linear_attention_parallel(q, k, v, eps=0.0), LIN.linear_attention_recurrent(q, k, v, eps=0.0),
                LIN.linear_attention_chunked(q, k, v, chunk_size=1, eps=0.0)):
        torch.testing.assert_close(out.flatten(), torch.tensor([3.0, 5.0], dtype=torch.float64))


@pytest.mark.parametrize("B,H,L,D,Dv,eps,chunk", [
    (2, 2, 9, 4, 3, 1e-6, 4),
    (1, 3, 13, 2, 5, 0.5, 5),
    (2, 1, 1, 3, 2, 0.25, 3),
    (1, 2, 7, 5, 4, 1e-3, 16),
])
def test_linear_forms_match_a_brute_force_loop(B, H, L, D, Dv, eps, chunk):
    g = _gen(L * 7 + D)
    q, k, v = _randn(g, B, H, L, D, scale=1.5), _randn(g, B, H, L, D, scale=1.5), _randn(g, B, H, L, Dv)
    want = _linear_brute(q, k, v, eps)
    torch.testing.assert_close(LIN.linear_attention_parallel(q, k, v, eps), want, rtol=1e-11, atol=1e-12)
    torch.testing.assert_close(LIN.linear_attention_recurrent(q, k, v, eps), want, rtol=1e-11, atol=1e-12)
    torch.testing.assert_close(LIN.linear_attention_chunked(q, k, v, chunk, eps), want, rtol=1e-11, atol=1e-12)


def test_linear_forms_agree_to_rounding_and_match_the_fast_transformers_normaliser():
    """B2 H3 L37 D8 Dv5, chunks of 8 with a ragged last one: the three forms agree to
    ~4e-16, and the normaliser Z = 1 / (phi(Q) . cumsum(phi(K)) + eps) of fast-transformers gives the same."""
    g = _gen(0)
    q, k, v = _randn(g, 2, 3, 37, 8), _randn(g, 2, 3, 37, 8), _randn(g, 2, 3, 37, 5)
    par = LIN.linear_attention_parallel(q, k, v)
    assert (par - LIN.linear_attention_recurrent(q, k, v)).abs().max() < 1e-14
    assert (par - LIN.linear_attention_chunked(q, k, v, chunk_size=8)).abs().max() < 1e-14
    pq, pk = F.elu(q) + 1, F.elu(k) + 1
    Z = 1.0 / (torch.einsum("bhld,bhld->bhl", pq, pk.cumsum(dim=2)) + 1e-6)
    numer = torch.einsum("bhij,bhje->bhie", (pq @ pk.transpose(-2, -1)).tril(), v)
    assert (par - numer * Z[..., None]).abs().max() < 1e-14


def test_linear_float32_running_state_stays_accurate_on_a_long_sequence():
    g = _gen(3)
    q, k, v = _randn(g, 1, 1, 4096, 16), _randn(g, 1, 1, 4096, 16), _randn(g, 1, 1, 4096, 16)
    want = LIN.linear_attention_chunked(q, k, v, chunk_size=256)
    got = LIN.linear_attention_chunked(q.float(), k.float(), v.float(), chunk_size=256).double()
    assert ((got - want).norm() / want.norm()) < 1e-6
    got = LIN.linear_attention_recurrent(q[:, :, :1024].float(), k[:, :, :1024].float(), v[:, :, :1024].float())
    want = LIN.linear_attention_parallel(q[:, :, :1024], k[:, :, :1024], v[:, :, :1024])
    assert ((got.double() - want).norm() / want.norm()) < 1e-6


def test_linear_recurrent_and_chunked_never_build_the_l_by_l_matrix():
    B, H, L, D, Dv, C = 1, 2, 40, 4, 3, 5
    g = _gen(5)
    q, k, v = (_randn(g, B, H, L, n).requires_grad_() for n in (D, D, Dv))
    with _Largest() as mode:
        LIN.linear_attention_recurrent(q, k, v).sum().backward()
    assert mode.largest <= B * H * max(L * D, L * Dv, D * Dv) < B * H * L * L
    with _Largest() as mode:
        LIN.linear_attention_chunked(q, k, v, chunk_size=C).sum().backward()
    assert mode.largest <= B * H * math.ceil(L / C) * max(C * C, C * D, C * Dv, D * Dv) < B * H * L * L


def test_linear_eps_sits_once_in_the_scalar_denominator():
    """With one key of feature phi(k) = 1 per dim, out_0 = (D phi(q)) v / (D phi(q) + eps) exactly."""
    q = torch.zeros(1, 1, 1, 3, dtype=torch.float64)
    k = torch.zeros(1, 1, 1, 3, dtype=torch.float64)
    v = torch.full((1, 1, 1, 2), 4.0, dtype=torch.float64)
    out = LIN.linear_attention_recurrent(q, k, v, eps=1.0)
    torch.testing.assert_close(out, torch.full_like(out, 4.0 * 3 / (3 + 1)))


# --------------------------------------------------------------------------- ring_attention
def _full_attention(q, k, v, scale, causal):
    L = q.shape[2]
    keep = torch.ones(L, L, dtype=torch.bool).tril() if causal else None
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, scale=scale)
    s = scale * q @ k.transpose(-2, -1)
    if causal:
        s = s.masked_fill(~keep, float("-inf"))
    return out, torch.logsumexp(s, dim=-1)


@pytest.mark.parametrize("blocks,causal,scale", [
    ([7, 8, 1, 13], True, None),
    ([7, 8, 1, 13], False, 0.3),
    ([5], True, None),
    ([1, 1, 1, 1], True, 1.2),
    ([3, 11, 2], False, None),
])
def test_ring_equals_sdpa_on_the_whole_sequence(blocks, causal, scale):
    """Uneven blocks (L 29 split [7, 8, 1, 13]), one device, blocks of one row; q and k scaled by 3."""
    g = _gen(sum(blocks) + len(blocks))
    L = sum(blocks)
    q, k, v = _randn(g, 2, 2, L, 6, scale=3.0), _randn(g, 2, 2, L, 6, scale=3.0), _randn(g, 2, 2, L, 5)
    s = 1.0 / math.sqrt(6) if scale is None else scale
    want_out, want_lse = _full_attention(q, k, v, s, causal)
    out, lse = RING.ring_attention(q, k, v, blocks, causal=causal, scale=scale)
    assert lse.shape == (2, 2, L)
    torch.testing.assert_close(out, want_out, rtol=1e-12, atol=1e-13)
    torch.testing.assert_close(lse, want_lse, rtol=1e-12, atol=1e-13)


def test_ring_gradients_equal_those_of_full_attention():
    g = _gen(11)
    blocks, L = [4, 6, 3], 13
    leaves = [_randn(g, 1, 2, L, 4).requires_grad_() for _ in range(3)]
    dO = _randn(g, 1, 2, L, 4)
    out, _ = RING.ring_attention(*leaves, blocks, causal=True)
    got = torch.autograd.grad(out, leaves, dO)
    ref = [t.detach().clone().requires_grad_() for t in leaves]
    want = torch.autograd.grad(F.scaled_dot_product_attention(*ref, is_causal=True), ref, dO)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-11, atol=1e-12)


def test_ring_merge_of_disjoint_key_sets_is_attention_over_their_union():
    """Keys split into two interleaved (not contiguous) sets: merging the two block results is exact."""
    g = _gen(4)
    q, k, v = _randn(g, 2, 3, 5, 4, scale=2.0), _randn(g, 2, 3, 12, 4, scale=2.0), _randn(g, 2, 3, 12, 3)
    a = torch.tensor([0, 2, 3, 7, 11])
    b = torch.tensor([1, 4, 5, 6, 8, 9, 10])
    pa = RING.block_attention(q, k[:, :, a], v[:, :, a], 0.5)
    pb = RING.block_attention(q, k[:, :, b], v[:, :, b], 0.5)
    out, lse = RING.merge_partials(*pa, *pb)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, scale=0.5), rtol=1e-12, atol=1e-13)
    torch.testing.assert_close(lse, torch.logsumexp(0.5 * q @ k.transpose(-2, -1), dim=-1), rtol=1e-12, atol=1e-13)
    swapped = RING.merge_partials(*pb, *pa)
    torch.testing.assert_close(swapped[0], out, rtol=1e-13, atol=1e-14)


def test_ring_worked_example():
    f64 = dict(dtype=torch.float64)
    out_a, lse_a = torch.tensor([[[[2.0]]]], **f64), torch.tensor([[[math.log(2)]]], **f64)
    out_b, lse_b = torch.tensor([[[[7.0]]]], **f64), torch.tensor([[[math.log(3)]]], **f64)
    out, lse = RING.merge_partials(out_a, lse_a, out_b, lse_b)
    assert abs(out.item() - 5.0) < 1e-12 and abs(lse.item() - math.log(5)) < 1e-12
    q = torch.ones(1, 1, 1, 1, dtype=torch.float64)
    k = torch.tensor([0.0, 0.0, math.log(3)], dtype=torch.float64).view(1, 1, 3, 1)
    v = torch.tensor([1.0, 3.0, 7.0], dtype=torch.float64).view(1, 1, 3, 1)
    o, l = RING.block_attention(q, k, v, 1.0)
    assert abs(o.item() - 5.0) < 1e-12 and abs(l.item() - math.log(5)) < 1e-12


def test_ring_merge_with_an_empty_partial_returns_the_other_one_and_finite_gradients():
    g = _gen(8)
    out_b, lse_b = _randn(g, 1, 2, 4, 3), _randn(g, 1, 2, 4)
    out_a = torch.zeros(1, 2, 4, 3, dtype=torch.float64, requires_grad=True)
    lse_a = torch.full((1, 2, 4), -math.inf, dtype=torch.float64, requires_grad=True)
    out_b.requires_grad_(), lse_b.requires_grad_()
    out, lse = RING.merge_partials(out_a, lse_a, out_b, lse_b)
    assert torch.equal(out, out_b) and torch.equal(lse, lse_b)
    grads = torch.autograd.grad((out.sum() + lse.sum()), (out_a, lse_a, out_b, lse_b))
    assert all(torch.isfinite(t).all() for t in grads)


def test_ring_sigmoid_merge_from_minus_inf_gives_nan_and_logaddexp_does_not():
    """Why the statement has a rule for empty partials: O = 0, lse = -inf merged with the sigmoid form
    gives lse = -inf - (-inf) = NaN."""
    lse = torch.tensor([-math.inf], dtype=torch.float64)
    lse_b = torch.tensor([0.7], dtype=torch.float64)
    assert torch.isnan(lse - F.logsigmoid(lse - lse_b)).all()
    assert torch.isfinite(torch.logaddexp(lse, lse_b)).all()


def test_ring_merge_stays_finite_when_the_lses_are_far_apart_in_float32():
    lse_a = torch.tensor([[[0.0, 300.0, -250.0]]])
    lse_b = torch.tensor([[[200.0, -100.0, 150.0]]])
    out_a, out_b = torch.ones(1, 1, 3, 2), -torch.ones(1, 1, 3, 2)
    out, lse = RING.merge_partials(out_a, lse_a, out_b, lse_b)
    assert torch.isfinite(out).all() and torch.isfinite(lse).all()
    torch.testing.assert_close(lse, torch.maximum(lse_a, lse_b))
    # the first form in ring-flash-attention, lse + log(1 + exp(lse_b - lse)), overflows here
    assert not torch.isfinite(lse_a + torch.log1p(torch.exp(lse_b - lse_a))).all()


def test_ring_holds_one_block_of_scores_at_a_time():
    B, H, D = 1, 2, 4
    blocks = [9, 7, 12, 5]
    L = sum(blocks)
    g = _gen(2)
    q, k, v = (_randn(g, B, H, L, D).requires_grad_() for _ in range(3))
    with _Largest() as mode:
        out, lse = RING.ring_attention(q, k, v, blocks, causal=True)
        (out.sum() + lse.sum()).backward()
    assert mode.largest <= B * H * max(max(blocks) ** 2, L * D) < B * H * L * L


# --------------------------------------------------------------------------- packed_sequences
def _doc_ids(lens):
    return torch.repeat_interleave(torch.arange(len(lens)), torch.tensor(lens))


def test_packed_worked_example_metadata():
    cu, pos, mx = PACK.packing_metadata(torch.tensor([5, 1, 9, 3]))
    assert cu.dtype == torch.int32 and cu.tolist() == [0, 5, 6, 15, 18]
    assert pos.dtype == torch.int64
    assert pos.tolist() == [0, 1, 2, 3, 4, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 2]
    assert mx == 9 and type(mx) is int


@pytest.mark.parametrize("lens", [[5, 1, 9, 3], [1], [1, 1, 1], [12, 1, 1, 7, 2]])
def test_packed_metadata_matches_a_python_loop(lens):
    cu, pos, mx = PACK.packing_metadata(torch.tensor(lens))
    want_cu, want_pos = [0], []
    for n in lens:
        want_cu.append(want_cu[-1] + n)
        want_pos += list(range(n))
    assert cu.tolist() == want_cu and pos.tolist() == want_pos and mx == max(lens)


@pytest.mark.parametrize("lens,H,D,Dv,scale", [
    ([5, 1, 9, 3], 3, 4, 5, None),
    ([1, 1, 1, 1], 2, 3, 3, 0.7),
    ([17], 1, 6, 2, None),
    ([2, 8, 1, 1, 6, 3], 2, 5, 5, 1.4),
])
def test_packed_equals_per_document_sdpa_and_one_masked_sdpa(lens, H, D, Dv, scale):
    g = _gen(sum(lens) * 3 + H)
    T = sum(lens)
    q, k, v = _randn(g, T, H, D), _randn(g, T, H, D), _randn(g, T, H, Dv)
    cu, _, mx = PACK.packing_metadata(torch.tensor(lens))
    got = PACK.varlen_attention(q, k, v, cu, mx, scale=scale)
    per_doc = []
    for s, e in zip(cu[:-1].tolist(), cu[1:].tolist()):
        qd, kd, vd = (t[s:e].transpose(0, 1) for t in (q, k, v))
        per_doc.append(F.scaled_dot_product_attention(qd, kd, vd, is_causal=True, scale=scale).transpose(0, 1))
    torch.testing.assert_close(got, torch.cat(per_doc), rtol=1e-12, atol=1e-13)
    doc = _doc_ids(lens)
    keep = (doc[:, None] == doc[None, :]) & torch.ones(T, T, dtype=torch.bool).tril()
    dense = F.scaled_dot_product_attention(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1),
                                           attn_mask=keep, scale=scale).transpose(0, 1)
    torch.testing.assert_close(got, dense, rtol=1e-12, atol=1e-13)
    # max_seqlen sizes a kernel's work; it does not change the answer
    torch.testing.assert_close(PACK.varlen_attention(q, k, v, cu, T, scale=scale), got, rtol=0, atol=0)


def test_packed_equals_flex_attention_with_a_document_mask_mod():
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    lens = [5, 1, 9, 3]
    T, H, D = sum(lens), 2, 4
    g = _gen(9)
    q, k, v = _randn(g, T, H, D), _randn(g, T, H, D), _randn(g, T, H, D)
    doc = _doc_ids(lens)

    def document_causal(b, h, qi, ki):
        return (doc[qi] == doc[ki]) & (ki <= qi)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mask = create_block_mask(document_causal, None, None, T, T, device="cpu")
        want = flex_attention(*(t.transpose(0, 1)[None] for t in (q, k, v)), block_mask=mask)[0].transpose(0, 1)
    cu, _, mx = PACK.packing_metadata(torch.tensor(lens))
    torch.testing.assert_close(PACK.varlen_attention(q, k, v, cu, mx), want, rtol=1e-12, atol=1e-13)


def test_packed_plain_causal_mask_leaks_across_documents():
    lens = [5, 1, 9, 3]
    T = sum(lens)
    g = _gen(1)
    q, k, v = _randn(g, T, 2, 4), _randn(g, T, 2, 4), _randn(g, T, 2, 4)
    cu, _, mx = PACK.packing_metadata(torch.tensor(lens))
    got = PACK.varlen_attention(q, k, v, cu, mx)
    leaky = F.scaled_dot_product_attention(*(t.transpose(0, 1) for t in (q, k, v)), is_causal=True).transpose(0, 1)
    assert (got - leaky).abs().max() > 0.1
    torch.testing.assert_close(got[:5], leaky[:5])                 # the first document sees nothing before it
    torch.testing.assert_close(got[5], v[5])                       # a document of length 1 returns its own v


def _rope(x, pos, theta=10000.0):
    """x: (T, H, D), rotated pairwise (interleaved) by angle pos * theta^(-2i/D)."""
    D = x.shape[-1]
    inv = theta ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    ang = pos.double()[:, None] * inv[None, :]                      # (T, D/2)
    cos, sin = ang.cos()[:, None, :], ang.sin()[:, None, :]
    x1, x2 = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = x1 * cos - x2 * sin
    out[..., 1::2] = x1 * sin + x2 * cos
    return out


def test_packed_rope_hides_a_missing_reset_and_absolute_positions_do_not():
    """Why the problem returns position_ids: with RoPE and the block-diagonal mask, global positions
    give the same output as per-document ones (RoPE is relative); absolute embeddings do not."""
    lens = [5, 1, 9, 3]
    T, H, D = sum(lens), 2, 8
    g = _gen(6)
    q, k, v = _randn(g, T, H, D), _randn(g, T, H, D), _randn(g, T, H, D)
    cu, pos, mx = PACK.packing_metadata(torch.tensor(lens))
    glob = torch.arange(T)
    reset = PACK.varlen_attention(_rope(q, pos), _rope(k, pos), v, cu, mx)
    no_reset = PACK.varlen_attention(_rope(q, glob), _rope(k, glob), v, cu, mx)
    assert (reset - no_reset).abs().max() < 1e-12
    table = _randn(g, T, 1, D)                                      # absolute position embeddings
    a = PACK.varlen_attention(q + table[pos], k + table[pos], v, cu, mx)
    b = PACK.varlen_attention(q + table[glob], k + table[glob], v, cu, mx)
    assert (a - b).abs().max() > 1e-3
