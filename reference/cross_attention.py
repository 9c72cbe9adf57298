"""Cross-attention: decoder queries attend to encoder keys and values (reference for `cross_attention`)."""
import math

import torch
import torch.nn as nn


class CrossAttention(nn.Module):
    """Multi-head cross-attention from a decoder sequence onto an encoder sequence.

    forward(decoder_hidden, encoder_hidden, key_padding_mask=None)
      decoder_hidden:   (B, Lq, decoder_dim)   queries come from here
      encoder_hidden:   (B, Lk, encoder_dim)   keys and values come from here
      key_padding_mask: (B, Lk) bool, True = padding in the encoder output (that key is ignored)
      returns           (B, Lq, decoder_dim)
    No causal mask: every decoder position may look at every (non-padded) encoder position.
    """

    def __init__(self, decoder_dim: int, encoder_dim: int, num_heads: int, dropout: float = 0.1):
        super().__init__()
        if decoder_dim % num_heads != 0:
            raise ValueError(f"decoder_dim={decoder_dim} is not divisible by num_heads={num_heads}")
        self.decoder_dim = decoder_dim
        self.encoder_dim = encoder_dim
        self.num_heads = num_heads
        self.head_dim = decoder_dim // num_heads
        self.q_proj = nn.Linear(decoder_dim, decoder_dim, bias=False)
        self.k_proj = nn.Linear(encoder_dim, decoder_dim, bias=False)  # encoder width -> decoder width
        self.v_proj = nn.Linear(encoder_dim, decoder_dim, bias=False)
        self.out_proj = nn.Linear(decoder_dim, decoder_dim, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, decoder_hidden: torch.Tensor, encoder_hidden: torch.Tensor,
                key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        B, Lq, E = decoder_hidden.shape
        Lk = encoder_hidden.size(1)
        H, D = self.num_heads, self.head_dim
        q = self.q_proj(decoder_hidden).view(B, Lq, H, D).transpose(1, 2)   # (B, H, Lq, D)
        k = self.k_proj(encoder_hidden).view(B, Lk, H, D).transpose(1, 2)   # (B, H, Lk, D)
        v = self.v_proj(encoder_hidden).view(B, Lk, H, D).transpose(1, 2)   # (B, H, Lk, D)

        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(D)       # (B, H, Lq, Lk)
        if key_padding_mask is not None:
            scores = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))

        weights = torch.softmax(scores, dim=-1)                             # over encoder positions
        weights = self.dropout(weights)
        out = torch.matmul(weights, v)                                      # (B, H, Lq, D)
        out = out.transpose(1, 2).contiguous().view(B, Lq, E)               # (B, Lq, E)
        return self.out_proj(out)
