"""Cases for `merged_qkv`: fuse_qkv checked directly, the module's outputs and gradients, and a
count of the matrix products its forward runs on the activations."""
import torch
import torch.nn as nn
from torch.overrides import TorchFunctionMode

from attn_drill.api import Case, Ctx, Failure

TARGET = "MergedQKVAttention"
# torch-level functions that run a matrix product (recorded with a TorchFunctionMode: cheap, and
# it sees nn.Linear, @, matmul, einsum and friends before they are decomposed)
GEMMS = {"linear", "matmul", "__matmul__", "__rmatmul__", "mm", "bmm", "addmm", "baddbmm", "addbmm",
         "einsum", "tensordot", "mv", "addmv", "inner", "dot"}


def _close(a: torch.Tensor, b: torch.Tensor, tol: float) -> bool:
    return a.shape == b.shape and bool(((a.double() - b.double()).abs() <= tol * (1 + b.double().abs())).all())


def _check_fuse(sub, ref, case: Case, configs) -> list:
    gen = torch.Generator().manual_seed(case.seed)
    for E_in, E_out, bias, dtype in configs:
        tol = 1e-10 if dtype == torch.float64 else 1e-5
        projs = []
        for _ in range(3):
            lin = nn.Linear(E_in, E_out, bias=bias, dtype=dtype)
            with torch.no_grad():
                lin.weight.copy_(torch.randn(E_out, E_in, generator=gen, dtype=torch.float64))
                if bias:
                    lin.bias.copy_(torch.randn(E_out, generator=gen, dtype=torch.float64))
            projs.append(lin)
        q_proj, k_proj, v_proj = projs
        x = torch.randn(2, 5, E_in, generator=gen, dtype=torch.float64).to(dtype)
        what = f"fuse_qkv(Linear({E_in}, {E_out}, bias={bias}) x 3, {dtype})"
        try:
            fused = sub.fuse_qkv(q_proj, k_proj, v_proj)
        except Exception as exc:
            return [f"{what} raised {type(exc).__name__}: {exc}"]
        if not isinstance(fused, nn.Linear):
            return [f"{what} returned {type(fused).__name__}, expected an nn.Linear"]
        shape = tuple(fused.weight.shape)
        if shape == (E_out, 3 * E_in) and shape != (3 * E_out, E_in):
            return [Failure(f"{what}: the fused weight has shape {shape}, expected {(3 * E_out, E_in)}; "
                            "the three (E_out, E_in) weights were concatenated along dim=1",
                            mistake="concat_wrong_dim")]
        if shape != (3 * E_out, E_in):
            return [f"{what}: the fused weight has shape {shape}, expected {(3 * E_out, E_in)}"]
        if bias and fused.bias is None:
            return [Failure(f"{what}: the projections have biases but the fused layer has none",
                            mistake="bias_dropped")]
        if not bias and fused.bias is not None and bool(fused.bias.detach().ne(0).any()):
            return [f"{what}: the projections have no bias but the fused layer adds a nonzero one"]
        if fused.weight.dtype != dtype:
            return [f"{what}: the fused weight is {fused.weight.dtype}; keep the inputs' dtype {dtype}"]
        if not isinstance(fused.weight, nn.Parameter):
            return [f"{what}: fused.weight is a plain tensor; it must be an nn.Parameter"]
        with torch.no_grad():
            want = [p(x) for p in projs]
            try:
                got = fused(x).split(E_out, dim=-1)
            except Exception as exc:
                return [f"{what}: calling the fused layer raised {type(exc).__name__}: {exc}"]
        if all(_close(g, w, tol) for g, w in zip(got, want)):
            continue
        if _close(got[0], want[1], tol) and _close(got[1], want[0], tol):
            return [Failure(f"{what}: the first third of the output equals k_proj(x) and the second "
                            "q_proj(x); the order must be [Q; K; V]", mistake="wrong_order")]
        wrong = [n for n, g, w in zip("QKV", got, want) if not _close(g, w, tol)]
        if bias and all(_close(g - fused.bias.detach().split(E_out)[i], w - projs[i].bias.detach(), tol)
                        for i, (g, w) in enumerate(zip(got, want))):
            return [Failure(f"{what}: the weights are right but the fused bias is not [b_q; b_k; b_v]",
                            mistake="bias_dropped")]
        return [f"{what}: fused(x).split({E_out}, dim=-1) does not give {', '.join(wrong)} "
                "of the separate projections"]
    return []


class _Calls(TorchFunctionMode):
    """Records each torch function called, with the shapes of its tensor arguments."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        flat = []
        for a in list(args) + list((kwargs or {}).values()):
            flat.extend(a if isinstance(a, (list, tuple)) else [a])
        name = getattr(func, "__name__", str(func))
        self.calls.append((name, [tuple(a.shape) for a in flat if isinstance(a, torch.Tensor)]))
        return func(*args, **(kwargs or {}))


def _check_one_matmul(sub, ref, case: Case) -> list:
    B, L, H, D = 2, 7, 3, 5
    E = H * D
    gen = torch.Generator().manual_seed(case.seed)
    try:
        module = sub.MergedQKVAttention(hidden_dim=E, num_heads=H, dropout=0.0, bias=True).double().eval()
        x = torch.randn(B, L, E, generator=gen, dtype=torch.float64)
        with _Calls() as mode:
            module(x)
    except Exception as exc:
        return [f"MergedQKVAttention({E}, {H}, bias=True) forward raised {type(exc).__name__}: {exc}"]
    on_activations = [name for name, shapes in mode.calls if name in GEMMS
                      and any(s and s[-1] == E and _numel(s) == B * L * E for s in shapes)]
    n = len(on_activations)
    if n == 2:
        return []
    if n >= 4:
        return [Failure(f"the forward ran {n} matrix products on (B*L, E) activations; a fused "
                        "projection runs 2 (qkv_proj and out_proj): Q, K and V were projected "
                        "separately", mistake="three_projection_matmuls")]
    return [f"the forward ran {n} matrix products on (B*L, E) activations ({', '.join(on_activations)}); "
            "expected 2: qkv_proj and out_proj"]


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
                note="+".join(notes) + (" large logits" if scale > 1 else ""))


def cases(ctx: Ctx) -> list[Case]:
    fuse_configs = ((10, 10, True, torch.float64), (7, 7, False, torch.float32),
                    (9, 6, True, torch.float32))
    out = [
        Case(name="fuse_qkv", target="fuse_qkv",
             check=lambda sub, ref, case: _check_fuse(sub, ref, case, fuse_configs),
             note="fused == separate"),
        _case(ctx, "basic_bias_fp64", 2, 7, 3, 5, torch.float64, bias=True),
        _case(ctx, "b1_l1_fp64", 1, 1, 2, 3, torch.float64),
        _case(ctx, "padding_fp64", 3, 9, 2, 7, torch.float64, bias=True, pad=True),
        _case(ctx, "causal_fp32", 2, 6, 4, 5, torch.float32, mask="causal"),
        _case(ctx, "mask3d_pad_fp32", 3, 5, 3, 6, torch.float32, bias=True, pad=True, mask="random3d"),
        _case(ctx, "large_logits_fp32", 2, 5, 2, 9, torch.float32, scale=60.0),
        _case(ctx, "bf16", 2, 11, 3, 8, torch.bfloat16, bias=True, pad=True),
        Case(name="one_projection_matmul", target=TARGET, check=_check_one_matmul,
             note="count of matrix products"),
    ]
    if ctx.full:
        for i in range(6):
            B, L, H, D = ctx.int(1, 4), ctx.int(1, 23), ctx.int(1, 5), ctx.int(2, 11)
            dtype = ctx.choice([torch.float64, torch.float32, torch.bfloat16])
            out.append(_case(ctx, f"random{i}", B, L, H, D, dtype, bias=bool(ctx.int(0, 1)),
                             pad=bool(ctx.int(0, 1)), mask=ctx.choice([None, "causal", "random3d"])))
    return out
