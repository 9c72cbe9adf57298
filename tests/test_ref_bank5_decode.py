"""Cross-checks of the two decoding references of bank 5 against implementations written another way:

decode_sampling  the filters row by row in Python floats (sorted lists, the pairwise "strictly more
                 probable" mass), the facts file's oracle A (seed 0, randn(2, 10)) and its traps
                 ([2, 1, 1, 1, 0] with k = 2, the float boundary of [0.5, 0.3, 0.2], ties at top-p),
                 the inverse CDF as a linear scan and on oracle B's filtered row, the decode loop
                 against recomputing the whole prefix without a cache, and the grader's statistical
                 check (it passes the reference and fails a sampler that ignores the filters)
beam_search      a per-prompt search in Python lists, each prompt searched alone (batch rows do not
                 leak into each other), one beam against greedy decoding, one step against the top
                 tokens, the length penalty's closed form, the reorder rule of the facts file
"""
from __future__ import annotations

import math

import pytest
import torch

from loading import failures, load

from attn_drill import bank
from attn_drill.bank import sources
from attn_drill.bank.api import Ctx, case_seed
from attn_drill.room.usercode import load_source


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(saved)


@pytest.fixture(scope="module")
def ds():
    return load("decode_sampling")


@pytest.fixture(scope="module")
def bs():
    return load("beam_search")


def _mutant(pid: str, mid: str):
    spec = bank.get(pid)
    return load_source(sources.mutant_source(spec, sources.read(bank.reference_path(pid)), mid), f"test_mutant_{mid}")


def _weights(gen, V, E, max_len, eos=None, eos_bias=0.0, scale=2.5):
    w = {"tok_emb": torch.randn(V, E, generator=gen, dtype=torch.float64),
         "pos_emb": torch.randn(max_len, E, generator=gen, dtype=torch.float64),
         "qkv": torch.randn(3 * E, E, generator=gen, dtype=torch.float64) / math.sqrt(E),
         "out": torch.randn(E, E, generator=gen, dtype=torch.float64) / math.sqrt(E),
         "lm_head": torch.randn(V, E, generator=gen, dtype=torch.float64) * scale / math.sqrt(2 * E),
         "lm_bias": torch.zeros(V, dtype=torch.float64)}
    if eos is not None:
        w["lm_bias"][eos] = eos_bias
    return w


# =============================================================================== decode_sampling
def _row_filter(values, temperature, top_k, top_p, min_p):
    """The statement's rules on one row of Python floats."""
    V = len(values)
    if temperature == 0:
        out = [0.0] * V
        out[values.index(max(values))] = 1.0
        return out
    s = [v / temperature for v in values]
    alive = list(range(V))
    if 0 < top_k < V:
        kth = sorted(s, reverse=True)[top_k - 1]
        alive = [i for i in alive if s[i] >= kth]

    def probs(ids):
        m = max(s[i] for i in ids)
        z = sum(math.exp(s[i] - m) for i in ids)
        return {i: math.exp(s[i] - m) / z for i in ids}

    if top_p < 1.0:
        p = probs(alive)
        alive = [i for i in alive if sum(q for q in p.values() if q > p[i]) < top_p]
    if min_p > 0.0:
        m = max(s[i] for i in alive)
        alive = [i for i in alive if math.exp(s[i] - m) >= min_p]
    p = probs(alive)
    return [p.get(i, 0.0) for i in range(V)]


SETTINGS = [(1.0, 0, 1.0, 0.0), (0.7, 5, 0.8, 0.1), (1.5, 3, 1.0, 0.0), (1.0, 0, 0.6, 0.0), (0.5, 0, 1.0, 0.2),
            (1.2, 20, 0.9, 0.05), (0.0, 0, 1.0, 0.0), (0.9, 4, 0.5, 0.3)]


@pytest.mark.parametrize("i", range(len(SETTINGS)))
def test_filter_matches_row_by_row_python(ds, i):
    T, k, p, m = SETTINGS[i]
    gen = torch.Generator().manual_seed(100 + i)
    logits = torch.randn(40, 13, generator=gen, dtype=torch.float64) * 2.0
    got = ds.filter_probs(logits, T, k, p, m)
    want = torch.tensor([_row_filter(r.tolist(), T, k, p, m) for r in logits], dtype=torch.float64)
    assert got.dtype == torch.float64 and got.shape == logits.shape
    assert torch.allclose(got, want, atol=1e-13, rtol=0)
    assert torch.allclose(got.sum(-1), torch.ones(40, dtype=torch.float64))


def test_filter_oracle_a(ds):
    """Facts file section 1, oracle A: seed 0, randn(2, 10) in float64."""
    torch.manual_seed(0)
    logits = torch.randn(2, 10, dtype=torch.float64)
    assert abs(float(logits[0, 0]) + 2.310411800234176) < 1e-15
    kept = lambda **kw: (ds.filter_probs(logits, **kw) > 0).sum(-1).tolist()   # noqa: E731
    assert kept(top_k=3) == [3, 3]
    assert kept(top_p=0.6) == [4, 3]
    assert kept(min_p=0.2) == [7, 5]
    chain = ds.filter_probs(logits, 0.7, 5, 0.8, 0.1)
    assert chain[0].nonzero().flatten().tolist() == [3, 5, 8, 9]
    want = [0.42643566489143164, 0.13810571171381605, 0.14382780735085246, 0.29163081604389984]
    assert torch.allclose(chain[0, [3, 5, 8, 9]], torch.tensor(want, dtype=torch.float64), atol=1e-15)
    assert chain[1].nonzero().flatten().tolist() == [1, 3, 7]
    # temperature after top-p instead of before: top-p 0.8 on the raw logits keeps [6, 5], not [5, 4]
    assert kept(temperature=0.7, top_p=0.8) == [5, 4]
    assert kept(top_p=0.8) == [6, 5]


def test_filter_traps_of_the_facts_file(ds):
    # top-k keeps every token tied with the k-th value
    assert (ds.filter_probs(torch.tensor([[2.0, 1, 1, 1, 0]], dtype=torch.float64), top_k=2) > 0).sum() == 4
    # [0.5, 0.3, 0.2] with top_p 0.8: the 0.2 token has 0.8 above it, not < 0.8: removed (the exact rule;
    # HF's cumsum <= 1 - top_p keeps it in float64 and removes it in float32)
    probs = ds.filter_probs(torch.tensor([[0.5, 0.3, 0.2]], dtype=torch.float64).log(), top_p=0.8)
    assert probs[0].tolist()[2] == 0.0 and (probs > 0).sum() == 2
    # ties at the boundary stay together (HF keeps an arbitrary one of them)
    probs = ds.filter_probs(torch.tensor([[0.5, 0.25, 0.25]], dtype=torch.float64).log(), top_p=0.75)
    assert (probs > 0).sum() == 3
    # greedy: the first index of the maximum
    g = ds.filter_probs(torch.tensor([[1.0, 3.0, 3.0]], dtype=torch.float64), temperature=0.0)
    assert g.tolist() == [[0.0, 1.0, 0.0]]
    # min-p is relative to the top after temperature: exp((l - l_max) / T) >= min_p
    x = torch.tensor([[3.0, 2.5, 1.0, 0.0, -1.0]], dtype=torch.float64)
    assert (ds.filter_probs(x, temperature=2.0, min_p=0.3) > 0).sum() == 3
    assert (ds.filter_probs(x, temperature=1.0, min_p=0.3) > 0).sum() == 2


def test_filter_keeps_the_dtype_and_leading_dims(ds):
    x = torch.randn(2, 3, 7, generator=torch.Generator().manual_seed(3))
    for dtype in (torch.float32, torch.bfloat16):
        out = ds.filter_probs(x.to(dtype), 0.8, 4, 0.9, 0.05)
        assert out.dtype == dtype and out.shape == x.shape


def test_inverse_cdf_is_a_scan_in_token_id_order(ds):
    gen = torch.Generator().manual_seed(5)
    probs = torch.softmax(torch.randn(200, 9, generator=gen, dtype=torch.float64), -1)
    probs[:, 3] = 0.0
    probs = probs / probs.sum(-1, keepdim=True)
    u = torch.rand(200, generator=gen, dtype=torch.float64)
    got = ds.sample_inverse_cdf(probs, u)
    for row, x, t in zip(probs.tolist(), u.tolist(), got.tolist()):
        acc = 0.0
        for i, p in enumerate(row):
            acc += p
            if acc > x:
                break
        assert t == i and t != 3


def test_inverse_cdf_on_oracle_b_row(ds):
    """Facts file oracle B: after T 0.8, top-k 4, top-p 0.9 the first step keeps p(1), p(5), p(10);
    u = 0.1 -> 1, 0.5 -> 5, 0.9 -> 10 (the logits are the facts file's, from a Llama model)."""
    logits = torch.tensor([-0.8001568546, 0.8148573704, -0.1004246538, -0.7511313601, -0.7397846397, 0.2241131417,
                           -0.8854245671, -0.4298950333, -0.9540239232, -0.1290073962, 1.1159696369, -0.7548122302],
                          dtype=torch.float64)
    probs = ds.filter_probs(logits[None].expand(3, -1), 0.8, 4, 0.9)
    assert probs[0].nonzero().flatten().tolist() == [1, 5, 10]
    assert torch.allclose(probs[0, [1, 5, 10]], torch.tensor([0.3407295287, 0.1628221834, 0.4964482879],
                                                             dtype=torch.float64), atol=1e-9)
    assert ds.sample_inverse_cdf(probs, torch.tensor([0.1, 0.5, 0.9], dtype=torch.float64)).tolist() == [1, 5, 10]


def _recompute_generate(ds, TinyLM, weights, H, prompt, uniforms, f):
    """The decode loop without a cache: a fresh model over the whole prefix at every step."""
    seq = prompt.clone()
    toks, dists = [], []
    for t in range(uniforms.shape[1]):
        model = TinyLM(weights, H, torch.float64)
        model.init_cache(seq.shape[0])
        logits = model(seq, 0)[:, -1]
        probs = torch.tensor([_row_filter(r.tolist(), *f) for r in logits], dtype=torch.float64)
        tok = ds.sample_inverse_cdf(probs, uniforms[:, t])
        toks.append(tok)
        dists.append(probs)
        seq = torch.cat([seq, tok[:, None]], dim=1)
    return torch.stack(toks, 1), torch.stack(dists, 1)


@pytest.mark.parametrize("f", [(0.7, 5, 0.8, 0.1), (0.0, 0, 1.0, 0.0), (1.3, 0, 0.9, 0.0)])
def test_generate_matches_recomputing_the_prefix(ds, f):
    probes = load("decode_sampling", "probes")
    gen = torch.Generator().manual_seed(11)
    B, P, T, V, E, H = 3, 4, 7, 10, 8, 2
    weights = {n: w for n, w in _weights(gen, V, E, P + T).items() if n != "lm_bias"}
    prompt = torch.randint(0, V, (B, P), generator=gen)
    uniforms = torch.rand(B, T, generator=gen, dtype=torch.float64)
    log = []
    model = probes.TinyLM(weights, H, torch.float64, log)
    tokens, probs = ds.generate(model, prompt, uniforms, *f)
    want_tokens, want_probs = _recompute_generate(ds, probes.TinyLM, weights, H, prompt, uniforms, f)
    assert torch.equal(tokens, want_tokens)
    assert torch.allclose(probs, want_probs, atol=1e-12)
    assert log == [[P, 0]] + [[1, P + t] for t in range(T - 1)]


def test_tiny_lm_cache_equals_full_forward():
    probes = load("decode_sampling", "probes")
    gen = torch.Generator().manual_seed(2)
    weights = {n: w for n, w in _weights(gen, 9, 12, 20).items() if n != "lm_bias"}
    ids = torch.randint(0, 9, (2, 11), generator=gen)
    m = probes.TinyLM(weights, 3)
    m.init_cache(2)
    full = m(ids, 0)
    m.init_cache(2)
    parts = [m(ids[:, :4], 0)] + [m(ids[:, t:t + 1], t) for t in range(4, 11)]
    assert (torch.cat(parts, 1) - full).abs().max() < 1e-12


def test_grader_distribution_check_passes_the_reference_and_fails_wrong_laws(ds):
    grader = load("decode_sampling", "graders")
    case = next(c for c in grader.cases(Ctx(0)) if c.name == "generate_distribution_fp64")
    case.seed = case_seed(0, case.name)
    assert failures("decode_sampling", case, ds) == []
    for mid in ("top_p_drops_crossing", "not_renormalised", "temperature_after_filters"):
        assert failures("decode_sampling", case, _mutant("decode_sampling", mid)) != [], mid
    # a sampler in another order has the right law: the statistical check passes it (the exact cases do not)
    assert failures("decode_sampling", case, _mutant("decode_sampling", "cdf_in_sorted_order")) == []


def test_grader_decisions_have_their_margins():
    """Every filter case's rows, re-decided here, sit away from their boundaries (except exact ties)."""
    grader = load("decode_sampling", "graders")
    for case in grader.cases(Ctx(4)):
        if case.target != "filter_probs" or "ties" in case.name:
            continue
        rows = case.inputs["logits"].to(case.dtype).double().reshape(-1, case.inputs["logits"].shape[-1])
        assert bool(grader._rows_ok(rows, case.dtype, case.kwargs).all()), case.name


# =============================================================================== beam_search
def _list_search(TinyLM, weights, H, prompt_row, nb, T, eos, lp):
    """One prompt, Python lists: the statement's rules written out."""
    P = prompt_row.shape[0]
    model = TinyLM(weights, H, torch.float64)
    model.init_cache(nb)
    logits = model(prompt_row[None].expand(nb, P).contiguous(), 0)[:, -1]
    beams = [(0.0, [])] + [(float("-inf"), [])] * (nb - 1)
    pool = []
    for t in range(T):
        logp = torch.log_softmax(logits, -1)
        cands = sorted(((s + float(logp[j, v]), j, v) for j, (s, _) in enumerate(beams) if s > float("-inf")
                        for v in range(logp.shape[-1])), key=lambda c: -c[0])[:2 * nb]
        if len(pool) < nb:
            pool = sorted(pool + [(s / (t + 1) ** lp, beams[j][1] + [v]) for s, j, v in cands[:nb]
                                  if v == eos or t == T - 1], key=lambda h: -h[0])[:nb]
        alive = [c for c in cands if c[2] != eos][:nb]
        if len(pool) == nb or t == T - 1:
            break
        model.reorder_cache(torch.tensor([j for _, j, _ in alive]))
        beams = [(s, beams[j][1] + [v]) for s, j, v in alive]
        logits = model(torch.tensor([[v] for _, _, v in alive]), P + t)[:, -1]
    return pool


@pytest.mark.parametrize("seed,nb,lp,bias", [(0, 3, 1.0, 1.5), (1, 2, 0.0, 1.0), (2, 4, 2.0, 2.0), (3, 3, 1.0, -3.0),
                                             (4, 1, 1.0, 1.0)])
def test_beam_search_matches_a_per_prompt_list_search(bs, seed, nb, lp, bias):
    probes = load("beam_search", "probes")
    gen = torch.Generator().manual_seed(seed)
    B, P, T, V, E, H = 3, 4, 6, 11, 8, 2
    eos = seed % V
    weights = _weights(gen, V, E, P + T, eos, bias)
    prompt = torch.randint(0, V, (B, P), generator=gen)
    seqs, scores = bs.beam_search(probes.TinyLM(weights, H), prompt, nb, T, eos, lp)
    assert seqs.shape == (B, nb, T) and scores.shape == (B, nb) and seqs.dtype == torch.int64
    for b in range(B):
        pool = _list_search(probes.TinyLM, weights, H, prompt[b], nb, T, eos, lp)
        assert [h[1] for h in pool] == [[v for v in row if v >= 0] for row in seqs[b].tolist()]
        assert torch.allclose(scores[b], torch.tensor([h[0] for h in pool], dtype=torch.float64), atol=1e-12)
        # each prompt searched alone gives the same result: the cache rows of prompts never mix
        alone_seqs, alone_scores = bs.beam_search(probes.TinyLM(weights, H), prompt[b:b + 1], nb, T, eos, lp)
        assert torch.equal(alone_seqs[0], seqs[b]) and torch.allclose(alone_scores[0], scores[b], atol=1e-12)


def test_one_beam_is_greedy_and_one_step_is_the_top_tokens(bs):
    probes = load("beam_search", "probes")
    gen = torch.Generator().manual_seed(9)
    V, E, H, P = 9, 8, 2, 3
    weights = _weights(gen, V, E, 12, eos=0, eos_bias=-5.0)
    prompt = torch.randint(1, V, (2, P), generator=gen)
    seqs, scores = bs.beam_search(probes.TinyLM(weights, H), prompt, 1, 5, 0, 1.0)
    # greedy with the same model: argmax each step
    m = probes.TinyLM(weights, H)
    m.init_cache(2)
    logits, total, toks = m(prompt, 0)[:, -1], torch.zeros(2, dtype=torch.float64), []
    for t in range(5):
        tok = logits.argmax(-1)
        total += torch.log_softmax(logits, -1).gather(1, tok[:, None])[:, 0]
        toks.append(tok)
        logits = m(tok[:, None], P + t)[:, -1]
    assert torch.equal(seqs[:, 0], torch.stack(toks, 1))
    assert torch.allclose(scores[:, 0], total / 5, atol=1e-12)
    # one step: the hypotheses are the nb most probable first tokens, scored log p / 1
    seqs, scores = bs.beam_search(probes.TinyLM(weights, H), prompt, 3, 1, 0, 2.0)
    m.init_cache(2)
    top = torch.log_softmax(m(prompt, 0)[:, -1], -1).topk(3, -1)
    assert torch.equal(seqs[..., 0], top.indices) and torch.allclose(scores, top.values, atol=1e-12)


def test_reorder_rule_of_the_facts_file():
    """reorder_cache([1, 1, 0]) puts old row 1 in rows 0 and 1 and old row 0 in row 2."""
    probes = load("beam_search", "probes")
    gen = torch.Generator().manual_seed(1)
    m = probes.TinyLM(_weights(gen, 5, 4, 6), 2)
    m.init_cache(3)
    m(torch.tensor([[1], [2], [3]]), 0)
    before = m.k_cache.clone()
    m.reorder_cache(torch.tensor([1, 1, 0]))
    assert torch.equal(m.k_cache[0], before[1]) and torch.equal(m.k_cache[1], before[1])
    assert torch.equal(m.k_cache[2], before[0])


def test_length_penalty_closed_form(bs):
    """With lp = 0 and lp = 2 the same finished hypotheses rescale as sum / len ** lp."""
    probes = load("beam_search", "probes")
    gen = torch.Generator().manual_seed(4)
    weights = _weights(gen, 10, 8, 12, eos=2, eos_bias=2.5)
    prompt = torch.randint(0, 10, (1, 4), generator=gen)
    s0, sc0 = bs.beam_search(probes.TinyLM(weights, 2), prompt, 1, 6, 2, 0.0)
    s2, sc2 = bs.beam_search(probes.TinyLM(weights, 2), prompt, 1, 6, 2, 2.0)
    assert torch.equal(s0, s2)                                   # one beam: the same path
    n = int((s0[0, 0] >= 0).sum())
    assert abs(float(sc2[0, 0]) - float(sc0[0, 0]) / n ** 2) < 1e-12


def test_beam_grader_margins_hold_for_the_reference_path():
    grader = load("beam_search", "graders")
    for case in grader.cases(Ctx(2)):
        kw = case.kwargs
        last = grader._search(case.probe_args["weights"], case.probe_args["num_heads"], case.inputs["prompt"],
                              kw["num_beams"], kw["max_new_tokens"], kw["eos_token_id"], kw["length_penalty"],
                              grader.MARGIN[case.dtype])
        assert last is not None and 0 <= last < kw["max_new_tokens"]


def test_beam_schedule_case_matches_the_calls_the_reference_makes(bs):
    """The schedule the grader expects is the reference's own call log, and the search it describes
    stops before the last step (so running on past full pools would show)."""
    grader = load("beam_search", "graders")
    probes = load("beam_search", "probes")
    (case,) = [c for c in grader.cases(Ctx(3)) if c.name == "beams_schedule_fp64"]
    kw = case.kwargs
    want = case.check.args[0]
    log = []
    model = probes.TinyLM(case.probe_args["weights"], case.probe_args["num_heads"], log=log)
    bs.beam_search(model, case.inputs["prompt"], kw["num_beams"], kw["max_new_tokens"], kw["eos_token_id"],
                   kw["length_penalty"])
    assert log == want
    assert len(want) < kw["max_new_tokens"]


def test_beam_schedule_names_running_past_full_pools_only_with_the_right_beams():
    """A call log that runs to the last step is `runs_past_full_pools` only when the search found the
    reference's beams; a search that ranks wrongly fills its pools later, so it runs on for that reason."""
    import torch
    grader = load("beam_search", "graders")
    (case,) = [c for c in grader.cases(Ctx(3)) if c.name == "beams_schedule_fp64"]
    want = case.check.args[0]
    N, P, _ = want[0]
    T = case.kwargs["max_new_tokens"]
    seqs = torch.arange(12).view(2, 2, 3)
    ref = {"calls": want, "sequences": seqs}
    long_log = grader._schedule(N, P, T - 1)
    (right,) = case.check({"calls": long_log, "sequences": seqs.clone()}, ref, case)
    (wrong,) = case.check({"calls": long_log, "sequences": seqs.flip(0)}, ref, case)
    assert right.mistake == "runs_past_full_pools" and wrong.mistake is None
    assert case.check({"calls": want, "sequences": seqs.flip(0)}, ref, case) == []
