"""Cases for `speculative_decoding`: exact cases (the uniforms are inputs, so every case has one right
answer) with random, degenerate and long draft blocks, and a statistical test on 60 000 seeded calls:
every emitted token must follow the target model, position by position, and the number of accepted
drafts must follow the truncated geometric law.

The uniforms of the exact cases are moved away from every decision boundary (p/q for the accept test,
the cumulative weights for the sampled token) by a margin that the case dtype's rounding cannot
cross, so that any correct way of writing the comparisons decides the same."""
from __future__ import annotations

import torch

from attn_drill.bank.api import Case, Ctx, Failure
from attn_drill.i18n import pick

TARGET = "speculative_verify"
# how far every uniform stays from a decision boundary, per dtype (rounding of p/q and of a cumsum)
MARGIN = {torch.float64: 1e-6, torch.float32: 1e-4, torch.bfloat16: 0.02}
U_LOW, U_HIGH = 0.002, 0.985          # bfloat16 rounds anything above 1 - 2**-9 up to 1.0
P_VALUE = 1e-5                        # each statistical test: a correct solution fails one in 10^5 runs


# ---------------------------------------------------------------- exact cases
def _rounded(t: torch.Tensor, dtype) -> torch.Tensor:
    return t.to(dtype).to(torch.float64)


def _away(ctx: Ctx, u: torch.Tensor, boundaries: torch.Tensor, margin: float, dtype, fixed=None) -> torch.Tensor:
    """u (...,) in [U_LOW, U_HIGH], redrawn where, once rounded to dtype, it lies within `margin` of a
    boundary (..., k); entries marked in `fixed` are kept as they are."""
    for _ in range(60):
        ur = _rounded(u, dtype)
        bad = ((ur[..., None] - boundaries).abs() < margin).any(dim=-1)
        if fixed is not None:
            bad &= ~fixed
        if not bad.any():
            return u
        u = torch.where(bad, _uniform(ctx, *u.shape), u)
    raise RuntimeError("grader: could not place the uniforms away from the decision boundaries")


def _uniform(ctx: Ctx, *shape: int) -> torch.Tensor:
    return ctx.rand(*shape) * (U_HIGH - U_LOW) + U_LOW


def _accepted_prefix(ratio: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    return (u < ratio).long().cumprod(dim=1).sum(dim=1)


def _exact(ctx: Ctx, name, p, q, x, dtype, note, traits=(), u_accept=None, fixed=None):
    """p (B, G+1, V) and q (B, G, V) float64 probability rows, x (B, G) drafts. The uniforms are drawn
    here (u_accept may be given, `fixed` marks entries of it to keep as they are)."""
    B, G, V = q.shape
    m = MARGIN[dtype]
    pr, qr = _rounded(p, dtype), _rounded(q, dtype)
    idx = x.unsqueeze(-1)
    ratio = pr[:, :G].gather(-1, idx).squeeze(-1) / qr.gather(-1, idx).squeeze(-1)     # (B, G)
    if u_accept is None:
        u_accept = _uniform(ctx, B, G)
    u_accept = _away(ctx, u_accept, ratio.unsqueeze(-1), m, dtype, fixed)
    n = _accepted_prefix(ratio, _rounded(u_accept, dtype))
    rows = torch.arange(B)
    last = torch.where((n == G)[:, None], pr[rows, n],
                       (pr[rows, n] - qr[rows, n.clamp(max=G - 1)]).clamp(min=0))          # (B, V)
    cdf = last.cumsum(-1) / last.sum(-1, keepdim=True)
    u_sample = _away(ctx, _uniform(ctx, B), cdf, m, dtype)
    words = {"b1": B == 1, "l1": G == 1}
    return Case(name=name, target=TARGET,
                inputs={"draft_tokens": x, "draft_probs": q, "target_probs": p,
                        "u_accept": u_accept, "u_sample": u_sample},
                dtype=dtype, grad=False, output_names=("tokens", "num_accepted"),
                traits=tuple(traits) + tuple(w for w, on in words.items() if on),
                note=f"B={B} G={G} V={V}, {note}")


def _softmax(logits: torch.Tensor) -> torch.Tensor:
    return torch.softmax(logits, dim=-1)


def _draw(ctx: Ctx, q: torch.Tensor) -> torch.Tensor:
    """Drafts x_i ~ q_i: (B, G, V) -> (B, G) int64."""
    B, G, V = q.shape
    return torch.multinomial(q.reshape(B * G, V), 1, generator=ctx.gen).view(B, G)


def _random_rows(ctx: Ctx, B, G, V, spread=1.5):
    """Target and draft rows from related logits: row b's draft is close to its target for some b
    (long accepted prefixes, bonus tokens) and far for others (early rejections)."""
    z = ctx.randn(B, G + 1, V, scale=spread)
    p = _softmax(z)
    closeness = torch.linspace(0.0, 0.97, B, dtype=torch.float64)[:, None, None] if B > 1 else \
        torch.full((1, 1, 1), 0.6, dtype=torch.float64)
    zq = closeness * z[:, :G] + (1 - closeness) * ctx.randn(B, G, V, scale=spread)
    q = _softmax(zq)
    return p, q


def _random_case(ctx, name, B, G, V, dtype, traits=(), spread=1.5):
    p, q = _random_rows(ctx, B, G, V, spread)
    return _exact(ctx, name, p, q, _draw(ctx, q), dtype, "random p, q", traits)


def _identical(ctx, name, dtype):
    """q == p: every draft is accepted (p/q = 1 > u) and the bonus token comes from p_G."""
    p, _ = _random_rows(ctx, 3, 4, 9)
    q = p[:, :4].clone()
    return _exact(ctx, name, p, q, _draw(ctx, q), dtype, "q = p: all accepted, bonus")


def _disjoint(ctx, name, dtype):
    """q lives on tokens the target never produces: the first draft is rejected (p(x) = 0) and the
    token comes from max(0, p - q) = p."""
    B, G, V = 4, 3, 8
    p = _softmax(ctx.randn(B, G + 1, V))
    q = _softmax(ctx.randn(B, G, V))
    p[..., V // 2:] = 0.0
    q[..., :V // 2] = 0.0
    p, q = p / p.sum(-1, keepdim=True), q / q.sum(-1, keepdim=True)
    return _exact(ctx, name, p, q, _draw(ctx, q), dtype, "disjoint supports: rejected at 0")


def _onehot_target(ctx, name, dtype):
    """A greedy target (one-hot rows): a draft equal to its argmax is accepted, any other is rejected
    and replaced by that argmax; the bonus token is the argmax of p_G."""
    B, G, V = 6, 4, 5
    hot = ctx.randint(0, V, (B, G + 1))
    p = torch.nn.functional.one_hot(hot, V).double()
    q = _softmax(ctx.randn(B, G, V))
    x = _draw(ctx, q)
    x[:2] = hot[:2, :G]                               # two rows whose drafts are all the target's argmax
    return _exact(ctx, name, p, q, x, dtype, "one-hot target")


def _onehot_draft(ctx, name, dtype):
    """A greedy draft (one-hot q): the draft is accepted with probability p(x), and after a rejection
    the token comes from p with x removed."""
    B, G, V = 8, 3, 6
    x = ctx.randint(0, V, (B, G))
    q = torch.nn.functional.one_hot(x, V).double()
    p = _softmax(ctx.randn(B, G + 1, V))
    return _exact(ctx, name, p, q, x, dtype, "one-hot draft")


def _zero_target(ctx, name, dtype):
    """In each row one draft the target gives probability 0, with u_accept = 0 exactly there: 0 < 0 is
    false, so it is rejected (a token the target never produces is never emitted). The drafts before
    it have q = p, so they are accepted and the zero is reached."""
    B, G, V = 5, 3, 7
    col = torch.tensor([0, 1, 2, 0, 1])                # where each row's ruled-out draft sits
    rows = torch.arange(B)
    p = _softmax(ctx.randn(B, G + 1, V))
    q = _softmax(ctx.randn(B, G, V))
    for b in range(B):
        q[b, :col[b]] = p[b, :col[b]]
    x = _draw(ctx, q)
    p[rows, col, x[rows, col]] = 0.0
    p = p / p.sum(-1, keepdim=True)
    zero_at = torch.zeros(B, G, dtype=torch.bool)
    zero_at[rows, col] = True
    u = torch.where(zero_at, torch.zeros((), dtype=torch.float64), _uniform(ctx, B, G))
    return _exact(ctx, name, p, q, x, dtype, "p(x) = 0 with u = 0", u_accept=u, fixed=zero_at)


def _long(ctx, name, dtype):
    """G = 70 drafts from a draft model close to the target: long accepted prefixes; the last row has
    q = p exactly, so all 70 are accepted and the bonus comes from p_70."""
    B, G, V = 4, 70, 37
    z = ctx.randn(B, G + 1, V)
    p = _softmax(z)
    q = _softmax(z[:, :G] + 0.08 * ctx.randn(B, G, V))
    q[-1] = p[-1, :G]
    return _exact(ctx, name, p, q, _draw(ctx, q), dtype, "G = 70, q close to p", traits=("long",))


# ---------------------------------------------------------------- the statistical test
def _rows(G: int, V: int, shift: int):
    """Fixed, position-dependent target rows p_0..p_G and draft rows q_0..q_{G-1} (acceptance rates
    between about 0.55 and 0.8, so that every position is reached often)."""
    a = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0, -3.0, 0.3, -0.5][:V], dtype=torch.float64)
    b = torch.tensor([0.0, 2.0, 0.0, 1.0, -2.0, 0.5, -1.0, 1.5][:V], dtype=torch.float64)
    p = torch.stack([_softmax(a.roll(k + shift)) for k in range(G + 1)])
    q = torch.stack([_softmax(0.6 * b.roll(2 * k + shift) + 0.6 * a.roll(k + shift)) for k in range(G)])
    return p, q


def _stat_case(name, G, V, calls, dtype, shift=0):
    p, q = _rows(G, V, shift)
    return Case(name=name, target=TARGET, probe="draw",
                probe_args={"target": p, "draft": q, "calls": calls},
                check=check_distribution, dtype=dtype, grad=False,
                note=f"{calls} seeded calls, G={G}, V={V}: tokens vs the target")


def _chi2(observed: torch.Tensor, probs: torch.Tensor) -> float:
    """The p-value of a chi-square goodness-of-fit test; cells expected below 5 are pooled. An outcome
    of probability 0 that occurs gives 0."""
    observed = observed.double()
    n = float(observed.sum())
    if n == 0:
        return 1.0
    expected = probs.double() * n
    if bool(((expected <= 1e-12 * n) & (observed > 0)).any()):
        return 0.0
    big = expected >= 5
    o = observed[big].tolist()
    e = expected[big].tolist()
    rest_o, rest_e = float(observed[~big].sum()), float(expected[~big].sum())
    if rest_e > 1e-12 * n:
        if rest_e >= 5 or not o:
            o.append(rest_o)
            e.append(rest_e)
        else:
            i = min(range(len(e)), key=e.__getitem__)
            o[i] += rest_o
            e[i] += rest_e
    if len(o) < 2:
        return 1.0
    stat = sum((oi - ei) ** 2 / ei for oi, ei in zip(o, e))
    dof = len(o) - 1
    return float(torch.special.gammaincc(torch.tensor(dof / 2, dtype=torch.float64),
                                         torch.tensor(stat / 2, dtype=torch.float64)))


def _counts(tokens: torch.Tensor, V: int) -> torch.Tensor:
    return torch.bincount(tokens, minlength=V)[:V]


def _norm(w: torch.Tensor) -> torch.Tensor:
    return w / w.sum()


def _n_law(alpha: list[float], G: int) -> torch.Tensor:
    """P(n = k): accepted with probability alpha_i at position i, stopping at the first rejection."""
    law, reach = [], 1.0
    for k in range(G):
        law.append(reach * (1 - alpha[k]))
        reach *= alpha[k]
    law.append(reach)
    return torch.tensor(law, dtype=torch.float64)


def _poisson_binomial(alpha: list[float]) -> torch.Tensor:
    """The number of accepted drafts when each is accepted on its own (no stop at the first rejection)."""
    law = torch.ones(1, dtype=torch.float64)
    for a in alpha:
        law = torch.cat([law * (1 - a), torch.zeros(1, dtype=torch.float64)]) + \
            torch.cat([torch.zeros(1, dtype=torch.float64), law * a])
    return law


def _unnormalised_law(residual: torch.Tensor) -> torch.Tensor:
    """The token's law when max(0, p - q) is inverted against u without dividing by its mass."""
    law = residual.clone()
    last = int((residual > 0).nonzero().max())
    law[last] += 1.0 - float(residual.sum())
    return law


def check_distribution(sub, ref, case) -> list:
    p, q = case.probe_args["target"].double(), case.probe_args["draft"].double()
    G, V = q.shape
    if not isinstance(sub, dict):
        return [pick(f"the probe expected (tokens, num_accepted) back; got {type(sub).__name__}",
                     f"探针期望得到 (tokens, num_accepted)；实际得到 {type(sub).__name__}")]
    tokens, n, drafts = sub.get("tokens"), sub.get("num_accepted"), sub.get("drafts")
    if not isinstance(drafts, torch.Tensor):
        return [pick("the probe's drafts are missing: was the function called?",
                     "探针的草稿 token 缺失：函数被调用了吗？")]
    for what, t, shape in (("tokens", tokens, (-1, G + 1)), ("num_accepted", n, (-1,))):
        if not isinstance(t, torch.Tensor) or t.is_floating_point() or t.dim() != len(shape) or \
                (len(shape) == 2 and t.shape[1] != G + 1):
            got = pick(f"{t.dtype} tensor of shape {list(t.shape)}", f"形状为 {list(t.shape)} 的 {t.dtype} 张量") \
                if isinstance(t, torch.Tensor) else type(t).__name__
            return [pick(f"`{what}` should be an int64 tensor of shape {['B', G + 1][:len(shape)]}; got {got}",
                         f"`{what}` 应为形状 {['B', G + 1][:len(shape)]} 的 int64 张量；实际是 {got}")]
    N = drafts.shape[0]
    if tokens.shape[0] != N or n.shape[0] != N:
        return [pick(f"called with B={N}, the function returned {tokens.shape[0]} rows of tokens "
                     f"and {n.shape[0]} counts",
                     f"以 B={N} 调用时，函数返回了 {tokens.shape[0]} 行 token 和 {n.shape[0]} 个计数")]
    tokens, n = tokens.long(), n.long()
    # -- the structure of every row: x_0..x_{n-1}, one token in [0, V), then -1
    if bool(((n < 0) | (n > G)).any()):
        return [pick(f"num_accepted must lie in 0..{G}; got values from {int(n.min())} to {int(n.max())}",
                     f"num_accepted 必须在 0..{G} 之间；实际取值从 {int(n.min())} 到 {int(n.max())}")]
    pos = torch.arange(G + 1)
    before = pos[None, :] < n[:, None]
    if not torch.equal(tokens[:, :G][before[:, :G]], drafts[before[:, :G]]):
        return [pick("the first num_accepted tokens of a row must be the accepted drafts x_0 .. x_(n-1)",
                     "每行的前 num_accepted 个 token 必须是被接受的草稿 x_0 .. x_(n-1)")]
    at_n = tokens[torch.arange(N), n]
    bonus = n == G
    if bonus.any() and bool((at_n[bonus] == -1).all()):
        return [Failure(pick(f"when all {G} drafts are accepted, no bonus token follows (tokens[:, {G}] is -1 in all "
                             f"{int(bonus.sum())} such rows): sample one more token from p_G",
                             f"全部 {G} 个草稿都被接受时，后面没有 bonus token（在所有 {int(bonus.sum())} 个这样的行中 "
                             f"tokens[:, {G}] 都是 -1）：应从 p_G 再采样一个 token"), mistake="no_bonus_token")]
    if bool(((at_n < 0) | (at_n >= V)).any()):
        return [pick(f"the token at position num_accepted must be a token id in 0..{V - 1} (n + 1 tokens are emitted)",
                     f"位置 num_accepted 上的 token 必须是 0..{V - 1} 之间的 token id（共输出 n + 1 个 token）")]
    if bool((tokens[pos[None, :] > n[:, None]] != -1).any()):
        return [pick("after the n + 1 emitted tokens, a row must hold -1",
                     "输出的 n + 1 个 token 之后，每行剩下的位置必须是 -1")]
    fails = []
    # -- how many drafts are accepted: the truncated geometric law
    alpha = [float(torch.minimum(p[k], q[k]).sum()) for k in range(G)]
    hist = torch.bincount(n, minlength=G + 1)
    pv = _chi2(hist, _n_law(alpha, G))
    if pv < P_VALUE:
        inverted = [float((q[k] * torch.clamp(q[k] / p[k], max=1.0)).sum()) for k in range(G)]
        seen = ", ".join(str(int(c)) for c in hist)
        want = ", ".join(f"{float(c):.0f}" for c in _n_law(alpha, G) * N)
        msg = pick(f"num_accepted over {N} calls is {seen} for n = 0..{G}; the target law (accept with probability "
                   f"min(1, p/q), stop at the first rejection) predicts {want} (chi-square p-value {pv:.2g})",
                   f"{N} 次调用中 num_accepted 取 n = 0..{G} 的次数为 {seen}；正确的分布（以概率 min(1, p/q) "
                   f"接受，在第一次拒绝处停止）预测为 {want}（卡方检验 p 值 {pv:.2g}）")
        if _chi2(hist, _n_law(inverted, G)) > 1e-3:
            fails.append(Failure(msg + pick(": it fits accepting with min(1, q/p), the ratio upside down",
                                            "：它符合以 min(1, q/p) 接受，即比值倒过来了"),
                                 mistake="ratio_inverted"))
        elif _chi2(hist, _poisson_binomial(alpha)) > 1e-3:
            fails.append(Failure(msg + pick(": it fits counting every accepted draft, as if the drafts after a "
                                            "rejection still counted",
                                            "：它符合统计所有通过检验的草稿，好像第一次拒绝之后的草稿仍然计入"),
                                 mistake="no_stop_at_rejection"))
        else:
            fails.append(msg)
    # -- every position: the emitted token follows p_k
    for k in range(G + 1):
        reached = n >= k
        pv = _chi2(_counts(tokens[reached, k], V), p[k])
        if pv < P_VALUE:
            fails.append(_position_failure(k, tokens, n, p, q, pv, int(reached.sum())))
    # -- and does not depend on the token before it (given that position 1 is reached)
    reached = n >= 1
    for a in range(V):
        rows = reached & (tokens[:, 0] == a)
        if int(rows.sum()) >= 200:
            pv = _chi2(_counts(tokens[rows, 1], V), p[1])
            if pv < P_VALUE / V:
                fails.append(pick(f"after the token {a} at position 0, the token at position 1 does not follow p_1 "
                                  f"(chi-square p-value {pv:.2g} on {int(rows.sum())} calls)",
                                  f"位置 0 上是 token {a} 时，位置 1 上的 token 不服从 p_1"
                                  f"（{int(rows.sum())} 次调用，卡方检验 p 值 {pv:.2g}）"))
                break
    named = [f for f in fails if isinstance(f, Failure)]
    return named + [f for f in fails if not isinstance(f, Failure)]


def _position_failure(k, tokens, n, p, q, pv, count):
    """A position whose tokens do not follow p_k: name the mistake when the sampled tokens there fit a
    known wrong law (and not the right one)."""
    G, V = q.shape
    msg = pick(f"the tokens emitted at position {k} ({count} calls reached it) do not follow the target row p_{k} "
               f"(chi-square p-value {pv:.2g})",
               f"位置 {k} 上输出的 token（{count} 次调用到达该位置）不服从目标分布的行 p_{k}"
               f"（卡方检验 p 值 {pv:.2g}）")
    if k == G:
        last = _counts(tokens[n == G, G], V)
        if _chi2(last, p[G - 1]) > 1e-3 and _chi2(last, p[G]) < P_VALUE:
            return Failure(msg + pick(f": the bonus tokens follow p_{G - 1}, the last draft position's row; the bonus "
                                      f"comes from p_{G}, the row after it",
                                      f"：bonus token 服从 p_{G - 1}，即最后一个草稿位置的行；bonus 应来自它之后的"
                                      f"那一行 p_{G}"), mistake="bonus_from_last_draft_row")
        return msg
    sampled = _counts(tokens[n == k, k], V)          # the token drawn after a rejection at k
    residual = torch.clamp(p[k] - q[k], min=0)
    if _chi2(sampled, _norm(residual)) >= P_VALUE:
        return msg
    alternatives = [
        (p[k], "resample_from_target",
         pick(f"the tokens drawn after a rejection at {k} follow p_{k} itself; draw them "
              f"from norm(max(0, p_{k} - q_{k}))",
              f"在位置 {k} 被拒绝后采样的 token 服从 p_{k} 本身；应从 norm(max(0, p_{k} - q_{k})) 中采样")),
        (_norm(torch.clamp(p[k + 1] - q[k], min=0)), "residual_next_row",
         pick(f"the tokens drawn after a rejection at {k} follow norm(max(0, p_{k + 1} - q_{k})): "
              f"the target row of the next position; use p_{k}",
              f"在位置 {k} 被拒绝后采样的 token 服从 norm(max(0, p_{k + 1} - q_{k}))：用的是下一个位置的目标行；"
              f"应使用 p_{k}")),
        (torch.nn.functional.one_hot(residual.argmax(), V).double(), "residual_argmax",
         pick(f"after a rejection at {k} the token is always the residual's largest one (an argmax of "
              f"max(0, p - q), or a sampler fed weights that are no distribution, such as p - q unclamped); "
              f"it must be sampled from norm(max(0, p - q))",
              f"在位置 {k} 被拒绝后，token 总是残差最大的那个（对 max(0, p - q) 取了 argmax，或者交给采样的权重"
              f"不是一个分布，例如没有截断的 p - q）；它必须从 norm(max(0, p - q)) 中采样得到")),
        (_unnormalised_law(residual), "residual_not_normalised",
         pick(f"the tokens drawn after a rejection at {k} fit max(0, p - q) inverted without dividing by its sum",
              f"在位置 {k} 被拒绝后采样的 token 符合没有除以总和就对 max(0, p - q) 做逆 CDF 的结果")),
    ]
    for law, mistake, why in alternatives:
        if _chi2(sampled, law) > 1e-3:
            return Failure(msg + pick(": ", "：") + why, mistake=mistake)
    return msg + pick(f"; the tokens drawn after a rejection at {k} do not follow norm(max(0, p_{k} - q_{k}))",
                      f"；在位置 {k} 被拒绝后采样的 token 不服从 norm(max(0, p_{k} - q_{k}))")


# ---------------------------------------------------------------- the cases
def cases(ctx: Ctx) -> list[Case]:
    out = [
        _random_case(ctx, "random_fp64", 40, 5, 7, torch.float64),
        _zero_target(ctx, "zero_target_prob_fp64", torch.float64),
        _identical(ctx, "identical_p_q_fp64", torch.float64),
        _disjoint(ctx, "disjoint_support_fp64", torch.float64),
        _onehot_target(ctx, "onehot_target_fp32", torch.float32),
        _onehot_draft(ctx, "onehot_draft_fp64", torch.float64),
        _random_case(ctx, "gamma1_b1_fp64", 1, 1, 5, torch.float64),
        _random_case(ctx, "sizes_from_seed_fp32", ctx.int(1, 9), ctx.int(1, 8), ctx.int(2, 40), torch.float32),
        _long(ctx, "long_gamma70_fp32", torch.float32),
        _random_case(ctx, "bf16", 12, 3, 6, torch.bfloat16, spread=1.0),
        _stat_case("distribution_fp64", 4, 6, 60_000, torch.float64),
    ]
    if ctx.full:
        for i in range(6):
            B, G, V = ctx.int(1, 30), ctx.int(1, 12), ctx.int(2, 60)
            dtype = ctx.choice([torch.float64, torch.float32, torch.bfloat16])
            out.append(_random_case(ctx, f"random{i}", B, G, min(V, 8) if dtype == torch.bfloat16 else V, dtype,
                                    spread=1.0 if dtype == torch.bfloat16 else 2.0))
        out.append(_stat_case("distribution_fp32_v8", 6, 8, 80_000, torch.float32, shift=3))
    return out
