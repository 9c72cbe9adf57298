"""Probes for `t5_bias` (they run beside the submission and hold no answers)."""
import torch


def bias_grads(p):
    """Whether the bias of a fresh T5RelativeBias(3, 12, 20, True) depends on its parameters."""
    module = p.build(init=dict(num_heads=3, num_buckets=12, max_distance=20, bidirectional=True), params=False)
    module = module.double()
    out = module(9)
    if not isinstance(out, torch.Tensor) or not out.requires_grad:
        return {"requires_grad": False, "any_grad": False}
    params = [q for q in module.parameters() if q.requires_grad]
    g = torch.randn(out.shape, generator=p.generator(), dtype=out.dtype)
    grads = torch.autograd.grad(out, params, g, allow_unused=True)
    return {"requires_grad": True, "any_grad": any(gr is not None and bool(gr.abs().sum() > 0) for gr in grads)}
