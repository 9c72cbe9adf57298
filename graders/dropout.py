"""Cases for `dropout`: eval mode and p = 0 equal plain attention exactly; in training, the attention
weights and the merged heads are dropped at rate p with survivors scaled by 1/(1-p) (statistical checks
on >= 10^5 samples, 6-sigma bounds, seeded)."""
import math

import torch

from attn_drill.api import Case, Ctx, Failure

TARGET = "AttentionWithDropout"


def _build(module_file, E, H, p_attn, p_out, state=None):
    m = getattr(module_file, TARGET)(hidden_dim=E, num_heads=H, attn_dropout=p_attn, output_dropout=p_out)
    m = m.double()
    if state is not None:
        _load(m, state)
    return m


def _load(m, state):
    """Copy qkv_proj/out_proj weights; separate q_proj/k_proj/v_proj are accepted too."""
    own = dict(m.named_parameters())
    with torch.no_grad():
        if "qkv_proj.weight" in own:
            own["qkv_proj.weight"].copy_(state["qkv_proj.weight"])
        elif all(f"{n}_proj.weight" in own for n in "qkv"):
            for n, w in zip("qkv", state["qkv_proj.weight"].chunk(3, dim=0)):
                own[f"{n}_proj.weight"].copy_(w)
        else:
            raise AttributeError("the module needs qkv_proj (or q_proj, k_proj, v_proj) as stated")
        if "out_proj.weight" not in own:
            raise AttributeError("the module needs out_proj = nn.Linear(hidden_dim, hidden_dim, bias=False)")
        own["out_proj.weight"].copy_(state["out_proj.weight"])


def _state(E, gen, w_qk_scale=1.0, w_v=None, w_o=None):
    w = torch.randn(3 * E, E, generator=gen, dtype=torch.float64) / math.sqrt(E)
    w[: 2 * E] *= w_qk_scale
    if w_v is not None:
        w[2 * E:] = w_v
    if w_o is None:
        w_o = torch.randn(E, E, generator=gen, dtype=torch.float64) / math.sqrt(E)
    return {"qkv_proj.weight": w, "out_proj.weight": w_o}


def check_eval(sub, ref, case) -> list:
    """Eval mode with large p: no dropout at all, the same answer twice, equal to plain attention."""
    gen = torch.Generator().manual_seed(case.seed)
    E, H, B, L = 12, 3, 2, 7
    state = _state(E, gen)
    x = torch.randn(B, L, E, generator=gen, dtype=torch.float64)
    want = _build(ref, E, H, 0.0, 0.0, state).eval()(x)
    m = _build(sub, E, H, 0.5, 0.5, state).eval()
    torch.manual_seed(case.seed)
    a = m(x)
    b = m(x)
    if not torch.equal(a, b) or not torch.allclose(a, want, rtol=1e-9, atol=1e-12):
        if not torch.equal(a, b):
            return [Failure("in eval mode (model.eval()) two calls gave different outputs: dropout is still "
                            "active. nn.Dropout switches itself off in eval; F.dropout needs "
                            "training=self.training", mistake="dropout_in_eval")]
        return [f"in eval mode with attn_dropout=output_dropout=0.5 the output differs from attention without "
                f"dropout by up to {float((a - want).abs().max()):.3g}"]
    return []


def _share_bound(p: float, n: int) -> float:
    return 6.0 * math.sqrt(p * (1 - p) / n) + 1.0 / n


def check_attention_weights(sub, ref, case, p: float) -> list:
    """Reads the dropped attention weights straight off the output: one-hot inputs, V = [one-hot | 1],
    out_proj = identity, output_dropout = 0. Then merged[b, i, h*D + j] = drop(w)[b, h, i, j] and
    merged[b, i, h*D + D-1] = sum_j drop(w)[b, h, i, j]."""
    gen = torch.Generator().manual_seed(case.seed)
    B, L, H, D = 240, 12, 3, 14
    E = H * D
    w_v = torch.zeros(E, E, dtype=torch.float64)
    for h in range(H):
        w_v[h * D + torch.arange(L), torch.arange(L)] = 1.0        # v_j = e_j in every head
        w_v[h * D + D - 1, :L] = 1.0                               # and a constant 1 in the head's last dim
    state = _state(E, gen, w_qk_scale=2.0, w_v=w_v, w_o=torch.eye(E, dtype=torch.float64))
    x = torch.eye(E, dtype=torch.float64)[:L].expand(B, L, E).clone()   # x_j = e_j
    wq, wk = state["qkv_proj.weight"][:E], state["qkv_proj.weight"][E:2 * E]
    q = (x[0] @ wq.T).view(L, H, D).transpose(0, 1)                # (H, L, D)
    k = (x[0] @ wk.T).view(L, H, D).transpose(0, 1)                # (H, L, D)
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(D), dim=-1)   # (H, L, L), all > 0

    m = _build(sub, E, H, p, 0.0, state).train()
    torch.manual_seed(case.seed)
    with torch.no_grad():
        out = m(x)                                                 # (B, L, E)
    merged = out.view(B, L, H, D).transpose(1, 2)                  # (B, H, L, D)
    got = merged[..., :L]                                          # (B, H, L, L): dropped weights
    total = merged[..., D - 1]                                     # (B, H, L): their row sums
    ww = w.expand_as(got)
    n = got.numel()
    if torch.allclose(got, ww, rtol=1e-9, atol=1e-12):
        return [Failure(f"with attn_dropout={p} in training, the attention weights were not dropped at all",
                        mistake="attn_dropout_missing")]
    zero = got.abs() <= 1e-12 * ww
    share = float(zero.double().mean())
    if share == 0.0 and torch.allclose(got.sum(-1), torch.ones_like(total), rtol=1e-9):
        return [Failure(f"with attn_dropout={p} no attention weight is zero and every row still sums to 1: "
                        "the dropout ran before the softmax, which renormalised it away",
                        mistake="dropout_before_softmax")]
    if abs(share - p) > _share_bound(p, n):
        return [f"with attn_dropout={p}, {share:.4f} of {n} attention weights were zeroed; expected {p} "
                f"(within {_share_bound(p, n):.4f})"]
    ratio = got[~zero] / ww[~zero]
    if torch.allclose(ratio, torch.ones_like(ratio), rtol=1e-9):
        return [Failure(f"the surviving attention weights were not scaled by 1/(1-p) = {1 / (1 - p):.4f}, so the "
                        "expected value of the output shrinks by (1-p)", mistake="attn_dropout_no_rescale")]
    if not torch.allclose(ratio, torch.full_like(ratio, 1 / (1 - p)), rtol=1e-9):
        return [f"surviving attention weights were scaled by {float(ratio.min()):.4f}..{float(ratio.max()):.4f}; "
                f"expected exactly 1/(1-p) = {1 / (1 - p):.4f}"]
    if not torch.allclose(total, got.sum(-1), rtol=1e-9, atol=1e-12):
        return ["the dropout mask is not shared by all dims of a value vector: drop attention weights "
                "(B, H, L, L) after the softmax, not elements of weights @ V"]
    if not torch.all(merged[..., L:D - 1] == 0):
        return ["unexpected values in the output (the value vectors were changed)"]
    return []


def check_output_dropout(sub, ref, case, p: float) -> list:
    """attn_dropout = 0, output_dropout = p, orthogonal out_proj W: the merged heads are out @ W.
    They must be zero with probability p and merged_eval / (1-p) otherwise."""
    gen = torch.Generator().manual_seed(case.seed)
    B, L, H, D = 100, 20, 5, 10
    E = H * D
    w_o = torch.linalg.qr(torch.randn(E, E, generator=gen, dtype=torch.float64))[0]
    state = _state(E, gen, w_o=w_o)
    x = torch.randn(B, L, E, generator=gen, dtype=torch.float64)
    with torch.no_grad():
        plain = _build(ref, E, H, 0.0, 0.0, state).eval()(x)        # (B, L, E)
        merged_eval = plain @ w_o                                    # (B, L, E): before out_proj
        m = _build(sub, E, H, 0.0, p, state).train()
        torch.manual_seed(case.seed)
        out = m(x)
    merged = out @ w_o                                               # undo out_proj
    scale = float(merged_eval.abs().max())
    clear = merged_eval.abs() > 1e-6 * scale                         # skip elements too close to 0 to judge
    merged, merged_eval = merged[clear], merged_eval[clear]
    n = merged.numel()
    zero = merged.abs() <= 1e-9 * scale
    share = float(zero.double().mean())
    if share == 0.0:
        zero_out = out.abs() <= 1e-12 * float(out.abs().max())
        out_share = float(zero_out.double().mean())
        if abs(out_share - p) <= _share_bound(p, n):
            return [Failure(f"output_dropout={p} zeroed the final output, after out_proj; this problem applies it "
                            "to the merged heads, before out_proj", mistake="output_dropout_after_proj")]
        if torch.allclose(out, plain, rtol=1e-9, atol=1e-12):
            return [f"with output_dropout={p} in training, nothing was dropped"]
        return [f"with output_dropout={p} in training, no element of the merged heads (the input of out_proj) "
                "was zeroed"]
    if abs(share - p) > _share_bound(p, n):
        return [f"with output_dropout={p}, {share:.4f} of {n} merged-head elements were zeroed; expected {p} "
                f"(within {_share_bound(p, n):.4f})"]
    ratio = merged[~zero] / merged_eval[~zero]
    if not torch.allclose(ratio, torch.full_like(ratio, 1 / (1 - p)), rtol=1e-7):
        return [f"surviving merged-head elements were scaled by {float(ratio.min()):.4f}..{float(ratio.max()):.4f};"
                f" expected exactly 1/(1-p) = {1 / (1 - p):.4f}"]
    return []


def _attn_check(p: float):
    return lambda sub, ref, case: check_attention_weights(sub, ref, case, p)


def _output_check(p: float):
    return lambda sub, ref, case: check_output_dropout(sub, ref, case, p)


def _case(ctx: Ctx, name, B, L, H, D, dtype, p=(0.2, 0.3), train=False, pad=False, mask=None, scale=1.0):
    E = H * D
    kwargs, notes = {}, ["train" if train else "eval", f"p={p[0]}/{p[1]}"]
    more, words = ctx.masks(B, L, pad, mask)
    kwargs.update(more)
    notes += words
    if scale > 1:
        notes.append("large logits")
    return Case(name=name, target=TARGET,
                init=dict(hidden_dim=E, num_heads=H, attn_dropout=p[0], output_dropout=p[1]),
                inputs={"x": ctx.randn(B, L, E, scale=scale)}, kwargs=kwargs, dtype=dtype, train=train,
                note=" ".join(notes))


def cases(ctx: Ctx) -> list[Case]:
    out = [
        Case(name="eval_is_deterministic", target=TARGET, check=check_eval, grad=False,
             note="eval, p=0.5"),
        _case(ctx, "eval_fp64", 2, 7, 3, 5, torch.float64),
        _case(ctx, "eval_b1_l1_fp64", 1, 1, 2, 3, torch.float64, p=(0.5, 0.5)),
        _case(ctx, "eval_pad_fp64", 3, 9, 2, 7, torch.float64, pad=True),
        _case(ctx, "eval_causal_pad_fp32", 2, 6, 4, 5, torch.float32, pad=True, mask="causal"),
        _case(ctx, "eval_mask3d_fp32", 3, 5, 3, 6, torch.float32, mask="random3d"),
        _case(ctx, "eval_large_logits_fp32", 2, 5, 2, 9, torch.float32, scale=60.0),
        _case(ctx, "eval_bf16", 2, 11, 3, 8, torch.bfloat16, pad=True),
        _case(ctx, "train_p0_fp64", 2, 8, 3, 4, torch.float64, p=(0.0, 0.0), train=True, pad=True,
              mask="causal"),
        Case(name="train_attn_weights", target=TARGET, check=_attn_check(0.3), grad=False,
             train=True, deterministic=False,
             note="attn p=0.3, 1e5 weights"),
        Case(name="train_output", target=TARGET, check=_output_check(0.25), grad=False,
             train=True, deterministic=False,
             note="output p=0.25, 1e5"),
    ]
    if ctx.full:
        for i in range(5):
            B, L, H, D = ctx.int(1, 4), ctx.int(1, 23), ctx.int(1, 5), ctx.int(2, 11)
            dtype = ctx.choice([torch.float64, torch.float32, torch.bfloat16])
            out.append(_case(ctx, f"random_eval{i}", B, L, H, D, dtype, pad=bool(ctx.int(0, 1)),
                             mask=ctx.choice([None, "causal", "random3d"])))
        out.append(_case(ctx, "train_p0_bf16", 2, 10, 2, 6, torch.bfloat16, p=(0.0, 0.0), train=True, pad=True))
        for i, p in enumerate((0.1, 0.5)):
            out.append(Case(name=f"train_attn_weights_p{i}", target=TARGET, check=_attn_check(p),
                            grad=False, train=True, deterministic=False,
                            note=f"attn p={p}"))
            out.append(Case(name=f"train_output_p{i}", target=TARGET, check=_output_check(p),
                            grad=False, train=True, deterministic=False,
                            note=f"output p={p}"))
    return out
