"""Cross-checks of the three sparse-attention references of bank 5 against implementations written
another way:

native_sparse_attention  the facts file's oracle (selected blocks and outputs, seed 0); a loop over
                         every (batch, query, head) in Python lists; each branch against SDPA with
                         an explicit mask (gates at +-1000 isolate a branch); the rules of the
                         selection (counts, forced blocks, nothing in the future, one per group)
lightning_indexer        the facts file's oracle rebuilt from Hugging Face's recipe (projections,
                         LayerNorm key, half-split RoPE); a loop over every (query, key, head); the
                         statement's example; sparse_attention against SDPA with a dense mask and
                         against a shuffled copy of its indices; the pipeline against a dense masked
                         attention as Hugging Face writes it
moba                     the facts file's oracle; a loop over every (batch, query, head); the
                         upstream naive formulation (gates of -inf and +inf, top-k, then the
                         token-level causal mask); the efficient two-part form merged by log-sum-exp;
                         top_k = 1 and top_k >= NB against SDPA
and, for all three, the graders' promise that no selection rests on a rounding: on every default
and --full case the reference in the case dtype selects exactly what float64 selects.
"""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from loading import load

from attn_drill.bank.api import Ctx


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Small tensors: threads only add contention (as in the judge and the rooms)."""
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(saved)


@pytest.fixture(scope="module")
def nsa():
    return load("native_sparse_attention")


@pytest.fixture(scope="module")
def dsa():
    return load("lightning_indexer")


@pytest.fixture(scope="module")
def moba():
    return load("moba")


def _randn(gen, *shape):
    return torch.randn(*shape, generator=gen, dtype=torch.float64)


def _softmax_list(xs):
    m = max(xs)
    e = [math.exp(x - m) for x in xs]
    s = sum(e)
    return [v / s for v in e]


def _attend_list(q, keys, values, scale):
    """Softmax attention of one query (list) over lists of keys and values, in Python floats."""
    w = _softmax_list([scale * sum(a * b for a, b in zip(q, kk)) for kk in keys])
    return [sum(wi * vv[c] for wi, vv in zip(w, values)) for c in range(len(values[0]))]


# =============================================================================== native_sparse_attention
def test_nsa_oracle_matches_the_facts(nsa):
    """seed 0: q (1, 24, 4, 8), k and v (1, 24, 2, 8), then the gate logits (1, 24, 4, 3); block 4,
    block_count 4, window 6."""
    torch.manual_seed(0)
    q = torch.randn(1, 24, 4, 8, dtype=torch.float64)
    k = torch.randn(1, 24, 2, 8, dtype=torch.float64)
    v = torch.randn(1, 24, 2, 8, dtype=torch.float64)
    g = torch.randn(1, 24, 4, 3, dtype=torch.float64)
    sel = nsa.select_blocks(q, k, 4, 4)
    assert sel[0, 21, 0].nonzero().flatten().tolist() == [0, 2, 4, 5]
    assert sel[0, 21, 1].nonzero().flatten().tolist() == [0, 1, 4, 5]
    o = nsa.native_sparse_attention(q, k, v, g, 4, 4, 6)
    want21 = [0.443699427689, 0.30909517307, 0.243922578222, 0.287231907119]
    want9 = [-0.028769608157, -0.474938791691, 0.228630240439, -0.030579925213]
    assert torch.allclose(o[0, 21, 0, :4], torch.tensor(want21, dtype=torch.float64), atol=1e-11, rtol=0)
    assert torch.allclose(o[0, 9, 3, :4], torch.tensor(want9, dtype=torch.float64), atol=1e-11, rtol=0)


def _nsa_loop(q, k, v, g, bs, count, window, scale):
    """NSA one (batch, query, head) at a time in Python floats, written from the statement."""
    B, T, Hq, D = q.shape
    Hkv, Dv = k.shape[2], v.shape[3]
    G = Hq // Hkv
    Q, K, V, GL = q.tolist(), k.tolist(), v.tolist(), g.tolist()
    out = [[[None] * Hq for _ in range(T)] for _ in range(B)]
    sel = [[[[False] * -(-T // bs) for _ in range(Hkv)] for _ in range(T)] for _ in range(B)]
    for b in range(B):
        kc = [[[sum(K[b][c * bs + i][h][e] for i in range(bs)) / bs for e in range(D)] for h in range(Hkv)]
              for c in range(T // bs)]
        vc = [[[sum(V[b][c * bs + i][h][e] for i in range(bs)) / bs for e in range(Dv)] for h in range(Hkv)]
              for c in range(T // bs)]
        for t in range(T):
            seen = [c for c in range(T // bs) if (c + 1) * bs - 1 <= t]
            probs = {}
            for h in range(Hq):
                logits = [scale * sum(a * x for a, x in zip(Q[b][t][h], kc[c][h // G])) for c in seen]
                probs[h] = dict(zip(seen, _softmax_list(logits))) if seen else {}
            o = t // bs
            for grp in range(Hkv):
                forced = {j for j in (0, o - 1, o) if j >= 0}
                cands = sorted(range(1, o - 1), key=lambda c: -sum(probs[h].get(c, 0.0)
                                                                 for h in range(grp * G, (grp + 1) * G)))
                chosen = forced | set(cands[:max(0, count - len(forced))])
                for j in chosen:
                    sel[b][t][grp][j] = True
            for h in range(Hq):
                grp = h // G
                o_cmp = [sum(probs[h][c] * vc[c][grp][e] for c in seen) for e in range(Dv)] if seen else [0.0] * Dv
                slc = [s for s in range(t + 1) if sel[b][t][grp][s // bs]]
                win = [s for s in range(t + 1) if t - s < window]
                o_slc = _attend_list(Q[b][t][h], [K[b][s][grp] for s in slc], [V[b][s][grp] for s in slc], scale)
                o_win = _attend_list(Q[b][t][h], [K[b][s][grp] for s in win], [V[b][s][grp] for s in win], scale)
                gc, gs, gw = (1 / (1 + math.exp(-x)) for x in GL[b][t][h])
                out[b][t][h] = [gc * a + gs * c + gw * w for a, c, w in zip(o_cmp, o_slc, o_win)]
    return torch.tensor(out, dtype=torch.float64), torch.tensor(sel)


@pytest.mark.parametrize("B,T,Hq,Hkv,D,Dv,bs,count,window,scale", [
    (2, 19, 4, 2, 5, 3, 4, 4, 5, None),      # partial last block
    (1, 20, 3, 1, 4, 4, 3, 5, 1, 0.7),       # MQA, window 1
    (1, 13, 2, 2, 3, 5, 2, 3, 30, None),     # MHA, forced blocks only, window past T
    (2, 3, 2, 1, 4, 2, 4, 3, 2, None),       # shorter than one block: no compressed key at all
    (1, 11, 2, 1, 3, 3, 1, 4, 3, None),      # blocks of one token
])
def test_nsa_matches_a_loop_over_queries(nsa, B, T, Hq, Hkv, D, Dv, bs, count, window, scale):
    gen = torch.Generator().manual_seed(T * 7 + bs)
    q, k, v, g = _randn(gen, B, T, Hq, D), _randn(gen, B, T, Hkv, D), _randn(gen, B, T, Hkv, Dv), \
        _randn(gen, B, T, Hq, 3)
    want, want_sel = _nsa_loop(q, k, v, g, bs, count, window, D ** -0.5 if scale is None else scale)
    assert torch.equal(nsa.select_blocks(q, k, bs, count, scale), want_sel)
    torch.testing.assert_close(nsa.native_sparse_attention(q, k, v, g, bs, count, window, scale), want,
                               rtol=1e-12, atol=1e-12)


def _sdpa_heads(q, k, v, keep, scale):
    """SDPA in the (B, H, T, D) layout with a boolean keep mask (B, H, T, S) (True = attend)."""
    G = q.shape[2] // k.shape[2]
    return F.scaled_dot_product_attention(q.transpose(1, 2), k.repeat_interleave(G, 2).transpose(1, 2),
                                          v.repeat_interleave(G, 2).transpose(1, 2), attn_mask=keep,
                                          scale=scale).transpose(1, 2)


def test_nsa_each_branch_matches_sdpa_with_its_mask(nsa):
    """Gate logits of +-1000 give gates of exactly 1 and 0, so the output is one branch."""
    gen = torch.Generator().manual_seed(3)
    B, T, Hq, Hkv, D, bs, count, window = 2, 27, 6, 2, 5, 4, 4, 7
    G, scale = Hq // Hkv, D ** -0.5
    q, k, v = _randn(gen, B, T, Hq, D), _randn(gen, B, T, Hkv, D), _randn(gen, B, T, Hkv, D)

    def only(branch):
        g = torch.full((B, T, Hq, 3), -1000.0, dtype=torch.float64)
        g[..., branch] = 1000.0
        return nsa.native_sparse_attention(q, k, v, g, bs, count, window)

    t = torch.arange(T)
    causal = t[None, :] <= t[:, None]
    win = causal & (t[:, None] - t[None, :] < window)
    torch.testing.assert_close(only(2), _sdpa_heads(q, k, v, win, scale), rtol=1e-12, atol=1e-12)
    sel = nsa.select_blocks(q, k, bs, count)                                          # (B, T, Hkv, NB)
    tok = sel[..., t // bs].repeat_interleave(G, dim=2) & causal[None, :, None, :]    # (B, T, Hq, T)
    torch.testing.assert_close(only(1), _sdpa_heads(q, k, v, tok.transpose(1, 2), scale), rtol=1e-12, atol=1e-12)
    n = T // bs
    kc = k[:, :n * bs].reshape(B, n, bs, Hkv, D).mean(2)
    vc = v[:, :n * bs].reshape(B, n, bs, Hkv, D).mean(2)
    seen = ((torch.arange(n) + 1) * bs - 1)[None, :] <= t[:, None]                    # (T, n)
    rows = seen.any(-1)
    want = _sdpa_heads(q[:, rows], kc, vc, seen[rows], scale)
    got = only(0)
    torch.testing.assert_close(got[:, rows], want, rtol=1e-12, atol=1e-12)
    assert bool((got[:, ~rows] == 0).all()) and int((~rows).sum()) == bs - 1


def test_nsa_selection_rules(nsa):
    gen = torch.Generator().manual_seed(5)
    B, T, Hq, Hkv, D, bs, count = 2, 45, 4, 2, 6, 4, 5
    q, k = _randn(gen, B, T, Hq, D), _randn(gen, B, T, Hkv, D)
    sel = nsa.select_blocks(q, k, bs, count)
    assert sel.shape == (B, T, Hkv, math.ceil(T / bs)) and sel.dtype == torch.bool
    for t in range(T):
        o = t // bs
        assert not sel[:, t, :, o + 1:].any()                                          # nothing in the future
        assert sel[:, t, :, 0].all() and sel[:, t, :, o].all() and (o == 0 or sel[:, t, :, o - 1].all())
        assert bool((sel[:, t].sum(-1) == min(count, o + 1)).all())                    # forced ones count
    # one selection per group: permuting the heads inside a group changes nothing
    perm = torch.tensor([1, 0, 3, 2])
    assert torch.equal(nsa.select_blocks(q[:, :, perm], k, bs, count), sel)
    # the own block is selected even when it is partial (T = 22: query 21 is in block 5, tokens 20-21)
    torch.manual_seed(0)
    q, k = torch.randn(1, 22, 4, 8, dtype=torch.float64), torch.randn(1, 22, 2, 8, dtype=torch.float64)
    assert nsa.select_blocks(q, k, 4, 4)[0, 21, :, 5].all()


def test_nsa_ranks_by_summed_weights_not_logits(nsa):
    """Two heads of one group: head 0 strongly prefers block 2, head 1 mildly prefers block 1 over
    blocks 2 and 3. The summed softmax weights pick block 2; summed logits would pick block 1."""
    bs, D = 1, 2
    k = torch.zeros(1, 8, 1, D, dtype=torch.float64)
    k[0, 1, 0] = torch.tensor([0.0, 1.0])
    k[0, 2, 0] = torch.tensor([1.0, 0.0])
    k[0, 3, 0] = torch.tensor([0.0, -1.0])
    q = torch.zeros(1, 8, 2, D, dtype=torch.float64)
    q[0, 5, 0] = torch.tensor([1.0, 0.0])        # head 0: logit 1 on block 2, 0 elsewhere
    q[0, 5, 1] = torch.tensor([-3.0, 3.0])       # head 1: block 1 at +3, block 2 at -3, block 3 at -3
    sel = nsa.select_blocks(q, k, bs, 4, scale=1.0)[0, 5, 0]
    # query 5: forced 0, 4, 5; one free slot among blocks 1-3
    assert sel.nonzero().flatten().tolist() == [0, 1, 4, 5]
    q[0, 5, 1] = torch.tensor([-0.5, 0.5])       # head 1 mild: now head 0's strong vote wins
    q[0, 5, 0] = torch.tensor([6.0, 0.0])
    assert nsa.select_blocks(q, k, bs, 4, scale=1.0)[0, 5, 0].nonzero().flatten().tolist() == [0, 2, 4, 5]


# =============================================================================== lightning_indexer
def _hf_indexer_inputs(interleaved: bool = False):
    """The facts file's recipe: DeepseekV32Indexer(hidden 32, q_lora_rank 12, 4 heads of dim 8, rope 4),
    parameters wq_b, wk, weights_proj drawn normal(0, 0.3) after the module's own init, k_norm left as
    built; x (2, 7, 32) and qr (2, 7, 12); half-split RoPE on the first 4 dims (or, as the first demo
    code did, interleaved pairs (2i, 2i + 1))."""
    hidden, q_lora, H, d, dr = 32, 12, 4, 8, 4
    torch.manual_seed(0)
    wq_b = torch.nn.Linear(q_lora, H * d, bias=False)        # the same modules in the same order: the same draws
    wk = torch.nn.Linear(hidden, d, bias=False)
    k_norm = torch.nn.LayerNorm(d, eps=1e-6)
    w_proj = torch.nn.Linear(hidden, H, bias=False)
    for m in (wq_b, wk, k_norm, w_proj):
        m.double()
    with torch.no_grad():
        for p in (wq_b.weight, wk.weight, w_proj.weight):
            p.normal_(0, 0.3)
    x = torch.randn(2, 7, hidden, dtype=torch.float64)
    qr = torch.randn(2, 7, q_lora, dtype=torch.float64)
    inv_freq = 10000.0 ** (-torch.arange(0, dr, 2, dtype=torch.float64) / dr)
    ang = torch.arange(7, dtype=torch.float64)[:, None] * inv_freq                # (7, dr / 2)
    cos, sin = torch.cat([ang.cos()] * 2, -1), torch.cat([ang.sin()] * 2, -1)      # (7, dr)

    def rope(t):                                                                   # (B, 7, ..., dr)
        shape = (1, 7) + (1,) * (t.dim() - 3) + (dr,)
        if interleaved:
            c, s = ang.cos().view(shape[:-1] + (dr // 2,)), ang.sin().view(shape[:-1] + (dr // 2,))
            a, b = t[..., 0::2], t[..., 1::2]
            return torch.stack([a * c - b * s, a * s + b * c], dim=-1).flatten(-2)
        half = torch.cat([-t[..., dr // 2:], t[..., :dr // 2]], -1)
        return t * cos.view(shape) + half * sin.view(shape)

    with torch.no_grad():
        q = wq_b(qr).view(2, 7, H, d)
        q = torch.cat([rope(q[..., :dr]), q[..., dr:]], -1)
        k = k_norm(wk(x))
        k = torch.cat([rope(k[..., :dr]), k[..., dr:]], -1)
        w = w_proj(x)
    return q, k, w


def test_indexer_oracle_matches_the_facts(dsa):
    q, k, w = _hf_indexer_inputs()
    scores, idx = dsa.lightning_indexer(q, k, w, 3)
    want = [0.0, 0.32541359363, -0.277836084133, 0.257599614381, -0.910040163544, -0.22870576707, 0.00802444644]
    assert torch.allclose(scores[0, 6], torch.tensor(want, dtype=torch.float64), atol=1e-11, rtol=0)
    want = [0.009241435783, 0.173807902948, 0.007571285042, 0.634534551152, 0.726738701367]
    assert torch.allclose(scores[1, 4, :5], torch.tensor(want, dtype=torch.float64), atol=1e-11, rtol=0)
    assert set(idx[0, 5].tolist()) == {1, 2, 5} and set(idx[0, 6].tolist()) == {1, 3, 6}
    assert set(idx[0, 0].tolist()) == {0, -1}            # upstream returns {0, 3, 5}: masked future keys
    assert idx.dtype == torch.int64 and idx.shape == (2, 7, 3)


def test_indexer_interleaved_rope_changes_the_selection_as_the_facts_say(dsa):
    """The RoPE trap: rotating interleaved pairs instead of the two halves changes the top-3 set on 5 of
    the 14 rows, and the visible scores by up to 1.82."""
    s1, i1 = dsa.lightning_indexer(*_hf_indexer_inputs(), 3)
    s2, i2 = dsa.lightning_indexer(*_hf_indexer_inputs(interleaved=True), 3)
    changed = sum(set(i1[b, t].tolist()) != set(i2[b, t].tolist()) for b in range(2) for t in range(7))
    assert changed == 5
    visible = torch.ones(7, 7, dtype=torch.bool).tril()
    assert abs(float((s1 - s2).abs()[:, visible].max()) - 1.82) < 0.005


def _indexer_loop(q, k, w, topk):
    B, Lq, H, d = q.shape
    Lk = k.shape[1]
    Q, K, W = q.tolist(), k.tolist(), w.tolist()
    scores = torch.zeros(B, Lq, Lk, dtype=torch.float64)
    sets = []
    for b in range(B):
        rows = []
        for i in range(Lq):
            row = [sum(W[b][i][h] * max(0.0, sum(a * c for a, c in zip(Q[b][i][h], K[b][s])) / math.sqrt(d))
                       for h in range(H)) / math.sqrt(H) for s in range(Lk)]
            scores[b, i] = torch.tensor(row, dtype=torch.float64)
            visible = range(Lk - Lq + i + 1)
            ranked = sorted(visible, key=lambda s: (-row[s], s))            # ties: the earlier key
            rows.append(set(ranked[:topk]) | ({-1} if len(ranked) < topk else set()))
        sets.append(rows)
    return scores, sets


@pytest.mark.parametrize("B,Lq,Lk,H,d,topk,zeros", [(2, 9, 9, 3, 4, 4, False), (1, 4, 13, 2, 5, 5, True),
                                                    (2, 6, 6, 4, 3, 8, True), (1, 1, 11, 3, 2, 3, False)])
def test_indexer_matches_a_loop(dsa, B, Lq, Lk, H, d, topk, zeros):
    gen = torch.Generator().manual_seed(Lq + Lk)
    q, k, w = _randn(gen, B, Lq, H, d), _randn(gen, B, Lk, d), _randn(gen, B, Lq, H)
    if zeros:                                 # keys every head scores below zero: exact ties at 0
        k[:, ::2] = -q.mean(dim=(1, 2))[:, None, :] * 3
        q = q.abs() * torch.sign(q.mean(dim=(1, 2), keepdim=True))
    scores, idx = dsa.lightning_indexer(q, k, w, topk)
    want_scores, want_sets = _indexer_loop(q, k, w, topk)
    torch.testing.assert_close(scores, want_scores, rtol=1e-12, atol=1e-12)
    for b in range(B):
        for i in range(Lq):
            assert set(idx[b, i].tolist()) == want_sets[b][i], (b, i)
    if zeros:
        assert bool((scores == 0).any())


def test_indexer_statement_example(dsa):
    """Two heads of dim 1 with q = +1 (weight +1) and q = -1 (weight -1) score key s as k_s / sqrt(2)."""
    vals = torch.tensor([0.0, 0.4, 0.0, -0.3, 0.0, 0.9, 0.2], dtype=torch.float64) * math.sqrt(2)
    k = vals.view(1, 7, 1)
    q = torch.tensor([1.0, -1.0], dtype=torch.float64).view(1, 1, 2, 1).expand(1, 7, 2, 1)
    w = torch.tensor([1.0, -1.0], dtype=torch.float64).view(1, 1, 2).expand(1, 7, 2)
    scores, idx = dsa.lightning_indexer(q, k, w, 3)
    assert torch.allclose(scores[0, 5, :6], torch.tensor([0.0, 0.4, 0.0, -0.3, 0.0, 0.9], dtype=torch.float64))
    assert set(idx[0, 5].tolist()) == {5, 1, 0}
    assert set(idx[0, 0].tolist()) == {0, -1} and (idx[0, 0] == -1).sum() == 2


def test_indexer_equals_topk_away_from_ties_and_ignores_positive_scales(dsa):
    gen = torch.Generator().manual_seed(9)
    q, k, w = _randn(gen, 2, 20, 20 // 5, 6), _randn(gen, 2, 20, 6), _randn(gen, 2, 20, 4).abs() + 0.1
    scores, idx = dsa.lightning_indexer(q, k, w, 6)
    visible = torch.ones(20, 20, dtype=torch.bool).tril()
    masked = scores.masked_fill(~visible, float("-inf"))
    top = masked.topk(7, dim=-1)
    checked = 0
    for b in range(2):
        for i in range(6, 20):                        # no tie across the boundary: topk's set is the set
            if top.values[b, i, 5] > top.values[b, i, 6]:
                assert torch.equal(idx[b, i].sort().values, top.indices[b, i, :6].sort().values)
                checked += 1
    assert checked >= 20
    s2, idx2 = dsa.lightning_indexer(q * 3.0, k, w * 0.5, 6)
    torch.testing.assert_close(s2, scores * 1.5)
    assert torch.equal(idx2, idx)


def test_sparse_attention_matches_sdpa_with_a_dense_mask(dsa):
    gen = torch.Generator().manual_seed(2)
    B, Lq, Lk, H, D, Dv, n = 2, 5, 17, 3, 6, 4, 6
    q, k, v = _randn(gen, B, Lq, H, D), _randn(gen, B, Lk, H, D), _randn(gen, B, Lk, H, Dv)
    idx = torch.stack([torch.stack([torch.randperm(Lk, generator=gen)[:n] for _ in range(Lq)]) for _ in range(B)])
    idx[0, 1, 2] = -1
    idx[1, 3, :4] = -1
    out = dsa.sparse_attention(q, k, v, idx)
    keep = torch.zeros(B, Lq, Lk, dtype=torch.bool)
    for b in range(B):
        for i in range(Lq):
            keep[b, i, idx[b, i][idx[b, i] >= 0]] = True
    want = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                          attn_mask=keep[:, None]).transpose(1, 2)
    torch.testing.assert_close(out, want, rtol=1e-12, atol=1e-12)
    shuffled = idx[..., torch.randperm(n, generator=gen)]
    torch.testing.assert_close(dsa.sparse_attention(q, k, v, shuffled), out, rtol=1e-13, atol=1e-13)
    torch.testing.assert_close(dsa.sparse_attention(q, k, v, idx, scale=0.2),
                               F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                              attn_mask=keep[:, None], scale=0.2).transpose(1, 2),
                               rtol=1e-12, atol=1e-12)


def test_pipeline_equals_dense_masked_attention_as_hugging_face_writes_it(dsa):
    """HF: index_mask = ones.scatter(-1, topk, False), attention_mask & ~index_mask, with the causal
    mask; here the -1 slots are simply skipped."""
    gen = torch.Generator().manual_seed(4)
    B, L, H, D, HI, d, topk = 2, 12, 2, 5, 3, 4, 5
    q, k, v = _randn(gen, B, L, H, D), _randn(gen, B, L, H, D), _randn(gen, B, L, H, D)
    qi, ki, w = _randn(gen, B, L, HI, d), _randn(gen, B, L, d), _randn(gen, B, L, HI)
    _, idx = dsa.lightning_indexer(qi, ki, w, topk)
    got = dsa.sparse_attention(q, k, v, idx)
    causal = torch.ones(L, L, dtype=torch.bool).tril()
    index_mask = torch.ones(B, L, L, dtype=torch.bool).scatter(-1, idx.clamp(min=0), False)
    keep = causal[None] & ~index_mask
    want = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                          attn_mask=keep[:, None]).transpose(1, 2)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


# =============================================================================== moba
def test_moba_oracle_matches_the_facts(moba):
    """seed 0: q, k, v = randn(10, 2, 4) each; chunk 3, top_k 2."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(10, 2, 4, dtype=torch.float64)[None] for _ in range(3))
    sel = moba.moba_select(q, k, 3, 2)
    head0 = [[0], [0], [0], [0, 1], [0, 1], [0, 1], [1, 2], [1, 2], [1, 2], [1, 3]]
    head1 = head0[:8] + [[0, 2], [1, 3]]
    assert [sel[0, t, 0].nonzero().flatten().tolist() for t in range(10)] == head0
    assert [sel[0, t, 1].nonzero().flatten().tolist() for t in range(10)] == head1
    o = moba.moba_attention(q, k, v, 3, 2)
    want = [-0.05644011908, 0.30409931007, -0.92370823361, -0.264481647865]
    assert torch.allclose(o[0, 9, 0], torch.tensor(want, dtype=torch.float64), atol=1e-11, rtol=0)
    want = [-0.420643166052, -0.475415717681, -0.622130830295, -0.317999523335]
    assert torch.allclose(o[0, 5, 1], torch.tensor(want, dtype=torch.float64), atol=1e-11, rtol=0)


def _moba_loop(q, k, v, C, topk, scale):
    B, T, H, D = q.shape
    Q, K, V = q.tolist(), k.tolist(), v.tolist()
    out = torch.zeros(B, T, H, v.shape[-1], dtype=torch.float64)
    sel = torch.zeros(B, T, H, -(-T // C), dtype=torch.bool)
    for b in range(B):
        for h in range(H):
            means = [[sum(K[b][j * C + i][h][e] for i in range(C)) / C for e in range(D)] for j in range(T // C)]
            for t in range(T):
                o = t // C
                gates = {j: sum(a * m for a, m in zip(Q[b][t][h], means[j])) for j in range(o)}
                chosen = {o} | set(sorted(gates, key=lambda j: -gates[j])[:topk - 1])
                for j in chosen:
                    sel[b, t, h, j] = True
                keys = [s for s in range(t + 1) if s // C in chosen]
                out[b, t, h] = torch.tensor(_attend_list(Q[b][t][h], [K[b][s][h] for s in keys],
                                                         [V[b][s][h] for s in keys], scale), dtype=torch.float64)
    return out, sel


@pytest.mark.parametrize("B,T,H,D,Dv,C,topk", [(2, 17, 2, 4, 3, 3, 3), (1, 20, 1, 3, 5, 4, 2),
                                               (1, 9, 2, 3, 3, 1, 4), (2, 5, 2, 4, 2, 7, 2), (1, 12, 3, 2, 2, 5, 1)])
def test_moba_matches_a_loop_over_queries(moba, B, T, H, D, Dv, C, topk):
    gen = torch.Generator().manual_seed(T + C)
    q, k, v = _randn(gen, B, T, H, D), _randn(gen, B, T, H, D), _randn(gen, B, T, H, Dv)
    want, want_sel = _moba_loop(q, k, v, C, topk, D ** -0.5)
    assert torch.equal(moba.moba_select(q, k, C, topk), want_sel)
    torch.testing.assert_close(moba.moba_attention(q, k, v, C, topk), want, rtol=1e-12, atol=1e-12)


def _moba_upstream_naive(q, k, v, C, topk):
    """MoonshotAI's naive formulation in other words: gate of block i is -inf for every query up to the
    end of block i, +inf inside block i; top-k with a tie guard; then the token-level tril."""
    B, T, H, D = q.shape
    NB = -(-T // C)
    k_mean = torch.stack([k[:, i * C:(i + 1) * C].mean(1) for i in range(NB)], dim=1)       # (B, NB, H, D)
    gate = torch.einsum("bthd,bnhd->bhtn", q, k_mean)                                       # (B, H, T, NB)
    for i in range(NB):
        gate[:, :, :(i + 1) * C, i] = float("-inf")
        gate[:, :, i * C:(i + 1) * C, i] = float("inf")
    top = gate.topk(min(topk, NB), dim=-1)
    attend = (gate >= top.values[..., -1:]) & torch.zeros_like(gate, dtype=torch.bool).scatter(-1, top.indices, True)
    tokens = attend.repeat_interleave(C, dim=-1)[..., :T]                                  # (B, H, T, T)
    tokens &= torch.ones(T, T, dtype=torch.bool).tril()
    scores = torch.einsum("bthd,bshd->bhts", q, k) * D ** -0.5
    w = torch.softmax(scores.masked_fill(~tokens, float("-inf")), -1)
    return torch.einsum("bhts,bshd->bthd", w, v), attend


def test_moba_equals_the_upstream_naive_form_which_also_picks_future_blocks(moba):
    gen = torch.Generator().manual_seed(8)
    q, k, v = _randn(gen, 2, 23, 2, 4), _randn(gen, 2, 23, 2, 4), _randn(gen, 2, 23, 2, 4)
    want, attend = _moba_upstream_naive(q, k, v, 4, 3)
    torch.testing.assert_close(moba.moba_attention(q, k, v, 4, 3), want, rtol=1e-12, atol=1e-12)
    sel = moba.moba_select(q, k, 4, 3).permute(0, 2, 1, 3)                                # (B, H, T, NB)
    assert bool((attend[:, :, :4, 1:].any()))                   # upstream: early queries also "select" the future
    future = torch.arange(6)[None, :] > (torch.arange(23) // 4)[:, None]
    assert torch.equal(sel, attend & ~future)


def test_moba_efficient_form_merges_two_attentions_by_lse(moba):
    """Own block (causal) and selected past blocks attended separately, merged by their log-sum-exps."""
    gen = torch.Generator().manual_seed(12)
    B, T, H, D, C, topk = 2, 26, 2, 5, 4, 3
    q, k, v = _randn(gen, B, T, H, D), _randn(gen, B, T, H, D), _randn(gen, B, T, H, D)
    sel = moba.moba_select(q, k, C, topk)                                                  # (B, T, H, NB)
    t = torch.arange(T)
    same = (t[:, None] // C) == (t[None, :] // C)
    own_keep = (same & (t[None, :] <= t[:, None]))[None, :, None, :]                       # (1, T, 1, T)
    past_keep = sel[..., t // C] & (t[None, :] // C < t[:, None] // C)[None, :, None, :]  # (B, T, H, T)
    s = torch.einsum("bthd,bshd->bths", q, k) * D ** -0.5

    def part(keep):
        x = s.masked_fill(~keep, float("-inf"))
        lse = torch.logsumexp(x, -1)                                                       # -inf: nothing kept
        w = torch.exp(x - lse.clamp(min=-1e300)[..., None]).nan_to_num(0.0)
        return torch.einsum("bths,bshd->bthd", w, v), lse

    o1, l1 = part(own_keep.expand(B, T, H, T))
    o2, l2 = part(past_keep)
    lse = torch.logaddexp(l1, l2)
    merged = torch.exp(l1 - lse)[..., None] * o1 + torch.exp(l2 - lse).nan_to_num(0.0)[..., None] * o2
    torch.testing.assert_close(moba.moba_attention(q, k, v, C, topk), merged, rtol=1e-12, atol=1e-12)


def test_moba_extreme_top_k_match_sdpa(moba):
    gen = torch.Generator().manual_seed(6)
    B, T, H, D, C = 2, 19, 3, 4, 5
    q, k, v = _randn(gen, B, T, H, D), _randn(gen, B, T, H, D), _randn(gen, B, T, H, D)

    def sdpa(keep):
        return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                              attn_mask=keep).transpose(1, 2)
    t = torch.arange(T)
    causal = t[None, :] <= t[:, None]
    torch.testing.assert_close(moba.moba_attention(q, k, v, C, 4), sdpa(causal), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(moba.moba_attention(q, k, v, C, 9), sdpa(causal), rtol=1e-12, atol=1e-12)
    block = causal & ((t[:, None] // C) == (t[None, :] // C))
    torch.testing.assert_close(moba.moba_attention(q, k, v, C, 1), sdpa(block), rtol=1e-12, atol=1e-12)


# =============================================================================== the graders' margins
def _selection(pid, ref, case, dtype):
    inputs = {n: (v.to(dtype) if v.is_floating_point() else v) for n, v in case.inputs.items()}
    if case.target == "lightning_indexer":
        _, idx = ref.lightning_indexer(*inputs.values(), **case.kwargs)
        return idx.sort(-1).values
    return getattr(ref, case.target)(*inputs.values(), **case.kwargs)


@pytest.mark.parametrize("pid,targets", [("native_sparse_attention", ("select_blocks",)),
                                         ("moba", ("moba_select",)), ("lightning_indexer", ("lightning_indexer",))])
def test_the_case_dtype_selects_what_float64_selects(pid, targets):
    """On every selection case (default and --full, two seeds) the reference run in the case dtype, and
    in float32 for a bfloat16 case, selects exactly what it selects in float64 on the same rounded inputs."""
    ref, grader = load(pid), load(pid, "graders")
    for seed in (0, 20261129):
        for case in grader.cases(Ctx(seed, full=True)):
            if case.target not in targets or case.dtype == torch.float64:
                continue
            rounded = {n: (v.to(case.dtype).double() if v.is_floating_point() else v) for n, v in case.inputs.items()}
            truth = _selection(pid, ref, type(case)(**{**case.__dict__, "inputs": rounded}), torch.float64)
            assert torch.equal(_selection(pid, ref, case, case.dtype), truth), (seed, case.name)
            if case.dtype == torch.bfloat16:
                assert torch.equal(_selection(pid, ref, case, torch.float32), truth), (seed, case.name)
