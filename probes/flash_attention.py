"""Probes for `flash_attention` (they run beside the submission and hold no answers)."""
import torch


def gradcheck(p):
    """torch.autograd.gradcheck of the submission's own backward against finite differences of its forward."""
    Q, K, V = (p.inputs[n].to(torch.float64).detach().clone().requires_grad_() for n in ("Q", "K", "V"))

    def fn(q, k, v):
        return p.target(q, k, v, **p.kwargs)

    return bool(torch.autograd.gradcheck(fn, (Q, K, V), fast_mode=True, raise_exception=False))


def saved(p):
    """What the forward keeps for backward: shapes of saved tensors (hooks and ctx attributes), the
    output's grad_fn, and whether FlashAttention is a torch.autograd.Function."""
    Q, K, V = (p.inputs[n].detach().clone().requires_grad_() for n in ("Q", "K", "V"))
    shapes = []

    def pack(t):
        shapes.append(list(t.shape))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = p.target(Q, K, V, **p.kwargs)
    fn = getattr(p.module, "FlashAttention", None)
    obs = {"is_tensor": isinstance(out, torch.Tensor),
           "grad_fn": type(out.grad_fn).__name__ if isinstance(out, torch.Tensor) and out.grad_fn is not None else None,
           "is_function": isinstance(fn, type) and issubclass(fn, torch.autograd.Function)}

    def tensors(value):                  # tensors kept on ctx as attributes, also inside lists
        if isinstance(value, torch.Tensor):
            yield list(value.shape)
        elif isinstance(value, (list, tuple)):
            for v in value:
                yield from tensors(v)
        elif isinstance(value, dict):
            for v in value.values():
                yield from tensors(v)

    if isinstance(out, torch.Tensor) and out.grad_fn is not None and hasattr(out.grad_fn, "__dict__"):
        for value in vars(out.grad_fn).values():
            shapes.extend(tensors(value))
    obs["shapes"] = shapes
    return obs
