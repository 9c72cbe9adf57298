"""Cases for `moe_router`: top-k routing with softmax and sigmoid scores, with and without
renormalisation (weights, experts, the auxiliary loss and their gradients); the load-balancing loss
on its own (random, perfectly balanced, all on one expert); expert capacity with dropped tokens
(per batch row, choice by choice, the Switch router's example, capacity 0 and more than enough).

The tokens of every routing case are redrawn until, in the case's dtype, no two of the top_k + 1
scores of a token are closer (relative to its top score) than a margin that the dtype's rounding
cannot cross: the experts a token picks, and their order, are the same for every correct way of
writing the scores."""
from __future__ import annotations

import torch

from attn_drill.bank.api import Case, Ctx, traits

# how far apart the top_k + 1 scores of every token stay, per dtype (relative to its top score)
MARGIN = {torch.float64: 1e-9, torch.float32: 1e-5, torch.bfloat16: 0.03}

PROMISES = [
    ("experts (B, S, top_k) int64, the top_k scores of each token, highest first", "route_"),
    ("weights in x's dtype: the chosen scores, divided by their sum when normalize", "route_"),
    ("normalize=False returns the chosen scores themselves", "route_softmax_raw_fp32"),
    ("score_func='softmax' normalises over the E experts", "route_softmax_"),
    ("score_func='sigmoid' scores each expert on its own", "route_sigmoid_"),
    ("aux_loss = load_balancing_loss of every token's scores divided by their sum (sigmoid too)",
     "route_sigmoid_norm_fp64"),
    ("gradients flow to x and weight through the weights and the auxiliary loss", "route_"),
    ("top_k = 1 with normalize gives weight 1", "route_top1_b1_fp64"),
    ("float64, float32 and bfloat16 inputs; the result in x's dtype", "route_bf16"),
    ("f_e counts the N * k assignments over N tokens (sum f = k), P_e is the mean of probs", "loss_"),
    ("a perfectly balanced router gives top_k", "loss_balanced_fp64"),
    ("all tokens on the same experts give num_experts", "loss_collapsed_fp32"),
    ("the loss is differentiable through probs", "loss_random_fp64"),
    ("capacity counted in each batch row separately", "capacity_k2_b3"),
    ("every first choice in sequence order, then every second choice", "capacity_k2_b3"),
    ("an expert keeps its first `capacity` assignments (rank <= capacity)", "capacity_"),
    ("top-1 routing as the Switch router: first come, first served", "capacity_switch_top1"),
    ("capacity 0 drops everything; capacity >= S * k keeps everything", "capacity_zero"),
    ("capacity >= S * k keeps everything", "capacity_plenty"),
]


# ---------------------------------------------------------------- routing
def _apart(ctx: Ctx, x: torch.Tensor, weight: torch.Tensor, k: int, score_func: str, dtype,
           scale: float) -> torch.Tensor:
    """x with every token redrawn until its top k + 1 scores (x and weight rounded to dtype, in
    float64) are at least MARGIN times its top score apart."""
    B, S, D = x.shape
    E = weight.shape[0]
    w = weight.to(dtype).double()
    for _ in range(200):
        logits = x.to(dtype).double() @ w.T                                     # (B, S, E)
        scores = logits.softmax(-1) if score_func == "softmax" else logits.sigmoid()
        top = scores.topk(min(k + 1, E), dim=-1).values                         # (B, S, k+1)
        gaps = (top[..., :-1] - top[..., 1:]).amin(dim=-1) if top.shape[-1] > 1 else \
            torch.full((B, S), 1.0, dtype=torch.float64)
        bad = gaps < MARGIN[dtype] * top[..., 0]                                # (B, S), relative to the top
        if not bad.any():
            return x
        x = torch.where(bad[..., None], ctx.randn(B, S, D, scale=scale), x)
    raise RuntimeError("grader: could not keep the routing scores apart")


def _route(ctx: Ctx, name, B, S, D, E, k, dtype, score_func="softmax", normalize=True, scale=1.0,
           weight_scale=None, note=""):
    weight = ctx.randn(E, D, scale=weight_scale if weight_scale is not None else 1.0 / D ** 0.5)
    x = _apart(ctx, ctx.randn(B, S, D, scale=scale), weight, k, score_func, dtype, scale)
    words = f"{score_func}, {'normalised' if normalize else 'raw'} top-{k} of {E}"
    return Case(name=name, target="topk_route", inputs={"x": x, "weight": weight},
                kwargs={"top_k": k, "score_func": score_func, "normalize": normalize}, dtype=dtype,
                output_names=("weights", "experts", "aux_loss"),
                traits=traits(B=B, L=S, large_logits=scale * (weight_scale or 1.0) > 3.0),
                note=words + (f", {note}" if note else ""))


# ---------------------------------------------------------------- the loss on its own
def _loss_case(name, probs, experts, E, dtype, note, B=None):
    N = probs.shape[0]
    return Case(name=name, target="load_balancing_loss", inputs={"probs": probs},
                kwargs={"experts": experts, "num_experts": E}, dtype=dtype, output_names=("loss",),
                traits=traits(B=B, L=N), note=note)


def _loss_random(ctx: Ctx, name, N, E, k, dtype):
    probs = torch.softmax(ctx.randn(N, E, scale=1.5), dim=-1)
    experts = torch.stack([torch.randperm(E, generator=ctx.gen)[:k] for _ in range(N)])   # (N, k), distinct
    return _loss_case(name, probs, experts, E, dtype, f"N={N} E={E} k={k}, random")


def _loss_balanced(name, dtype):
    """Uniform probabilities and every expert chosen equally often: the loss is exactly k."""
    N, E = 12, 6              # k = 2 experts per token
    probs = torch.full((N, E), 1.0 / E, dtype=torch.float64)
    experts = torch.tensor([[(2 * n) % E, (2 * n + 1) % E] for n in range(N)])
    return _loss_case(name, probs, experts, E, dtype, "balanced: loss = k = 2")


def _loss_collapsed(ctx: Ctx, name, dtype):
    """Every token on experts 0 and 1 with nearly all its probability there: the loss approaches E."""
    N, E = 9, 5               # k = 2 experts per token
    logits = ctx.randn(N, E, scale=0.3)
    logits[:, :2] += 6.0
    probs = torch.softmax(logits, dim=-1)
    experts = torch.tensor([[0, 1]] * N)
    return _loss_case(name, probs, experts, E, dtype, "collapsed on experts 0 and 1")


# ---------------------------------------------------------------- capacity
def _capacity_case(name, experts, E, capacity, note):
    B, S, k = experts.shape
    return Case(name=name, target="capacity_keep", inputs={"experts": experts},
                kwargs={"num_experts": E, "capacity": capacity}, grad=False, output_names=("keep",),
                traits=traits(B=B, L=S), note=f"B={B} S={S} k={k} E={E}, capacity {capacity}" +
                (f", {note}" if note else ""))


def _random_choices(ctx: Ctx, B, S, k, E, skew=True) -> torch.Tensor:
    """(B, S, k) distinct experts per token; with skew, low ids are popular (so experts overflow)."""
    rows = []
    for _ in range(B * S):
        w = torch.linspace(3.0, 1.0, E, dtype=torch.float64) if skew else torch.ones(E, dtype=torch.float64)
        rows.append(torch.multinomial(w, k, replacement=False, generator=ctx.gen))
    return torch.stack(rows).view(B, S, k)


def cases(ctx: Ctx) -> list[Case]:
    f64, f32, bf16 = torch.float64, torch.float32, torch.bfloat16
    switch_argmax = torch.tensor([[1, 3, 0, 1, 3, 0], [0, 0, 2, 1, 1, 3]])[..., None]   # (2, 6, 1)
    out = [
        _route(ctx, "route_softmax_norm_fp64", 2, 7, 10, 8, 2, f64, "softmax", True),
        _route(ctx, "route_softmax_raw_fp32", 3, 5, 12, 6, 2, f32, "softmax", False),
        _route(ctx, "route_sigmoid_norm_fp64", 2, 6, 9, 12, 3, f64, "sigmoid", True),
        _route(ctx, "route_sigmoid_raw_fp32", 2, 5, 7, 10, 4, f32, "sigmoid", False),
        _route(ctx, "route_top1_b1_fp64", 1, 9, 6, 5, 1, f64, "softmax", True),
        _route(ctx, "route_s1_fp64", 3, 1, 8, 7, 3, f64, "sigmoid", True),
        _route(ctx, "route_peaked_fp32", 2, 6, 8, 9, 2, f32, "softmax", True, scale=3.0, weight_scale=1.2,
               note="peaked scores"),
        _route(ctx, "route_long_fp32", 2, 70, 11, 10, 2, f32, "softmax", True),
        _route(ctx, "route_bf16", 2, 6, 8, 8, 2, bf16, "softmax", True),
        _route(ctx, "route_sigmoid_bf16", 2, 5, 8, 9, 3, bf16, "sigmoid", True),
        _route(ctx, "route_sizes_from_seed_fp64", ctx.int(1, 4), ctx.int(2, 13), ctx.int(3, 11), ctx.int(3, 13), 2,
               f64, ctx.choice(["softmax", "sigmoid"]), bool(ctx.int(0, 1))),
        _loss_random(ctx, "loss_random_fp64", 11, 7, 2, f64),
        _loss_balanced("loss_balanced_fp64", f64),
        _loss_collapsed(ctx, "loss_collapsed_fp32", f32),
        _loss_random(ctx, "loss_top3_bf16", 10, 9, 3, bf16),
        _capacity_case("capacity_k2_b3", _random_choices(ctx, 3, 9, 2, 5), 5, 3, "skewed experts"),
        _capacity_case("capacity_switch_top1", switch_argmax, 4, 1, "the Switch router's example"),
        _capacity_case("capacity_zero", _random_choices(ctx, 2, 4, 2, 4), 4, 0, "everything dropped"),
        _capacity_case("capacity_plenty", _random_choices(ctx, 2, 5, 2, 6), 6, 10, "nothing dropped"),
        _capacity_case("capacity_b1_k3", _random_choices(ctx, 1, 7, 3, 6), 6, 3, ""),
        _capacity_case("capacity_long", _random_choices(ctx, 2, 80, 2, 8), 8, 21, "long"),
        _capacity_case("capacity_sizes_from_seed", _random_choices(ctx, ctx.int(1, 4), ctx.int(2, 20), 2, 7),
                       7, ctx.int(1, 5), ""),
    ]
    if ctx.full:
        for i in range(6):
            B, S, D, E = ctx.int(1, 4), ctx.int(1, 30), ctx.int(2, 16), ctx.int(2, 16)
            k = ctx.int(1, min(E, 4))
            dtype = ctx.choice([f64, f32, bf16])
            out.append(_route(ctx, f"route_random{i}", B, S, D, E, k, dtype, ctx.choice(["softmax", "sigmoid"]),
                              bool(ctx.int(0, 1))))
        for i in range(4):
            B, S, E = ctx.int(1, 4), ctx.int(1, 40), ctx.int(2, 12)
            k = ctx.int(1, min(E, 3))
            out.append(_capacity_case(f"capacity_random{i}", _random_choices(ctx, B, S, k, E), E,
                                      ctx.int(0, S), ""))
    return out
