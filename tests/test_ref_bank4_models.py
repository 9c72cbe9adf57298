"""Cross-checks of four model references (attention_sinks, differential_attention, llama_block,
gated_attention) against independent implementations: brute-force loops over the tokens a query
keeps, a closed form of cache positions, flex_attention with a mask_mod, F.scaled_dot_product_attention
with explicit masks and enable_gqa, complex-number RoPE, F.rms_norm, and the published oracle values
(Hugging Face LlamaDecoderLayer and Qwen3NextAttention, the official Diff Transformer module) rebuilt
from their seeds."""
from __future__ import annotations

import math
import types
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from loading import failures, load

SINKS = load("attention_sinks")
DIFF = load("differential_attention")
LLAMA = load("llama_block")
GATED = load("gated_attention")
F64 = torch.float64


def _fill(module, rule):
    """Overwrite every parameter, in named_parameters() order, with rule(name, fresh float64 randn)."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            p.copy_(rule(name, torch.randn(p.shape, dtype=F64)))


def _rope_half_complex(x: torch.Tensor, pos: torch.Tensor, theta: float) -> torch.Tensor:
    """Rotate-half RoPE written with complex numbers: dims i and i + D/2 are one complex number.
    x (..., n, D), pos (n,) float64 positions."""
    D = x.shape[-1]
    h = D // 2
    z = torch.complex(x[..., :h].double(), x[..., h:].double())
    freq = theta ** (-2.0 * torch.arange(h, dtype=F64) / D)
    z = z * torch.polar(torch.ones(len(pos), h, dtype=F64), pos.double()[:, None] * freq)
    return torch.cat([z.real, z.imag], dim=-1)


def _rope_adjacent_complex(x: torch.Tensor, pos: torch.Tensor, theta: float) -> torch.Tensor:
    """Meta-layout RoPE (pairs 2i, 2i+1) with view_as_complex; x (..., n, D)."""
    D = x.shape[-1]
    z = torch.view_as_complex(x.double().reshape(*x.shape[:-1], D // 2, 2).contiguous())
    freq = theta ** (-torch.arange(0, D, 2, dtype=F64) / D)
    z = z * torch.polar(torch.ones(len(pos), D // 2, dtype=F64), pos.double()[:, None] * freq)
    return torch.view_as_real(z).flatten(-2)


# ================================================================ attention_sinks
def _stream(module, x, schedule):
    module.init_cache(x.shape[0])
    outs, pos = [], 0
    for n in schedule:
        outs.append(module(x[:, pos:pos + n]))
        pos += n
    return torch.cat(outs, dim=1)


def _heads(w, x, H):
    B, L, _ = x.shape
    return (x @ w.T).view(B, L, H, -1).transpose(1, 2)              # (B, H, L, D)


def _sinks_by_kept_set(m, x):
    """Each query t on its own: the kept tokens listed explicitly, positions 0..n-1 by rank."""
    B, T, E = x.shape
    H, S, W, theta = m.num_heads, m.num_sinks, m.window_size, m.rope_theta
    q, k, v = (_heads(w.double(), x, H) for w in (m.q_proj.weight, m.k_proj.weight, m.v_proj.weight))
    D = q.shape[-1]
    rows = []
    for t in range(T):
        kept = [j for j in range(t + 1) if j < S or t - j < W]
        n = len(kept)
        keys = _rope_half_complex(k[:, :, kept], torch.arange(n), theta)          # ranks 0..n-1
        query = _rope_half_complex(q[:, :, t:t + 1], torch.tensor([n - 1]), theta)
        w = torch.softmax(query @ keys.transpose(-1, -2) / math.sqrt(D), dim=-1)
        rows.append(w @ v[:, :, kept])
    o = torch.cat(rows, dim=2).transpose(1, 2).reshape(B, T, E)
    return o @ m.out_proj.weight.double().T


def _sinks_closed_form(m, x):
    """All queries at once: relative distances in the cache are t - j inside the window and
    min(t, S + W - 1) - j to a sink, so two score matrices cover every query."""
    B, T, E = x.shape
    H, S, W, theta = m.num_heads, m.num_sinks, m.window_size, m.rope_theta
    q, k, v = (_heads(w.double(), x, H) for w in (m.q_proj.weight, m.k_proj.weight, m.v_proj.weight))
    D = q.shape[-1]
    pos = torch.arange(T)
    k_rot = _rope_half_complex(k, pos, theta)
    window = _rope_half_complex(q, pos, theta) @ k_rot.transpose(-1, -2)
    sink = _rope_half_complex(q, pos.clamp(max=S + W - 1), theta) @ k_rot.transpose(-1, -2)
    j, t = pos[None, :], pos[:, None]
    scores = torch.where(j < S, sink, window) / math.sqrt(D)
    keep = (j <= t) & ((j < S) | (t - j < W))
    w = torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)
    return (w @ v).transpose(1, 2).reshape(B, T, E) @ m.out_proj.weight.double().T


@pytest.mark.parametrize("L,S,W", [(9, 2, 3), (6, 0, 2), (7, 3, 1), (5, 4, 8), (1, 4, 4), (12, 1, 5), (11, 5, 2)])
def test_sink_mask_matches_loops(L, S, W):
    want = torch.zeros(L, L, dtype=torch.bool)
    for i in range(L):
        for j in range(L):
            want[i, j] = j <= i and (j < S or i - j < W)
    got = SINKS.streaming_mask(L, S, W)
    assert got.dtype == torch.bool and torch.equal(got, want)


def test_sink_mask_without_sinks_is_a_causal_band():
    band = torch.ones(10, 10, dtype=torch.bool).tril() & ~torch.ones(10, 10, dtype=torch.bool).tril(-4)
    assert torch.equal(SINKS.streaming_mask(10, 0, 4), band)


@pytest.mark.parametrize("B,H,D,S,W,schedule,theta", [
    (2, 2, 6, 2, 5, [1] * 19, 10000.0),
    (1, 3, 4, 3, 4, [12, 1, 1, 5, 1, 2], 10000.0),
    (2, 1, 8, 0, 4, [5, 1, 1, 3, 1, 2], 500.0),
    (3, 2, 4, 4, 3, [20], 10000.0),
    (2, 2, 6, 1, 1, [3, 3, 3], 10000.0),
])
def test_stream_matches_kept_set_and_closed_form(B, H, D, S, W, schedule, theta):
    torch.manual_seed(3)
    m = SINKS.StreamingAttention(H * D, H, num_sinks=S, window_size=W, rope_theta=theta).double()
    x = torch.randn(B, sum(schedule), H * D, dtype=F64)
    with torch.no_grad():
        got = _stream(m, x, schedule)
        torch.testing.assert_close(got, _sinks_by_kept_set(m, x), rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(got, _sinks_closed_form(m, x), rtol=1e-12, atol=1e-12)


def test_stream_does_not_depend_on_how_it_is_cut():
    torch.manual_seed(4)
    m = SINKS.StreamingAttention(12, 2, num_sinks=2, window_size=4).double()
    x = torch.randn(2, 23, 12, dtype=F64)
    with torch.no_grad():
        outs = [_stream(m, x, s) for s in ([23], [1] * 23, [6, 1, 9, 2, 5], [2] * 11 + [1])]
    for o in outs[1:]:
        torch.testing.assert_close(o, outs[0], rtol=1e-13, atol=1e-13)


def test_cache_after_fourteen_tokens():
    """The facts' example: 2 sinks, a window of 5, 14 tokens keep [0, 1, 9, 10, 11, 12, 13]."""
    torch.manual_seed(5)
    m = SINKS.StreamingAttention(8, 2, num_sinks=2, window_size=5).double()
    x = torch.randn(2, 14, 8, dtype=F64)
    with torch.no_grad():
        _stream(m, x, [6, 1, 4, 3])
        kept = [0, 1, 9, 10, 11, 12, 13]
        assert m.cache_index.tolist() == kept
        torch.testing.assert_close(m.k_cache, _heads(m.k_proj.weight, x, 2)[:, :, kept])   # before RoPE
        torch.testing.assert_close(m.v_cache, _heads(m.v_proj.weight, x, 2)[:, :, kept])


def test_cache_positions_against_flex_attention_at_stream_positions():
    """flex_attention with the sink mask_mod (CPU, float64) at stream positions: the same mask as
    streaming_mask; the module agrees with it while the stream fits in the cache and not after."""
    flex = pytest.importorskip("torch.nn.attention.flex_attention")
    torch.manual_seed(6)
    S, W, T, H, D = 2, 5, 14, 2, 4
    m = SINKS.StreamingAttention(H * D, H, num_sinks=S, window_size=W).double()
    x = torch.randn(1, T, H * D, dtype=F64)
    q, k, v = (_heads(w.detach().double(), x, H) for w in (m.q_proj.weight, m.k_proj.weight, m.v_proj.weight))
    pos = torch.arange(T)
    q, k = _rope_half_complex(q, pos, 1e4), _rope_half_complex(k, pos, 1e4)

    def mask_mod(b, h, qi, kv):
        return (kv <= qi) & ((kv < S) | (qi - kv < W))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        block = flex.create_block_mask(mask_mod, None, None, T, T, device="cpu")
        o = flex.flex_attention(q, k, v, block_mask=block)                       # (1, H, T, D)
    dense = torch.softmax((q @ k.transpose(-1, -2) / math.sqrt(D)).masked_fill(
        ~SINKS.streaming_mask(T, S, W), float("-inf")), dim=-1) @ v
    torch.testing.assert_close(o, dense, rtol=1e-12, atol=1e-12)
    at_stream_positions = o.transpose(1, 2).reshape(1, T, H * D) @ m.out_proj.weight.detach().double().T
    with torch.no_grad():
        got = _stream(m, x, [1] * T)
    torch.testing.assert_close(got[:, :S + W], at_stream_positions[:, :S + W], rtol=1e-12, atol=1e-12)
    assert (got[:, S + W:] - at_stream_positions[:, S + W:]).abs().max() > 1e-3


def test_state_check_names_a_rolling_window_and_accepts_rotated_keys():
    """The grader's cache check: a cache that evicts its sinks is named; keys kept rotated at their
    current cache positions (Hugging Face's SinkCache design) are accepted."""
    grader = load("attention_sinks", "graders")
    from attn_drill.bank.api import Ctx
    case = next(c for c in grader.cases(Ctx(0)) if c.name == "cache_state")

    class Rotated(SINKS.StreamingAttention):
        """Shows k_cache rotated at the current cache positions between calls."""
        def init_cache(self, batch_size, device=None):
            super().init_cache(batch_size, device)
            self.raw = self.k_cache

        def forward(self, x):
            self.k_cache = self.raw
            out = super().forward(x)
            self.raw = self.k_cache
            n = self.k_cache.size(2)
            cos, sin = SINKS._rope_cos_sin(torch.arange(n), self.head_dim, self.rope_theta, self.k_cache.dtype)
            self.k_cache = SINKS._apply_rope(self.raw, cos, sin)
            return out

    from attn_drill import bank
    from attn_drill.bank import sources
    rolling = types.ModuleType("rolling")
    exec(sources.mutant_source(bank.get("attention_sinks"), sources.read(bank.reference_path("attention_sinks")),
                              "evict_sinks"), rolling.__dict__)
    found = failures("attention_sinks", case, rolling)
    assert found and getattr(found[0], "mistake", None) == "evict_sinks", found

    rotated = type("Sub", (), {"StreamingAttention": Rotated})
    assert failures("attention_sinks", case, rotated) == []


# ================================================================ differential_attention
def test_lambda_init_schedule_values():
    want = [0.2, 0.3555090676, 0.4707130183, 0.5560582042, 0.6192834729, 0.6661219039]
    for depth, w in enumerate(want):
        assert abs(DIFF.lambda_init_schedule(depth) - w) < 1e-10


def _diff_rule(name, r):
    if name.startswith("lambda"):
        return 0.1 * r
    return 1.0 + 0.2 * r if name.startswith("subln") else 0.2 * r


def test_diff_attention_oracle_value():
    """E 48, 3 heads, depth 2, seed 0: the official module's output (facts bank 4, section 10)."""
    torch.manual_seed(0)
    m = DIFF.DifferentialAttention(48, 3, depth=2).double()
    _fill(m, _diff_rule)
    x = torch.randn(2, 7, 48, dtype=F64)
    with torch.no_grad():
        y = m(x)
    want = torch.tensor([1.658881630751, -0.748660932915, 1.164683400462, 0.861962951315], dtype=F64)
    torch.testing.assert_close(y[0, -1, :4], want, rtol=0, atol=1e-10)


def _diff_by_two_sdpa(m, x, pad=None):
    """(A1 - lambda A2) V = A1 V - lambda A2 V: two causal SDPA calls per differential head."""
    B, L, E = x.shape
    H, d = m.num_heads, m.head_dim
    pos = torch.arange(L)
    q = _rope_adjacent_complex((x @ m.q_proj.weight.double().T).view(B, L, 2 * H, d).transpose(1, 2), pos,
                               m.rope_theta)
    k = _rope_adjacent_complex((x @ m.k_proj.weight.double().T).view(B, L, 2 * H, d).transpose(1, 2), pos,
                               m.rope_theta)
    v = (x @ m.v_proj.weight.double().T).view(B, L, H, 2 * d).transpose(1, 2)
    keep = torch.ones(L, L, dtype=torch.bool).tril()
    if pad is not None:
        keep = keep & ~pad[:, None, None, :]
    lam = (torch.exp(torch.dot(m.lambda_q1.double(), m.lambda_k1.double()))
           - torch.exp(torch.dot(m.lambda_q2.double(), m.lambda_k2.double())) + m.lambda_init)
    heads = []
    for h in range(H):
        first = F.scaled_dot_product_attention(q[:, 2 * h:2 * h + 1], k[:, 2 * h:2 * h + 1], v[:, h:h + 1],
                                               attn_mask=keep)
        second = F.scaled_dot_product_attention(q[:, 2 * h + 1:2 * h + 2], k[:, 2 * h + 1:2 * h + 2], v[:, h:h + 1],
                                                attn_mask=keep)
        o = first - lam * second                                                   # (B, 1, L, 2d)
        heads.append(F.rms_norm(o, (2 * d,), m.subln.weight.double(), eps=1e-5) * (1 - m.lambda_init))
    o = torch.cat(heads, dim=1).transpose(1, 2).reshape(B, L, 2 * H * d)
    return o @ m.out_proj.weight.double().T


@pytest.mark.parametrize("E,H,depth,L,pad", [(48, 3, 2, 7, None), (24, 2, 0, 9, [9, 4, 6]), (20, 1, 7, 11, None),
                                             (32, 4, 11, 5, [5, 1])])
def test_diff_attention_matches_two_sdpa_calls(E, H, depth, L, pad):
    torch.manual_seed(7)
    m = DIFF.DifferentialAttention(E, H, depth=depth, rope_theta=500.0).double()
    _fill(m, lambda n, r: 0.5 * r if n.startswith("lambda") else (1 + 0.3 * r if n.startswith("subln") else 0.3 * r))
    B = 2 if pad is None else len(pad)
    x = torch.randn(B, L, E, dtype=F64)
    mask = None if pad is None else torch.arange(L)[None, :] >= torch.tensor(pad)[:, None]
    with torch.no_grad():
        torch.testing.assert_close(m(x, mask), _diff_by_two_sdpa(m, x, mask), rtol=1e-11, atol=1e-12)


def test_upstream_grouped_kv_pairs_maps_differently():
    """The statement's note on the official GQA path: it repeats the 2*Hkv key heads along the head
    axis. Rebuilt from the facts' recipe for Hkv = 1 (in the same RNG stream after the Hkv = 3 run; the
    printed numbers come back when the lambda vectors are overwritten before the projections)."""
    torch.manual_seed(0)
    first = DIFF.DifferentialAttention(48, 3, depth=2).double()
    _fill(first, _diff_rule)
    torch.randn(2, 7, 48, dtype=F64)                                            # the first run's x
    E, H, Hkv, d = 48, 3, 1, 8
    rep = H // Hkv
    proj = [nn.Linear(E, n, bias=False) for n in (E, E // rep, E // rep, E)]     # q, k, v, out
    lambdas = [nn.Parameter(torch.zeros(d).normal_(0, 0.1)) for _ in range(4)]
    with torch.no_grad():
        for p in lambdas:
            p.copy_(0.1 * torch.randn(d, dtype=F64))
        wq, wk, wv, wo = (0.2 * torch.randn(p.weight.shape, dtype=F64) for p in proj)
        w_norm = 1 + 0.2 * torch.randn(2 * d, dtype=F64)
    x = torch.randn(2, 7, 48, dtype=F64)
    B, L, _ = x.shape
    pos = torch.arange(L)
    q = _rope_adjacent_complex((x @ wq.T).view(B, L, 2 * H, d).transpose(1, 2), pos, 1e4)
    k = _rope_adjacent_complex((x @ wk.T).view(B, L, 2 * Hkv, d).transpose(1, 2), pos, 1e4)
    v = (x @ wv.T).view(B, L, Hkv, 2 * d).transpose(1, 2)
    k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)    # key heads 0,0,0,1,1,1
    maps = torch.softmax((q @ k.transpose(-1, -2) / math.sqrt(d)).masked_fill(
        ~torch.ones(L, L, dtype=torch.bool).tril(), float("-inf")), dim=-1).view(B, H, 2, L, L)
    l1, k1, l2, k2 = (p.detach().double() for p in lambdas)
    lam = torch.exp(l1 @ k1) - torch.exp(l2 @ k2) + DIFF.lambda_init_schedule(2)
    o = F.rms_norm((maps[:, :, 0] - lam * maps[:, :, 1]) @ v, (2 * d,), w_norm, eps=1e-5)
    y = (o * (1 - DIFF.lambda_init_schedule(2))).transpose(1, 2).reshape(B, L, E) @ wo.T
    want = torch.tensor([0.132261911720, -1.282820289294, 0.951291764937, -0.398286157014], dtype=F64)
    torch.testing.assert_close(y[0, -1, :4], want, rtol=0, atol=1e-10)


# ================================================================ llama_block
def test_llama_layer_oracle_values():
    """Hugging Face LlamaDecoderLayer, seed 0 (facts bank 4, section 12): the same RNG stream, because
    the reference builds the same linear layers in the same order."""
    torch.manual_seed(0)
    m = LLAMA.LlamaDecoderLayer(48, 6, 2, 40, rope_theta=1e4, rms_norm_eps=1e-5).double()
    _fill(m, lambda n, r: 1 + r if "norm" in n else 0.2 * r)
    x = torch.randn(2, 9, 48, dtype=F64)
    with torch.no_grad():
        y = m(x)
    first = torch.tensor([-8.418499936027, 1.215239212814, -3.864956847207, 4.623794340450], dtype=F64)
    last = torch.tensor([-8.105063608786, -7.667592256886, -0.246867546257], dtype=F64)
    torch.testing.assert_close(y[0, 0, :4], first, rtol=0, atol=1e-10)
    torch.testing.assert_close(y[1, -1, -3:], last, rtol=0, atol=1e-10)


def _llama_by_sdpa(m, x, pad=None):
    a, mlp = m.self_attn, m.mlp
    B, L, E = x.shape
    H, Hkv = a.num_heads, a.num_kv_heads
    D = E // H
    n1 = F.rms_norm(x, (E,), m.input_layernorm.weight.double(), eps=m.input_layernorm.eps)
    pos = torch.arange(L)
    q = _rope_half_complex((n1 @ a.q_proj.weight.double().T).view(B, L, H, D).transpose(1, 2), pos, a.rope_theta)
    k = _rope_half_complex((n1 @ a.k_proj.weight.double().T).view(B, L, Hkv, D).transpose(1, 2), pos, a.rope_theta)
    v = (n1 @ a.v_proj.weight.double().T).view(B, L, Hkv, D).transpose(1, 2)
    keep = torch.ones(L, L, dtype=torch.bool).tril()
    if pad is not None:
        keep = keep & ~pad[:, None, None, :]
    o = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, enable_gqa=True)
    h = x + o.transpose(1, 2).reshape(B, L, E) @ a.o_proj.weight.double().T
    n2 = F.rms_norm(h, (E,), m.post_attention_layernorm.weight.double(), eps=m.post_attention_layernorm.eps)
    ffn = F.linear(F.silu(F.linear(n2, mlp.gate_proj.weight.double())) * F.linear(n2, mlp.up_proj.weight.double()),
                   mlp.down_proj.weight.double())
    return h + ffn


@pytest.mark.parametrize("H,Hkv,D,inter,theta,eps,pad", [(6, 2, 8, 40, 1e4, 1e-5, None),
                                                         (4, 1, 6, 17, 500.0, 1e-6, [7, 3]),
                                                         (3, 3, 10, 22, 5e5, 1e-5, [7, 7, 1])])
def test_llama_layer_matches_sdpa_with_gqa(H, Hkv, D, inter, theta, eps, pad):
    torch.manual_seed(8)
    m = LLAMA.LlamaDecoderLayer(H * D, H, Hkv, inter, rope_theta=theta, rms_norm_eps=eps).double()
    _fill(m, lambda n, r: 1 + 0.5 * r if "norm" in n else 0.3 * r)
    B = 2 if pad is None else len(pad)
    x = torch.randn(B, 7, H * D, dtype=F64)
    mask = None if pad is None else torch.arange(7)[None, :] >= torch.tensor(pad)[:, None]
    with torch.no_grad():
        torch.testing.assert_close(m(x, mask), _llama_by_sdpa(m, x, mask), rtol=1e-11, atol=1e-12)


def test_llama_rmsnorm_bf16_normalises_in_float32_then_applies_the_weight():
    torch.manual_seed(9)
    norm = LLAMA.RMSNorm(20, eps=1e-6)
    with torch.no_grad():
        norm.weight.copy_(1 + torch.randn(20))
    norm = norm.to(torch.bfloat16)
    x = torch.randn(3, 5, 20).to(torch.bfloat16)
    xf = x.float()
    want = norm.weight * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(torch.bfloat16)
    assert torch.equal(norm(x), want)


# ================================================================ gated_attention
def test_gated_attention_oracle_value():
    """Hugging Face Qwen3NextAttention, seed 0 (facts bank 4, section 13)."""
    torch.manual_seed(0)
    m = GATED.GatedAttention(32, 4, 2, 16, partial_rotary_factor=0.25, rope_theta=1e4, rms_norm_eps=1e-6).double()
    _fill(m, lambda n, r: 0.3 * r)
    x = torch.randn(2, 6, 32, dtype=F64)
    with torch.no_grad():
        y = m(x)
    want = torch.tensor([0.317499435811, -2.229429606320, 2.404439509133, -1.946798424312], dtype=F64)
    torch.testing.assert_close(y[0, 0, :4], want, rtol=0, atol=1e-10)


def _gated_by_sdpa(m, x, pad=None, grouped=False):
    """Queries and gates read off q_proj's rows; with grouped=True, q_proj's rows are first permuted
    into the official repository's layout (per KV head: the group's queries, then its gates) and read
    back that way."""
    B, L, E = x.shape
    H, Hkv, D, rot = m.num_heads, m.num_kv_heads, m.head_dim, m.rotary_dim
    G = H // Hkv
    w = m.q_proj.weight.double().view(H, 2, D, E)                   # head, [query | gate], dim, in
    if grouped:
        w_grouped = w.view(Hkv, G, 2, D, E).transpose(1, 2).reshape(H * 2 * D, E)   # per KV head: Q..., gates...
        qg = (x @ w_grouped.T).view(B, L, Hkv, 2, G, D)
        q, gate = qg[:, :, :, 0].reshape(B, L, H, D), qg[:, :, :, 1].reshape(B, L, H, D)
    else:
        q = torch.einsum("ble,hde->blhd", x, w[:, 0])
        gate = torch.einsum("ble,hde->blhd", x, w[:, 1])
    k = (x @ m.k_proj.weight.double().T).view(B, L, Hkv, D)
    v = (x @ m.v_proj.weight.double().T).view(B, L, Hkv, D).transpose(1, 2)
    if m.qk_norm:
        q = F.rms_norm(q, (D,), 1 + m.q_norm.weight.double(), eps=m.q_norm.eps)
        k = F.rms_norm(k, (D,), 1 + m.k_norm.weight.double(), eps=m.k_norm.eps)
    pos = torch.arange(L)
    q, k = q.transpose(1, 2), k.transpose(1, 2)
    q = torch.cat([_rope_half_complex(q[..., :rot], pos, m.rope_theta), q[..., rot:]], dim=-1)
    k = torch.cat([_rope_half_complex(k[..., :rot], pos, m.rope_theta), k[..., rot:]], dim=-1)
    keep = torch.ones(L, L, dtype=torch.bool).tril()
    if pad is not None:
        keep = keep & ~pad[:, None, None, :]
    o = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, enable_gqa=True).transpose(1, 2)   # (B, L, H, D)
    return (o * torch.sigmoid(gate)).reshape(B, L, H * D) @ m.o_proj.weight.double().T


@pytest.mark.parametrize("E,H,Hkv,D,factor,qk_norm,pad", [(32, 4, 2, 16, 0.25, True, None),
                                                          (20, 3, 1, 12, 0.5, True, [9, 2, 5]),
                                                          (18, 2, 2, 10, 0.4, False, None),
                                                          (9, 6, 3, 6, 1.0, True, [9, 4])])
def test_gated_attention_matches_sdpa_and_the_grouped_layout(E, H, Hkv, D, factor, qk_norm, pad):
    torch.manual_seed(10)
    m = GATED.GatedAttention(E, H, Hkv, D, partial_rotary_factor=factor, rope_theta=500.0, qk_norm=qk_norm).double()
    _fill(m, lambda n, r: 0.3 * r)
    B = 2 if pad is None else len(pad)
    x = torch.randn(B, 9, E, dtype=F64)
    mask = None if pad is None else torch.arange(9)[None, :] >= torch.tensor(pad)[:, None]
    with torch.no_grad():
        got = m(x, mask)
        torch.testing.assert_close(got, _gated_by_sdpa(m, x, mask), rtol=1e-11, atol=1e-12)
        torch.testing.assert_close(got, _gated_by_sdpa(m, x, mask, grouped=True), rtol=1e-11, atol=1e-12)
