"""Probes for `lora_attention` (they run beside the submission and hold no answers).

merge_cycle  delta_weight, outputs and weights through merge, a second merge, unmerge (judged as usual)
own_init     the module as its own __init__ leaves it (no parameters copied in): weights, one output
trainable    which parameters require a gradient, and which got one after a backward pass
dropout      one training-mode forward of a LoRALinear with dropout, with its weights and input"""
import torch

from attn_drill.room.kit import describe


def merge_cycle(p):
    """q_proj.delta_weight(); forward; merge(); forward; merge() again; forward; unmerge(); forward.
    Also the merged and restored base weights of q_proj and v_proj. A fresh module each call (merging changes it)."""
    m, x = p.build(), p.inputs["x"]
    with torch.no_grad():
        delta = m.q_proj.delta_weight()
        before = m(x)
        m.merge()
        merged = m(x)
        w_q = m.q_proj.base_layer.weight.detach().clone()
        w_v = m.v_proj.base_layer.weight.detach().clone()
        m.merge()
        merged_twice = m(x)
        m.unmerge()
        after = m(x)
        w_q_restored = m.q_proj.base_layer.weight.detach().clone()
    return before, merged, merged_twice, after, w_q, w_v, w_q_restored, delta


def own_init(p):
    m = p.build(params=False)
    x = p.inputs["x"]
    with torch.no_grad():
        y = m(x)
    return {"params": {n: t.detach().clone() for n, t in m.named_parameters()}, "out": y}


def trainable(p):
    m = p.build()
    x = p.inputs["x"]
    before = {n: bool(t.requires_grad) for n, t in m.named_parameters()}
    y = m(x)
    if isinstance(y, torch.Tensor) and y.requires_grad:
        g = torch.randn(y.shape, generator=p.generator(), dtype=torch.float64).to(y.dtype)
        (y * g).sum().backward()
    grads = {n: (None if t.grad is None else t.grad.detach().clone()) for n, t in m.named_parameters()}
    return {"requires_grad": before, "grads": describe(grads)}


def dropout(p):
    """p.args: p (the dropout rate). A LoRALinear in training mode, seeded, called once."""
    m = p.build()
    m.train(True)
    x = p.inputs["x"]
    torch.manual_seed(p.seed)
    with torch.no_grad():
        y = m(x)
    return {"out": y, "x": x, "params": {n: t.detach().clone() for n, t in m.named_parameters()},
            "scaling": describe(getattr(m, "scaling", None))}
