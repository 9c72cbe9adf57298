"""Cases for `lora_attention`: LoRALinear and LoRAAttention forwards and gradients with non-zero
adapters (alpha / r and the rank-stabilised alpha / sqrt(r)); merge, a second merge and unmerge;
the initialisation (B = 0, A uniform in +-1/sqrt(in)); which parameters train (only A and B) and get
gradients; dropout on the input of the low-rank branch only, in training mode.

The forward cases build the modules with init_lora_weights=False, as peft does for tests: B keeps
nn.Linear's random init, so the update is not zero and its scaling shows in the output."""
from __future__ import annotations

import math

import torch

from attn_drill.bank.api import FLOAT32_LEVEL, Case, Ctx, Failure, traits, type_name
from attn_drill.i18n import pick

BASES = ("q_proj.base_layer.weight", "v_proj.base_layer.weight")
FROZEN_PLAIN = ("k_proj.weight", "o_proj.weight")
ADAPTERS = ("q_proj.lora_A.weight", "q_proj.lora_B.weight", "v_proj.lora_A.weight", "v_proj.lora_B.weight")

PROMISES = [
    ("LoRALinear: base_layer(x) + scaling * lora_B(lora_A(dropout(x)))", "linear_"),
    ("scaling = lora_alpha / r", "linear_fp64"),
    ("scaling = lora_alpha / sqrt(r) with use_rslora", "linear_rslora_fp32"),
    ("lora_A weight (r, in), lora_B weight (out, r), base_layer weight (out, in)", "linear_"),
    ("LoRAAttention: causal attention with LoRA on q_proj and v_proj, k_proj and o_proj plain", "attn_"),
    ("gradients reach x, lora_A and lora_B", "attn_"),
    ("dropout is off in eval mode", "attn_eval_dropout_fp64"),
    ("delta_weight() = scaling * B @ A, shape (out, in)", "merge_"),
    ("merge(): base weight += scaling * B @ A, then the branch is skipped: the same outputs", "merge_"),
    ("merge() on a merged module does nothing", "merge_"),
    ("unmerge() restores the weights and the outputs", "merge_"),
    ("init_lora_weights=True: B = 0 and A ~ U(-1/sqrt(in), 1/sqrt(in)); the module equals its base", "own_init"),
    ("init_lora_weights=False keeps nn.Linear's default init (B not zero)", "own_init_false"),
    ("the base weights are frozen (requires_grad False, no gradient); A and B train", "trainable"),
    ("dropout on the input of the low-rank branch only, in training mode", "dropout_branch_only"),
    ("float64, float32 and bfloat16; outputs in x's dtype", "attn_bf16"),
]


def _lin_init(inp, out, r, alpha, rs=False, drop=0.0):
    return dict(in_features=inp, out_features=out, r=r, lora_alpha=alpha, use_rslora=rs, lora_dropout=drop,
                init_lora_weights=False)


def _attn_init(E, H, r, alpha, rs=False, drop=0.0, init=False):
    return dict(hidden_dim=E, num_heads=H, r=r, lora_alpha=alpha, use_rslora=rs, lora_dropout=drop,
                init_lora_weights=init)


def _linear(ctx, name, shape, inp, out, r, alpha, dtype, rs=False):
    scale = f"alpha/sqrt(r) = {alpha / math.sqrt(r):.3g}" if rs else f"alpha/r = {alpha / r:.3g}"
    return Case(name=name, target="LoRALinear", init=_lin_init(inp, out, r, alpha, rs),
                inputs={"x": ctx.randn(*shape, inp)}, dtype=dtype,
                traits=traits(B=shape[0], L=shape[1] if len(shape) > 1 else None),
                note=f"in {inp}, out {out}, r {r}, {scale}")


def _attn(ctx, name, B, L, E, H, r, alpha, dtype, rs=False, drop=0.0):
    scale = f"alpha/sqrt(r) = {alpha / math.sqrt(r):.3g}" if rs else f"alpha/r = {alpha / r:.3g}"
    return Case(name=name, target="LoRAAttention", init=_attn_init(E, H, r, alpha, rs, drop),
                inputs={"x": ctx.randn(B, L, E)}, dtype=dtype, traits=traits(B=B, L=L, H=H, mask="causal"),
                note=f"E {E}, H {H}, r {r}, {scale}" + (f", dropout {drop} (eval)" if drop else ""))


def _merge(ctx, name, B, L, E, H, r, alpha, dtype, rs=False):
    return Case(name=name, target="LoRAAttention", init=_attn_init(E, H, r, alpha, rs),
                inputs={"x": ctx.randn(B, L, E)}, dtype=dtype, grad=False, probe="merge_cycle",
                output_names=("unmerged", "merged", "merged_twice", "unmerged_again", "q_weight_merged",
                              "v_weight_merged", "q_weight_restored", "q_delta_weight"),
                traits=traits(B=B, L=L, H=H, mask="causal"), note="forward, merge, merge, unmerge")


# ---------------------------------------------------------------- checks
def _attention(x, wq, wk, wv, wo, H):
    """Causal attention with plain weights, in float64 (the judge's own, for the base model)."""
    B, L, E = x.shape
    D = E // H
    q = (x @ wq.T).view(B, L, H, D).transpose(1, 2)
    k = (x @ wk.T).view(B, L, H, D).transpose(1, 2)
    v = (x @ wv.T).view(B, L, H, D).transpose(1, 2)
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    return out.transpose(1, 2).reshape(B, L, E) @ wo.T


def _tensor(obj, name):
    if not isinstance(obj, dict) or not isinstance(obj.get(name), torch.Tensor):
        raise ValueError(name)
    return obj[name].double()


def check_own_init(sub, ref, case) -> list:
    if not isinstance(sub, dict) or not isinstance(sub.get("params"), dict):
        return [pick(f"the probe expected the module's parameters back; got {type_name(sub)}",
                     f"探针期望得到模块的参数；实际得到 {type_name(sub)}")]
    params = sub["params"]
    missing = [n for n in (*BASES, *FROZEN_PLAIN, *ADAPTERS) if not isinstance(params.get(n), torch.Tensor)]
    if missing:
        return [pick(f"LoRAAttention has no parameter {missing[0]} (names: {', '.join(sorted(params))[:300]})",
                     f"LoRAAttention 没有参数 {missing[0]}（现有参数：{', '.join(sorted(params))[:300]}）")]
    E = case.init["hidden_dim"]
    bound = 1.0 / math.sqrt(E)
    fails = []
    if case.init["init_lora_weights"] is False:
        r_bound = 1.0 / math.sqrt(case.init["r"])
        for n in ("q_proj.lora_B.weight", "v_proj.lora_B.weight"):
            b = params[n].double()
            if not (0.3 * r_bound < float(b.abs().max()) <= r_bound * (1 + 1e-3)):
                fails.append(pick(
                    f"with init_lora_weights=False, {n} should keep nn.Linear's default init (uniform in "
                    f"+-1/sqrt(r) = +-{r_bound:.4g}); its entries reach {float(b.abs().max()):.4g}",
                    f"init_lora_weights=False 时，{n} 应保留 nn.Linear 的默认初始化（在 +-1/sqrt(r) = +-{r_bound:.4g} "
                    f"内均匀分布）；实际最大值为 {float(b.abs().max()):.4g}"))
        return fails
    for n in ("q_proj.lora_B.weight", "v_proj.lora_B.weight"):
        b = params[n].double()
        if bool((b != 0).any()):
            fails.append(Failure(pick(
                f"with init_lora_weights=True, {n} starts non-zero (max |B| = {float(b.abs().max()):.3g}): the "
                f"adapter changes the model before any training; initialise B to zeros (A stays random)",
                f"init_lora_weights=True 时，{n} 的初值不为零（max |B| = {float(b.abs().max()):.3g}）：适配器在训练之前"
                f"就改变了模型；应把 B 初始化为零（A 保持随机）"), mistake="b_random_init"))
    for n in ("q_proj.lora_A.weight", "v_proj.lora_A.weight"):
        a = params[n].double()
        top = float(a.abs().max())
        if top > bound * (1 + 1e-3) or top < 0.5 * bound or float(a.std()) < 0.2 * bound:
            fails.append(pick(
                f"{n} should be kaiming_uniform_(a=sqrt(5)), uniform in +-1/sqrt(in) = +-{bound:.4g}; its "
                f"entries reach {top:.4g} (std {float(a.std()):.3g})",
                f"{n} 应按 kaiming_uniform_(a=sqrt(5)) 初始化，即在 +-1/sqrt(in) = +-{bound:.4g} 内均匀分布；"
                f"实际最大值为 {top:.4g}（标准差 {float(a.std()):.3g}）"))
    out = sub.get("out")
    if not fails and isinstance(out, torch.Tensor):
        x = case.inputs["x"].double()
        base = _attention(x, params[BASES[0]].double(), params["k_proj.weight"].double(),
                          params[BASES[1]].double(), params["o_proj.weight"].double(), case.init["num_heads"])
        if tuple(out.shape) != tuple(base.shape):
            fails.append(pick(f"the output has shape {list(out.shape)}, expected {list(base.shape)}",
                              f"输出形状为 {list(out.shape)}，期望 {list(base.shape)}"))
        else:
            err = float((out.double() - base).abs().max())
            if not err <= FLOAT32_LEVEL * max(1.0, float(base.abs().max())):
                fails.append(pick(f"at init the module should equal its base model (B = 0); its output differs "
                                  f"from the base attention by up to {err:.3g}",
                                  f"初始化时模块应与基座模型完全相同（B = 0）；它的输出与基座注意力最多相差 {err:.3g}"))
    return fails


def check_trainable(sub, ref, case) -> list:
    if not isinstance(sub, dict) or not isinstance(sub.get("requires_grad"), dict):
        return [pick(f"the probe expected the parameters' requires_grad flags; got {type_name(sub)}",
                     f"探针期望得到各参数的 requires_grad 标志；实际得到 {type_name(sub)}")]
    flags, grads = sub["requires_grad"], sub.get("grads") or {}
    fails = []
    trained_bases = [n for n in BASES if flags.get(n) is not False]
    trained_plain = [n for n in FROZEN_PLAIN if flags.get(n) is not False]
    if trained_bases:
        fails.append(Failure(pick(
            f"{', '.join(trained_bases)} still require a gradient: the pretrained weight under the adapter must be "
            f"frozen (requires_grad_(False)), or the optimiser trains all of it and LoRA saves nothing",
            f"{', '.join(trained_bases)} 仍然需要梯度：适配器下面的预训练权重必须冻结"
            f"（requires_grad_(False)），否则优化器会训练整个权重，LoRA 就什么也没省下"), mistake="base_not_frozen"))
    elif trained_plain:
        fails.append(Failure(pick(
            f"{', '.join(trained_plain)} still require a gradient: k_proj and o_proj carry no adapter, but they "
            f"belong to the pretrained model and must be frozen too; only lora_A and lora_B train",
            f"{', '.join(trained_plain)} 仍然需要梯度：k_proj 和 o_proj 虽然没有适配器，"
            f"但它们属于预训练模型，同样必须冻结；只有 lora_A 和 lora_B 参与训练"), mistake="k_o_not_frozen"))
    for n in (*BASES, *FROZEN_PLAIN):
        if n in flags and flags[n] is False and isinstance(grads.get(n), torch.Tensor):
            fails.append(pick(f"{n} is frozen but got a gradient", f"{n} 已冻结，却得到了梯度"))
    for n in ADAPTERS:
        if flags.get(n) is not True:
            fails.append(pick(f"{n} must be trainable (requires_grad True); got {flags.get(n)!r}",
                              f"{n} 必须可训练（requires_grad 为 True）；实际为 {flags.get(n)!r}"))
        elif not isinstance(grads.get(n), torch.Tensor) or not bool((grads[n] != 0).any()):
            fails.append(pick(f"after a backward pass, {n} has no (or an all-zero) gradient",
                              f"反向传播之后，{n} 没有梯度（或梯度全为零）"))
    return fails


def _mask_like(z, target, tol):
    """Whether every entry of z is either 0 or target (the kept entries scaled by 1 / (1 - p))."""
    zero = z.abs() <= tol
    kept = (z - target).abs() <= tol
    return bool((zero | kept).all()), zero & ~kept


def check_dropout(sub, ref, case) -> list:
    try:
        y, x = _tensor(sub, "out"), _tensor(sub, "x")
        params = sub.get("params")
        W = _tensor(params, "base_layer.weight")
        A = _tensor(params, "lora_A.weight")
        Bw = _tensor(params, "lora_B.weight")
    except ValueError as exc:
        return [pick(f"the probe could not read `{exc}` (LoRALinear's out, base_layer.weight, lora_A.weight, "
                     f"lora_B.weight)",
                     f"探针无法读取 `{exc}`（LoRALinear 的输出、base_layer.weight、lora_A.weight、lora_B.weight）")]
    init = case.init
    p = init["lora_dropout"]
    s = init["lora_alpha"] / init["r"]
    keep = 1.0 / (1.0 - p)
    M = s * Bw @ A                                                        # (out, in)
    if tuple(y.shape) != (x.shape[0], W.shape[0]):
        return [pick(f"the output has shape {list(y.shape)}, expected {[x.shape[0], W.shape[0]]}",
                     f"输出形状为 {list(y.shape)}，期望 {[x.shape[0], W.shape[0]]}")]
    tol = 1e-6 * max(1.0, float(x.abs().max()) * keep)
    full = x @ (W + M).T
    if float((y - full).abs().max()) <= tol:
        return [pick(f"in training mode with lora_dropout={p}, the output equals the one without dropout: apply "
                     f"nn.Dropout(lora_dropout) to the input of the low-rank branch",
                     f"训练模式下 lora_dropout={p} 时，输出与不加 dropout 时完全相同：应对低秩分支的输入使用 "
                     f"nn.Dropout(lora_dropout)")]
    delta = y - x @ W.T                                                   # what the branch added
    z = torch.linalg.lstsq(M, delta.T).solution.T                         # (N, in): the branch's input
    fits = float((z @ M.T - delta).abs().max()) <= tol
    ok, dropped = _mask_like(z, x * keep, tol)
    if fits and ok and bool(dropped.any()):
        return []
    # dropout on the base path as well: y = W (x * m1) / (1 - p) + M (x * m2) / (1 - p)
    WM = torch.cat([W, M], dim=1)                                         # (out, 2 * in)
    z2 = torch.linalg.lstsq(WM, y.T).solution.T                           # (N, 2 * in)
    n_in = x.shape[1]
    if float((z2 @ WM.T - y).abs().max()) <= tol:
        ok1, drop1 = _mask_like(z2[:, :n_in], x * keep, tol)
        ok2, _ = _mask_like(z2[:, n_in:], x * keep, tol)
        if ok1 and ok2 and bool(drop1.any()):
            return [Failure(pick("dropout also reaches the base path: the frozen layer sees dropped inputs. Apply the "
                                 "dropout to the input of the low-rank branch only, base_layer(x) + scaling * "
                                 "B(A(dropout(x)))",
                                 "dropout 也作用到了基座路径上：冻结的层看到的是被丢弃过的输入。"
                                 "dropout 只应作用于低秩分支的输入：base_layer(x) + scaling * B(A(dropout(x)))"),
                            mistake="dropout_on_base")]
    ratio = delta / (x @ M.T)
    ok3, _ = _mask_like(ratio, torch.full_like(ratio, keep), 1e-6 * keep)
    if ok3:
        return [Failure(pick("dropout is applied to the output of the low-rank branch (B(A(x)) is dropped entry by "
                             "entry); peft drops the branch's input: B(A(dropout(x)))",
                             "dropout 作用在了低秩分支的输出上（B(A(x)) 被逐元素丢弃）；peft 丢弃的是分支的输入："
                             "B(A(dropout(x)))"), mistake="dropout_on_output")]
    return [pick("in training mode, the output is not base_layer(x) + scaling * B(A(dropout(x))) for any dropout "
                 f"mask of x (entries kept times 1/(1 - p) = {keep:g}, or zero)",
                 "训练模式下，对 x 的任何 dropout 掩码（保留的元素乘以 1/(1 - p) = "
                 f"{keep:g}，其余为零），输出都不等于 base_layer(x) + scaling * B(A(dropout(x)))")]


def cases(ctx: Ctx) -> list[Case]:
    f64, f32, bf16 = torch.float64, torch.float32, torch.bfloat16
    out = [
        _linear(ctx, "linear_fp64", (2, 5), 10, 7, 3, 6.0, f64),
        _linear(ctx, "linear_rslora_fp32", (3, 4), 9, 11, 4, 8.0, f32, rs=True),
        _linear(ctx, "linear_r1_b1_fp64", (1, 6), 7, 5, 1, 2.0, f64),
        _linear(ctx, "linear_bf16", (2, 3), 12, 8, 4, 16.0, bf16),
        _attn(ctx, "attn_fp64", 2, 7, 12, 3, 4, 8.0, f64),
        _attn(ctx, "attn_rslora_fp64", 2, 6, 10, 2, 5, 10.0, f64, rs=True),
        _attn(ctx, "attn_eval_dropout_fp64", 2, 5, 8, 2, 2, 4.0, f64, drop=0.3),
        _attn(ctx, "attn_l1_b1_fp32", 1, 1, 12, 4, 3, 6.0, f32),
        _attn(ctx, "attn_long_fp32", 2, 70, 12, 3, 4, 8.0, f32, rs=True),
        _attn(ctx, "attn_bf16", 2, 6, 16, 4, 4, 16.0, bf16),
        _attn(ctx, "attn_sizes_from_seed_fp64", ctx.int(1, 3), ctx.int(2, 13), 3 * ctx.int(2, 5), 3, ctx.int(1, 6),
              float(ctx.int(1, 16)), f64, rs=bool(ctx.int(0, 1))),
        _merge(ctx, "merge_fp64", 2, 6, 12, 3, 4, 8.0, f64),
        _merge(ctx, "merge_rslora_fp32", 2, 5, 10, 2, 5, 10.0, f32, rs=True),
        Case(name="own_init", target="LoRAAttention", init=_attn_init(16, 4, 4, 8.0, init=True),
             inputs={"x": ctx.randn(2, 5, 16)}, probe="own_init", check=check_own_init,
             traits=traits(B=2, L=5, H=4, mask="causal"), note="init_lora_weights=True, the module's own init"),
        Case(name="own_init_false", target="LoRAAttention", init=_attn_init(12, 3, 5, 8.0, init=False),
             inputs={"x": ctx.randn(1, 4, 12)}, probe="own_init", check=check_own_init,
             traits=traits(B=1, L=4, H=3, mask="causal"), note="init_lora_weights=False: nn.Linear's init for A and B"),
        Case(name="trainable", target="LoRAAttention", init=_attn_init(12, 3, 4, 8.0),
             inputs={"x": ctx.randn(2, 5, 12)}, probe="trainable", check=check_trainable,
             traits=traits(B=2, L=5, H=3, mask="causal"), note="requires_grad and .grad after backward"),
        Case(name="dropout_branch_only", target="LoRALinear",
             init=dict(_lin_init(4, 9, 4, 4.0, drop=0.5)), inputs={"x": ctx.randn(6, 4)}, probe="dropout",
             check=check_dropout, traits=traits(B=6), note="train mode, lora_dropout 0.5"),
    ]
    if ctx.full:
        for i in range(5):
            H, D = ctx.int(1, 4), ctx.int(2, 6)
            dtype = ctx.choice([f64, f32, bf16])
            out.append(_attn(ctx, f"attn_random{i}", ctx.int(1, 3), ctx.int(1, 20), H * D, H, ctx.int(1, 8),
                             float(ctx.int(1, 32)), dtype, rs=bool(ctx.int(0, 1))))
        out.append(_merge(ctx, "merge_random", ctx.int(1, 3), ctx.int(1, 12), 2 * ctx.int(2, 6), 2, ctx.int(1, 6),
                          float(ctx.int(1, 16)), ctx.choice([f64, f32])))
    return out
