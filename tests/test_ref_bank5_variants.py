"""Cross-checks of two attention-variant references of bank 5 against implementations written another way:

softcap_qknorm  the Gemma 2 and Qwen3 oracle values of the facts rebuilt from their recipes (seed order:
                build the module, overwrite its parameters in order, draw the input); an independent
                layer (complex-number RoPE, F.scaled_dot_product_attention with an additive mask where
                there is no cap, an eager Gemma-style softmax where there is) that also reproduces the
                OLMo-2 oracle with its whole-projection norm; the trap that a per-head norm commutes
                with RoPE only for unit weights; a mask before a small cap leaks, before a cap of 50 not
                visibly; rms_norm's float32 path for bfloat16
gated_deltanet  the oracle values of the facts; the paper's form (a V x K state, alpha S (I - beta k k^T)
                + beta v k^T); scalar recurrences in Python floats; exact recall with orthonormal keys
                and no decay; the chunked form against the recurrent one at every chunk size, with
                initial states, strong decay and gradients; one chunk of T against a dense solve with
                torch.linalg.inv; the grader's agreement check passes the reference and fails a float32
                cast (as fla's naive references do) and a chunked form without the triangular solve
"""
from __future__ import annotations

import math
import types

import pytest
import torch
import torch.nn.functional as F

from loading import failures, load

from attn_drill.bank.api import Ctx

SQ = load("softcap_qknorm")
GD = load("gated_deltanet")


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Small tensors: threads only add contention (as in the judge and the rooms)."""
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(saved)


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _randn(g, *shape, scale=1.0):
    return torch.randn(*shape, generator=g, dtype=torch.float64) * scale


# =============================================================================== softcap_qknorm
def test_gemma2_capped_attention_oracle():
    """The facts' recipe: q, k = randn(1, 2, 5, 8) * 6, v = randn(1, 2, 5, 8), scaling 1/16, cap 50."""
    torch.manual_seed(0)
    q = torch.randn(1, 2, 5, 8, dtype=torch.float64) * 6
    k = torch.randn(1, 2, 5, 8, dtype=torch.float64) * 6
    v = torch.randn(1, 2, 5, 8, dtype=torch.float64)
    out = SQ.capped_attention(q, k, v, 1 / 16, 50.0)
    want = torch.tensor([-1.09588625112, -0.156749992729, -0.195638731133, -0.070974166134], dtype=torch.float64)
    torch.testing.assert_close(out[0, 1, 4, :4], want, rtol=0, atol=1e-11)
    # Gemma 2's eager form: the cap, then an additive finfo.min mask, then softmax
    s = SQ.soft_cap(q @ k.transpose(-1, -2) / 16, 50.0)
    s = s + torch.full((5, 5), torch.finfo(torch.float64).min, dtype=torch.float64).triu(1)
    torch.testing.assert_close(out, s.softmax(-1) @ v, rtol=0, atol=1e-15)


def _oracle_params(module):
    with torch.no_grad():
        for name, p in module.named_parameters():
            if "norm" in name:
                p.uniform_(0.5, 1.5)
            else:
                p.normal_(0, 0.5)


def test_qwen3_layer_oracle():
    """Qwen3Config(hidden 16, 4 heads, 2 KV heads, head_dim 8): build (its Linear layers draw from the RNG),
    overwrite the parameters in order, then x = randn(1, 6, 16)."""
    torch.manual_seed(0)
    m = SQ.SoftcapQKNormAttention(16, 4, 2, 8).double()
    _oracle_params(m)
    x = torch.randn(1, 6, 16, dtype=torch.float64)
    want = torch.tensor([-1.059920133805, -3.636811370174, -0.624392735961, -0.288901717222], dtype=torch.float64)
    torch.testing.assert_close(m(x)[0, -1, :4], want, rtol=0, atol=1e-11)


def _rope_complex(x, theta):
    """(B, h, L, D), rotate-half pairs (i, i + D/2) as complex numbers turned by e^{i m theta^(-2i/D)}."""
    D = x.shape[-1]
    L = x.shape[2]
    freq = theta ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    rot = torch.polar(torch.ones(L, D // 2, dtype=torch.float64), torch.arange(L, dtype=torch.float64)[:, None] * freq)
    z = torch.complex(x[..., :D // 2], x[..., D // 2:]) * rot
    return torch.cat([z.real, z.imag], dim=-1)


def _layer(x, W, H, Hkv, D, norm="head", eps=1e-6, softcap=None, scaling=None, theta=1e4, pad=None):
    """An attention layer written apart from the reference. norm: "head" (Qwen3), "proj" (OLMo-2), None."""
    B, L, _ = x.shape
    q, k, v = x @ W["q_proj.weight"].T, x @ W["k_proj.weight"].T, x @ W["v_proj.weight"].T
    if norm == "proj":                                   # OLMo-2: the whole projection, then the heads
        q = q / torch.sqrt(q.pow(2).mean(-1, keepdim=True) + eps) * W["q_norm.weight"]
        k = k / torch.sqrt(k.pow(2).mean(-1, keepdim=True) + eps) * W["k_norm.weight"]
    q, k, v = q.view(B, L, H, D), k.view(B, L, Hkv, D), v.view(B, L, Hkv, D)
    if norm == "head":
        q = q / torch.sqrt(q.pow(2).mean(-1, keepdim=True) + eps) * W["q_norm.weight"]
        k = k / torch.sqrt(k.pow(2).mean(-1, keepdim=True) + eps) * W["k_norm.weight"]
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    q, k = _rope_complex(q, theta), _rope_complex(k, theta)
    scaling = D ** -0.5 if scaling is None else scaling
    allowed = torch.ones(L, L, dtype=torch.bool).tril().expand(B, 1, L, L)
    if pad is not None:
        allowed = allowed & ~pad[:, None, None, :]
    if softcap is None:
        bias = torch.zeros(B, 1, L, L, dtype=x.dtype).masked_fill(~allowed, -math.inf)
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=scaling, enable_gqa=True)
    else:
        kk, vv = k.repeat_interleave(H // Hkv, 1), v.repeat_interleave(H // Hkv, 1)
        s = softcap * torch.tanh(q @ kk.transpose(-1, -2) * scaling / softcap)
        o = s.masked_fill(~allowed, torch.finfo(x.dtype).min).softmax(-1) @ vv
    return o.transpose(1, 2).reshape(B, L, H * D) @ W["o_proj.weight"].T


def test_olmo2_oracle_through_the_independent_layer():
    """The same recipe with OLMo-2's shapes: norms of size H*D and Hkv*D, eps 1e-5, over the projection."""
    torch.manual_seed(0)
    shapes = [("q_proj.weight", (32, 16)), ("k_proj.weight", (16, 16)), ("v_proj.weight", (16, 16)),
              ("o_proj.weight", (16, 32)), ("q_norm.weight", (32,)), ("k_norm.weight", (16,))]
    for _, s in shapes[:4]:                              # the module's Linear layers draw on construction
        torch.nn.init.kaiming_uniform_(torch.empty(s), a=math.sqrt(5))
    W = {}
    for name, s in shapes:
        t = torch.empty(s, dtype=torch.float64)
        W[name] = t.uniform_(0.5, 1.5) if "norm" in name else t.normal_(0, 0.5)
    x = torch.randn(1, 6, 16, dtype=torch.float64)
    y = _layer(x, W, 4, 2, 8, norm="proj", eps=1e-5)
    want = torch.tensor([2.373724811761, -1.726456069082, -0.686115179469, -3.626853966753], dtype=torch.float64)
    torch.testing.assert_close(y[0, -1, :4], want, rtol=0, atol=1e-11)


@pytest.mark.parametrize("cfg", [
    dict(H=4, Hkv=2, D=8, softcap=None, qpas=None, theta=1e4, pad=False),
    dict(H=3, Hkv=1, D=6, softcap=2.0, qpas=None, theta=500.0, pad=True),
    dict(H=2, Hkv=2, D=4, softcap=50.0, qpas=11.0, theta=1e4, pad=True),
])
def test_layer_against_the_independent_layer(cfg):
    g = _gen(7)
    H, Hkv, D = cfg["H"], cfg["Hkv"], cfg["D"]
    hidden, B, L = 10, 3, 7
    m = SQ.SoftcapQKNormAttention(hidden, H, Hkv, D, softcap=cfg["softcap"], query_pre_attn_scalar=cfg["qpas"],
                                  rope_theta=cfg["theta"]).double()
    with torch.no_grad():
        for name, p in m.named_parameters():
            p.copy_(0.5 + torch.rand(p.shape, generator=g, dtype=torch.float64) if "norm" in name
                    else _randn(g, *p.shape, scale=0.6))
    W = {n: p.detach() for n, p in m.named_parameters()}
    x = _randn(g, B, L, hidden, scale=2.0)
    pad = (torch.arange(L)[None, :] >= torch.tensor([7, 4, 1])[:, None]) if cfg["pad"] else None
    got = m(x, pad)
    scaling = cfg["qpas"] ** -0.5 if cfg["qpas"] else None
    want = _layer(x, W, H, Hkv, D, softcap=cfg["softcap"], scaling=scaling, theta=cfg["theta"], pad=pad)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)


def test_norm_commutes_with_rope_only_for_unit_weights():
    g = _gen(8)
    x = _randn(g, 1, 3, 9, 8)

    def norm(t, w):
        return t / torch.sqrt(t.pow(2).mean(-1, keepdim=True) + 1e-6) * w
    ones, w = torch.ones(8, dtype=torch.float64), 0.5 + torch.rand(8, generator=g, dtype=torch.float64)
    assert (norm(_rope_complex(x, 1e4), ones) - _rope_complex(norm(x, ones), 1e4)).abs().max() < 1e-14
    assert (norm(_rope_complex(x, 1e4), w) - _rope_complex(norm(x, w), 1e4)).abs().max() > 0.05


def test_mask_before_the_cap_leaks_only_with_small_caps():
    g = _gen(9)
    q, k, v = _randn(g, 1, 1, 6, 4), _randn(g, 1, 1, 6, 4), _randn(g, 1, 1, 6, 4)

    def masked_then_capped(cap):
        s = (q @ k.transpose(-1, -2) / 2).masked_fill(torch.ones(6, 6).triu(1).bool(), -math.inf)
        return SQ.soft_cap(s, cap).softmax(-1) @ v
    assert (masked_then_capped(50.0) - SQ.capped_attention(q, k, v, 0.5, 50.0)).abs().max() < 1e-15
    assert (masked_then_capped(2.0) - SQ.capped_attention(q, k, v, 0.5, 2.0)).abs().max() > 0.05
    assert float(SQ.soft_cap(torch.tensor(-math.inf, dtype=torch.float64), 2.0)) == -2.0


def test_soft_cap_and_rms_norm_by_hand():
    x = torch.tensor([-1e3, -100.0, -1.0, 0.0, 1e-3, 10.0, 100.0, math.inf], dtype=torch.float64)
    want = [50 * math.tanh(v / 50) if math.isfinite(v) else 50.0 for v in x.tolist()]
    assert SQ.soft_cap(x, 50.0).tolist() == pytest.approx(want, rel=1e-15)
    g = _gen(10)
    xb = _randn(g, 4, 6).to(torch.bfloat16)
    w = (0.5 + torch.rand(6, generator=g)).to(torch.bfloat16)
    h = xb.float()
    want_b = w * (h / torch.sqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)).to(torch.bfloat16)
    assert torch.equal(SQ.rms_norm(xb, w, 1e-6), want_b)
    small = _randn(g, 3, 5, scale=1e-3)
    got = SQ.rms_norm(small, torch.ones(5, dtype=torch.float64), 1e-6)
    ms = [sum(v * v for v in row) / 5 for row in small.tolist()]
    want = [v / math.sqrt(m + 1e-6) for row, m in zip(small.tolist(), ms) for v in row]
    assert got.flatten().tolist() == pytest.approx(want, rel=1e-13)


# =============================================================================== gated_deltanet
def _facts_inputs():
    """Seed 0; q, k (B, T, H, K), v (B, T, H, V), beta = rand, g = -rand, in that order."""
    torch.manual_seed(0)
    B, T, H, K, V = 2, 11, 2, 4, 3
    q = torch.randn(B, T, H, K, dtype=torch.float64)
    k = torch.randn(B, T, H, K, dtype=torch.float64)
    v = torch.randn(B, T, H, V, dtype=torch.float64)
    beta = torch.rand(B, T, H, dtype=torch.float64)
    g = -torch.rand(B, T, H, dtype=torch.float64)
    return q, k, v, g, beta


def test_gated_delta_oracle():
    q, k, v, g, beta = _facts_inputs()
    o, _ = GD.gated_delta_recurrent(q, k, v, g, beta)
    torch.testing.assert_close(o[0, -1, 0], torch.tensor([-0.241930435298, 0.285129998472, -0.000729546056],
                                                         dtype=torch.float64), rtol=0, atol=1e-11)
    torch.testing.assert_close(o[1, 5, 1], torch.tensor([0.292905379066, -0.232811558416, -0.144814215334],
                                                        dtype=torch.float64), rtol=0, atol=1e-11)


def _paper_form(q, k, v, g, beta, S0=None, scale=None):
    """S_t = alpha_t S_{t-1} (I - beta_t k_t k_t^T) + beta_t v_t k_t^T with S (V x K), o_t = S_t q_t."""
    B, T, H, K = q.shape
    V = v.shape[-1]
    scale = K ** -0.5 if scale is None else scale
    qn = q / torch.sqrt((q * q).sum(-1, keepdim=True) + 1e-6) * scale
    kn = k / torch.sqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    o = torch.zeros(B, T, H, V, dtype=q.dtype)
    S_all = torch.zeros(B, H, K, V, dtype=q.dtype)
    for b in range(B):
        for h in range(H):
            S = torch.zeros(V, K, dtype=q.dtype) if S0 is None else S0[b, h].T.clone()
            for t in range(T):
                kt = kn[b, t, h]
                forget = torch.eye(K, dtype=q.dtype) - beta[b, t, h] * torch.outer(kt, kt)
                S = math.exp(float(g[b, t, h])) * S @ forget + beta[b, t, h] * torch.outer(v[b, t, h], kt)
                o[b, t, h] = S @ qn[b, t, h]
            S_all[b, h] = S.T
    return o, S_all


def test_recurrent_against_the_paper_form():
    q, k, v, g, beta = _facts_inputs()
    S0 = _randn(_gen(11), 2, 2, 4, 3)
    o, S = GD.gated_delta_recurrent(q, k, v, g, beta, initial_state=S0, scale=0.7)
    o_p, S_p = _paper_form(q, k, v, g, beta, S0, scale=0.7)
    torch.testing.assert_close(o, o_p, rtol=0, atol=1e-14)
    torch.testing.assert_close(S, S_p, rtol=0, atol=1e-14)


def test_scalar_recurrence_in_python_floats():
    """K = V = 1, scale 1: the normalised k and q are x / sqrt(x^2 + eps), about their sign."""
    vals, gs, bs = [4.0, 4.0, 0.0, -2.5, 1.0], [-0.7, -0.1, -2.0, 0.0, -0.3], [0.5, 0.9, 0.2, 1.0, 0.4]
    signs_k, signs_q = [1, -1, 1, 1, -1], [1, 1, -1, 1, 1]
    t = lambda xs: torch.tensor(xs, dtype=torch.float64).view(1, 5, 1, 1)   # noqa: E731
    o, _ = GD.gated_delta_recurrent(t(signs_q) * 3.0, t(signs_k) * 0.2, t(vals), t(gs).view(1, 5, 1),
                                    t(bs).view(1, 5, 1), scale=1.0)
    # l2norm of a 1-vector x is x / sqrt(x^2 + 1e-6): recompute with the inputs' magnitudes
    nq, nk = 3.0 / math.sqrt(9 + 1e-6), 0.2 / math.sqrt(0.04 + 1e-6)
    S, want = 0.0, []
    for v, gg, b, sk, sq in zip(vals, gs, bs, signs_k, signs_q):
        kk, qq = sk * nk, sq * nq
        S = math.exp(gg) * S
        S = S + kk * b * (v - S * kk)
        want.append(S * qq)
    assert o.flatten().tolist() == pytest.approx(want, rel=1e-13)


def test_exact_recall_with_orthonormal_keys_and_no_decay():
    """beta = 1, g = 0, orthonormal keys: after the writes, S^T k_i = v_i for every i (the delta rule
    overwrites; linear attention would add)."""
    K, V = 6, 4
    Qm, _ = torch.linalg.qr(_randn(_gen(12), K, K))
    keys = Qm.T[:5].reshape(1, 5, 1, K) * 1e3                          # normalised away (eps negligible)
    v = _randn(_gen(13), 1, 5, 1, V)
    ones, zeros = torch.ones(1, 5, 1, dtype=torch.float64), torch.zeros(1, 5, 1, dtype=torch.float64)
    _, S = GD.gated_delta_recurrent(keys, keys, v, zeros, ones)
    kn = keys / keys.norm(dim=-1, keepdim=True)
    recalled = torch.einsum("kv,tk->tv", S[0, 0], kn[0, :, 0])
    torch.testing.assert_close(recalled, v[0, :, 0], rtol=0, atol=1e-11)


@pytest.mark.parametrize("chunk", [1, 2, 5, 11, 12, 64])
def test_chunked_equals_recurrent_with_gradients(chunk):
    q, k, v, g, beta = _facts_inputs()
    S0 = _randn(_gen(14), 2, 2, 4, 3)
    g = g.clone()
    g[:, ::2] = -120.0                                                  # overflow above the diagonal if not masked
    ins = [t.clone().requires_grad_(True) for t in (q, k, v, g, beta, S0)]
    ins2 = [t.clone().requires_grad_(True) for t in (q, k, v, g, beta, S0)]
    o1, S1 = GD.gated_delta_recurrent(*ins)
    o2, S2 = GD.gated_delta_chunked(*ins2, chunk_size=chunk)
    # gam reaches about -500 here: exp(gam_i - gam_j) of such differences carries ~ 500 eps relative
    torch.testing.assert_close(o2, o1, rtol=0, atol=1e-12)
    torch.testing.assert_close(S2, S1, rtol=0, atol=1e-12)
    up_o, up_s = _randn(_gen(15), *o1.shape), _randn(_gen(16), *S1.shape)
    ((o1 * up_o).sum() + (S1 * up_s).sum()).backward()
    ((o2 * up_o).sum() + (S2 * up_s).sum()).backward()
    for a, b in zip(ins, ins2):
        torch.testing.assert_close(b.grad, a.grad, rtol=0, atol=1e-12)


def test_one_chunk_against_a_dense_solve():
    """With one chunk of T tokens the corrections solve (I + A) U = beta (v - e^gam K S0) for all t at
    once: check against torch.linalg.inv of the dense T x T matrix, and the inverse helper itself."""
    q, k, v, g, beta = (t[:1, :, :1] for t in _facts_inputs())
    T = q.shape[1]
    S0 = _randn(_gen(17), 4, 3)
    qn = q[0, :, 0] / torch.sqrt((q[0, :, 0] ** 2).sum(-1, keepdim=True) + 1e-6) * 0.5
    kn = k[0, :, 0] / torch.sqrt((k[0, :, 0] ** 2).sum(-1, keepdim=True) + 1e-6)
    gam = torch.cumsum(g[0, :, 0], 0)
    decay = torch.tensor([[math.exp(gam[i] - gam[j]) if j <= i else 0.0 for j in range(T)] for i in range(T)],
                         dtype=torch.float64)
    b = beta[0, :, 0]
    A = torch.tril(b[:, None] * (kn @ kn.T) * decay, -1)
    rhs = b[:, None] * (v[0, :, 0] - gam.exp()[:, None] * (kn @ S0))
    U = torch.linalg.inv(torch.eye(T, dtype=torch.float64) + A) @ rhs
    o_dense = gam.exp()[:, None] * (qn @ S0) + ((qn @ kn.T) * decay) @ U
    o, _ = GD.gated_delta_chunked(q, k, v, g, beta, initial_state=S0.view(1, 1, 4, 3), scale=0.5, chunk_size=T)
    torch.testing.assert_close(o[0, :, 0], o_dense, rtol=0, atol=1e-13)
    torch.testing.assert_close(GD._unit_lower_inverse(A), torch.linalg.inv(torch.eye(T, dtype=torch.float64) + A),
                               rtol=0, atol=1e-13)


def test_l2norm_and_gates_by_hand():
    g = _gen(18)
    x = _randn(g, 3, 5, scale=4e-4)
    want = [v / math.sqrt(sum(w * w for w in row) + 1e-6) for row in x.tolist() for v in row]
    assert GD.l2norm(x).flatten().tolist() == pytest.approx(want, rel=1e-13)
    assert (GD.l2norm(x) - F.normalize(x, dim=-1)).abs().max() > 0.1     # the clamp differs here
    a, b, A_log, dt = _randn(g, 2, 3, 4), _randn(g, 2, 3, 4), _randn(g, 4), _randn(g, 4)
    gg, beta = GD.gates(a, b, A_log, dt)
    sp = torch.log1p(torch.exp(a + dt))
    torch.testing.assert_close(gg, -torch.exp(A_log) * sp, rtol=1e-14, atol=0)
    torch.testing.assert_close(beta, 1 / (1 + torch.exp(-b)), rtol=1e-14, atol=0)
    assert bool((gg <= 0).all())


def _module(**fns):
    return types.SimpleNamespace(**fns)


def test_agreement_check_passes_the_reference_and_fails_float32_and_no_solve():
    grader = load("gated_deltanet", "graders")
    case = next(c for c in grader.cases(Ctx(0)) if c.name == "forms_agree_fp64")
    assert failures("gated_deltanet", case, GD) == []

    def as_float32(fn):
        def run(*args, **kwargs):
            o, S = fn(*(a.float() if torch.is_tensor(a) else a for a in args), **kwargs)
            return o.double(), S.double()
        return run
    f32 = _module(gated_delta_recurrent=GD.gated_delta_recurrent,
                  gated_delta_chunked=as_float32(GD.gated_delta_chunked))
    assert failures("gated_deltanet", case, f32)

    def no_solve(q, k, v, g, beta, initial_state=None, scale=None, chunk_size=64):
        saved = GD._unit_lower_inverse
        GD._unit_lower_inverse = lambda A: torch.eye(A.shape[-1], dtype=A.dtype).expand_as(A)
        try:
            return GD.gated_delta_chunked(q, k, v, g, beta, initial_state, scale, chunk_size)
        finally:
            GD._unit_lower_inverse = saved
    assert failures("gated_deltanet", case, _module(gated_delta_recurrent=GD.gated_delta_recurrent,
                                                    gated_delta_chunked=no_solve))
