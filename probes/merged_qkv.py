"""Probes for `merged_qkv` (they run beside the submission and hold no answers)."""
import torch
import torch.nn as nn

from attn_drill.room import kit


def fuse(p):
    """fuse_qkv on three random nn.Linear projections per config: what it returned, and its output
    beside the three projections' outputs on one input."""
    gen = p.generator()
    out = []
    for E_in, E_out, bias, dtype in p.args["configs"]:
        projs = []
        for _ in range(3):
            lin = nn.Linear(E_in, E_out, bias=bias, dtype=dtype)
            with torch.no_grad():
                lin.weight.copy_(torch.randn(E_out, E_in, generator=gen, dtype=torch.float64))
                if bias:
                    lin.bias.copy_(torch.randn(E_out, generator=gen, dtype=torch.float64))
            projs.append(lin)
        x = torch.randn(2, 5, E_in, generator=gen, dtype=torch.float64).to(dtype)
        row = {"want": [q(x).detach() for q in projs], "biases": [q.bias.detach() if bias else None for q in projs]}
        r = kit.attempt(p.target, *projs)
        if "error" in r:
            row["error"] = f"{r['error']}: {r['message']}"
            out.append(row)
            continue
        fused = r["value"]
        row["type"] = type(fused).__name__
        row["is_linear"] = isinstance(fused, nn.Linear)
        if row["is_linear"]:
            w, b = fused.weight, fused.bias
            row.update(weight_shape=list(w.shape), weight_dtype=w.dtype, is_parameter=isinstance(w, nn.Parameter),
                       bias=None if b is None else b.detach())
            with torch.no_grad():
                y = kit.attempt(fused, x)
            row["out"] = y["value"].detach() if "value" in y else None
            row["call_error"] = None if "value" in y else f"{y['error']}: {y['message']}"
        out.append(row)
    return out


def gemm_calls(p):
    """The torch functions (with argument shapes) one forward of MergedQKVAttention(E, H, bias=True) calls."""
    B, L, H, D = p.args["sizes"]
    E = H * D
    module = p.target(hidden_dim=E, num_heads=H, dropout=0.0, bias=True).double().eval()
    x = torch.randn(B, L, E, generator=p.generator(), dtype=torch.float64)
    with kit.torch_calls() as mode:
        module(x)
    return mode.calls
