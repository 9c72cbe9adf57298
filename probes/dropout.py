"""Probes for `dropout` (they run beside the submission and hold no answers).

Each builds the module with weights made here from the case seed, so that what dropout did can be
read off the output; the check in graders/dropout.py does the statistics."""
import math

import torch

TARGET = "AttentionWithDropout"


def _build(p, E, H, p_attn, p_out, state):
    m = getattr(p.module, TARGET)(hidden_dim=E, num_heads=H, attn_dropout=p_attn, output_dropout=p_out)
    m = m.double()
    own = dict(m.named_parameters())
    with torch.no_grad():
        if "qkv_proj.weight" in own:
            own["qkv_proj.weight"].copy_(state["qkv_proj.weight"])
        elif all(f"{n}_proj.weight" in own for n in "qkv"):
            for n, w in zip("qkv", state["qkv_proj.weight"].chunk(3, dim=0)):
                own[f"{n}_proj.weight"].copy_(w)
        else:
            raise AttributeError("the module needs qkv_proj (or q_proj, k_proj, v_proj) as stated")
        if "out_proj.weight" not in own:
            raise AttributeError("the module needs out_proj = nn.Linear(hidden_dim, hidden_dim, bias=False)")
        own["out_proj.weight"].copy_(state["out_proj.weight"])
    return m


def _state(E, gen, w_qk_scale=1.0, w_v=None, w_o=None):
    w = torch.randn(3 * E, E, generator=gen, dtype=torch.float64) / math.sqrt(E)
    w[: 2 * E] *= w_qk_scale
    if w_v is not None:
        w[2 * E:] = w_v
    if w_o is None:
        w_o = torch.randn(E, E, generator=gen, dtype=torch.float64) / math.sqrt(E)
    return {"qkv_proj.weight": w, "out_proj.weight": w_o}


def eval_twice(p):
    """Eval mode with dropout 0.5 everywhere: two calls on the same input."""
    gen = p.generator()
    E, H, B, L = 12, 3, 2, 7
    state = _state(E, gen)
    x = torch.randn(B, L, E, generator=gen, dtype=torch.float64)
    m = _build(p, E, H, 0.5, 0.5, state).eval()
    torch.manual_seed(p.seed)
    return {"a": m(x).detach(), "b": m(x).detach()}


def train_weights(p):
    """Reads the dropped attention weights straight off the output: one-hot inputs, V = [one-hot | 1],
    out_proj = identity, output_dropout = 0. Then merged[b, i, h*D + j] = drop(w)[b, h, i, j] and
    merged[b, i, h*D + D-1] = sum_j drop(w)[b, h, i, j]. Also returns w itself."""
    rate = p.args["p"]
    gen = p.generator()
    B, L, H, D = 240, 12, 3, 14
    E = H * D
    w_v = torch.zeros(E, E, dtype=torch.float64)
    for h in range(H):
        w_v[h * D + torch.arange(L), torch.arange(L)] = 1.0        # v_j = e_j in every head
        w_v[h * D + D - 1, :L] = 1.0                               # and a constant 1 in the head's last dim
    state = _state(E, gen, w_qk_scale=2.0, w_v=w_v, w_o=torch.eye(E, dtype=torch.float64))
    x = torch.eye(E, dtype=torch.float64)[:L].expand(B, L, E).clone()   # x_j = e_j
    wq, wk = state["qkv_proj.weight"][:E], state["qkv_proj.weight"][E:2 * E]
    q = (x[0] @ wq.T).view(L, H, D).transpose(0, 1)                # (H, L, D)
    k = (x[0] @ wk.T).view(L, H, D).transpose(0, 1)                # (H, L, D)
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(D), dim=-1)   # (H, L, L), all > 0
    m = _build(p, E, H, rate, 0.0, state).train()
    torch.manual_seed(p.seed)
    with torch.no_grad():
        out = m(x)                                                 # (B, L, E)
    return {"out": out, "w": w, "sizes": [B, L, H, D]}


def train_output(p):
    """attn_dropout = 0, output_dropout = p, orthogonal out_proj W: the output in training, and the
    same module's output in eval (no dropout), with W."""
    rate = p.args["p"]
    gen = p.generator()
    B, L, H, D = 100, 20, 5, 10
    E = H * D
    w_o = torch.linalg.qr(torch.randn(E, E, generator=gen, dtype=torch.float64))[0]
    state = _state(E, gen, w_o=w_o)
    x = torch.randn(B, L, E, generator=gen, dtype=torch.float64)
    with torch.no_grad():
        plain = _build(p, E, H, 0.0, 0.0, state).eval()(x)        # (B, L, E)
        m = _build(p, E, H, 0.0, rate, state).train()
        torch.manual_seed(p.seed)
        out = m(x)
    return {"out": out, "plain": plain, "w_o": w_o}
