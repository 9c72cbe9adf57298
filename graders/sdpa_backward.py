"""Cases for `sdpa_backward`: dQ, dK, dV from a given P, with and without masks, Lq != Lk, dtypes."""
import math

import torch

from attn_drill.bank.api import Case, Ctx, NoAutograd, causal_keep, on_cuda, traits
from attn_drill.i18n import pick

TARGET = "scaled_dot_product_attention_backward"


def _case(ctx: Ctx, name, B, H, Lq, Lk, D, Dv, dtype, mask=None, scale=None, logit=1.0):
    """P is the softmax of scale * Q K^T (masked where `mask` says), built in float64."""
    s = 1.0 / math.sqrt(D) if scale is None else scale
    Q = ctx.randn(B, H, Lq, D, scale=logit)
    K = ctx.randn(B, H, Lk, D)
    V = ctx.randn(B, H, Lk, Dv)
    dO = ctx.randn(B, H, Lq, Dv)
    scores = s * torch.matmul(Q, K.transpose(-2, -1))                   # (B, H, Lq, Lk)
    note = ""
    if mask == "causal":
        scores = scores.masked_fill(~causal_keep(Lq, Lk), float("-inf"))
        note = "causal (bottom-right)"
    elif mask == "pad":
        lengths = ctx.lengths(B, Lk)
        pad = torch.arange(Lk)[None, :] >= lengths[:, None]            # (B, Lk), True = padding
        scores = scores.masked_fill(pad[:, None, None, :], float("-inf"))
        note = "key padding"
    if logit > 1.0:
        note = "large logits: P nearly one-hot"
    P = torch.softmax(scores, dim=-1)
    return Case(name=name, target=TARGET, inputs={"dO": dO, "Q": Q, "K": K, "V": V, "P": P},
                kwargs={"scale": s}, dtype=dtype, grad=False, output_names=("dQ", "dK", "dV"),
                note=note, trace=(NoAutograd(pick("dQ, dK and dV", "dQ、dK 和 dV")),),
                traits=traits(B=B, Lq=Lq, Lk=Lk, D=D, Dv=Dv, H=H, pad=mask == "pad", large_logits=logit > 1,
                              mask="causal" if mask == "causal" else None))


def cases(ctx: Ctx) -> list[Case]:
    out = [
        _case(ctx, "square_fp64", 2, 3, 6, 6, 5, 5, torch.float64),
        _case(ctx, "cross_fp64", 1, 2, 7, 11, 6, 3, torch.float64, scale=0.37),
        _case(ctx, "causal_fp64", 2, 2, 5, 8, 4, 4, torch.float64, mask="causal"),
        _case(ctx, "padding_fp32", 3, 2, 6, 10, 5, 7, torch.float32, mask="pad"),
        _case(ctx, "one_query_fp64", 2, 1, 1, 7, 3, 3, torch.float64, scale=1.3),
        _case(ctx, "large_logits_fp32", 2, 2, 5, 9, 7, 7, torch.float32, logit=40.0),
        _case(ctx, "bf16", 2, 3, 12, 9, 8, 8, torch.bfloat16, mask="pad"),
        _case(ctx, "random_fp64", ctx.int(1, 3), ctx.int(1, 3), ctx.int(2, 13), ctx.int(2, 15), ctx.int(2, 7),
              ctx.int(2, 7), torch.float64, mask="pad"),
        _case(ctx, "long_fp32", 1, 2, ctx.int(64, 81), ctx.int(81, 97), 4, ctx.int(3, 6), torch.float32, mask="causal"),
    ]
    # the GPU tier: a larger causal case in float16 on CUDA
    out.append(on_cuda(_case(ctx, "big_causal", 2, 4, 96, 96, 64, 64, torch.float32, mask="causal"),
                       name="big_causal_cuda_fp16"))
    if ctx.full:
        for i in range(6):
            B, H, Lq, Lk = ctx.int(1, 3), ctx.int(1, 4), ctx.int(1, 17), ctx.int(1, 19)
            D, Dv = ctx.int(2, 9), ctx.int(2, 9)
            mask = ctx.choice([None, "causal", "pad"])
            if mask == "causal":
                Lk = max(Lk, Lq)                      # every query keeps at least one key
            out.append(_case(ctx, f"random{i}", B, H, Lq, Lk, D, Dv,
                             ctx.choice([torch.float64, torch.float32, torch.bfloat16]),
                             mask=mask, scale=ctx.choice([None, 0.5, 1.7])))
    return out
