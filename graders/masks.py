"""Cases for `masks`: apply_masks (masked scores), masked_attention (outputs and gradients), and the
stated rule for query rows that keep no key, checked on its own."""
import torch

from attn_drill.bank.api import Case, Ctx, Failure, causal_keep, padding_mask, type_name, traits
from attn_drill.i18n import pick

NEG = -1e4  # apply_masks' -inf entries are compared after clamping to this value


def _keep3d(ctx: Ctx, B: int, Lq: int, Lk: int) -> torch.Tensor:
    keep = ctx.rand(B, Lq, Lk) > 0.4
    keep[..., 0] = True                    # key 0 is never padded: no query row is left without a key
    return keep


def _keep2d(ctx: Ctx, Lq: int, Lk: int) -> torch.Tensor:
    keep = ctx.rand(Lq, Lk) > 0.4
    keep[:, 0] = True
    return keep


def _masks(ctx: Ctx, B, Lq, Lk, pad, mask):
    kwargs, notes = {}, []
    if pad:
        kwargs["key_padding_mask"] = padding_mask(ctx.lengths(B, Lk), Lk)
        notes.append("pad")
    if mask == "2d":
        kwargs["attn_mask"] = _keep2d(ctx, Lq, Lk)
        notes.append("2-D mask")
    elif mask == "2d_int":
        keep = causal_keep(Lq, Lk).long()                       # 0/1 integers, 1 = keep
        keep[:, 0] = 1                                          # also when Lk < Lq: no empty row
        kwargs["attn_mask"] = keep
        notes.append("2-D 0/1 causal mask")
    elif mask == "3d":
        kwargs["attn_mask"] = _keep3d(ctx, B, Lq, Lk)
        notes.append("3-D mask")
    return kwargs, notes


def _scores_case(ctx: Ctx, name, B, H, Lq, Lk, dtype, pad=False, mask=None) -> Case:
    kwargs, notes = _masks(ctx, B, Lq, Lk, pad, mask)
    return Case(name=name, target="apply_masks", inputs={"attn_scores": ctx.randn(B, H, Lq, Lk)},
                kwargs=kwargs, dtype=dtype, probe="clamped", probe_args={"floor": NEG},
                note="+".join(notes) + " (scores)")


def _attn_case(ctx: Ctx, name, B, H, Lq, Lk, D, dtype, pad=False, mask=None, scale=1.0) -> Case:
    kwargs, notes = _masks(ctx, B, Lq, Lk, pad, mask)
    inputs = {"q": ctx.randn(B, H, Lq, D, scale=scale), "k": ctx.randn(B, H, Lk, D, scale=scale),
              "v": ctx.randn(B, H, Lk, D)}
    return Case(name=name, target="masked_attention", inputs=inputs, kwargs=kwargs, dtype=dtype,
                note="+".join(notes) + (" large logits" if scale > 1 else ""),
                traits=traits(B=B, Lq=Lq, Lk=Lk, H=H, pad=pad, large_logits=scale > 1,
                              mask="mask3d" if mask == "3d" else ("causal" if mask == "2d_int" else None)))


def _check_empty_rows(sub, ref, case: Case) -> list:
    """The rule: a query row with no kept key outputs exactly 0, and all gradients are finite.
    sub, ref: the probe `empty_rows` (float64 and float32 runs); the float64 reference is the truth."""
    fails = []
    want = ref["float64"]
    if "error" in want:
        raise AssertionError(f"grader: the reference fails on fully masked rows: {want['error']}")
    empty = ref["empty"]
    where = [tuple(i) for i in empty.nonzero().tolist()]
    for dtype, tol in (("float64", 1e-9), ("float32", 1e-4)):
        got = sub.get(dtype) if isinstance(sub, dict) else None
        if not isinstance(got, dict):
            return [pick("masked_attention with fully masked rows returned nothing that can be checked",
                         "masked_attention 在含整行被屏蔽的输入上没有返回可检查的内容")]
        if "error" in got:
            return [pick(f"masked_attention with fully masked rows raised {got['error']}",
                         f"masked_attention 在含整行被屏蔽的输入上抛出了 {got['error']}")]
        out = got.get("out")
        if not isinstance(out, torch.Tensor) or tuple(out.shape) != tuple(want["out"].shape):
            shape = list(out.shape) if isinstance(out, torch.Tensor) else type_name(out)
            return [pick(f"masked_attention returned {shape}, expected shape {list(want['out'].shape)}",
                         f"masked_attention 返回了 {shape}，期望形状为 {list(want['out'].shape)}")]
        o = out.detach().double().permute(0, 2, 1, 3)                  # (B, Lq, H, D)
        w = want["out"].permute(0, 2, 1, 3)
        err = (o[~empty] - w[~empty]).abs().max().item()
        if not err <= tol * (1 + w.abs().max().item()):
            return [pick(f"{dtype}: on query rows that keep at least one key the output differs from the "
                         f"reference by {err:.3g} (fully masked rows case)",
                         f"{dtype}：在至少保留一个 key 的 query 行上，输出与参考实现相差 {err:.3g}"
                         f"（整行被屏蔽用例）")]
        rows = o[empty]                                                # (n_empty, H, D)
        if not torch.isfinite(rows).all():
            return [Failure(pick(f"{dtype}: query rows without a kept key (batch, query) = {where} output NaN; "
                                 "the rule is exactly 0 there",
                                 f"{dtype}：没有保留任何 key 的 query 行 (batch, query) = {where} 输出了 NaN；"
                                 "规则要求这些行恰好为 0"), mistake="nan_on_fully_masked_rows")]
        if rows.abs().max() != 0:
            return [Failure(pick(f"{dtype}: query rows without a kept key {where} output nonzero values "
                                 f"(max |out| = {rows.abs().max():.3g}), e.g. the mean of V; the rule is "
                                 "exactly 0 there",
                                 f"{dtype}：没有保留任何 key 的 query 行 {where} 输出了非零值"
                                 f"（max |out| = {rows.abs().max():.3g}），例如 V 的平均值；规则要求这些行恰好为 0"),
                            mistake="finite_fill_value")]
        for name, want_grad in zip("qkv", want["grads"]):
            grads = got.get("grads") or [None, None, None]
            grad = grads["qkv".index(name)] if len(grads) == 3 else None
            if not isinstance(grad, torch.Tensor) or grad.shape != want_grad.shape:
                grad = torch.zeros_like(want_grad)
            if not torch.isfinite(grad).all():
                return [Failure(pick(f"{dtype}: d{name} has NaN/inf entries; with a query row without a "
                                     "kept key, gradients must stay finite",
                                     f"{dtype}：d{name} 中有 NaN/inf；即使有 query 行没有保留任何 key，"
                                     "梯度也必须保持有限"), mistake="nan_on_fully_masked_rows")]
            err = (grad.double() - want_grad).abs().max().item()
            if err > tol * (1 + want_grad.abs().max().item()):
                fails.append(pick(f"{dtype}: d{name} differs from the reference by {err:.3g} "
                                  "(fully masked rows case)",
                                  f"{dtype}：d{name} 与参考实现相差 {err:.3g}（整行被屏蔽用例）"))
        if fails:
            return fails
    return fails


def cases(ctx: Ctx) -> list[Case]:
    out = [
        _scores_case(ctx, "scores_pad_fp64", 3, 2, 7, 7, torch.float64, pad=True),
        _scores_case(ctx, "scores_3d_pad_fp32", 3, 3, 5, 6, torch.float32, pad=True, mask="3d"),
        _scores_case(ctx, "scores_2d_int_fp64", 2, 4, 3, 8, torch.float64, mask="2d_int"),
        _attn_case(ctx, "attn_pad_fp64", 3, 2, 6, 9, 5, torch.float64, pad=True),
        _attn_case(ctx, "attn_2d_pad_fp64", 2, 3, 5, 7, 3, torch.float64, pad=True, mask="2d"),
        _attn_case(ctx, "attn_3d_pad_fp32", 4, 2, 7, 5, 6, torch.float32, pad=True, mask="3d"),
        _attn_case(ctx, "attn_b1_lq1_fp64", 1, 2, 1, 6, 4, torch.float64, mask="2d"),
        _attn_case(ctx, "attn_large_logits_fp32", 2, 2, 5, 6, 7, torch.float32, pad=True, scale=30.0),
        _attn_case(ctx, "attn_bf16", 3, 2, 8, 10, 6, torch.bfloat16, pad=True, mask="3d"),
        _attn_case(ctx, "attn_random_fp64", ctx.int(2, 4), ctx.int(1, 3), ctx.int(2, 12), ctx.int(2, 13),
                   ctx.int(2, 7), torch.float64, pad=True, mask="3d"),
        _attn_case(ctx, "attn_long_fp32", 1, 2, ctx.int(64, 81), ctx.int(64, 97), ctx.int(3, 5), torch.float32,
                   pad=True, mask="2d"),
        Case(name="fully_masked_rows", target="masked_attention", probe="empty_rows", check=_check_empty_rows,
             note="rows without a key -> 0"),
    ]
    if ctx.full:
        for i in range(6):
            B, H, Lq, Lk, D = ctx.int(1, 4), ctx.int(1, 4), ctx.int(1, 13), ctx.int(1, 13), ctx.int(2, 9)
            dtype = ctx.choice([torch.float64, torch.float32, torch.bfloat16])
            mask = ctx.choice([None, "2d", "2d_int", "3d"])
            pad = bool(ctx.int(0, 1))
            if i % 3 == 0:
                out.append(_scores_case(ctx, f"random{i}", B, H, Lq, Lk, dtype, pad=pad, mask=mask))
            else:
                out.append(_attn_case(ctx, f"random{i}", B, H, Lq, Lk, D, dtype, pad=pad, mask=mask))
    return out
