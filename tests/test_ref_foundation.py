"""Cross-checks of the foundation references (split_heads, causal, masks, merged_qkv) against
independent implementations: nn.MultiheadAttention, F.scaled_dot_product_attention, explicit
indexing, autograd and FlopCounterMode."""
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from loading import load

SPLIT = load("split_heads")
CAUSAL = load("causal")
MASKS = load("masks")
MERGED = load("merged_qkv")


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _mha_like(module, E: int, H: int, bias: bool) -> nn.MultiheadAttention:
    """An nn.MultiheadAttention holding the same weights as a reference module."""
    mha = nn.MultiheadAttention(E, H, bias=bias, batch_first=True, dtype=torch.float64).eval()
    with torch.no_grad():
        mha.in_proj_weight.copy_(module.qkv_proj.weight)
        mha.out_proj.weight.copy_(module.out_proj.weight)
        if bias:
            mha.in_proj_bias.copy_(module.qkv_proj.bias)
            mha.out_proj.bias.copy_(module.out_proj.bias)
    return mha


# ----------------------------------------------------------------------------- split_heads

@pytest.mark.parametrize("B,L,H,D", [(2, 5, 3, 4), (1, 1, 4, 2), (3, 6, 1, 5), (2, 7, 5, 3)])
def test_split_heads_matches_explicit_indexing(B, L, H, D):
    x = torch.randn(B, L, H * D, generator=_gen(0), dtype=torch.float64)
    out = SPLIT.split_heads(x, H)
    assert out.shape == (B, H, L, D)
    b, h, l, d = torch.meshgrid(*(torch.arange(n) for n in (B, H, L, D)), indexing="ij")
    expect = x[b, l, h * D + d]                      # head h owns features h*D ... h*D + D - 1
    assert torch.equal(out, expect)
    assert torch.equal(SPLIT.merge_heads(expect), x)


def test_split_heads_differs_from_direct_view():
    x = torch.randn(2, 5, 12, generator=_gen(1), dtype=torch.float64)
    assert not torch.equal(SPLIT.split_heads(x, 3), x.view(2, 3, 5, 4))


def test_split_merge_gradients_are_permutations():
    x = torch.randn(2, 4, 6, generator=_gen(2), dtype=torch.float64, requires_grad=True)
    g = torch.randn(2, 3, 4, 2, generator=_gen(3), dtype=torch.float64)
    (grad,) = torch.autograd.grad(SPLIT.split_heads(x, 3), x, g)
    assert torch.equal(grad, g.transpose(1, 2).reshape(2, 4, 6))
    y = torch.randn(2, 3, 4, 2, generator=_gen(4), dtype=torch.float64, requires_grad=True)
    g2 = torch.randn(2, 4, 6, generator=_gen(5), dtype=torch.float64)
    (grad2,) = torch.autograd.grad(SPLIT.merge_heads(y), y, g2)
    assert torch.equal(grad2, g2.view(2, 4, 3, 2).transpose(1, 2))


def test_split_merge_build_the_same_attention_as_nn_multihead():
    B, L, H, D = 2, 6, 3, 4
    E = H * D
    mha = nn.MultiheadAttention(E, H, bias=False, batch_first=True, dtype=torch.float64).eval()
    x = torch.randn(B, L, E, generator=_gen(6), dtype=torch.float64)
    q, k, v = F.linear(x, mha.in_proj_weight).split(E, dim=-1)
    q, k, v = (SPLIT.split_heads(t, H) for t in (q, k, v))
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(D), dim=-1)
    out = mha.out_proj(SPLIT.merge_heads(weights @ v))
    expect, _ = mha(x, x, x, need_weights=False)
    torch.testing.assert_close(out, expect, rtol=1e-12, atol=1e-12)


# ----------------------------------------------------------------------------- causal

@pytest.mark.parametrize("L", [1, 2, 7])
def test_causal_mask_is_j_le_i(L):
    mask = CAUSAL.generate_causal_mask(L, torch.device("cpu"))
    i = torch.arange(L)[:, None]
    j = torch.arange(L)[None, :]
    assert mask.shape == (L, L)
    assert torch.equal(mask != 0, j <= i)


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-12), (torch.float32, 1e-5)])
def test_causal_matches_nn_multihead_attention(dtype, tol):
    B, L, H, D = 3, 7, 2, 5
    E = H * D
    torch.manual_seed(0)
    attn = CAUSAL.CausalSelfAttention(E, H, dropout=0.0).double().eval()
    mha = _mha_like(attn, E, H, bias=False)
    x = torch.randn(B, L, E, generator=_gen(7), dtype=torch.float64)
    pad = torch.arange(L)[None, :] >= torch.tensor([7, 4, 1])[:, None]
    future = torch.ones(L, L, dtype=torch.bool).triu(1)          # nn.MultiheadAttention: True = NOT allowed
    expect, _ = mha(x, x, x, key_padding_mask=pad, attn_mask=future, need_weights=False)
    out = attn.to(dtype)(x.to(dtype), key_padding_mask=pad)
    torch.testing.assert_close(out.double(), expect, rtol=tol, atol=tol)


def test_causal_matches_sdpa_is_causal_with_gradients():
    B, L, H, D = 2, 6, 3, 4
    E = H * D
    torch.manual_seed(1)
    attn = CAUSAL.CausalSelfAttention(E, H, dropout=0.0).double().eval()
    x = torch.randn(B, L, E, generator=_gen(8), dtype=torch.float64, requires_grad=True)
    g = torch.randn(B, L, E, generator=_gen(9), dtype=torch.float64)

    def oracle(x):
        q, k, v = (t.view(B, L, H, D).transpose(1, 2) for t in attn.qkv_proj(x).split(E, dim=-1))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return attn.out_proj(out.transpose(1, 2).reshape(B, L, E))

    grads = torch.autograd.grad(attn(x), [x, *attn.parameters()], g)
    expect = torch.autograd.grad(oracle(x), [x, *attn.parameters()], g)
    for a, b in zip(grads, expect):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_causal_no_information_from_the_future():
    B, L, H, D = 1, 5, 2, 3
    attn = CAUSAL.CausalSelfAttention(H * D, H, dropout=0.0).double().eval()
    x = torch.randn(B, L, H * D, generator=_gen(10), dtype=torch.float64, requires_grad=True)
    out = attn(x)
    for i in range(L):
        (grad,) = torch.autograd.grad(out[:, i].sum(), x, retain_graph=True)
        assert grad[:, i + 1:].abs().max() == 0 if i + 1 < L else True
        assert grad[:, :i + 1].abs().max() > 0


def test_causal_large_logits_stay_finite():
    attn = CAUSAL.CausalSelfAttention(10, 2, dropout=0.0).eval()
    x = torch.randn(2, 5, 10, generator=_gen(11)) * 60
    assert torch.isfinite(attn(x)).all()


# ----------------------------------------------------------------------------- masks

def _keep(pad, attn_mask, H, Lq):
    B, Lk = pad.shape
    keep = ~pad[:, None, None, :]
    if attn_mask is not None:
        m = attn_mask.bool()
        keep = keep & (m[:, None] if m.dim() == 3 else m)
    return keep.expand(B, H, Lq, Lk)


@pytest.mark.parametrize("mask_kind", ["none", "2d", "3d", "2d_int"])
def test_apply_masks_sets_exactly_the_masked_entries(mask_kind):
    B, H, Lq, Lk = 3, 2, 4, 6
    scores = torch.randn(B, H, Lq, Lk, generator=_gen(12), dtype=torch.float64)
    before = scores.clone()
    pad = torch.arange(Lk)[None, :] >= torch.tensor([6, 2, 4])[:, None]
    attn_mask = {"none": None,
                 "2d": torch.rand(Lq, Lk, generator=_gen(13)) > 0.5,
                 "3d": torch.rand(B, Lq, Lk, generator=_gen(14)) > 0.5,
                 "2d_int": (torch.rand(Lq, Lk, generator=_gen(15)) > 0.5).long()}[mask_kind]
    out = MASKS.apply_masks(scores, key_padding_mask=pad, attn_mask=attn_mask)
    keep = _keep(pad, attn_mask, H, Lq)
    assert torch.equal(torch.isneginf(out), ~keep)
    assert torch.equal(out[keep], scores[keep])
    assert torch.equal(scores, before)                         # input untouched


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-12), (torch.float32, 2e-6)])
def test_masked_attention_matches_sdpa_including_fully_masked_rows(dtype, tol):
    B, H, Lq, Lk, D = 3, 2, 5, 7, 4
    gen = _gen(16)
    q, k, v = (torch.randn(B, H, n, D, generator=gen, dtype=torch.float64) for n in (Lq, Lk, Lk))
    pad = torch.arange(Lk)[None, :] >= torch.tensor([7, 3, 0])[:, None]      # batch 2: all padding
    attn_mask = torch.rand(B, Lq, Lk, generator=gen) > 0.4
    attn_mask[0, 1] = False                                                  # an empty row by attn_mask
    keep = _keep(pad, attn_mask, H, Lq)
    empty = ~keep.any(-1)
    assert empty.any() and not empty.all()
    g = torch.randn(B, H, Lq, D, generator=gen, dtype=torch.float64)

    leaves = [t.to(dtype).requires_grad_(True) for t in (q, k, v)]
    out = MASKS.masked_attention(*leaves, key_padding_mask=pad, attn_mask=attn_mask)
    grads = torch.autograd.grad(out, leaves, g.to(dtype))
    oracle_leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
    expect = F.scaled_dot_product_attention(*oracle_leaves, attn_mask=keep)
    expect_grads = torch.autograd.grad(expect, oracle_leaves, g)

    assert torch.isfinite(out).all() and out.detach()[empty].abs().max() == 0
    torch.testing.assert_close(out.double(), expect, rtol=tol, atol=tol)
    for a, b in zip(grads, expect_grads):
        assert torch.isfinite(a).all()
        torch.testing.assert_close(a.double(), b, rtol=tol, atol=tol)


def test_masked_attention_large_logits_and_2d_mask():
    B, H, Lq, Lk, D = 2, 3, 4, 9, 5
    gen = _gen(17)
    q, k = (torch.randn(B, H, n, D, generator=gen) * 30 for n in (Lq, Lk))
    v = torch.randn(B, H, Lk, D, generator=gen)
    attn_mask = torch.ones(Lq, Lk, dtype=torch.bool).tril(Lk - Lq)
    out = MASKS.masked_attention(q, k, v, attn_mask=attn_mask)
    expect = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=attn_mask)
    torch.testing.assert_close(out.double(), expect, rtol=1e-4, atol=1e-4)


# ----------------------------------------------------------------------------- merged_qkv

class _GemmShapes(TorchDispatchMode):
    """Records the output shape of every matrix product run inside it."""

    def __init__(self):
        super().__init__()
        self.outputs = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func.overloadpacket in (torch.ops.aten.mm, torch.ops.aten.addmm, torch.ops.aten.bmm,
                                   torch.ops.aten.baddbmm):
            self.outputs.append(tuple(out.shape))
        return out


@pytest.mark.parametrize("E_in,E_out,bias", [(10, 10, True), (7, 7, False), (9, 6, True)])
def test_fuse_qkv_equals_separate_projections(E_in, E_out, bias):
    torch.manual_seed(2)
    projs = [nn.Linear(E_in, E_out, bias=bias, dtype=torch.float64) for _ in range(3)]
    fused = MERGED.fuse_qkv(*projs)
    assert isinstance(fused, nn.Linear) and fused.weight.shape == (3 * E_out, E_in)
    assert (fused.bias is not None) == bias
    x = torch.randn(2, 5, E_in, generator=_gen(18), dtype=torch.float64)
    for got, proj in zip(fused(x).split(E_out, dim=-1), projs):
        torch.testing.assert_close(got, proj(x), rtol=1e-13, atol=1e-13)
    # independent parameters: training the fused layer leaves the originals alone
    fused(x).sum().backward()
    assert fused.weight.grad is not None and all(p.weight.grad is None for p in projs)


def test_fuse_qkv_one_matmul_same_flops():
    E, N = 12, 35
    projs = [nn.Linear(E, E, dtype=torch.float64) for _ in range(3)]
    fused = MERGED.fuse_qkv(*projs)
    x = torch.randn(N, E, dtype=torch.float64)
    with FlopCounterMode(display=False) as separate:
        [p(x) for p in projs]
    with FlopCounterMode(display=False) as merged:
        fused(x)
    assert merged.get_total_flops() == separate.get_total_flops() == 2 * N * E * 3 * E
    ops = merged.get_flop_counts()["Global"]
    assert sum(ops.values()) == 2 * N * E * 3 * E and len(ops) == 1


@pytest.mark.parametrize("bias", [False, True])
def test_merged_qkv_attention_matches_nn_multihead_attention(bias):
    B, L, H, D = 3, 6, 3, 4
    E = H * D
    torch.manual_seed(3)
    attn = MERGED.MergedQKVAttention(E, H, dropout=0.0, bias=bias).double().eval()
    if bias:
        with torch.no_grad():
            attn.qkv_proj.bias.normal_()
            attn.out_proj.bias.normal_()
    mha = _mha_like(attn, E, H, bias=bias)
    x = torch.randn(B, L, E, generator=_gen(19), dtype=torch.float64)
    pad = torch.arange(L)[None, :] >= torch.tensor([6, 2, 5])[:, None]
    keep = torch.rand(B, L, L, generator=_gen(20)) > 0.4
    keep[..., 0] = True
    out = attn(x, key_padding_mask=pad, attn_mask=keep)
    expect, _ = mha(x, x, x, key_padding_mask=pad, attn_mask=(~keep).repeat_interleave(H, dim=0),
                    need_weights=False)
    torch.testing.assert_close(out, expect, rtol=1e-12, atol=1e-12)


def test_merged_qkv_forward_runs_one_projection_gemm():
    B, L, H, D = 2, 7, 3, 5
    E = H * D
    attn = MERGED.MergedQKVAttention(E, H, dropout=0.0, bias=True).double().eval()
    x = torch.randn(B, L, E, dtype=torch.float64)
    with FlopCounterMode(display=False) as counter:
        attn(x)
    flops = counter.get_total_flops()
    # qkv_proj + out_proj + QK^T + PV, each 2*m*n*k
    assert flops == 2 * B * L * E * 3 * E + 2 * B * L * E * E + 2 * 2 * B * H * L * L * D
    # one GEMM produces all of Q, K and V: a (B*L, 3E) output
    with _GemmShapes() as gemms:
        attn(x)
    assert sorted(gemms.outputs) == sorted([(B * L, 3 * E), (B * L, E), (B * H, L, L), (B * H, L, D)])
    # and the fused module equals the module built from separate projections
    qp, kp, vp = (nn.Linear(E, E, dtype=torch.float64) for _ in range(3))
    with torch.no_grad():
        fused = MERGED.fuse_qkv(qp, kp, vp)
        attn.qkv_proj.weight.copy_(fused.weight)
        attn.qkv_proj.bias.copy_(fused.bias)
    q, k, v = (p(x).view(B, L, H, D).transpose(1, 2) for p in (qp, kp, vp))
    ref = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(B, L, E)
    torch.testing.assert_close(attn(x), attn.out_proj(ref), rtol=1e-12, atol=1e-12)
