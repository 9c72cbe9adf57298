"""Cross-checks of the memory-and-backward references against independent implementations:
torch.autograd, F.scaled_dot_product_attention and torch.utils.flop_counter.FlopCounterMode."""
import math

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from loading import load

class _Largest(TorchDispatchMode):
    """Records the largest tensor any aten op outputs (views and copies included)."""

    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in (out if isinstance(out, (tuple, list)) else (out,)):
            if isinstance(t, torch.Tensor):
                self.largest = max(self.largest, t.numel())
        return out


def _qkv(B, H, Lq, Lk, D, Dv=None, scale=1.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    Dv = D if Dv is None else Dv
    Q = torch.randn(B, H, Lq, D, generator=g, dtype=torch.float64) * scale
    K = torch.randn(B, H, Lk, D, generator=g, dtype=torch.float64)
    V = torch.randn(B, H, Lk, Dv, generator=g, dtype=torch.float64)
    dO = torch.randn(B, H, Lq, Dv, generator=g, dtype=torch.float64)
    return Q, K, V, dO


# --------------------------------------------------------------------------- sdpa_backward
@pytest.mark.parametrize("B,H,Lq,Lk,D,Dv,mask,scale", [
    (2, 3, 5, 5, 4, 4, None, None),
    (1, 2, 7, 11, 6, 3, "causal", 0.37),
    (3, 1, 9, 6, 5, 5, "pad", 1.9),
    (2, 2, 1, 8, 3, 7, None, None),
])
def test_sdpa_backward_matches_autograd_of_sdpa(B, H, Lq, Lk, D, Dv, mask, scale):
    ref = load("sdpa_backward")
    Q, K, V, dO = _qkv(B, H, Lq, Lk, D, Dv, seed=Lq * 31 + Lk)
    s = 1.0 / math.sqrt(D) if scale is None else scale
    keep = None
    if mask == "causal":
        keep = torch.ones(Lq, Lk, dtype=torch.bool).tril(diagonal=Lk - Lq)
    elif mask == "pad":
        lengths = torch.tensor([Lk, 3, 1][:B])
        keep = (torch.arange(Lk)[None, :] < lengths[:, None])[:, None, None, :]
    q, k, v = (t.clone().requires_grad_() for t in (Q, K, V))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, scale=s)
    want = torch.autograd.grad(out, (q, k, v), dO)
    scores = s * Q @ K.transpose(-2, -1)
    if keep is not None:
        scores = scores.masked_fill(~keep, float("-inf"))
    P = torch.softmax(scores, dim=-1)
    got = ref.scaled_dot_product_attention_backward(dO, Q, K, V, P, s)
    for name, g, w in zip(("dQ", "dK", "dV"), got, want):
        assert g.shape == w.shape, name
        torch.testing.assert_close(g, w, rtol=1e-10, atol=1e-12, msg=name)


def test_sdpa_backward_scale_is_a_multiplier():
    """Doubling the scale of the scores doubles dQ when P is held fixed: scale multiplies."""
    ref = load("sdpa_backward")
    Q, K, V, dO = _qkv(1, 1, 4, 6, 3)
    P = torch.softmax(0.5 * Q @ K.transpose(-2, -1), dim=-1)
    dq1 = ref.scaled_dot_product_attention_backward(dO, Q, K, V, P, 0.5)[0]
    dq2 = ref.scaled_dot_product_attention_backward(dO, Q, K, V, P, 1.0)[0]
    torch.testing.assert_close(dq2, 2 * dq1)


# --------------------------------------------------------------------------- attention_cost
@pytest.mark.parametrize("B,H,Lq,Lk,D", [(2, 3, 7, 7, 5), (1, 4, 9, 13, 6), (3, 2, 1, 10, 7)])
def test_attention_cost_flops_match_flop_counter(B, H, Lq, Lk, D):
    ref = load("attention_cost")
    Q, K, V, _ = _qkv(B, H, Lq, Lk, D)
    with FlopCounterMode(display=False) as counter:
        P = torch.softmax(Q @ K.transpose(-2, -1) / math.sqrt(D), dim=-1)
        P @ V
    flops, _ = ref.estimate_attention_cost(B, H, Lq, D, Lk=Lk)
    assert flops == counter.get_total_flops()


def test_attention_cost_memory_matches_allocated_scores_and_probs():
    ref = load("attention_cost")
    B, H, Lq, Lk, D = 2, 3, 5, 9, 4

    class Bytes(TorchDispatchMode):
        """Bytes of the distinct storages that hold a (B, H, Lq, Lk) tensor."""
        storages = {}

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if isinstance(out, torch.Tensor) and tuple(out.shape) == (B, H, Lq, Lk):
                Bytes.storages[out.untyped_storage().data_ptr()] = out.untyped_storage().nbytes()
            return out

    for dtype in (torch.bfloat16, torch.float32, torch.float64):
        Bytes.storages = {}
        Q, K, V, _ = (t.to(dtype) for t in _qkv(B, H, Lq, Lk, D))
        with Bytes():
            S = (Q / math.sqrt(D)) @ K.transpose(-2, -1)    # the score matrix
            P = torch.softmax(S, dim=-1)                    # the probability matrix
            P @ V
        size = torch.empty((), dtype=dtype).element_size()
        assert ref.estimate_attention_cost(B, H, Lq, D, bytes_per_elem=size, Lk=Lk)[1] == sum(Bytes.storages.values())


def test_attention_cost_gpt3_scale_example():
    ref = load("attention_cost")
    flops, mem = ref.estimate_attention_cost(8, 96, 2048, 128)
    assert flops == 4 * 8 * 96 * 2048 ** 2 * 128          # ~1.65e12, twice the seed's 8.2e11
    assert mem == 2 * 8 * 96 * 2048 ** 2 * 2               # ~1.29e10 bytes, ten times the seed's 1.2 GB


# --------------------------------------------------------------------------- chunked_attention
@pytest.mark.parametrize("B,H,Lq,Lk,D,Dv,chunk,scale", [
    (2, 3, 13, 13, 5, 5, 4, None),     # chunk does not divide L
    (1, 2, 7, 17, 6, 3, 5, 0.8),       # Lq != Lk, Dv != D
    (2, 1, 11, 6, 4, 4, 32, None),     # chunk > L
    (1, 1, 1, 9, 3, 3, 2, None),       # one query
])
def test_chunked_attention_matches_sdpa(B, H, Lq, Lk, D, Dv, chunk, scale):
    ref = load("chunked_attention")
    Q, K, V, _ = _qkv(B, H, Lq, Lk, D, Dv, seed=chunk)
    want = F.scaled_dot_product_attention(Q, K, V, scale=scale)
    got = ref.chunked_attention(Q, K, V, chunk_size=chunk, scale=scale)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-13)


def test_chunked_attention_large_and_negative_logits():
    ref = load("chunked_attention")
    Q, K, V, _ = _qkv(2, 2, 9, 14, 5, scale=300.0)
    torch.testing.assert_close(ref.chunked_attention(Q, K, V, chunk_size=4),
                               F.scaled_dot_product_attention(Q, K, V), rtol=1e-10, atol=1e-12)
    # every score far below zero: a running max started at 0 would underflow to 0 / 0
    Qn = Q.abs() / 300.0 * 200.0
    Kn = -K.abs()
    got = ref.chunked_attention(Qn, Kn, V, chunk_size=4)
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got, F.scaled_dot_product_attention(Qn, Kn, V), rtol=1e-10, atol=1e-12)


def test_chunked_attention_never_builds_full_scores():
    ref = load("chunked_attention")
    B, H, Lq, Lk, D, c = 2, 2, 19, 23, 3, 4
    Q, K, V, _ = _qkv(B, H, Lq, Lk, D)
    with _Largest() as mode:
        ref.chunked_attention(Q, K, V, chunk_size=c)
    assert mode.largest <= max(B * H * Lq * D, B * H * Lk * D, B * H * c * c) < B * H * Lq * Lk


# --------------------------------------------------------------------------- flash_attention
@pytest.mark.parametrize("B,H,Lq,Lk,D,Dv,block,scale", [
    (2, 3, 13, 13, 5, 5, 4, None),
    (1, 2, 7, 17, 6, 3, 5, 0.8),
    (2, 1, 11, 6, 4, 4, 32, None),
    (1, 1, 1, 9, 3, 3, 2, 2.5),
])
def test_flash_attention_forward_and_grads_match_sdpa(B, H, Lq, Lk, D, Dv, block, scale):
    ref = load("flash_attention")
    Q, K, V, dO = _qkv(B, H, Lq, Lk, D, Dv, seed=block + 7)
    q1, k1, v1 = (t.clone().requires_grad_() for t in (Q, K, V))
    q2, k2, v2 = (t.clone().requires_grad_() for t in (Q, K, V))
    want = F.scaled_dot_product_attention(q1, k1, v1, scale=scale)
    got = ref.flash_attention(q2, k2, v2, scale=scale, block_size=block)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-13)
    gw = torch.autograd.grad(want, (q1, k1, v1), dO)
    gg = torch.autograd.grad(got, (q2, k2, v2), dO)
    for name, a, b in zip(("dQ", "dK", "dV"), gg, gw):
        torch.testing.assert_close(a, b, rtol=1e-11, atol=1e-12, msg=name)


def test_flash_attention_gradcheck():
    ref = load("flash_attention")
    Q, K, V, _ = _qkv(1, 2, 5, 7, 3, scale=1.5)
    inputs = tuple(t.requires_grad_() for t in (Q, K, V))
    assert torch.autograd.gradcheck(lambda q, k, v: ref.FlashAttention.apply(q, k, v, 0.6, 3), inputs)


def test_flash_attention_saves_lse_not_p_and_backward_stays_blocked():
    ref = load("flash_attention")
    B, H, Lq, Lk, D, c = 2, 2, 19, 23, 3, 4
    Q, K, V, dO = _qkv(B, H, Lq, Lk, D)
    saved = []
    inputs = tuple(t.requires_grad_() for t in (Q, K, V))
    with torch.autograd.graph.saved_tensors_hooks(lambda t: (saved.append(t.shape), t)[1], lambda t: t):
        out = ref.flash_attention(*inputs, block_size=c)
    assert (B, H, Lq, 1) in saved                                    # the row log-sum-exp
    assert all(math.prod(s) < Lq * Lk for s in saved if len(s) >= 2 and s[-2:] == (Lq, Lk))
    assert not any(tuple(s[-2:]) == (Lq, Lk) for s in saved)
    with _Largest() as mode:
        torch.autograd.grad(out, inputs, dO)
    assert mode.largest <= max(B * H * Lq * D, B * H * Lk * D, B * H * c * c) < B * H * Lq * Lk
