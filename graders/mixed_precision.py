"""Cases for `mixed_precision`: autocast on CPU (bfloat16, float16), float32 attention core checked
on the ops the submission runs, a large-logit float16 case that overflows without the upcast,
and float16/bfloat16 CUDA cases when a GPU is present."""
from __future__ import annotations

import torch

from attn_drill.bank.api import Case, Ctx, Failure, OpInputDtype, traits
from attn_drill.i18n import pick

TARGET = "MixedPrecisionAttention"
# the property, however it is written: every softmax (or the exp of a hand-written one) and every
# batched matmul of the core receive float32
CORE_FP32 = (OpInputDtype(("softmax", "exp"), torch.float32), OpInputDtype("bmm", torch.float32))


def autocast_check(sub, ref, case):
    """float32 master weights and inputs: the module must turn autocast on for x's device itself,
    with torch.autocast, and hand back x's dtype, within the low-precision error of the reference.
    sub, ref: the probe `autocast_forward`; case.truth_obs: the reference's forward in float64."""
    amp = case.init["amp_dtype"]
    x = case.inputs["x"]
    amp_name = str(amp).replace("torch.", "")
    warned = [w for w in sub["warnings"] if isinstance(w, list) and len(w) == 2]
    deprecated = [m for cat, m in warned if cat == "FutureWarning" and ".amp." in m]
    if deprecated:
        return [Failure(pick(f"your module used a deprecated autocast API ({deprecated[0][:120]}); "
                             f"use torch.autocast(device_type=x.device.type, dtype=...)",
                             f"你的模块使用了已弃用的 autocast API（{deprecated[0][:120]}）；"
                             f"请使用 torch.autocast(device_type=x.device.type, dtype=...)"),
                        mistake="deprecated_cuda_amp")]
    failures: list = []
    mm = [str(d) for d in sub["mm"]]
    if not mm or any(d != amp_name for d in mm):
        seen = sorted(set(mm)) or ["none"]
        told = [m[:120] for _, m in warned if "autocast" in m.lower()]
        failures.append(Failure(pick(
            f"with float32 weights and input on cpu, the projections ran in {', '.join(seen)}, "
            f"not {amp_name}: autocast was not active for this device"
            + (f" (torch warned: {told[0]})" if told else "")
            + "; open torch.autocast(device_type=x.device.type, dtype=self.amp_dtype)",
            f"权重和输入都是 float32 且在 cpu 上时，投影是在 {', '.join(seen)} 中计算的，"
            f"而不是 {amp_name}：autocast 没有在这个设备上生效"
            + (f"（torch 警告：{told[0]}）" if told else "")
            + "；请开启 torch.autocast(device_type=x.device.type, dtype=self.amp_dtype)"),
            mistake="autocast_hardcoded_cuda"))
    out = sub["out"]
    if not isinstance(out, torch.Tensor) or out.shape != x.shape:
        return failures + [pick(f"the output should be a tensor of shape {tuple(x.shape)}",
                                f"输出应为形状 {tuple(x.shape)} 的张量")]
    if out.dtype != torch.float32:
        failures.append(Failure(pick(f"the output is {out.dtype} for a torch.float32 input; cast it back with "
                                     f".to(x.dtype) after the autocast region",
                                     f"输入是 torch.float32，输出却是 {out.dtype}；请在 autocast 区域之后用 "
                                     f".to(x.dtype) 转回去"), mistake="output_dtype_not_restored"))
    truth = case.truth_obs["out"].double()
    ref_err = (ref["out"].double() - truth).abs().max().item()
    err = (out.double() - truth).abs().max().item()
    if not err <= 2 * ref_err + 1e-5:
        failures.append(pick(f"max error to the float64 result is {err:.3g}; the reference under the same autocast "
                             f"is off by {ref_err:.3g} (allowed {2 * ref_err + 1e-5:.3g})",
                             f"与 float64 结果的最大误差为 {err:.3g}；参考实现在同样的 autocast 下误差为 "
                             f"{ref_err:.3g}（允许 {2 * ref_err + 1e-5:.3g}）"))
    return failures


def _case(ctx: Ctx, name, B, L, H, D, dtype, amp=torch.bfloat16, pad=False, mask=None, scale=1.0,
          device="cpu", autocast=None, trace=CORE_FP32, grad=True):
    E = H * D
    kwargs, notes = {}, [f"amp {str(amp).replace('torch.', '')}"]
    more, words = ctx.masks(B, L, pad, mask)
    kwargs.update(more)
    notes += words
    if scale > 1:
        notes.append("large logits")
    return Case(name=name, target=TARGET, init=dict(hidden_dim=E, num_heads=H, dropout=0.0, amp_dtype=amp),
                inputs={"x": ctx.randn(B, L, E, scale=scale)}, kwargs=kwargs, dtype=dtype, device=device,
                autocast=autocast, trace=trace, grad=grad, note="+".join(notes),
                cuda_reason=pick("float16/bfloat16 autocast on a GPU", "需要在 GPU 上做 float16/bfloat16 autocast"),
                traits=traits(B=B, L=L, H=H, pad=pad, mask=mask, large_logits=scale > 1))


def cases(ctx: Ctx) -> list[Case]:
    out = [
        Case(name="autocast_fp32_master", target=TARGET,
             init=dict(hidden_dim=12, num_heads=3, dropout=0.0, amp_dtype=torch.bfloat16),
             inputs={"x": ctx.randn(2, 5, 12)}, dtype=torch.float32, probe="autocast_forward", check=autocast_check,
             note="fp32 weights+input: projections in bf16, output fp32"),
        _case(ctx, "basic_bf16", 2, 7, 3, 8, torch.bfloat16),
        _case(ctx, "padding_bf16", 3, 9, 2, 6, torch.bfloat16, pad=True),
        _case(ctx, "b1_bf16", 1, 6, 2, 5, torch.bfloat16),
        _case(ctx, "l1_bf16", 3, 1, 2, 5, torch.bfloat16),
        _case(ctx, "random_bf16", ctx.int(2, 4), ctx.int(2, 13), ctx.int(1, 4), ctx.int(2, 7), torch.bfloat16, pad=True,
              mask="random3d"),
        _case(ctx, "long_bf16", ctx.int(1, 2), ctx.int(64, 97), 2, ctx.int(3, 6), torch.bfloat16, pad=True,
              mask="causal"),
        _case(ctx, "mask3d_bf16", 2, 6, 3, 5, torch.bfloat16, pad=True, mask="random3d"),
        _case(ctx, "large_logits_bf16", 2, 6, 2, 9, torch.bfloat16, scale=60.0, grad=False),
        _case(ctx, "outer_autocast_bf16", 2, 5, 2, 7, torch.bfloat16, mask="causal", autocast=torch.bfloat16),
        _case(ctx, "fp16_causal", 2, 8, 3, 7, torch.float16, amp=torch.float16, mask="causal"),
        # forward only: gradients through a float16 softmax of logits this large overflow, the reference's too
        _case(ctx, "fp16_overflow", 2, 7, 3, 8, torch.float16, amp=torch.float16, scale=200.0, grad=False),
        _case(ctx, "fp64_passthrough", 2, 5, 3, 4, torch.float64, trace=()),
        _case(ctx, "cuda_fp16_overflow", 2, 13, 4, 16, torch.float16, amp=torch.float16, scale=200.0,
              device="cuda", trace=()),
        _case(ctx, "cuda_bf16_pad", 3, 11, 2, 24, torch.bfloat16, pad=True, device="cuda", trace=()),
    ]
    if ctx.full:
        for i in range(5):
            B, L, H, D = ctx.int(1, 4), ctx.int(1, 17), ctx.int(1, 4), ctx.int(2, 11)
            amp = ctx.choice([torch.bfloat16, torch.float16])
            out.append(_case(ctx, f"random{i}", B, L, H, D, amp, amp=amp, pad=bool(ctx.int(0, 1)),
                             mask=ctx.choice([None, "causal", "random3d"])))
    return out
