"""Probes for `masks` (they run beside the submission and hold no answers)."""
import torch

from attn_drill.bank.api import padding_mask


def clamped(p):
    """apply_masks, with -inf clamped to a finite floor so outputs and gradients compare cleanly."""
    return p.impl(*p.inputs.values(), **p.kwargs).clamp(min=p.args["floor"])


def empty_rows(p):
    """masked_attention where some query rows keep no key, in float64 and float32: outputs and
    gradients under one upstream gradient, plus which (batch, query) rows are empty."""
    B, H, Lq, Lk, D = 3, 2, 5, 6, 4
    gen = p.generator()
    pad = padding_mask(torch.tensor([6, 3, 0]), Lk)       # batch 2: every key is padding
    keep = torch.rand(B, Lq, Lk, generator=gen) > 0.4
    keep[..., 0] = True
    keep[0, 2] = False                                    # batch 0, query 2: the mask keeps no key
    keep[1, 4, :3] = False                                # batch 1, query 4: keeps only padded keys
    empty = (keep & ~pad[:, None, :]).logical_not().all(dim=-1)    # (B, Lq) rows without a key
    out = {"empty": empty}
    q, k, v = (torch.randn(B, H, n, D, generator=gen, dtype=torch.float64) for n in (Lq, Lk, Lk))
    g = torch.randn(B, H, Lq, D, generator=gen, dtype=torch.float64)
    for dtype in (torch.float64, torch.float32):
        leaves = [t.to(dtype).requires_grad_(True) for t in (q, k, v)]
        name = str(dtype).replace("torch.", "")
        try:
            o = p.target(*leaves, key_padding_mask=pad, attn_mask=keep)
            grads = torch.autograd.grad(o, leaves, g.to(o.dtype), allow_unused=True)
        except Exception as exc:  # noqa: BLE001 - the observation is the error
            out[name] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
            continue
        out[name] = {"out": o.detach(), "grads": list(grads)}
    return out
