"""Cross-checks of three inference references of bank 4 against implementations written another way:

speculative_decoding  a brute-force accept/reject loop in plain Python floats; the law of the first
                      token integrated over a grid of uniforms; the statistical values of a known
                      stationary example (acceptance rate, tokens per call, the law of n); and the
                      grader's statistical check, which must pass the reference and name each mutant
int8_kv_cache         element-by-element quantisation in Python (round() rounds half to even) and in
                      numpy; the error bounds the quantisation implies; the cache against SDPA over
                      the dequantised keys and values; its storage
paged_attention       SDPA (enable_gqa) over keys and values laid out contiguously by a Python loop over
                      slots, with NaN in every other pool slot; a whole-block version that only masks
                      scores gives NaN there; write_kv read back through the block tables
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from loading import failures, load

from attn_drill import bank
from attn_drill.bank import sources
from attn_drill.bank.api import Ctx, case_seed
from attn_drill.room.usercode import load_source


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Small tensors: threads only add contention (as in the judge and the rooms)."""
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(saved)


@pytest.fixture(scope="module")
def spec_ref():
    return load("speculative_decoding")


@pytest.fixture(scope="module")
def int8_ref():
    return load("int8_kv_cache")


@pytest.fixture(scope="module")
def paged_ref():
    return load("paged_attention")


def _mutants(pid: str) -> dict:
    spec = bank.get(pid)
    src = sources.read(bank.reference_path(pid))
    return {m.id: load_source(sources.mutant_source(spec, src, m.id), f"test_mutant_{pid}_{m.id}")
            for m in spec.mistakes}


def _chi2_pvalue(observed, expected_probs) -> float:
    """Goodness of fit on the cells with expected count >= 5 (others pooled), written here."""
    observed = torch.as_tensor(observed, dtype=torch.float64)
    e = torch.as_tensor(expected_probs, dtype=torch.float64) * observed.sum()
    big = e >= 5
    o_cells = torch.cat([observed[big], observed[~big].sum().reshape(1)])
    e_cells = torch.cat([e[big], e[~big].sum().reshape(1)])
    keep = e_cells > 0
    o_cells, e_cells = o_cells[keep], e_cells[keep]
    stat = float(((o_cells - e_cells) ** 2 / e_cells).sum())
    dof = len(o_cells) - 1
    return float(torch.special.gammaincc(torch.tensor(dof / 2.0), torch.tensor(stat / 2.0)))


# =============================================================================== speculative_decoding
def _brute_force(x, q, p, ua, us):
    """One block at a time, in Python floats: accept/reject until the first rejection."""
    B, G = x.shape
    tokens, counts = [], []
    for b in range(B):
        n = 0
        for i in range(G):
            t = int(x[b, i])
            if float(ua[b, i]) < float(p[b, i, t]) / float(q[b, i, t]):
                n += 1
            else:
                break
        if n == G:
            w = [float(v) for v in p[b, G]]
        else:
            w = [max(0.0, float(a) - float(c)) for a, c in zip(p[b, n], q[b, n])]
        threshold = float(us[b]) * sum(w)
        cum, tok = 0.0, None
        for j, wj in enumerate(w):
            cum += wj
            if cum > threshold:
                tok = j
                break
        if tok is None:                                  # rounding: the last token with weight
            tok = max(j for j, wj in enumerate(w) if wj > 0)
        row = [int(v) for v in x[b, :n]] + [tok]
        tokens.append(row + [-1] * (G + 1 - len(row)))
        counts.append(n)
    return torch.tensor(tokens), torch.tensor(counts)


def _spec_inputs(gen, B, G, V, kind="random"):
    z = torch.randn(B, G + 1, V, generator=gen, dtype=torch.float64) * 1.5
    p = torch.softmax(z, -1)
    if kind == "identical":
        q = p[:, :G].clone()
    elif kind == "onehot_target":
        p = F.one_hot(torch.randint(0, V, (B, G + 1), generator=gen), V).double()
        q = torch.softmax(torch.randn(B, G, V, generator=gen, dtype=torch.float64), -1)
    else:
        mix = torch.rand(B, 1, 1, generator=gen, dtype=torch.float64)
        q = torch.softmax(mix * z[:, :G] + (1 - mix) * torch.randn(B, G, V, generator=gen, dtype=torch.float64), -1)
    x = torch.multinomial(q.reshape(B * G, V), 1, generator=gen).view(B, G)
    ua = torch.rand(B, G, generator=gen, dtype=torch.float64)
    us = torch.rand(B, generator=gen, dtype=torch.float64)
    return x, q, p, ua, us


@pytest.mark.parametrize("seed,kind", [(0, "random"), (1, "random"), (2, "identical"), (3, "onehot_target"),
                                       (4, "random")])
def test_speculative_matches_brute_force_loop(spec_ref, seed, kind):
    gen = torch.Generator().manual_seed(seed)
    x, q, p, ua, us = _spec_inputs(gen, 50, 1 + seed % 5, 3 + 2 * seed, kind)
    tokens, n = spec_ref.speculative_verify(x, q, p, ua, us)
    want_tokens, want_n = _brute_force(x, q, p, ua, us)
    assert tokens.dtype == torch.int64 and n.dtype == torch.int64
    assert torch.equal(n, want_n)
    assert torch.equal(tokens, want_tokens)


def test_speculative_worked_example(spec_ref):
    """The statement's example: rejected at 0 -> [0, -1, -1]; accepted twice -> bonus from p_2."""
    p = torch.tensor([[[0.5, 0.3, 0.2], [0.2, 0.2, 0.6], [0.1, 0.6, 0.3]]], dtype=torch.float64)
    q = torch.tensor([[[0.2, 0.6, 0.2], [0.3, 0.3, 0.4]]], dtype=torch.float64)
    x = torch.tensor([[1, 2]])
    tokens, n = spec_ref.speculative_verify(x, q, p, torch.tensor([[0.7, 0.1]]).double(), torch.tensor([0.3]).double())
    assert tokens.tolist() == [[0, -1, -1]] and n.tolist() == [0]
    tokens, n = spec_ref.speculative_verify(x, q, p, torch.tensor([[0.4, 0.1]]).double(), torch.tensor([0.75]).double())
    assert tokens.tolist() == [[1, 2, 2]] and n.tolist() == [2]


def test_speculative_first_token_follows_target_on_a_grid(spec_ref):
    """G = 1: integrate over a midpoint grid of (u_accept, u_sample) for every draft token x, each
    weighted by q(x): the first emitted token's law must be p (to the grid's resolution)."""
    V, M = 6, 160
    p = torch.softmax(torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0, -3.0], dtype=torch.float64), -1)
    q = torch.softmax(torch.tensor([0.0, 2.0, 0.0, 1.0, -2.0, 0.5], dtype=torch.float64), -1)
    u = (torch.arange(M, dtype=torch.float64) + 0.5) / M
    ua, us = torch.meshgrid(u, u, indexing="ij")
    law = torch.zeros(V, dtype=torch.float64)
    N = M * M
    for t in range(V):
        x = torch.full((N, 1), t)
        tokens, _ = spec_ref.speculative_verify(x, q.expand(N, 1, V), torch.stack([p, p]).expand(N, 2, V),
                                                ua.reshape(N, 1), us.reshape(N))
        law += q[t] * torch.bincount(tokens[:, 0], minlength=V).double() / N
    assert (law - p).abs().max() < 4.0 / M


def test_speculative_stationary_statistics_match_the_facts(spec_ref):
    """V=6, G=4, p=softmax([2,1,.5,0,-1,-3]), q=softmax([0,2,0,1,-2,.5]) in every position:
    acceptance rate 0.43974550871 (0.4397454858 when p and q are computed in float32), (1 - a^5)/(1 - a)
    = 1.7556 tokens per call, P(n=k) = a^k (1-a), and the concatenated output stream is iid p (unigrams
    and bigrams)."""
    V, G, N = 6, 4, 120_000
    p = torch.softmax(torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0, -3.0], dtype=torch.float64), -1)
    q = torch.softmax(torch.tensor([0.0, 2.0, 0.0, 1.0, -2.0, 0.5], dtype=torch.float64), -1)
    a = float(torch.minimum(p, q).sum())
    assert abs(a - 0.43974550871) < 1e-10
    p32 = torch.softmax(torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0, -3.0]), -1)
    q32 = torch.softmax(torch.tensor([0.0, 2.0, 0.0, 1.0, -2.0, 0.5]), -1)
    assert abs(float(torch.minimum(p32, q32).sum()) - 0.4397454858) < 1e-9
    per_call = (1 - a ** (G + 1)) / (1 - a)
    assert abs(per_call - 1.7556) < 1e-4
    gen = torch.Generator().manual_seed(7)
    x = torch.multinomial(q, N * G, replacement=True, generator=gen).view(N, G)
    tokens, n = spec_ref.speculative_verify(x, q.expand(N, G, V), p.expand(N, G + 1, V),
                                            torch.rand(N, G, generator=gen, dtype=torch.float64),
                                            torch.rand(N, generator=gen, dtype=torch.float64))
    emitted = (n + 1).double()
    assert abs(float(emitted.mean()) - per_call) < 5 * float(emitted.std()) / math.sqrt(N)
    law = [a ** k * (1 - a) for k in range(G)] + [a ** G]
    assert _chi2_pvalue(torch.bincount(n, minlength=G + 1), law) > 1e-6
    stream = tokens.reshape(-1)
    stream = stream[stream >= 0]                                      # the calls' outputs, one after another
    assert _chi2_pvalue(torch.bincount(stream, minlength=V), p) > 1e-6
    pairs = stream[:-1] * V + stream[1:]
    assert _chi2_pvalue(torch.bincount(pairs, minlength=V * V), torch.outer(p, p).reshape(-1)) > 1e-6


def _check_once(pid: str, case, mod) -> list:
    """A check case's verdict on `mod`, its probe run once here (the check reads no reference)."""
    from attn_drill.judge.prepare import Prepared
    from attn_drill.room.side import run_side
    side = run_side(mod, Prepared(case, mod, check=True).low, session=None, trace=False, repeat=False,
                    probes=load(pid, "probes"))
    return list(case.check(side.obs, None, case))


def test_speculative_grader_statistics_pass_the_reference_and_name_each_mutant(spec_ref):
    grader = load("speculative_decoding", "graders")
    for seed in (0, 5):
        case = next(c for c in grader.cases(Ctx(seed)) if c.name == "distribution_fp64")
        case.seed = case_seed(seed, case.name)
        assert _check_once("speculative_decoding", case, spec_ref) == []
    for mid, mod in _mutants("speculative_decoding").items():
        got = _check_once("speculative_decoding", case, mod)
        if mid == "accept_zero_probability":
            assert got == []          # differs only when u == 0 exactly: the exact case catches it
            continue
        named = [f.mistake for f in got if getattr(f, "mistake", None)]
        assert named and named[0] == mid, (mid, got[:2])


# =============================================================================== int8_kv_cache
def _quantize_python(x: torch.Tensor, dim: int, scale=None):
    """Per element in Python floats; Python's round() rounds half to even."""
    xt = x.movedim(dim, -1)
    rows = xt.reshape(-1, xt.shape[-1]).tolist()
    codes, scales = [], []
    for row in rows:
        s = max(max(abs(v) for v in row), 1e-8) / 127 if scale is None else scale
        codes.append([min(127, max(-127, round(v / s))) for v in row])
        scales.append([s])
    q = torch.tensor(codes, dtype=torch.int8).reshape(xt.shape).movedim(-1, dim)
    s = torch.tensor(scales, dtype=torch.float64).reshape(*xt.shape[:-1], 1).movedim(-1, dim)
    return q, s


@pytest.mark.parametrize("shape,dim,scale", [((3, 4, 7), -1, None), ((2, 9, 5), -2, None), ((4, 6), 0, None),
                                             ((3, 8), -1, 0.02), ((2, 5, 6), -1, None)])
def test_int8_quantize_matches_python_loop(int8_ref, shape, dim, scale):
    gen = torch.Generator().manual_seed(len(shape) * 10 + abs(dim))
    x = torch.randn(*shape, generator=gen, dtype=torch.float64) * 3
    x.view(-1)[::7] = 0.0
    if shape == (2, 5, 6):
        x[1, 2] = 0.0                                                  # an all-zero row
    q, s = int8_ref.quantize_int8(x, dim=dim, scale=scale)
    want_q, want_s = _quantize_python(x, dim, scale)
    assert q.dtype == torch.int8 and s.dtype == torch.float64
    assert torch.equal(q, want_q)
    torch.testing.assert_close(s, want_s, rtol=0, atol=0)


def test_int8_rounds_half_to_even(int8_ref):
    assert torch.round(torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5])).tolist() == [0.0, 2.0, 2.0, -0.0, -2.0]
    x = torch.tensor([[0.625, -31.75, 15.875]], dtype=torch.float64)   # the statement's example
    q, s = int8_ref.quantize_int8(x)
    assert q.tolist() == [[2, -127, 64]] and s.item() == 0.25
    assert int8_ref.dequantize_int8(q, s).tolist() == [[0.5, -31.75, 16.0]]
    q, _ = int8_ref.quantize_int8(x, scale=0.125)
    assert q.tolist() == [[5, -127, 127]]
    for dtype in (torch.float32, torch.bfloat16):                       # upcast: same codes, float32 scale
        q2, s2 = int8_ref.quantize_int8(x.to(dtype))
        assert q2.tolist() == [[2, -127, 64]] and s2.dtype == torch.float32


def test_int8_error_bounds_and_outlier_channels(int8_ref):
    """|x - x^| <= s/2; |q.k - q.k^| <= sum_c |q_c| s_c / 2; with outlier key channels per-channel
    scales give a much smaller score error than per-token ones (KIVI's reason for keys)."""
    gen = torch.Generator().manual_seed(3)
    B, H, L, D = 2, 4, 128, 64
    k = torch.randn(B, H, L, D, generator=gen, dtype=torch.float64)
    k[..., 3] *= 20
    k[..., 17] *= 10
    qry = torch.randn(B, H, L, D, generator=gen, dtype=torch.float64)
    errs = {}
    for dim in (-1, -2):
        codes, s = int8_ref.quantize_int8(k, dim=dim)
        k_hat = int8_ref.dequantize_int8(codes, s)
        assert bool(((k - k_hat).abs() <= s / 2 * (1 + 1e-12)).all())
        err = (qry @ k.transpose(-1, -2) - qry @ k_hat.transpose(-1, -2)).abs()
        s_full = s.expand_as(k)
        bound = qry.abs() @ (s_full / 2).transpose(-1, -2)
        assert bool((err <= bound * (1 + 1e-9)).all())
        errs[dim] = float(err.max())
    assert errs[-2] < 0.5 * errs[-1]


def _dequantised_numpy(x: torch.Tensor) -> torch.Tensor:
    a = x.numpy()
    s = np.maximum(np.abs(a).max(axis=-1, keepdims=True), 1e-8) / 127
    return torch.from_numpy(np.clip(np.round(a / s), -127, 127) * s)


@pytest.mark.parametrize("schedule", [(9,), (4, 1, 1, 3), (1,) * 9])
def test_int8_cache_matches_sdpa_over_dequantised(int8_ref, schedule):
    gen = torch.Generator().manual_seed(11)
    B, H, L, D = 2, 3, 9, 8
    q, k, v = (torch.randn(B, H, L, D, generator=gen, dtype=torch.float64) for _ in range(3))
    cache = int8_ref.Int8KVCache(B, H, 12, D, dtype=torch.float64)
    outs, pos = [], 0
    with torch.no_grad():
        for n in schedule:
            outs.append(cache(q[:, :, pos:pos + n], k[:, :, pos:pos + n], v[:, :, pos:pos + n], pos))
            pos += n
    got = torch.cat(outs, dim=2)
    want = F.scaled_dot_product_attention(q, _dequantised_numpy(k), _dequantised_numpy(v), is_causal=True)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="max_len=12"):
        cache(q[:, :, :4], k[:, :, :4], v[:, :, :4], 9)


def test_int8_cache_stores_int8(int8_ref):
    B, H, M, D = 2, 3, 20, 8
    for dtype, scale_bytes in ((torch.float32, 4), (torch.bfloat16, 4), (torch.float64, 8)):
        cache = int8_ref.Int8KVCache(B, H, M, D, dtype=dtype)
        held = {n: b for n, b in cache.named_buffers()}
        assert held["k_cache"].dtype == torch.int8 and held["v_cache"].dtype == torch.int8
        assert sum(b.numel() * b.element_size() for b in held.values()) == 2 * B * H * M * (D + scale_bytes)


def test_int8_grader_bound_check(int8_ref):
    """The bound check passes the reference; an unquantised cache lies within the bound but is told it
    does not match attention over the dequantised cache."""
    grader = load("int8_kv_cache", "graders")
    case = next(c for c in grader.cases(Ctx(2)) if c.name == "cache_error_bound_fp32")
    case.seed = case_seed(2, case.name)
    assert failures("int8_kv_cache", case, int8_ref) == []

    class Plain:
        quantize_int8 = int8_ref.quantize_int8
        dequantize_int8 = int8_ref.dequantize_int8

        class Int8KVCache(torch.nn.Module):
            def __init__(self, B, H, M, D, dtype=torch.float32):
                super().__init__()
                self.k = torch.zeros(B, H, M, D, dtype=dtype)
                self.v = torch.zeros(B, H, M, D, dtype=dtype)

            def forward(self, q, k, v, start_pos):
                L, end = q.shape[2], start_pos + q.shape[2]
                self.k[:, :, start_pos:end], self.v[:, :, start_pos:end] = k, v
                mask = torch.ones(L, end, dtype=torch.bool).tril(start_pos)
                return F.scaled_dot_product_attention(q, self.k[:, :, :end], self.v[:, :, :end], attn_mask=mask)
    got = failures("int8_kv_cache", case, Plain)
    assert len(got) == 1 and "within the quantisation bound" in str(getattr(got[0], "message", got[0]))


# =============================================================================== paged_attention
def _paged_setup(seed, lens, bs, Hq, Hkv, D, spare=2, poison=float("nan")):
    gen = torch.Generator().manual_seed(seed)
    need = [-(-n // bs) for n in lens]
    num_blocks = sum(need) + spare
    perm = torch.randperm(num_blocks, generator=gen)
    tables = torch.full((len(lens), max(need) + 1), num_blocks - 1, dtype=torch.int32)
    key = torch.full((num_blocks, bs, Hkv, D), poison, dtype=torch.float64)
    value = torch.full((num_blocks, bs, Hkv, D), poison, dtype=torch.float64)
    contiguous_k, contiguous_v, start = [], [], 0
    for i, n in enumerate(lens):
        tables[i, :need[i]] = perm[start:start + need[i]].int()
        start += need[i]
        ks = torch.randn(n, Hkv, D, generator=gen, dtype=torch.float64)
        vs = torch.randn(n, Hkv, D, generator=gen, dtype=torch.float64)
        for j in range(n):                                         # slot by slot, in Python
            slot = int(tables[i, j // bs]) * bs + j % bs
            key.view(-1, Hkv, D)[slot] = ks[j]
            value.view(-1, Hkv, D)[slot] = vs[j]
        contiguous_k.append(ks)
        contiguous_v.append(vs)
    query = torch.randn(len(lens), Hq, D, generator=gen, dtype=torch.float64)
    return query, key, value, tables, torch.tensor(lens, dtype=torch.int32), contiguous_k, contiguous_v


def _contiguous_sdpa(query, ks, vs, scale=None):
    outs = []
    for i, (k, v) in enumerate(zip(ks, vs)):
        o = F.scaled_dot_product_attention(query[i][None, :, None], k.transpose(0, 1)[None], v.transpose(0, 1)[None],
                                           scale=scale, enable_gqa=True)     # (1, Hq, 1, D)
        outs.append(o[0, :, 0])
    return torch.stack(outs)


@pytest.mark.parametrize("lens,bs,Hq,Hkv,D,scale", [([9, 1, 13], 4, 6, 2, 8, None), ([5, 10, 11], 5, 4, 4, 6, 0.3),
                                                     ([3, 7], 1, 4, 1, 5, None), ([100, 67, 129], 16, 8, 2, 16, None)])
def test_paged_matches_contiguous_sdpa_with_nan_poison(paged_ref, lens, bs, Hq, Hkv, D, scale):
    query, key, value, tables, ctx_lens, ks, vs = _paged_setup(len(lens) + bs, lens, bs, Hq, Hkv, D)
    before = [t.clone() for t in (query, key, value, tables, ctx_lens)]
    got = paged_ref.paged_attention(query, key, value, tables, ctx_lens, scale=scale)
    assert bool(torch.isfinite(got).all())
    torch.testing.assert_close(got, _contiguous_sdpa(query, ks, vs, scale), rtol=1e-12, atol=1e-12)
    for b, a in zip(before, (query, key, value, tables, ctx_lens)):
        assert torch.equal(b.nan_to_num(), a.nan_to_num())          # inputs left as they were


def test_paged_whole_block_masking_reads_the_poison(paged_ref):
    """The facts' trap: gather whole blocks and mask only the scores -> 0 * NaN in weights @ V."""
    query, key, value, tables, ctx_lens, _, _ = _paged_setup(0, [9, 1, 13], 4, 6, 2, 8)
    bs, Hkv = key.shape[1], key.shape[2]
    i, n = 0, 9
    nb = -(-n // bs)
    k = key[tables[i, :nb].long()].reshape(nb * bs, Hkv, -1).repeat_interleave(3, dim=1)
    v = value[tables[i, :nb].long()].reshape(nb * bs, Hkv, -1).repeat_interleave(3, dim=1)
    s = torch.einsum("hd,nhd->hn", query[i], k) / math.sqrt(8)
    s = s.masked_fill(torch.arange(nb * bs) >= n, float("-inf"))
    assert bool(torch.isnan(torch.einsum("hn,nhd->hd", s.softmax(-1), v)).all())
    assert bool(torch.isfinite(paged_ref.paged_attention(query, key, value, tables, ctx_lens)).all())


def test_paged_write_kv_round_trip(paged_ref):
    """Write through a slot mapping with padding; reading back through the block tables gives the rows,
    and nothing else changes (the last slot, where -1 would land, included)."""
    gen = torch.Generator().manual_seed(4)
    bs, Hkv, D, num_blocks = 4, 2, 3, 6
    tables = torch.tensor([[4, 1, 0], [2, 3, 0]], dtype=torch.int32)
    positions = [(0, 0), (0, 3), (0, 4), None, (1, 5), None, (1, 2)]      # (sequence, token position)
    slots = torch.tensor([-1 if r is None else int(tables[r[0], r[1] // bs]) * bs + r[1] % bs for r in positions])
    key = torch.randn(len(positions), Hkv, D, generator=gen, dtype=torch.float64)
    value = torch.randn(len(positions), Hkv, D, generator=gen, dtype=torch.float64)
    kc = torch.randn(num_blocks, bs, Hkv, D, generator=gen, dtype=torch.float64)
    vc = torch.randn(num_blocks, bs, Hkv, D, generator=gen, dtype=torch.float64)
    kc0, vc0 = kc.clone(), vc.clone()
    assert paged_ref.write_kv(key, value, kc, vc, slots) is None
    changed = torch.zeros(num_blocks, bs, dtype=torch.bool)
    for t, r in enumerate(positions):
        if r is None:
            continue
        blk, off = int(tables[r[0], r[1] // bs]), r[1] % bs
        assert torch.equal(kc[blk, off], key[t]) and torch.equal(vc[blk, off], value[t])
        changed[blk, off] = True
    assert torch.equal(kc[~changed], kc0[~changed]) and torch.equal(vc[~changed], vc0[~changed])
    assert not bool(changed[-1, -1])
