"""Cross-checks of the bank-4 RoPE references (mla, rope_scaling, rope_cached_decode) against
independent implementations: the Hugging Face DeepSeek-V3 oracle values, per-token loops and SDPA
for MLA, the inv_freq tables printed by transformers' own rope-init functions (float32, so compared
at 1e-6), Meta's llama3 `apply_scaling` loop, complex-number RoPE on permuted dims, and the
prefill + decode == full recompute property."""
import math

import pytest
import torch
import torch.nn.functional as F

from attn_drill import bank
from attn_drill.bank import sources
from attn_drill.room.usercode import load_source
from loading import load

MLA = load("mla")
SCALE = load("rope_scaling")
CACHED = load("rope_cached_decode")


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _mutant(pid: str, mistake: str):
    spec = bank.get(pid)
    source = sources.mutant_source(spec, sources.read(bank.reference_path(pid)), mistake)
    return load_source(source, f"m_{pid}_{mistake}")


# ============================================================================================ mla
def _oracle_module(mod=MLA):
    """The recipe behind the facts' oracle: seed 0, build (its Linear inits draw from the RNG), every
    parameter normal_(std=0.3) in named_parameters() order, then x = randn(2, 7, 32) in float64."""
    torch.manual_seed(0)
    m = mod.MultiHeadLatentAttention(32, 4, 12, 10, 6, 4, 5).double()
    with torch.no_grad():
        for _, p in m.named_parameters():
            p.normal_(std=0.3)
    x = torch.randn(2, 7, 32, dtype=torch.float64)
    return m, x


def test_mla_parameter_order_is_hugging_face_order():
    m, _ = _oracle_module()
    assert [n for n, _ in m.named_parameters()] == [
        "q_a_proj.weight", "q_a_layernorm.weight", "q_b_proj.weight", "kv_a_proj_with_mqa.weight",
        "kv_a_layernorm.weight", "kv_b_proj.weight", "o_proj.weight"]


def test_mla_matches_hugging_face_deepseek_v3_oracle():
    m, x = _oracle_module()
    with torch.no_grad():
        y = m(x)
    want0 = torch.tensor([-0.339558921722, -0.040571550503, 0.654181750230, 0.148182490794], dtype=torch.float64)
    want1 = torch.tensor([-0.556648387169, 0.012654132413, 0.241288323233, -0.475396777537], dtype=torch.float64)
    torch.testing.assert_close(y[0, 0, :4], want0, rtol=0, atol=1e-11)
    torch.testing.assert_close(y[1, -1, :4], want1, rtol=0, atol=1e-11)


def _rms(v, w, eps=1e-6):
    return v / math.sqrt(float((v * v).mean()) + eps) * w


def _rope_vec(v, pos, theta):
    """One vector's adjacent pairs turned by pos * theta^(-2i/d), with cos/sin per pair."""
    d = v.numel()
    out = v.clone()
    for i in range(d // 2):
        a = pos * theta ** (-2 * i / d)
        c, s = math.cos(a), math.sin(a)
        out[2 * i] = v[2 * i] * c - v[2 * i + 1] * s
        out[2 * i + 1] = v[2 * i] * s + v[2 * i + 1] * c
    return out


def _mla_loops(m, x):
    """MLA by the formulas, one token and one head at a time (float64, causal, positions 0..L-1)."""
    B, L, _ = x.shape
    H, dn, dr, dv, r = m.num_heads, m.qk_nope_head_dim, m.qk_rope_head_dim, m.v_head_dim, m.kv_lora_rank
    theta = m.rope_theta
    W = {n: p.detach() for n, p in m.named_parameters()}
    kvb = W["kv_b_proj.weight"]
    out = torch.zeros(B, L, H * dv, dtype=torch.float64)
    for b in range(B):
        qs, cs, kps = [], [], []
        for t in range(L):
            q = W["q_b_proj.weight"] @ _rms(W["q_a_proj.weight"] @ x[b, t], W["q_a_layernorm.weight"])
            qs.append(q.view(H, dn + dr))
            a = W["kv_a_proj_with_mqa.weight"] @ x[b, t]
            cs.append(_rms(a[:r], W["kv_a_layernorm.weight"]))
            kps.append(_rope_vec(a[r:], t, theta))
        for h in range(H):
            w_uk = kvb[h * (dn + dv): h * (dn + dv) + dn]            # (dn, r)
            w_uv = kvb[h * (dn + dv) + dn: (h + 1) * (dn + dv)]      # (dv, r)
            for s in range(L):
                q_nope, q_pe = qs[s][h, :dn], _rope_vec(qs[s][h, dn:], s, theta)
                logits = torch.tensor([float(q_nope @ (w_uk @ cs[t]) + q_pe @ kps[t]) / math.sqrt(dn + dr)
                                       for t in range(s + 1)], dtype=torch.float64)
                p = torch.exp(logits - logits.max())
                p = p / p.sum()
                out[b, s, h * dv:(h + 1) * dv] = sum(p[t] * (w_uv @ cs[t]) for t in range(s + 1))
    return out @ W["o_proj.weight"].T


@pytest.mark.parametrize("sizes", [(2, 5, 18, 3, 7, 6, 4, 4, 5), (1, 6, 14, 1, 5, 9, 2, 6, 3)])
def test_mla_matches_per_token_loops(sizes):
    B, L, E, H, rq, r, dn, dr, dv = sizes
    torch.manual_seed(1)
    m = MLA.MultiHeadLatentAttention(E, H, rq, r, dn, dr, dv, rope_theta=500.0).double()
    with torch.no_grad():
        m.q_a_layernorm.weight.uniform_(0.5, 1.5)
        m.kv_a_layernorm.weight.uniform_(0.5, 1.5)
    x = torch.randn(B, L, E, dtype=torch.float64, generator=_gen(2))
    with torch.no_grad():
        want = _mla_loops(m, x)
        torch.testing.assert_close(m(x), want, rtol=0, atol=1e-12)
        m.init_cache(B, L + 2)
        got = torch.cat([m(x[:, :2], 0)] + [m(x[:, t:t + 1], t) for t in range(2, L)], dim=1)
        torch.testing.assert_close(got, want, rtol=0, atol=1e-12)


def test_mla_matches_sdpa_on_expanded_heads():
    """Concatenate [k_nope | k_pe] per head (k_pe broadcast) and [q_nope | q_pe]: plain causal attention
    over a (dn + dr)-dim head with the default 1/sqrt(dn + dr) scale."""
    torch.manual_seed(3)
    B, L, E, H, rq, r, dn, dr, dv = 2, 9, 20, 4, 8, 7, 6, 4, 5
    m = MLA.MultiHeadLatentAttention(E, H, rq, r, dn, dr, dv).double()
    x = torch.randn(B, L, E, dtype=torch.float64, generator=_gen(4))
    W = {n: p.detach() for n, p in m.named_parameters()}
    pos = torch.arange(L, dtype=torch.float64)

    def rope(t):                          # (..., L, dr) with positions on dim -2: complex, pairs (2i, 2i+1)
        ang = pos[:, None] * 10000.0 ** (-torch.arange(0, dr, 2, dtype=torch.float64) / dr)
        tc = torch.view_as_complex(t.reshape(*t.shape[:-1], dr // 2, 2).contiguous())
        return torch.view_as_real(tc * torch.polar(torch.ones_like(ang), ang)).reshape(t.shape)

    q = F.linear(F.rms_norm(F.linear(x, W["q_a_proj.weight"]), (rq,), W["q_a_layernorm.weight"], 1e-6),
                 W["q_b_proj.weight"]).view(B, L, H, dn + dr).permute(0, 2, 1, 3)
    q = torch.cat([q[..., :dn], rope(q[..., dn:])], dim=-1)                       # (B, H, L, dn+dr)
    a = F.linear(x, W["kv_a_proj_with_mqa.weight"])
    c = F.rms_norm(a[..., :r], (r,), W["kv_a_layernorm.weight"], 1e-6)
    kv = F.linear(c, W["kv_b_proj.weight"]).view(B, L, H, dn + dv).permute(0, 2, 1, 3)
    k = torch.cat([kv[..., :dn], rope(a[..., r:])[:, None].expand(B, H, L, dr)], dim=-1)
    o = F.scaled_dot_product_attention(q, k, kv[..., dn:], is_causal=True)       # (B, H, L, dv)
    want = F.linear(o.permute(0, 2, 1, 3).reshape(B, L, H * dv), W["o_proj.weight"])
    with torch.no_grad():
        torch.testing.assert_close(m(x), want, rtol=0, atol=1e-13)


def test_mla_cache_holds_normalised_latents_and_rotated_k_pe():
    torch.manual_seed(5)
    B, L, E, H, rq, r, dn, dr, dv = 2, 8, 16, 2, 6, 5, 4, 6, 3
    m = MLA.MultiHeadLatentAttention(E, H, rq, r, dn, dr, dv, rope_theta=100.0).double()
    x = torch.randn(B, L, E, dtype=torch.float64, generator=_gen(6))
    with torch.no_grad():
        m.init_cache(B, L + 3)
        pos = 0
        for n in (3, 1, 2, 2):
            m(x[:, pos:pos + n], pos)
            pos += n
        a = x @ m.kv_a_proj_with_mqa.weight.T
        lat = a[..., :r] * torch.rsqrt(a[..., :r].pow(2).mean(-1, keepdim=True) + 1e-6) * m.kv_a_layernorm.weight
        pe = torch.stack([torch.stack([_rope_vec(a[b, t, r:], t, 100.0) for t in range(L)]) for b in range(B)])
    assert m.kv_cache.shape == (B, L + 3, r) and m.pe_cache.shape == (B, L + 3, dr)
    torch.testing.assert_close(m.kv_cache[:, :L], lat, rtol=0, atol=1e-13)
    torch.testing.assert_close(m.pe_cache[:, :L], pe, rtol=0, atol=1e-13)
    assert m.kv_cache[:, L:].abs().max() == 0


def test_mla_statement_numbers():
    # k_pe example: dr = 4, t = 1, k_raw = [1, 0, 0, 1]
    cos, sin = MLA._rope_angles(torch.tensor([1]), 4, 10000.0, torch.float64)
    got = MLA._rope(torch.tensor([1.0, 0, 0, 1], dtype=torch.float64).view(1, 1, 4), cos, sin)
    want = torch.tensor([math.cos(1), math.sin(1), -math.sin(0.01), math.cos(0.01)], dtype=torch.float64)
    torch.testing.assert_close(got.view(4), want, rtol=0, atol=1e-15)
    # DeepSeek-V3: cache per token and layer, expanded keys and values, mscale
    assert 512 + 64 == 576 and 128 * (192 + 128) == 40960
    assert abs((0.1 * math.log(40) + 1) - 1.3688879454113936) < 1e-15


@pytest.mark.parametrize("mistake,change", [("rope_rotate_half", 0.289), ("scale_without_rope_dim", 0.057),
                                            ("scale_v_head_dim", 0.081), ("kv_b_all_k_then_v", 2.83),
                                            ("norm_includes_rope_part", 0.216)])
def test_mla_mutants_change_the_oracle_output_as_the_facts_say(mistake, change):
    m, x = _oracle_module()
    mm, _ = _oracle_module(_mutant("mla", mistake))
    with torch.no_grad():
        diff = float((mm(x) - m(x)).abs().max())
    assert abs(diff - change) <= 0.005 * change, diff      # the facts give three significant digits


# =================================================================================== rope_scaling
# HF's ROPE_INIT_FUNCTIONS output (float32), config A: head dim 16, theta 1e4
BASE_A = [1, 0.3162277639, 0.1000000015, 0.03162277862, 0.009999999776, 0.003162277862, 0.001000000047,
          0.0003162277862]
LINEAR_A = [0.25, 0.07905694097, 0.02500000037, 0.007905694656, 0.002499999944, 0.0007905694656, 0.0002500000119,
            7.905694656e-05]
ORACLES = [
    ("none", 16, 1e4, None, None, BASE_A, 1.0),
    ("linear", 16, 1e4, {"rope_type": "linear", "factor": 4.0}, None, LINEAR_A, 1.0),
    ("dynamic_le_M", 16, 1e4, {"rope_type": "dynamic", "factor": 4.0, "max_position_embeddings": 32}, 32, BASE_A, 1.0),
    ("dynamic_none", 16, 1e4, {"rope_type": "dynamic", "factor": 4.0, "max_position_embeddings": 32}, None, BASE_A,
     1.0),
    ("dynamic_64", 16, 1e4, {"rope_type": "dynamic", "factor": 4.0, "max_position_embeddings": 32}, 64,
     [1, 0.2512737513, 0.06313850731, 0.01586504839, 0.003986470401, 0.001001695404, 0.000251699792, 6.324554852e-05],
     1.0),
    ("dynamic_128", 16, 1e4, {"rope_type": "dynamic", "factor": 4.0, "max_position_embeddings": 32}, 128,
     [1, 0.2192124724, 0.04805410281, 0.01053405832, 0.002309196861, 0.0005062047276, 0.0001109663863,
      2.432521251e-05], 1.0),
    ("yarn", 16, 1e4, {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32,
                       "beta_fast": 32, "beta_slow": 1}, None, [1, 0.1976423562] + LINEAR_A[2:], 1.138629436111989),
    ("yarn_no_truncate", 16, 1e4, {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32,
                                   "truncate": False}, None, [1, 0.1484902501] + LINEAR_A[2:], 1.138629436111989),
    ("llama3", 16, 1e4, {"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 32}, None, [1, 0.1273239553] + LINEAR_A[2:], 1.0),
    ("yarn_B", 32, 1e4, {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 256}, None,
     [1, 0.492048651, 0.2371708304, 0.1111424565, 0.04999999702, 0.0210877955, 0.007905693725, 0.002222849289,
      0.001249999972, 0.0007029266562, 0.0003952847328, 0.0002222849289, 0.0001250000059, 7.029266271e-05,
      3.952847328e-05, 2.222849253e-05], 1.2079441541679836),
    ("llama3_B", 32, 1e4, {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                           "original_max_position_embeddings": 256}, None,
     [1, 0.5623413324, 0.3162277639, 0.1778279394, 0.1000000015, 0.02820678242, 0.006613106932, 0.002222849289,
      0.001249999972, 0.0007029266562, 0.0003952847328, 0.0002222849289, 0.0001250000059, 7.029266271e-05,
      3.952847328e-05, 2.222849253e-05], 1.0),
    ("deepseek_equal_mscale", 16, 1e4, {"rope_type": "yarn", "factor": 40.0, "mscale": 1.0, "mscale_all_dim": 1.0,
                                        "original_max_position_embeddings": 32}, None,
     [1, 0.1620667279, 0.002499999944, 0.0007905694656, 0.0002500000119, 7.905694656e-05, 2.499999937e-05,
      7.905694474e-06], 1.0),
    ("deepseek_mscale_ratio", 16, 1e4, {"rope_type": "yarn", "factor": 40.0, "mscale": 1.0, "mscale_all_dim": 0.707,
                                        "original_max_position_embeddings": 32}, None,
     [1, 0.1620667279, 0.002499999944, 0.0007905694656, 0.0002500000119, 7.905694656e-05, 2.499999937e-05,
      7.905694474e-06], 1.0857263992561355),
]


@pytest.mark.parametrize("name,dim,theta,scaling,seq_len,want,factor", ORACLES, ids=[o[0] for o in ORACLES])
def test_rope_scaling_matches_hugging_face_tables(name, dim, theta, scaling, seq_len, want, factor):
    inv_freq, f = SCALE.scaled_inv_freq(dim, theta, scaling, seq_len)
    assert inv_freq.dtype == torch.float64 and inv_freq.shape == (dim // 2,)
    torch.testing.assert_close(inv_freq, torch.tensor(want, dtype=torch.float64), rtol=1e-6, atol=0)
    assert isinstance(f, float) and abs(f - factor) < 1e-12


def test_rope_scaling_real_configs():
    llama, _ = SCALE.scaled_inv_freq(128, 500000.0, {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                                      "high_freq_factor": 4.0,
                                                      "original_max_position_embeddings": 8192})
    want = torch.tensor([1, 0.0165604409, 0.00137189368, 0.00085675146, 3.42810235e-05, 3.06892588e-07],
                        dtype=torch.float64)
    torch.testing.assert_close(llama[[0, 20, 30, 31, 40, 63]], want, rtol=1e-6, atol=0)
    base, _ = SCALE.scaled_inv_freq(128, 500000.0)
    kept = int(torch.isclose(llama, base, rtol=1e-12, atol=0).sum())
    divided = int(torch.isclose(llama, base / 8, rtol=1e-12, atol=0).sum())
    assert (kept, divided, 64 - kept - divided) == (29, 29, 6)
    ds, f = SCALE.scaled_inv_freq(64, 10000.0, {"rope_type": "yarn", "factor": 40.0, "beta_fast": 32, "beta_slow": 1,
                                                 "mscale": 1.0, "mscale_all_dim": 1.0,
                                                 "original_max_position_embeddings": 4096})
    want = torch.tensor([1, 0.0562341288, 0.0390069261, 0.0268793609, 0.0083345091, 0.00550000044, 0.000790569407,
                         3.33380353e-06], dtype=torch.float64)
    torch.testing.assert_close(ds[[0, 10, 11, 12, 15, 16, 20, 31]], want, rtol=1e-6, atol=0)
    assert f == 1.0


def _meta_apply_scaling(freqs, scale_factor, low_freq_factor, high_freq_factor, old_context_len):
    """Meta's llama3 `apply_scaling`, one frequency at a time with its three branches."""
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    out = []
    for freq in freqs.tolist():
        wavelen = 2 * math.pi / freq
        if wavelen < high_freq_wavelen:
            out.append(freq)
        elif wavelen > low_freq_wavelen:
            out.append(freq / scale_factor)
        else:
            smooth = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
            out.append((1 - smooth) * freq / scale_factor + smooth * freq)
    return torch.tensor(out, dtype=torch.float64)


@pytest.mark.parametrize("dim,theta,s,lo,hi,lo_ctx", [(128, 500000.0, 8.0, 1.0, 4.0, 8192),
                                                      (16, 1e4, 4.0, 1.0, 4.0, 32),
                                                      (64, 1e4, 32.0, 2.0, 8.0, 1000),
                                                      (10, 100.0, 3.0, 1.0, 2.0, 50)])
def test_rope_scaling_llama3_matches_meta_loop(dim, theta, s, lo, hi, lo_ctx):
    base = 1.0 / theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    got, f = SCALE.scaled_inv_freq(dim, theta, {"rope_type": "llama3", "factor": s, "low_freq_factor": lo,
                                                "high_freq_factor": hi, "original_max_position_embeddings": lo_ctx})
    torch.testing.assert_close(got, _meta_apply_scaling(base, s, lo, hi, lo_ctx), rtol=1e-14, atol=0)
    assert f == 1.0


def _yarn_paper(dim, theta, s, L_o, alpha=1.0, beta=32.0):
    """The YaRN paper's ramp on the number of rotations r = L_o / wavelength (no floor/ceil)."""
    base = 1.0 / theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    r = L_o * base / (2 * math.pi)
    gamma = ((r - alpha) / (beta - alpha)).clamp(0, 1)
    return (1 - gamma) * base / s + gamma * base


def test_rope_scaling_follows_the_code_not_the_paper():
    paper_a = _yarn_paper(16, 1e4, 4.0, 32)
    torch.testing.assert_close(paper_a[:3], torch.tensor([0.349023, 0.0837279, 0.025], dtype=torch.float64),
                               rtol=5e-6, atol=0)            # six significant digits
    paper_b = _yarn_paper(32, 1e4, 8.0, 256)
    torch.testing.assert_close(paper_b[:7], torch.tensor([1, 0.418089, 0.145605, 0.0535761, 0.0211776, 0.0090787,
                                                          0.00421029], dtype=torch.float64), rtol=5e-6, atol=0)
    code_a, _ = SCALE.scaled_inv_freq(16, 1e4, {"rope_type": "yarn", "factor": 4.0,
                                                "original_max_position_embeddings": 32})
    assert (code_a - paper_a).abs().max() > 0.1


def _complex_rope(x, pos, inv_freq, f):
    """rotate_half RoPE as complex numbers on permuted dims: pair j is (x[j], x[j + D/2])."""
    D = x.shape[-1]
    z = torch.complex(x[..., :D // 2].double(), x[..., D // 2:].double())
    ang = pos.double()[:, None, :, None] * inv_freq                          # (B, 1, L, D/2)
    z = z * torch.polar(torch.full_like(ang, f), ang)
    return torch.cat([z.real, z.imag], dim=-1)


@pytest.mark.parametrize("scaling", [None, {"rope_type": "linear", "factor": 3.0},
                                     {"rope_type": "dynamic", "factor": 2.0, "max_position_embeddings": 10},
                                     {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 16},
                                     {"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0,
                                      "high_freq_factor": 4.0, "original_max_position_embeddings": 16}])
def test_rope_scaling_apply_matches_complex_numbers(scaling):
    B, H, Hk, L, D = 2, 3, 1, 7, 12
    q = torch.randn(B, H, L, D, dtype=torch.float64, generator=_gen(7))
    k = torch.randn(B, Hk, L, D, dtype=torch.float64, generator=_gen(8))
    pos = torch.stack([torch.arange(L), torch.arange(4, 4 + L)])
    qr, kr = SCALE.apply_scaled_rope(q, k, pos, 500.0, scaling)
    inv_freq, f = SCALE.scaled_inv_freq(D, 500.0, scaling, int(pos.max()) + 1)
    torch.testing.assert_close(qr, _complex_rope(q, pos, inv_freq, f), rtol=0, atol=1e-14)
    torch.testing.assert_close(kr, _complex_rope(k, pos, inv_freq, f), rtol=0, atol=1e-14)
    # the scores are the unscaled-magnitude scores times f^2 ...
    s0 = torch.einsum("ld,md->lm", qr[0, 0], kr[0, 0])
    plain = torch.einsum("ld,md->lm", *[_complex_rope(t, pos, inv_freq, 1.0)[0, 0] for t in (q, k)])
    torch.testing.assert_close(s0, plain * f * f, rtol=0, atol=1e-12)
    # ... and depend only on the distance: shifting every position leaves them unchanged (except for
    # dynamic scaling, whose frequencies depend on the largest position)
    if scaling is None or scaling["rope_type"] != "dynamic":
        q5, k5 = SCALE.apply_scaled_rope(q, k, pos + 5, 500.0, scaling)
        torch.testing.assert_close(torch.einsum("ld,md->lm", q5[0, 0], k5[0, 0]), s0, rtol=0, atol=1e-12)


def test_rope_scaling_worked_examples():
    x = torch.tensor([1.0, 0, 0, 1], dtype=torch.float64).view(1, 1, 1, 4)
    pos = torch.tensor([[1]])
    qr, _ = SCALE.apply_scaled_rope(x, x, pos, 10000.0, None)
    want = torch.tensor([math.cos(1), -math.sin(0.01), math.sin(1), math.cos(0.01)], dtype=torch.float64)
    torch.testing.assert_close(qr.view(4), want, rtol=0, atol=1e-15)
    torch.testing.assert_close(want, torch.tensor([0.54030, -0.01000, 0.84147, 0.99995], dtype=torch.float64),
                               rtol=0, atol=5e-6)
    qy, _ = SCALE.apply_scaled_rope(x, x, pos, 10000.0, {"rope_type": "yarn", "factor": 4.0,
                                                          "original_max_position_embeddings": 32})
    f = 0.1 * math.log(4) + 1
    assert abs(f - 1.13863) < 1e-5
    want = f * torch.tensor([math.cos(1), -math.sin(0.0025), math.sin(1), math.cos(0.0025)], dtype=torch.float64)
    torch.testing.assert_close(qy.view(4), want, rtol=0, atol=1e-15)
    table, _ = SCALE.scaled_inv_freq(16, 10000.0, {"rope_type": "yarn", "factor": 4.0,
                                                   "original_max_position_embeddings": 32})
    base = 10000.0 ** (-torch.arange(0, 16, 2, dtype=torch.float64) / 16)
    torch.testing.assert_close(table[:4], torch.tensor([1, 0.19764, 0.025, 0.0079057], dtype=torch.float64),
                               rtol=3e-5, atol=0)
    assert abs(float(table[1]) - float(base[1] + base[1] / 4) / 2) < 1e-15


def test_float32_angles_drift_at_long_positions():
    """The statement's claim: at position 32 000 a float32 angle is off by up to about 0.002 rad
    (position x 6e-8, the float32 rounding of the angle and of inv_freq), here with head dim 128."""
    pos = torch.arange(32000, 32064)
    inv = 1.0 / 10000.0 ** (torch.arange(0, 128, 2, dtype=torch.float64) / 128)
    exact = pos.double()[:, None] * inv
    f32 = (pos.float()[:, None] * inv.float()).double()
    err = float((f32 - exact).abs().max())
    assert 1e-3 < err < 32064 * 6e-8, err


# ============================================================================ rope_cached_decode
def _table(D, rows, theta=10000.0):
    ang = torch.arange(rows, dtype=torch.float64)[:, None] * theta ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    return torch.polar(torch.ones_like(ang), ang)


def _full_causal_sdpa(m, x, theta):
    """One pass over the whole sequence: rotate with cos/sin per pair, then SDPA with a float mask."""
    B, L, E = x.shape
    H, D = m.num_heads, m.head_dim
    q, k, v = F.linear(x, m.qkv_proj.weight).split(E, dim=-1)
    q, k, v = [t.reshape(B, L, H, D).permute(0, 2, 1, 3) for t in (q, k, v)]
    ang = torch.arange(L, dtype=torch.float64)[:, None] * theta ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    c, s = ang.cos(), ang.sin()

    def rot(t):
        e, o = t[..., 0::2], t[..., 1::2]
        return torch.stack([e * c - o * s, e * s + o * c], dim=-1).flatten(-2)
    mask = torch.zeros(L, L, dtype=torch.float64).masked_fill(torch.ones(L, L).triu(1).bool(), float("-inf"))
    o = F.scaled_dot_product_attention(rot(q), rot(k), v, attn_mask=mask)
    return F.linear(o.permute(0, 2, 1, 3).reshape(B, L, E), m.out_proj.weight)


def _decode(m, x, freqs, schedule, max_len):
    m.init_cache(x.shape[0], max_len)
    outs, pos = [], 0
    for n in schedule:
        outs.append(m(x[:, pos:pos + n], pos, freqs))
        pos += n
    return torch.cat(outs, dim=1)


@pytest.mark.parametrize("schedule,theta", [((6, 1, 3, 1), 10000.0), ((1, 1, 1, 1, 1, 1), 100.0),
                                            ((2, 5, 1, 4), 500000.0), ((40, 1, 5, 1, 16, 7), 10000.0)])
def test_rope_cached_decode_equals_full_recompute_and_sdpa(schedule, theta):
    torch.manual_seed(9)
    B, H, D = 2, 3, 6
    L = sum(schedule)
    m = CACHED.RoPECachedAttention(H * D, H).double()
    x = torch.randn(B, L, H * D, dtype=torch.float64, generator=_gen(10))
    freqs = _table(D, L + 5, theta)
    with torch.no_grad():
        inc = _decode(m, x, freqs, schedule, L + 2)
        full = _decode(m, x, freqs, (L,), L + 2)
        want = _full_causal_sdpa(m, x, theta)
    torch.testing.assert_close(inc, full, rtol=0, atol=1e-13)
    torch.testing.assert_close(full, want, rtol=0, atol=1e-13)
    # the cache holds keys rotated at their own positions: equal to one full pass's rotated keys
    q, k, v = F.linear(x, m.qkv_proj.weight).split(H * D, dim=-1)
    kc = torch.view_as_complex(k.reshape(B, L, H, D // 2, 2).permute(0, 2, 1, 3, 4).contiguous())
    torch.testing.assert_close(m.k_cache[:, :, :L], torch.view_as_real(kc * freqs[:L]).flatten(-2), rtol=0, atol=1e-13)


@pytest.mark.parametrize("mistake", ["positions_restart_per_chunk", "chunk_without_causal_mask",
                                     "causal_mask_top_left", "cached_keys_rotated_again"])
def test_rope_cached_decode_mutants_break_the_recompute_property(mistake):
    torch.manual_seed(0)
    B, H, D, schedule = 2, 3, 6, (6, 1, 3, 1)
    L = sum(schedule)
    m = CACHED.RoPECachedAttention(H * D, H).double()
    mm = _mutant("rope_cached_decode", mistake).RoPECachedAttention(H * D, H).double()
    mm.load_state_dict(m.state_dict())
    x = torch.randn(B, L, H * D, dtype=torch.float64, generator=_gen(11))
    freqs = _table(D, L + 2)
    with torch.no_grad():
        good = _decode(m, x, freqs, schedule, L)
        bad = _decode(mm, x, freqs, schedule, L)
    assert float((good - bad).abs().max()) > 0.05


def test_rope_cached_decode_statement_example():
    """head_dim 4, position 1, k = [1, 0, 0, 1]: the cached key is [cos 1, sin 1, -sin 0.01, cos 0.01]."""
    k = torch.tensor([1.0, 0, 0, 1], dtype=torch.float64).view(1, 1, 1, 4)
    got = CACHED._rotate(k, _table(4, 2)[1:2])
    want = torch.tensor([math.cos(1), math.sin(1), -math.sin(0.01), math.cos(0.01)], dtype=torch.float64)
    torch.testing.assert_close(got.view(4), want, rtol=0, atol=1e-15)
