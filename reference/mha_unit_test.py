"""A unit test of a hand-written MultiHeadSelfAttention against PyTorch's official module
(reference solution for `mha_unit_test`)."""
import torch


def check_against_official(attention_cls, official_cls) -> None:
    """Raise AssertionError unless attention_cls matches official_cls with copied weights.

    attention_cls: the class under test, built as attention_cls(hidden_dim, num_heads, dropout=0.0),
                   with qkv_proj (rows [W_q; W_k; W_v]) and out_proj, no bias, and
                   forward(x, key_padding_mask=None, attn_mask=None) -> (B, L, hidden_dim)
                   (key_padding_mask True = padding; attn_mask True = may attend)
    official_cls:  torch.nn.MultiheadAttention, passed in by the caller
    Returns None when every comparison passes.
    """
    torch.manual_seed(0)
    B, L, E, H = 3, 7, 30, 5
    mine = attention_cls(E, H, dropout=0.0).double().eval()
    official = official_cls(E, H, dropout=0.0, bias=False, batch_first=True).double().eval()
    with torch.no_grad():
        official.in_proj_weight.copy_(mine.qkv_proj.weight)    # both (3E, E), rows [W_q; W_k; W_v]
        official.out_proj.weight.copy_(mine.out_proj.weight)   # (E, E)

    x = torch.randn(B, L, E, dtype=torch.float64)
    lengths = torch.tensor([L, 4, 6])
    pad = torch.arange(L)[None, :] >= lengths[:, None]         # (B, L), True = padding
    keep = torch.ones(L, L, dtype=torch.bool).tril()           # (L, L), True = may attend

    def compare(got, want, what):
        torch.testing.assert_close(got, want, rtol=1e-7, atol=1e-9, msg=lambda m: f"{what}: {m}")

    with torch.no_grad():
        want, _ = official(x, x, x, need_weights=False)
        compare(mine(x), want, "no mask")
        want, _ = official(x, x, x, key_padding_mask=pad, need_weights=False)
        compare(mine(x, key_padding_mask=pad), want, "key_padding_mask")
        # nn.MultiheadAttention's boolean attn_mask means True = NOT allowed: invert ours
        want, _ = official(x, x, x, attn_mask=~keep, need_weights=False)
        compare(mine(x, attn_mask=keep), want, "causal attn_mask")
        want, _ = official(x, x, x, key_padding_mask=pad, attn_mask=~keep, need_weights=False)
        compare(mine(x, key_padding_mask=pad, attn_mask=keep), want, "padding + causal")
