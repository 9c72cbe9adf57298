"""Cases for `decode_sampling`: filter_probs on given logits (each filter alone, the chain, ties at
the top-k and top-p boundaries, the crossing token, min-p after temperature, greedy with tied
maxima, top_k above the vocabulary, large logits, three dtypes); generate over the probe's TinyLM
with given uniforms (exact tokens and the distributions they were drawn from), the model calls it
makes (one prefill, then one token at its position per step), and a statistical test on 6 000
seeded copies of one prompt.

Every decision is kept away from its boundary by a margin the dtype's rounding cannot cross: the
grader decides each filter and each sampled token itself, in float64, on the inputs rounded to the
case's dtype (for generate, along the whole trajectory, on the model's rounded weights), and redraws
the logits, the prompt or the uniforms until every margin holds. Only the deliberate ties are exact,
and they are ties in every dtype (equal logits)."""
from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import torch

from attn_drill.bank.api import Case, Ctx, traits
from attn_drill.i18n import pick

_spec = importlib.util.spec_from_file_location("_decode_sampling_probes",
                                               Path(__file__).resolve().parent.parent / "probes" / "decode_sampling.py")
_probes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_probes)
TinyLM = _probes.TinyLM

# how far every decision stays from its boundary: probability units (top-p, the CDF) and score units
# (top-k, min-p as log(min_p) against s - max(s), greedy), the latter times max(1, |largest logit|)
PROB_MARGIN = {torch.float64: 1e-9, torch.float32: 2e-5, torch.bfloat16: 0.03}
SCORE_MARGIN = {torch.float64: 1e-9, torch.float32: 1e-4, torch.bfloat16: 0.08}
U_LOW, U_HIGH = 0.002, 0.985
P_VALUE = 1e-5

PROMISES = [
    ("filter order temperature -> top-k -> top-p -> min-p, each on the renormalised survivors", "filter_chain_"),
    ("temperature > 0 divides the logits before every filter", "filter_min_p_temperature_fp64"),
    ("temperature 0 is greedy: one-hot at the first index of the largest logit", "filter_greedy_ties_fp64"),
    ("greedy ignores the other filters", "filter_greedy_filters_on_fp64"),
    ("top_k keeps every token tied with the k-th largest score", "filter_top_k_ties_fp64"),
    ("top_k >= V keeps every token; top_k = 0 is off", "filter_top_k_above_vocab_fp32"),
    ("top_p keeps a token iff the mass strictly more probable than it is < top_p (crossing token kept)",
     "filter_top_p_crossing_fp64"),
    ("top_p keeps or removes tied tokens together", "filter_top_p_ties_fp64"),
    ("min_p keeps a token iff p >= min_p * max p, after temperature", "filter_min_p_temperature_fp64"),
    ("returned probabilities sum to 1 over the survivors, zero elsewhere, in logits' dtype", "filter_"),
    ("any leading dims (..., V)", "filter_3d_fp32"),
    ("large logits do not overflow", "filter_large_logits_fp32"),
    ("bfloat16 logits", "filter_bf16"),
    ("sample_inverse_cdf: the smallest id whose cumulative probability exceeds u, in token-id order",
     "sample_token_id_order_fp64"),
    ("u exactly on a cumulative sum: the next token (strictly greater), never one of probability 0",
     "sample_exact_boundary_"),
    ("when rounding leaves the total at or below u: the last token with a non-zero probability",
     "sample_fallback_fp32"),
    ("token t = sample_inverse_cdf(filter_probs(logits), uniforms[:, t])", "generate_"),
    ("generate returns (tokens (B, T) int64, probs (B, T, V))", "generate_"),
    ("the first token comes from the logits at the prompt's last position", "generate_"),
    ("one prefill model(prompt, 0), then model(tokens[:, t:t+1], P + t) for every token but the last",
     "generate_calls"),
    ("the sampled tokens follow the filtered distribution", "generate_distribution_fp64"),
    ("greedy decoding through generate (temperature 0)", "generate_greedy_b1_fp64"),
]


# ---------------------------------------------------------------- the grader's own decisions
def _decide(logits: torch.Tensor, temperature, top_k, top_p, min_p):
    """One row (V,) in float64 -> (probs (V,), margin in probability units, margin in score units):
    how close the row's decisions come to their boundaries (inf where a filter is off)."""
    V = logits.numel()
    inf = float("inf")
    pm, sm = inf, inf
    if temperature == 0:
        top = logits.max()
        rest = logits[logits < top]
        if rest.numel():
            sm = float(top - rest.max())
        probs = torch.zeros(V, dtype=torch.float64)
        probs[int((logits == top).nonzero()[0])] = 1.0
        return probs, pm, sm
    s = logits / temperature
    keep = torch.ones(V, dtype=torch.bool)
    if 0 < top_k < V:
        kth = s.sort(descending=True).values[top_k - 1]
        keep = s >= kth
        below = s[s < kth]
        if below.numel():
            sm = min(sm, float(kth - below.max()))
    if top_p < 1.0:
        q = torch.where(keep, (s - s[keep].max()).exp(), torch.zeros_like(s))
        q = q / q.sum()
        new = keep.clone()
        for i in keep.nonzero().flatten().tolist():
            above = float(q[q > q[i]].sum())
            pm = min(pm, abs(above - top_p))
            new[i] = above < top_p
        keep = new
    if min_p > 0.0:
        # p_i >= min_p * p_max  <=>  s_i - s_max >= log(min_p): the margin is in score units
        rel = s - s[keep].max()
        for i in keep.nonzero().flatten().tolist():
            sm = min(sm, abs(float(rel[i]) - math.log(min_p)))
        keep = keep & (rel.exp() >= min_p)
    w = torch.where(keep, (s - s[keep].max()).exp(), torch.zeros_like(s))
    return w / w.sum(), pm, sm


def _rows_ok(logits: torch.Tensor, dtype, filters) -> torch.Tensor:
    """(R, V) float64 logits (already rounded) -> (R,) bool: every decision of the row has its margin."""
    ok = []
    for row in logits:
        _, pm, sm = _decide(row, **filters)
        ok.append(pm >= PROB_MARGIN[dtype] and sm >= SCORE_MARGIN[dtype] * max(1.0, float(row.abs().max())))
    return torch.tensor(ok)


def _rounded(t: torch.Tensor, dtype) -> torch.Tensor:
    return t.to(dtype).to(torch.float64)


# ---------------------------------------------------------------- filter_probs cases
def _filters(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0) -> dict:
    return dict(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p)


def _describe(f: dict) -> str:
    on = []
    if f["temperature"] != 1.0:
        on.append("greedy" if f["temperature"] == 0 else f"T {f['temperature']:g}")
    if f["top_k"]:
        on.append(f"top-k {f['top_k']}")
    if f["top_p"] < 1.0:
        on.append(f"top-p {f['top_p']:g}")
    if f["min_p"] > 0:
        on.append(f"min-p {f['min_p']:g}")
    return ", ".join(on) or "no filter"


def _filter_case(name, logits, dtype, f, note="", check_margins=True, large=False):
    if check_margins:
        flat = _rounded(logits, dtype).reshape(-1, logits.shape[-1])
        if not bool(_rows_ok(flat, dtype, f).all()):
            raise RuntimeError(f"grader: {name} has a decision at its boundary")
    shape = logits.shape
    return Case(name=name, target="filter_probs", inputs={"logits": logits}, kwargs=f, dtype=dtype, grad=False,
                output_names=("probs",), traits=traits(B=shape[0], L=shape[-2] if len(shape) > 2 else None,
                                                       large_logits=large),
                note=_describe(f) + (f", {note}" if note else ""))


def _random_logits(ctx: Ctx, name, R, V, dtype, f, scale=2.0, lead=(), note="", large=False):
    """R rows of random logits, each redrawn until its decisions keep their margins."""
    logits = ctx.randn(R, V, scale=scale)
    for _ in range(300):
        ok = _rows_ok(_rounded(logits, dtype), dtype, f)
        if bool(ok.all()):
            break
        logits = torch.where(ok[:, None], logits, ctx.randn(R, V, scale=scale))
    else:
        raise RuntimeError(f"grader: could not keep the decisions of {name} away from their boundaries")
    return _filter_case(name, logits.view(*lead, V) if lead else logits, dtype, f, note, large=large)


def _ties_top_k(ctx: Ctx, name, dtype):
    """Rows with several tokens tied at the k-th score: every one of them is kept (HF's rule)."""
    rows = []
    for _ in range(4):
        base = torch.tensor([2.0, 1.0, 1.0, 1.0, 0.0, -0.5, -1.5, 0.5], dtype=torch.float64)
        rows.append(base[torch.randperm(8, generator=ctx.gen)])
    return _filter_case(name, torch.stack(rows), dtype, _filters(top_k=2), "three tokens tied at the 2nd score")


def _ties_top_p(ctx: Ctx, name, dtype):
    """Probabilities 0.4, 0.2, 0.2, ... with top_p = 0.5: the two tied tokens have 0.4 above them and
    are both kept, although the first of them already brings the mass to 0.6."""
    base = torch.tensor([0.4, 0.2, 0.2, 0.1, 0.06, 0.04], dtype=torch.float64).log()
    rows = [base[torch.randperm(6, generator=ctx.gen)] + ctx.randn(1).item() for _ in range(3)]
    return _filter_case(name, torch.stack(rows), dtype, _filters(top_p=0.5), "tied tokens across top-p")


def _crossing(ctx: Ctx, name, dtype):
    """The token whose inclusive mass passes top_p is kept: probabilities 0.45, 0.3, 0.15, 0.1 with
    top_p 0.6 keep two tokens (0.45 < 0.6 is above the second), not one."""
    base = torch.tensor([0.45, 0.3, 0.15, 0.1], dtype=torch.float64).log()
    rows = [base[torch.randperm(4, generator=ctx.gen)] for _ in range(3)]
    return _filter_case(name, torch.stack(rows), dtype, _filters(top_p=0.6), "the crossing token is kept")


def _greedy_ties(ctx: Ctx, name, dtype, f=None):
    """temperature 0 with the largest logit at two indices: the first index wins (f: the other filters)."""
    logits = ctx.randn(4, 9)
    for r in range(4):
        i, j = sorted(torch.randperm(9, generator=ctx.gen)[:2].tolist())
        logits[r, i] = logits[r, j] = float(logits[r].max()) + 1.0
    f = f or _filters(temperature=0.0)
    note = "tied maxima: the first index" + ("" if f == _filters(temperature=0.0) else ", other filters on")
    return _filter_case(name, logits, dtype, f, note, check_margins=False)


# ---------------------------------------------------------------- sample_inverse_cdf cases
def _sample_case(ctx: Ctx, name, B, V, dtype, fallback=False):
    """Random rows (some tokens at probability 0) and uniforms away from every cumulative sum. With
    fallback, the rows sum to 0.995 and some uniforms lie above that: the last token with weight."""
    probs = torch.softmax(ctx.randn(B, V, scale=1.5), dim=-1)
    probs[:, ::3] = 0.0
    probs[:, -1] = 0.0
    probs = probs / probs.sum(-1, keepdim=True) * (0.995 if fallback else 1.0)
    cdf = _rounded(probs, dtype).cumsum(-1)
    u = ctx.rand(B) * (U_HIGH - U_LOW) + U_LOW
    for _ in range(200):
        bad = ((cdf - _rounded(u, dtype)[:, None]).abs() < PROB_MARGIN[dtype]).any(-1)
        if not bad.any():
            break
        u = torch.where(bad, ctx.rand(B) * (U_HIGH - U_LOW) + U_LOW, u)
    if fallback:
        u[::2] = 0.999                                        # above the total 0.995: the fallback
    return Case(name=name, target="sample_inverse_cdf", inputs={"probs": probs, "u": u}, dtype=dtype, grad=False,
                output_names=("tokens",), traits=traits(B=B, L=V),
                note=f"B={B} V={V}" + (", rows summing to 0.995, u above it" if fallback else ", token-id order"))


def _exact_boundary_case(ctx: Ctx, name, dtype):
    """Uniforms exactly on a cumulative sum (0 among them, before a token of probability 0): the
    strict `> u` decides, so the token whose sum equals u is never drawn. The probabilities are
    dyadic, so every sum is exact in float32 and float64 however it is accumulated."""
    rows, us = [], []
    for _ in range(6):
        V = ctx.int(5, 10)
        weights = [ctx.choice([0, 0, 1, 2, 4]) for _ in range(V)]
        weights[0] = 0                                        # a first token that can never be drawn
        weights[ctx.int(1, V - 1)] += 1
        total = sum(weights)
        scale = 1 << (total - 1).bit_length()                 # a power of two >= total
        weights[-1] += scale - total                          # the row sums to exactly 1
        p = torch.tensor(weights, dtype=torch.float64) / scale
        cdf = p.cumsum(0)
        sums = sorted({float(c) for c in cdf if float(c) < 1.0})
        rows.append(torch.nn.functional.pad(p, (0, 10 - V)))
        us.append(ctx.choice(sums))
    us[0] = 0.0
    return Case(name=name, target="sample_inverse_cdf", inputs={"probs": torch.stack(rows), "u": torch.tensor(us)},
                dtype=dtype, grad=False, output_names=("tokens",), traits=traits(B=6, L=10),
                note="u exactly on a cumulative sum (u = 0 before a token of probability 0)")


# ---------------------------------------------------------------- generate cases
def _weights(ctx: Ctx, V, E, max_len, logit_scale):
    return {"tok_emb": ctx.randn(V, E), "pos_emb": ctx.randn(max_len, E),
            "qkv": ctx.randn(3 * E, E, scale=1.0 / math.sqrt(E)), "out": ctx.randn(E, E, scale=1.0 / math.sqrt(E)),
            "lm_head": ctx.randn(V, E, scale=logit_scale / math.sqrt(2 * E))}


def _trajectory(weights, H, prompt, uniforms, dtype, f):
    """The float64 decode the case will have (weights and uniforms rounded to dtype). Returns whether
    every decision keeps its margin (redraw otherwise)."""
    model = TinyLM(weights, H, torch.float64)
    B, P = prompt.shape
    T = uniforms.shape[1]
    model.init_cache(B)
    logits = model(prompt, 0)[:, -1]
    u = _rounded(uniforms, dtype)
    for t in range(T):
        tokens = []
        for b in range(B):
            probs, pm, sm = _decide(logits[b], **f)
            if pm < PROB_MARGIN[dtype] or sm < SCORE_MARGIN[dtype] * max(1.0, float(logits[b].abs().max())):
                return False
            cdf = probs.cumsum(0)
            if float((cdf - u[b, t]).abs().min()) < PROB_MARGIN[dtype] or float(u[b, t]) >= float(cdf[-1]):
                return False
            tokens.append(int((cdf <= u[b, t]).sum()))
        if t + 1 < T:
            logits = model(torch.tensor(tokens)[:, None], P + t)[:, -1]
    return True


def _generate_case(ctx: Ctx, name, B, P, T, V, E, H, dtype, f, logit_scale=3.0, probe="run", note=""):
    max_len = P + T + ctx.int(0, 3)
    for _ in range(40):
        weights = {n: _rounded(w, dtype) for n, w in _weights(ctx, V, E, max_len, logit_scale).items()}
        prompt = ctx.randint(0, V, (B, P))
        for _ in range(40):
            uniforms = ctx.rand(B, T) * (U_HIGH - U_LOW) + U_LOW
            if _trajectory(weights, H, prompt, uniforms, dtype, f):
                args = {"weights": weights, "num_heads": H}
                extra = dict(check=_check_calls) if probe == "calls" else dict(output_names=("tokens", "probs"))
                return Case(name=name, target="generate", inputs={"prompt": prompt, "uniforms": uniforms},
                            kwargs=f, dtype=dtype, grad=False, probe=probe, probe_args=args,
                            traits=traits(B=B, L=P + T, long_from=64) + (("l1",) if P == 1 or T == 1 else ()),
                            note=f"P={P} T={T} V={V}, {_describe(f)}" + (f", {note}" if note else ""), **extra)
    raise RuntimeError(f"grader: could not keep the decisions of {name} away from their boundaries")


def _check_calls(sub, ref, case) -> list:
    if not isinstance(sub, dict) or not isinstance(sub.get("calls"), list):
        return [pick("the probe expected the list of model calls back", "探针期望得到模型调用的列表")]
    P = case.inputs["prompt"].shape[1]
    T = case.inputs["uniforms"].shape[1]
    want = [[P, 0]] + [[1, P + t] for t in range(T - 1)]
    got = sub["calls"]
    if got == want:
        return []
    shown = ", ".join(f"({n}, {s})" for n, s in got[:8]) + (" ..." if len(got) > 8 else "")
    wanted = ", ".join(f"({n}, {s})" for n, s in want)
    msg = pick(f"generate made the model calls (length, start_pos) {shown}; with P={P} and T={T} it should make "
               f"{wanted}: one prefill of the prompt at 0, then each new token alone at its own position P + t, "
               f"and no call after the last token",
               f"generate 对模型的调用（长度，start_pos）为 {shown}；P={P}、T={T} 时应为 {wanted}："
               f"先在位置 0 对 prompt 做一次 prefill，之后每个新 token 单独在它自己的位置 P + t 输入，"
               f"最后一个 token 之后不再调用")
    return [msg]


def _check_distribution(sub, ref, case) -> list:
    if not isinstance(sub, dict) or not isinstance(sub.get("tokens"), torch.Tensor):
        return [pick("generate returned no token tensor", "generate 没有返回 token 张量")]
    tokens = sub["tokens"]
    copies, steps = case.probe_args["copies"], case.probe_args["steps"]
    truth = case.truth_obs
    probs = truth["probs"].double()                                           # (copies, steps, V)
    V = probs.shape[-1]
    if tuple(tokens.shape) != (copies, steps) or tokens.is_floating_point():
        return [pick(f"tokens should be an int64 tensor of shape {[copies, steps]}; got {list(tokens.shape)}",
                     f"tokens 应为形状 {[copies, steps]} 的 int64 张量；实际为 {list(tokens.shape)}")]
    tokens = tokens.long()
    if bool(((tokens < 0) | (tokens >= V)).any()):
        return [pick(f"tokens must be ids in 0..{V - 1}", f"token 必须是 0..{V - 1} 之间的 id")]
    first = probs[0, 0]
    counts = torch.bincount(tokens[:, 0], minlength=V).double()
    pv = _chi2(counts, first)
    if pv < P_VALUE:
        seen = ", ".join(f"{int(c)}" for c in counts)
        want = ", ".join(f"{float(p) * copies:.0f}" for p in first)
        return [pick(f"over {copies} copies of one prompt, the first tokens are {seen} (token ids 0..{V - 1}); "
                     f"filter_probs predicts {want} (chi-square p-value {pv:.2g}): sample from the filtered, "
                     f"renormalised distribution",
                     f"在一个 prompt 的 {copies} 个副本上，第一个 token 的计数为 {seen}（token id 0..{V - 1}）；"
                     f"filter_probs 预测为 {want}（卡方检验 p 值 {pv:.2g}）：应从过滤并重新归一化后的分布中采样")]
    # the second token, given the most frequent first one
    a = int(counts.argmax())
    rows = tokens[:, 0] == a
    truth_rows = (truth["tokens"][:, 0] == a).nonzero().flatten()
    if steps > 1 and int(rows.sum()) >= 200 and truth_rows.numel():
        second = probs[int(truth_rows[0]), 1]
        pv = _chi2(torch.bincount(tokens[rows, 1], minlength=V).double(), second)
        if pv < P_VALUE:
            return [pick(f"after the first token {a}, the second tokens do not follow filter_probs of the logits "
                         f"that follow it (chi-square p-value {pv:.2g} on {int(rows.sum())} copies)",
                         f"第一个 token 为 {a} 时，第二个 token 不服从其后 logits 的 filter_probs 分布"
                         f"（{int(rows.sum())} 个副本，卡方检验 p 值 {pv:.2g}）")]
    return []


def _chi2(observed: torch.Tensor, probs: torch.Tensor) -> float:
    """Goodness of fit; cells expected below 5 are pooled; an impossible outcome that occurs gives 0."""
    n = float(observed.sum())
    expected = probs * n
    if bool(((expected <= 1e-12 * n) & (observed > 0)).any()):
        return 0.0
    big = expected >= 5
    o, e = observed[big].tolist(), expected[big].tolist()
    rest_o, rest_e = float(observed[~big].sum()), float(expected[~big].sum())
    if rest_e > 1e-12 * n:
        o.append(rest_o)
        e.append(rest_e)
    if len(o) < 2:
        return 1.0
    stat = sum((a - b) ** 2 / b for a, b in zip(o, e))
    return float(torch.special.gammaincc(torch.tensor((len(o) - 1) / 2, dtype=torch.float64),
                                         torch.tensor(stat / 2, dtype=torch.float64)))


def _distribution_case(ctx: Ctx, name, dtype, f):
    V, E, H, P = 9, 8, 2, 3
    for _ in range(40):
        weights = _weights(ctx, V, E, P + 2, 2.0)
        prompt = ctx.randint(0, V, (1, P))
        logits = TinyLM(weights, H, torch.float64)
        logits.init_cache(1)
        row = logits(prompt, 0)[0, -1]
        probs, pm, sm = _decide(row, **f)
        if pm >= 1e-6 and sm >= 1e-6 and int((probs > 0).sum()) >= 3:
            return Case(name=name, target="generate", inputs={"prompt": prompt}, kwargs=f, dtype=dtype, grad=False,
                        probe="distribution", probe_args={"weights": weights, "num_heads": H, "copies": 6000,
                                                          "steps": 2},
                        check=_check_distribution, traits=traits(B=6000, L=P + 2),
                        note=f"6000 seeded copies of one prompt, {_describe(f)}")
    raise RuntimeError("grader: could not build the distribution case")


def cases(ctx: Ctx) -> list[Case]:
    f64, f32, bf16 = torch.float64, torch.float32, torch.bfloat16
    chain = _filters(0.7, 5, 0.8, 0.1)
    out = [
        _random_logits(ctx, "filter_chain_fp64", 6, 10, f64, chain),
        _random_logits(ctx, "filter_top_k_fp64", 4, 11, f64, _filters(top_k=3)),
        _random_logits(ctx, "filter_top_p_fp32", 5, 13, f32, _filters(top_p=0.7)),
        _random_logits(ctx, "filter_min_p_temperature_fp64", 5, 12, f64, _filters(temperature=1.8, min_p=0.07),
                       scale=2.5),
        _random_logits(ctx, "filter_temperature_top_p_fp64", 4, 10, f64, _filters(temperature=0.6, top_p=0.85)),
        _ties_top_k(ctx, "filter_top_k_ties_fp64", f64),
        _ties_top_p(ctx, "filter_top_p_ties_fp64", f64),
        _crossing(ctx, "filter_top_p_crossing_fp64", f64),
        _greedy_ties(ctx, "filter_greedy_ties_fp64", f64),
        _greedy_ties(ctx, "filter_greedy_filters_on_fp64", f64, _filters(0.0, 3, 0.5, 0.2)),
        _random_logits(ctx, "filter_top_k_above_vocab_fp32", 3, 7, f32, _filters(temperature=0.9, top_k=12)),
        _random_logits(ctx, "filter_3d_fp32", 6, 9, f32, _filters(1.3, 4, 0.9, 0.05), lead=(2, 3)),
        _random_logits(ctx, "filter_large_logits_fp32", 4, 10, f32, _filters(0.5, 6, 0.95), scale=60.0,
                       note="logits in the hundreds", large=True),
        _random_logits(ctx, "filter_long_vocab_fp64", 2, 80, f64, _filters(1.1, 40, 0.9, 0.02)),
        _random_logits(ctx, "filter_bf16", 6, 10, bf16, _filters(0.8, 6, 0.8, 0.08)),
        _random_logits(ctx, "filter_sizes_from_seed_fp64", ctx.int(1, 6), ctx.int(3, 30), f64,
                       _filters(ctx.choice([0.5, 0.9, 1.0, 1.4]), ctx.int(0, 8), ctx.choice([0.6, 0.85, 1.0]),
                                ctx.choice([0.0, 0.05]))),
        _sample_case(ctx, "sample_token_id_order_fp64", 7, 11, f64),
        _sample_case(ctx, "sample_fallback_fp32", 6, 9, f32, fallback=True),
        _generate_case(ctx, "generate_chain_fp64", 3, 5, 8, 12, 16, 4, f64, chain),
        _generate_case(ctx, "generate_top_p_fp32", 2, 4, 6, 11, 12, 3, f32, _filters(temperature=1.2, top_p=0.9)),
        _generate_case(ctx, "generate_greedy_b1_fp64", 1, 6, 7, 10, 8, 2, f64, _filters(temperature=0.0)),
        _generate_case(ctx, "generate_prompt1_fp64", 2, 1, 5, 9, 8, 2, f64, _filters(top_k=4)),
        _generate_case(ctx, "generate_long_fp32", 2, 66, 10, 12, 12, 3, f32, _filters(0.9, 6, 0.9, 0.05)),
        _generate_case(ctx, "generate_sizes_from_seed_fp64", ctx.int(1, 3), ctx.int(1, 9), ctx.int(1, 9),
                       ctx.int(5, 14), 8, 2, f64, _filters(ctx.choice([0.7, 1.0, 1.3]), ctx.int(0, 5),
                                                           ctx.choice([0.75, 1.0]), ctx.choice([0.0, 0.1]))),
        _generate_case(ctx, "generate_calls", 2, 4, 5, 9, 8, 2, f64, _filters(top_k=5), probe="calls",
                       note="the model calls generate makes"),
        _distribution_case(ctx, "generate_distribution_fp64", f64, _filters(0.9, 6, 0.9, 0.02)),
        # after the others: the random draws of the cases above stay as they were
        _exact_boundary_case(ctx, "sample_exact_boundary_fp64", f64),
        _exact_boundary_case(ctx, "sample_exact_boundary_fp32", f32),
    ]
    if ctx.full:
        for i in range(5):
            dtype = ctx.choice([f64, f32, bf16])
            low = dtype == bf16           # bfloat16 sums round at 1/256: few tokens, no top-p in the tail
            f = _filters(ctx.choice([0.0, 0.6, 1.0, 1.5]), ctx.int(0, 9),
                         ctx.choice([0.5, 0.8, 1.0] if low else [0.5, 0.8, 0.95, 1.0]), ctx.choice([0.0, 0.03, 0.1]))
            V = ctx.int(2, 12) if low else ctx.int(2, 40)
            out.append(_random_logits(ctx, f"filter_random{i}", ctx.int(1, 8), V, dtype, f, scale=3.0 if low else 2.0))
        for i in range(3):
            f = _filters(ctx.choice([0.6, 1.0, 1.5]), ctx.int(0, 8), ctx.choice([0.7, 0.9, 1.0]),
                         ctx.choice([0.0, 0.05]))
            H = ctx.int(1, 3)
            out.append(_generate_case(ctx, f"generate_random{i}", ctx.int(1, 4), ctx.int(1, 12), ctx.int(1, 10),
                                      ctx.int(4, 20), 4 * H, H, ctx.choice([f64, f32]), f))
    return out
