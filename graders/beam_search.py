"""Cases for `beam_search`: the probe's TinyLM (weights the grader draws, an EOS made likely by a
bias) searched with 1 to 4 beams, length penalties 0, 1 and 2, batches of 1 to 3 prompts (the cache
rows of every prompt reordered with their own offset), hypotheses that end at EOS and at the length
limit, a prompt of one token and a long one, float64 and float32.

Every decision of the search is kept off its boundary: the grader runs its own float64 search (a
loop over prompts and candidates, on the weights rounded to the case's dtype) and redraws the weights
until, at every step, the 2 * num_beams + 1 best candidate scores, and the finished hypotheses' scores,
are pairwise at least a margin apart that the dtype's rounding cannot cross."""
from __future__ import annotations

import functools
import importlib.util
import math
from pathlib import Path

import torch

from attn_drill.bank.api import Case, Ctx, Failure, traits
from attn_drill.i18n import pick

_spec = importlib.util.spec_from_file_location("_beam_search_probes",
                                               Path(__file__).resolve().parent.parent / "probes" / "beam_search.py")
_probes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_probes)
TinyLM = _probes.TinyLM

MARGIN = {torch.float64: 1e-9, torch.float32: 2e-4}

PROMISES = [
    ("sequences (B, num_beams, max_new_tokens) int64, the generated tokens then -1, best first", "beams_"),
    ("scores = sum of log-probabilities / (generated tokens, EOS included) ** length_penalty", "beams_"),
    ("length_penalty 0 ranks by the sum of log-probabilities", "beams_lp0_fp64"),
    ("length_penalty 2 favours longer hypotheses", "beams_lp2_fp64"),
    ("at step 0 only beam 0 is live: no duplicate hypotheses", "beams_"),
    ("the 2 * num_beams best candidates are kept, so an EOS does not leave fewer live beams", "beams_"),
    ("only an EOS among the top num_beams candidates joins the finished pool", "beams_"),
    ("an EOS candidate never keeps running", "beams_"),
    ("at the last step the top num_beams candidates finish", "beams_max_length_fp64"),
    ("a full pool takes no more hypotheses (early_stopping=True)", "beams_"),
    ("one prefill at 0, then (B * num_beams, 1) tokens at P + t, no call once every pool is full",
     "beams_schedule_fp64"),
    ("the cache is reordered with beam_idx = b * num_beams + source beam", "beams_b3_fp64"),
    ("one beam is greedy search", "beams_one_beam_b1_fp64"),
    ("a prompt of one token; a long prompt", "beams_prompt1_fp64"),
    ("float64 and float32; scores in the logits' dtype", "beams_fp32"),
]


def _weights(ctx: Ctx, V, E, max_len, eos, eos_bias, logit_scale=2.5):
    w = {"tok_emb": ctx.randn(V, E), "pos_emb": ctx.randn(max_len, E),
         "qkv": ctx.randn(3 * E, E, scale=1.0 / math.sqrt(E)), "out": ctx.randn(E, E, scale=1.0 / math.sqrt(E)),
         "lm_head": ctx.randn(V, E, scale=logit_scale / math.sqrt(2 * E)),
         "lm_bias": torch.zeros(V, dtype=torch.float64)}
    w["lm_bias"][eos] = eos_bias
    return w


def _gaps_ok(values, m) -> bool:
    v = sorted(x for x in values if x != float("-inf"))
    return all(b - a >= m for a, b in zip(v, v[1:]))


def _search(weights, H, prompt, nb, T, eos, lp, m) -> int | None:
    """The grader's own search, one prompt and one candidate at a time, in float64: None when some
    ranking it makes is closer than margin m, else the last step any prompt runs (the step at which
    its pool is full, or T - 1). (The same rules as the statement; a separate formulation.)"""
    B, P = prompt.shape
    last = 0
    for b in range(B):
        model = TinyLM(weights, H, torch.float64)
        model.init_cache(nb)
        logits = model(prompt[b:b + 1].expand(nb, P).contiguous(), 0)[:, -1]
        beams = [(0.0, [])] + [(float("-inf"), [])] * (nb - 1)
        pool = []
        for t in range(T):
            logp = torch.log_softmax(logits, dim=-1)
            cands = []
            for j, (score, toks) in enumerate(beams):
                if score == float("-inf"):
                    continue
                for v in range(logp.shape[-1]):
                    cands.append((score + float(logp[j, v]), j, v))
            cands.sort(key=lambda c: -c[0])
            if not _gaps_ok([c[0] for c in cands[:2 * nb + 1]], m):
                return None
            top = cands[:2 * nb]
            if len(pool) < nb:
                new = [(s / (t + 1) ** lp, beams[j][1] + [v]) for s, j, v in top[:nb] if v == eos or t == T - 1]
                merged = pool + new
                if not _gaps_ok([h[0] for h in merged], m):
                    return None
                pool = sorted(merged, key=lambda h: -h[0])[:nb]
            alive = [c for c in top if c[2] != eos][:nb]
            if len(pool) == nb or t == T - 1:
                last = max(last, t)
                break
            order = torch.tensor([j for _, j, _ in alive])
            beams = [(s, beams[j][1] + [v]) for s, j, v in alive]
            model.reorder_cache(order)
            logits = model(torch.tensor([[v] for _, _, v in alive]), P + t)[:, -1]
    return last


def _case(ctx: Ctx, name, B, P, nb, T, V, E, H, dtype, lp=1.0, eos_bias=1.5, note="", schedule=False):
    """schedule: the case records the model calls (the probe's `calls`) and needs every pool full
    before the last step, so that a search running on past full pools shows."""
    eos = ctx.int(0, V - 1)
    for _ in range(60):
        weights = {n: w.to(dtype).double() for n, w in _weights(ctx, V, E, P + T + 1, eos, eos_bias).items()}
        prompt = ctx.randint(0, V, (B, P))
        last = _search(weights, H, prompt, nb, T, eos, lp, MARGIN[dtype])
        if last is None or (schedule and last >= T - 1):
            continue
        extra = dict(probe="calls", check=functools.partial(_check_calls, _schedule(B * nb, P, last))) \
            if schedule else dict(probe="run", output_names=("sequences", "scores"))
        return Case(name=name, target="beam_search", inputs={"prompt": prompt},
                    kwargs={"num_beams": nb, "max_new_tokens": T, "eos_token_id": eos, "length_penalty": lp},
                    dtype=dtype, grad=False, probe_args={"weights": weights, "num_heads": H},
                    traits=traits(B=B, L=P + T) + (("l1",) if P == 1 else ()),
                    note=f"P={P} beams={nb} T={T} V={V} eos={eos}, lp {lp:g}" + (f", {note}" if note else ""),
                    **extra)
    raise RuntimeError(f"grader: could not keep the rankings of {name} apart")


def _schedule(N, P, last) -> list:
    """The calls (rows, length, start_pos) of a search that stops after step `last`: the prefill of
    every beam's prompt at 0, then one token per row at P + t for t < last, and none after."""
    return [[N, P, 0]] + [[N, 1, P + t] for t in range(last)]


def _check_calls(want, sub, ref, case) -> list:
    if not isinstance(sub, dict) or not isinstance(sub.get("calls"), list):
        return [pick("the probe expected the list of model calls back", "探针期望得到模型调用的列表")]
    got = sub["calls"]
    if got == want:
        return []
    N, P, _ = want[0]
    T = case.kwargs["max_new_tokens"]
    # named only when the search found the right beams: a search that ranks wrongly fills its pools
    # later, and runs to the last step for that reason
    same, want_seqs = sub.get("sequences"), ref.get("sequences")
    right_beams = isinstance(same, torch.Tensor) and isinstance(want_seqs, torch.Tensor) and \
        same.shape == want_seqs.shape and same.dtype == want_seqs.dtype and torch.equal(same, want_seqs)
    named = "runs_past_full_pools" if right_beams and got == _schedule(N, P, T - 1) else None
    shown = ", ".join(f"({n}, {L}, {s})" for n, L, s in got[:8]) + (" ..." if len(got) > 8 else "")
    wanted = ", ".join(f"({n}, {L}, {s})" for n, L, s in want)
    return [Failure(pick(f"beam_search made the model calls (rows, length, start_pos) {shown}; it should make "
                         f"{wanted}: one prefill of every beam's prompt at 0, then one token per row at P + t, "
                         f"and no call once every prompt's pool is full or after the last step",
                         f"beam_search 对模型的调用（行数，长度，start_pos）为 {shown}；应为 {wanted}：先在位置 0 "
                         f"对每个 beam 的 prompt 做一次 prefill，之后每行一个 token 在位置 P + t 输入；"
                         f"每个 prompt 的候选池都满了之后、或最后一步之后，不再调用"), mistake=named)]


def cases(ctx: Ctx) -> list[Case]:
    f64, f32 = torch.float64, torch.float32
    out = [
        _case(ctx, "beams_b2_fp64", 2, 4, 3, 6, 12, 16, 4, f64),
        _case(ctx, "beams_lp0_fp64", 2, 3, 3, 7, 11, 12, 3, f64, lp=0.0),
        _case(ctx, "beams_lp2_fp64", 2, 5, 3, 6, 12, 16, 4, f64, lp=2.0),
        _case(ctx, "beams_b3_fp64", 3, 4, 4, 5, 10, 8, 2, f64, eos_bias=1.0),
        _case(ctx, "beams_max_length_fp64", 2, 4, 3, 5, 10, 8, 2, f64, eos_bias=-3.0, note="no EOS: the length limit"),
        _case(ctx, "beams_one_beam_b1_fp64", 1, 5, 1, 6, 9, 8, 2, f64),
        _case(ctx, "beams_prompt1_fp64", 2, 1, 2, 6, 9, 8, 2, f64),
        _case(ctx, "beams_long_fp64", 2, 66, 3, 6, 10, 8, 2, f64),
        _case(ctx, "beams_fp32", 2, 4, 3, 6, 12, 12, 3, f32),
        _case(ctx, "beams_schedule_fp64", 2, 3, 2, 9, 9, 8, 2, f64, eos_bias=3.0, schedule=True,
              note="the model calls; every pool full before the last step"),
        _case(ctx, "beams_sizes_from_seed_fp64", ctx.int(1, 3), ctx.int(1, 8), ctx.int(1, 4), ctx.int(1, 8), 11, 8, 2,
              f64, lp=ctx.choice([0.0, 1.0, 2.0]), eos_bias=ctx.choice([0.5, 1.5, 2.5])),
    ]
    if ctx.full:
        for i in range(5):
            nb = ctx.int(1, 4)
            H = ctx.int(1, 3)
            out.append(_case(ctx, f"beams_random{i}", ctx.int(1, 4), ctx.int(1, 10), nb, ctx.int(1, 9),
                             ctx.int(2 * nb + 1, 16), 4 * H, H, ctx.choice([f64, f32]),
                             lp=ctx.choice([0.0, 0.5, 1.0, 2.0]), eos_bias=ctx.choice([-1.0, 1.0, 2.0])))
    return out
