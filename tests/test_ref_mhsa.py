"""The mhsa reference against independent implementations: nn.MultiheadAttention and SDPA."""

import pytest
import torch
import torch.nn.functional as F

from loading import load

ref = load("mhsa")


def pair(E, H):
    torch.manual_seed(0)
    mine = ref.MultiHeadSelfAttention(E, H, dropout=0.0).double().eval()
    official = torch.nn.MultiheadAttention(E, H, dropout=0.0, bias=False, batch_first=True).double().eval()
    with torch.no_grad():
        official.in_proj_weight.copy_(mine.qkv_proj.weight)     # both stack [W_q; W_k; W_v]
        official.out_proj.weight.copy_(mine.out_proj.weight)
    return mine, official


@pytest.mark.parametrize("B, L, E, H", [(2, 7, 15, 3), (1, 1, 6, 2), (3, 9, 14, 7)])
def test_matches_nn_multihead_attention_with_padding_and_causal_mask(B, L, E, H):
    mine, official = pair(E, H)
    x = torch.randn(B, L, E, dtype=torch.float64)
    lengths = torch.randint(1, L + 1, (B,))
    lengths[0] = L
    pad = torch.arange(L)[None] >= lengths[:, None]                       # True = padding
    keep = torch.ones(L, L, dtype=torch.bool).tril()                       # True = may attend
    got = mine(x, key_padding_mask=pad, attn_mask=keep)
    # nn.MultiheadAttention's bool attn_mask means NOT allowed: pass the complement
    want, _ = official(x, x, x, key_padding_mask=pad, attn_mask=~keep, need_weights=False)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_3d_mask_is_per_batch_and_matches_sdpa():
    B, L, E, H = 3, 6, 12, 4
    mine, _ = pair(E, H)
    x = torch.randn(B, L, E, dtype=torch.float64)
    keep = torch.rand(B, L, L) > 0.5
    keep[..., 0] = True
    got = mine(x, attn_mask=keep)
    q, k, v = mine.qkv_proj(x).split(E, dim=-1)
    split = lambda t: t.view(B, L, H, E // H).transpose(1, 2)
    o = F.scaled_dot_product_attention(split(q), split(k), split(v), attn_mask=keep[:, None])
    want = mine.out_proj(o.transpose(1, 2).reshape(B, L, E))
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_gradients_match_the_official_module():
    mine, official = pair(10, 5)
    x = torch.randn(2, 4, 10, dtype=torch.float64, requires_grad=True)
    g = torch.randn(2, 4, 10, dtype=torch.float64)
    (gx_mine,) = torch.autograd.grad(mine(x), x, g)
    (gx_off,) = torch.autograd.grad(official(x, x, x, need_weights=False)[0], x, g)
    torch.testing.assert_close(gx_mine, gx_off, rtol=1e-12, atol=1e-12)
