"""Cases for `dropout`: eval mode and p = 0 equal plain attention exactly; in training, the attention
weights and the merged heads are dropped at rate p with survivors scaled by 1/(1-p) (statistical checks
on >= 10^5 samples, 6-sigma bounds, seeded)."""
import math

import torch

from attn_drill.bank.api import Case, Ctx, Failure, traits
from attn_drill.i18n import pick

TARGET = "AttentionWithDropout"


def _tensors(obs: dict, *names) -> list:
    """The named tensors of a probe's observation; ValueError when one is missing or not a tensor."""
    got = [obs.get(n) if hasattr(obs, "get") else None for n in names]
    if not all(isinstance(t, torch.Tensor) for t in got):
        raise ValueError(pick("your module's output is missing or not a tensor", "你的模块没有输出，或输出不是张量"))
    return got


def check_eval(sub, ref, case) -> list:
    """Eval mode with large p: no dropout at all, the same answer twice, equal to plain attention."""
    a, b = _tensors(sub, "a", "b")
    want, = _tensors(ref, "a")
    if a.shape != want.shape or b.shape != want.shape:
        return [pick(f"in eval mode the output has shape {list(a.shape)}, expected {list(want.shape)}",
                     f"eval 模式下输出的形状为 {list(a.shape)}，期望 {list(want.shape)}")]
    if not torch.equal(a, b) or not torch.allclose(a, want, rtol=1e-9, atol=1e-12):
        if not torch.equal(a, b):
            return [Failure(pick("in eval mode (model.eval()) two calls gave different outputs: dropout is still "
                                 "active. nn.Dropout switches itself off in eval; F.dropout needs "
                                 "training=self.training",
                                 "eval 模式（model.eval()）下两次调用的输出不同：dropout 仍在生效。nn.Dropout 在 "
                                 "eval 模式下会自动关闭；F.dropout 需要传入 training=self.training"),
                            mistake="dropout_in_eval")]
        err = float((a - want).abs().max())
        return [pick(f"in eval mode with attn_dropout=output_dropout=0.5 the output differs from attention without "
                     f"dropout by up to {err:.3g}",
                     f"eval 模式下（attn_dropout=output_dropout=0.5），输出与不带 dropout 的注意力最多相差 {err:.3g}")]
    return []


def _share_bound(p: float, n: int) -> float:
    return 6.0 * math.sqrt(p * (1 - p) / n) + 1.0 / n


def check_attention_weights(sub, ref, case) -> list:
    """sub: the probe `train_weights` (see there how the dropped weights are read off the output);
    the weights w themselves come from the reference's side."""
    p = case.probe_args["p"]
    out, = _tensors(sub, "out")
    w, = _tensors(ref, "w")
    B, L, H, D = ref["sizes"]
    E = H * D
    if tuple(out.shape) != (B, L, E):
        return [pick(f"in training the output has shape {list(out.shape)}, expected {[B, L, E]}",
                     f"训练模式下输出的形状为 {list(out.shape)}，期望 {[B, L, E]}")]
    out = out.double()
    merged = out.view(B, L, H, D).transpose(1, 2)                  # (B, H, L, D)
    got = merged[..., :L]                                          # (B, H, L, L): dropped weights
    total = merged[..., D - 1]                                     # (B, H, L): their row sums
    ww = w.expand_as(got)
    n = got.numel()
    if torch.allclose(got, ww, rtol=1e-9, atol=1e-12):
        return [Failure(pick(f"with attn_dropout={p} in training, the attention weights were not dropped at all",
                             f"训练模式下 attn_dropout={p}，注意力权重却完全没有被 dropout"),
                        mistake="attn_dropout_missing")]
    zero = got.abs() <= 1e-12 * ww
    share = float(zero.double().mean())
    if share == 0.0 and torch.allclose(got.sum(-1), torch.ones_like(total), rtol=1e-9):
        return [Failure(pick(f"with attn_dropout={p} no attention weight is zero and every row still sums to 1: "
                             "the dropout ran before the softmax, which renormalised it away",
                             f"attn_dropout={p} 时没有一个注意力权重为零，且每行之和仍为 1：dropout 在 softmax "
                             "之前执行，被 softmax 的归一化抵消了"),
                        mistake="dropout_before_softmax")]
    if abs(share - p) > _share_bound(p, n):
        return [pick(f"with attn_dropout={p}, {share:.4f} of {n} attention weights were zeroed; expected {p} "
                     f"(within {_share_bound(p, n):.4f})",
                     f"attn_dropout={p} 时，{n} 个注意力权重中被置零的比例为 {share:.4f}；期望 {p}"
                     f"（误差不超过 {_share_bound(p, n):.4f}）")]
    ratio = got[~zero] / ww[~zero]
    if torch.allclose(ratio, torch.ones_like(ratio), rtol=1e-9):
        return [Failure(pick(f"the surviving attention weights were not scaled by 1/(1-p) = {1 / (1 - p):.4f}, so the "
                             "expected value of the output shrinks by (1-p)",
                             f"保留下来的注意力权重没有乘以 1/(1-p) = {1 / (1 - p):.4f}，因此输出的期望值"
                             "缩小为原来的 (1-p) 倍"), mistake="attn_dropout_no_rescale")]
    if not torch.allclose(ratio, torch.full_like(ratio, 1 / (1 - p)), rtol=1e-9):
        return [pick(f"surviving attention weights were scaled by {float(ratio.min()):.4f}..{float(ratio.max()):.4f}; "
                     f"expected exactly 1/(1-p) = {1 / (1 - p):.4f}",
                     f"保留下来的注意力权重的缩放倍数为 {float(ratio.min()):.4f}..{float(ratio.max()):.4f}；"
                     f"应恰好为 1/(1-p) = {1 / (1 - p):.4f}")]
    if not torch.allclose(total, got.sum(-1), rtol=1e-9, atol=1e-12):
        return [pick("the dropout mask is not shared by all dims of a value vector: drop attention weights "
                     "(B, H, L, L) after the softmax, not elements of weights @ V",
                     "dropout 掩码没有在一个 value 向量的所有维度间共享：应在 softmax 之后对注意力权重 "
                     "(B, H, L, L) 做 dropout，而不是对 weights @ V 的元素")]
    if not torch.all(merged[..., L:D - 1] == 0):
        return [pick("unexpected values in the output (the value vectors were changed)",
                     "输出中出现了意料之外的值（value 向量被改动了）")]
    return []


def check_output_dropout(sub, ref, case) -> list:
    """attn_dropout = 0, output_dropout = p, orthogonal out_proj W: the merged heads are out @ W.
    They must be zero with probability p and merged_eval / (1-p) otherwise. The eval output and W
    come from the reference's side."""
    p = case.probe_args["p"]
    out, = _tensors(sub, "out")
    plain, w_o = _tensors(ref, "plain", "w_o")
    if out.shape != plain.shape:
        return [pick(f"in training the output has shape {list(out.shape)}, expected {list(plain.shape)}",
                     f"训练模式下输出的形状为 {list(out.shape)}，期望 {list(plain.shape)}")]
    out = out.double()
    merged_eval = plain @ w_o                                        # (B, L, E): before out_proj
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
            return [Failure(pick(f"output_dropout={p} zeroed the final output, after out_proj; this problem applies it "
                                 "to the merged heads, before out_proj",
                                 f"output_dropout={p} 置零的是 out_proj 之后的最终输出；本题要求在 out_proj 之前"
                                 "对合并后的多头输出做 dropout"), mistake="output_dropout_after_proj")]
        if torch.allclose(out, plain, rtol=1e-9, atol=1e-12):
            return [pick(f"with output_dropout={p} in training, nothing was dropped",
                         f"训练模式下 output_dropout={p}，却没有任何元素被 dropout")]
        return [pick(f"with output_dropout={p} in training, no element of the merged heads (the input of out_proj) "
                     "was zeroed",
                     f"训练模式下 output_dropout={p}，合并后的多头输出（out_proj 的输入）却没有任何元素被置零")]
    if abs(share - p) > _share_bound(p, n):
        return [pick(f"with output_dropout={p}, {share:.4f} of {n} merged-head elements were zeroed; expected {p} "
                     f"(within {_share_bound(p, n):.4f})",
                     f"output_dropout={p} 时，合并后多头输出的 {n} 个元素中被置零的比例为 {share:.4f}；期望 {p}"
                     f"（误差不超过 {_share_bound(p, n):.4f}）")]
    ratio = merged[~zero] / merged_eval[~zero]
    if not torch.allclose(ratio, torch.full_like(ratio, 1 / (1 - p)), rtol=1e-7):
        return [pick(f"surviving merged-head elements were scaled by "
                     f"{float(ratio.min()):.4f}..{float(ratio.max()):.4f}; "
                     f"expected exactly 1/(1-p) = {1 / (1 - p):.4f}",
                     f"保留下来的合并多头元素的缩放倍数为 {float(ratio.min()):.4f}..{float(ratio.max()):.4f}；"
                     f"应恰好为 1/(1-p) = {1 / (1 - p):.4f}")]
    return []


def _attn_case(name, p: float, note: str) -> Case:
    return Case(name=name, target=TARGET, probe="train_weights", probe_args={"p": p},
                check=check_attention_weights, grad=False, train=True, deterministic=False, note=note)


def _output_case(name, p: float, note: str) -> Case:
    return Case(name=name, target=TARGET, probe="train_output", probe_args={"p": p},
                check=check_output_dropout, grad=False, train=True, deterministic=False, note=note)


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
                note=" ".join(notes), traits=traits(B=B, L=L, H=H, pad=pad, mask=mask, large_logits=scale > 1))


def cases(ctx: Ctx) -> list[Case]:
    out = [
        Case(name="eval_is_deterministic", target=TARGET, probe="eval_twice", check=check_eval, grad=False,
             note="eval, p=0.5"),
        _case(ctx, "eval_fp64", 2, 7, 3, 5, torch.float64),
        _case(ctx, "eval_b1_fp64", 1, 6, 2, 3, torch.float64, p=(0.5, 0.5)),
        _case(ctx, "eval_l1_fp64", 3, 1, 2, 3, torch.float64, p=(0.5, 0.5)),
        _case(ctx, "eval_random_fp64", ctx.int(2, 4), ctx.int(2, 13), ctx.int(1, 4), ctx.int(2, 6), torch.float64,
              pad=True, mask="random3d"),
        _case(ctx, "eval_long_fp32", ctx.int(1, 2), ctx.int(64, 97), 2, ctx.int(3, 5), torch.float32, pad=True,
              mask="causal"),
        _case(ctx, "eval_pad_fp64", 3, 9, 2, 7, torch.float64, pad=True),
        _case(ctx, "eval_causal_pad_fp32", 2, 6, 4, 5, torch.float32, pad=True, mask="causal"),
        _case(ctx, "eval_mask3d_fp32", 3, 5, 3, 6, torch.float32, mask="random3d"),
        _case(ctx, "eval_large_logits_fp32", 2, 5, 2, 9, torch.float32, scale=60.0),
        _case(ctx, "eval_bf16", 2, 11, 3, 8, torch.bfloat16, pad=True),
        _case(ctx, "train_p0_fp64", 2, 8, 3, 4, torch.float64, p=(0.0, 0.0), train=True, pad=True,
              mask="causal"),
        _attn_case("train_attn_weights", 0.3, "attn p=0.3, 1e5 weights"),
        _output_case("train_output", 0.25, "output p=0.25, 1e5"),
    ]
    if ctx.full:
        for i in range(5):
            B, L, H, D = ctx.int(1, 4), ctx.int(1, 23), ctx.int(1, 5), ctx.int(2, 11)
            dtype = ctx.choice([torch.float64, torch.float32, torch.bfloat16])
            out.append(_case(ctx, f"random_eval{i}", B, L, H, D, dtype, pad=bool(ctx.int(0, 1)),
                             mask=ctx.choice([None, "causal", "random3d"])))
        out.append(_case(ctx, "train_p0_bf16", 2, 10, 2, 6, torch.bfloat16, p=(0.0, 0.0), train=True, pad=True))
        for i, p in enumerate((0.1, 0.5)):
            out.append(_attn_case(f"train_attn_weights_p{i}", p, f"attn p={p}"))
            out.append(_output_case(f"train_output_p{i}", p, f"output p={p}"))
    return out
