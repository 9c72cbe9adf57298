"""Cases for `merged_qkv`: fuse_qkv checked directly, the module's outputs and gradients, and a
count of the matrix products its forward runs on the activations."""
import torch

from attn_drill.bank.api import Case, Ctx, Failure, traits
from attn_drill.i18n import pick

TARGET = "MergedQKVAttention"
# torch-level functions that run a matrix product (recorded with a TorchFunctionMode: cheap, and
# it sees nn.Linear, @, matmul, einsum and friends before they are decomposed)
GEMMS = {"linear", "matmul", "__matmul__", "__rmatmul__", "mm", "bmm", "addmm", "baddbmm", "addbmm",
         "einsum", "tensordot", "mv", "addmv", "inner", "dot"}


def _close(a: torch.Tensor, b: torch.Tensor, tol: float) -> bool:
    return a.shape == b.shape and bool(((a.double() - b.double()).abs() <= tol * (1 + b.double().abs())).all())


def _check_fuse(sub, ref, case: Case) -> list:
    """sub, ref: the probe `fuse`, one entry per config of case.probe_args["configs"]; the separate
    projections' outputs are taken from the reference's side."""
    for (E_in, E_out, bias, dtype), got, mine in zip(case.probe_args["configs"], sub, ref):
        tol = 1e-10 if dtype == torch.float64 else 1e-5
        what = f"fuse_qkv(Linear({E_in}, {E_out}, bias={bias}) x 3, {dtype})"
        if "error" in got:
            return [pick(f"{what} raised {got['error']}", f"{what} 抛出了 {got['error']}")]
        if not got["is_linear"]:
            return [pick(f"{what} returned {got['type']}, expected an nn.Linear",
                         f"{what} 返回了 {got['type']}，应返回 nn.Linear")]
        shape = tuple(got["weight_shape"])
        if shape == (E_out, 3 * E_in) and shape != (3 * E_out, E_in):
            return [Failure(pick(f"{what}: the fused weight has shape {shape}, expected {(3 * E_out, E_in)}; "
                                 "the three (E_out, E_in) weights were concatenated along dim=1",
                                 f"{what}：融合后的权重形状为 {shape}，应为 {(3 * E_out, E_in)}；"
                                 "三个 (E_out, E_in) 权重被沿 dim=1 拼接了"),
                            mistake="concat_wrong_dim")]
        if shape != (3 * E_out, E_in):
            return [pick(f"{what}: the fused weight has shape {shape}, expected {(3 * E_out, E_in)}",
                         f"{what}：融合后的权重形状为 {shape}，应为 {(3 * E_out, E_in)}")]
        fused_bias = got["bias"]
        if bias and fused_bias is None:
            return [Failure(pick(f"{what}: the projections have biases but the fused layer has none",
                                 f"{what}：各投影都有 bias，但融合后的层没有"),
                            mistake="bias_dropped")]
        if not bias and fused_bias is not None and bool(fused_bias.ne(0).any()):
            return [pick(f"{what}: the projections have no bias but the fused layer adds a nonzero one",
                         f"{what}：各投影都没有 bias，但融合后的层加了一个非零的 bias")]
        if got["weight_dtype"] != dtype:
            return [pick(f"{what}: the fused weight is {got['weight_dtype']}; keep the inputs' dtype {dtype}",
                         f"{what}：融合后的权重是 {got['weight_dtype']}；应保持输入的 dtype {dtype}")]
        if not got["is_parameter"]:
            return [pick(f"{what}: fused.weight is a plain tensor; it must be an nn.Parameter",
                         f"{what}：fused.weight 是普通张量；它必须是 nn.Parameter")]
        if got["call_error"] or not isinstance(got["out"], torch.Tensor) or got["out"].shape[-1] != 3 * E_out:
            return [pick(f"{what}: calling the fused layer raised {got['call_error']}",
                         f"{what}：调用融合后的层抛出了 {got['call_error']}") if got["call_error"] else
                    pick(f"{what}: the fused layer's output has the wrong shape",
                         f"{what}：融合后的层的输出形状不对")]
        out = got["out"].split(E_out, dim=-1)
        want = mine["want"]
        if all(_close(g, w, tol) for g, w in zip(out, want)):
            continue
        if _close(out[0], want[1], tol) and _close(out[1], want[0], tol):
            return [Failure(pick(f"{what}: the first third of the output equals k_proj(x) and the second "
                                 "q_proj(x); the order must be [Q; K; V]",
                                 f"{what}：输出的第一个三分之一等于 k_proj(x)，第二个等于 q_proj(x)；"
                                 "顺序必须是 [Q; K; V]"), mistake="wrong_order")]
        wrong = [n for n, g, w in zip("QKV", out, want) if not _close(g, w, tol)]
        if bias and fused_bias is not None and all(
                _close(g - fused_bias.split(E_out)[i], w - mine["biases"][i], tol)
                for i, (g, w) in enumerate(zip(out, want))):
            # the weights are right: the bias is left at zero, stacked in another order, or else wrong
            blocks, biases = fused_bias.split(E_out), mine["biases"]
            if not bool(fused_bias.ne(0).any()):
                mistake = "bias_dropped"
            elif all(any(_close(b, r, tol) for r in biases) for b in blocks):
                mistake = "bias_order"
            else:
                mistake = None
            return [Failure(pick(f"{what}: the weights are right but the fused bias is not [b_q; b_k; b_v]",
                                 f"{what}：权重正确，但融合后的 bias 不是 [b_q; b_k; b_v]"),
                            mistake=mistake)]
        return [pick(f"{what}: fused(x).split({E_out}, dim=-1) does not give {', '.join(wrong)} "
                     "of the separate projections",
                     f"{what}：fused(x).split({E_out}, dim=-1) 得到的 {', '.join(wrong)} "
                     "与分开的投影结果不一致")]
    return []


def _check_one_matmul(sub, ref, case: Case) -> list:
    """sub: the probe `gemm_calls`: (name, argument shapes) of each torch function the forward called."""
    B, L, H, D = case.probe_args["sizes"]
    E = H * D
    # a projection, however it is laid out (x @ W.T, W @ x.transpose(1, 2), a slice of the weight):
    # a product of the B*L*E activations with an (E, E), (2E, E) or (3E, E) weight
    weights = {E * E, 2 * E * E, 3 * E * E}
    on_activations = [name for name, shapes in sub if name in GEMMS
                      and any(_numel(s) == B * L * E for s in shapes) and any(_numel(s) in weights for s in shapes)]
    n = len(on_activations)
    if n == 2:
        return []
    if n >= 4:
        return [Failure(pick(f"the forward ran {n} matrix products on (B*L, E) activations; a fused "
                             "projection runs 2 (qkv_proj and out_proj): Q, K and V were projected "
                             "separately",
                             f"forward 在 (B*L, E) 的激活上做了 {n} 次矩阵乘法；融合投影只需要 2 次"
                             "（qkv_proj 和 out_proj）：Q、K、V 是分别投影的"),
                        mistake="three_projection_matmuls")]
    return [pick(f"the forward ran {n} matrix products on (B*L, E) activations ({', '.join(on_activations)}); "
                 "expected 2: qkv_proj and out_proj",
                 f"forward 在 (B*L, E) 的激活上做了 {n} 次矩阵乘法（{', '.join(on_activations)}）；"
                 "应为 2 次：qkv_proj 和 out_proj")]


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _case(ctx: Ctx, name, B, L, H, D, dtype, bias=False, pad=False, mask=None, scale=1.0) -> Case:
    E = H * D
    kwargs, notes = {}, []
    more, words = ctx.masks(B, L, pad, mask)
    kwargs.update(more)
    notes += words
    if bias:
        notes.append("bias")
    return Case(name=name, target=TARGET, init=dict(hidden_dim=E, num_heads=H, dropout=0.0, bias=bias),
                inputs={"x": ctx.randn(B, L, E, scale=scale)}, kwargs=kwargs, dtype=dtype,
                note="+".join(notes) + (" large logits" if scale > 1 else ""),
                traits=traits(B=B, L=L, H=H, pad=pad, mask=mask, large_logits=scale > 1))


def cases(ctx: Ctx) -> list[Case]:
    fuse_configs = ((10, 10, True, torch.float64), (7, 7, False, torch.float32),
                    (9, 6, True, torch.float32))
    out = [
        Case(name="fuse_qkv", target="fuse_qkv", probe="fuse", probe_args={"configs": fuse_configs},
             check=_check_fuse, note="fused == separate"),
        _case(ctx, "basic_bias_fp64", 2, 7, 3, 5, torch.float64, bias=True),
        _case(ctx, "b1_fp64", 1, 6, 2, 3, torch.float64),
        _case(ctx, "l1_fp64", 3, 1, 2, 3, torch.float64, bias=True),
        _case(ctx, "padding_fp64", 3, 9, 2, 7, torch.float64, bias=True, pad=True),
        _case(ctx, "causal_fp32", 2, 6, 4, 5, torch.float32, mask="causal"),
        _case(ctx, "mask3d_pad_fp32", 3, 5, 3, 6, torch.float32, bias=True, pad=True, mask="random3d"),
        _case(ctx, "large_logits_fp32", 2, 5, 2, 9, torch.float32, scale=60.0),
        _case(ctx, "bf16", 2, 11, 3, 8, torch.bfloat16, bias=True, pad=True),
        _case(ctx, "random_fp64", ctx.int(2, 4), ctx.int(2, 13), ctx.int(1, 4), ctx.int(2, 7), torch.float64,
              bias=bool(ctx.int(0, 1)), pad=True, mask="random3d"),
        _case(ctx, "long_fp32", ctx.int(1, 2), ctx.int(64, 97), 2, ctx.int(3, 5), torch.float32, bias=True, pad=True,
              mask="causal"),
        Case(name="one_projection_matmul", target=TARGET, probe="gemm_calls", probe_args={"sizes": (2, 7, 3, 5)},
             check=_check_one_matmul, note="count of matrix products"),
    ]
    if ctx.full:
        for i in range(6):
            B, L, H, D = ctx.int(1, 4), ctx.int(1, 23), ctx.int(1, 5), ctx.int(2, 11)
            dtype = ctx.choice([torch.float64, torch.float32, torch.bfloat16])
            out.append(_case(ctx, f"random{i}", B, L, H, D, dtype, bias=bool(ctx.int(0, 1)),
                             pad=bool(ctx.int(0, 1)), mask=ctx.choice([None, "causal", "random3d"])))
    return out
