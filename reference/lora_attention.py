"""LoRA adapters on the query and value projections of causal attention (reference solution for
`lora_attention`)."""
import math

import torch
import torch.nn as nn


class LoRALinear(nn.Module):
    """A frozen nn.Linear plus a trainable low-rank update: y = W x + scaling * B (A x).

    LoRALinear(in_features, out_features, r, lora_alpha, use_rslora=False, lora_dropout=0.0,
               init_lora_weights=True)
      base_layer  nn.Linear(in_features, out_features, bias=False), weight (out, in), frozen
      lora_A      nn.Linear(in_features, r, bias=False), weight (r, in), trainable
      lora_B      nn.Linear(r, out_features, bias=False), weight (out, r), trainable
      scaling     lora_alpha / r, or lora_alpha / sqrt(r) when use_rslora
      init_lora_weights=True: A ~ kaiming_uniform_(a=sqrt(5)), i.e. U(-1/sqrt(in), 1/sqrt(in)), and
      B = 0, so the layer starts equal to its base; False keeps nn.Linear's default init for both.
    forward(x) -> base_layer(x) + scaling * lora_B(lora_A(dropout(x))), (..., in) -> (..., out);
      nn.Dropout(lora_dropout) on the input of the low-rank branch only, in training mode only.
      After merge() the update lives in base_layer.weight and the branch is skipped.
    merge()   base_layer.weight += scaling * B @ A; nothing when already merged
    unmerge() base_layer.weight -= scaling * B @ A; nothing when not merged
    """

    def __init__(self, in_features: int, out_features: int, r: int, lora_alpha: float, use_rslora: bool = False,
                 lora_dropout: float = 0.0, init_lora_weights: bool = True):
        super().__init__()
        self.base_layer = nn.Linear(in_features, out_features, bias=False)
        self.base_layer.weight.requires_grad_(False)                   # the pretrained weight is frozen
        self.lora_A = nn.Linear(in_features, r, bias=False)            # weight (r, in)
        self.lora_B = nn.Linear(r, out_features, bias=False)           # weight (out, r)
        self.lora_dropout = nn.Dropout(lora_dropout) if lora_dropout > 0 else nn.Identity()
        self.scaling = lora_alpha / math.sqrt(r) if use_rslora else lora_alpha / r
        self.merged = False
        if init_lora_weights:
            nn.init.kaiming_uniform_(self.lora_A.weight, a=math.sqrt(5))
            nn.init.zeros_(self.lora_B.weight)                         # the update starts at zero

    def delta_weight(self) -> torch.Tensor:
        """scaling * B @ A: (out, r) @ (r, in) -> (out, in), the shape of the base weight."""
        return (self.lora_B.weight @ self.lora_A.weight) * self.scaling

    @torch.no_grad()
    def merge(self) -> None:
        if self.merged:
            return
        self.base_layer.weight += self.delta_weight()
        self.merged = True

    @torch.no_grad()
    def unmerge(self) -> None:
        if not self.merged:
            return
        self.base_layer.weight -= self.delta_weight()
        self.merged = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        result = self.base_layer(x)                                    # (..., out)
        if not self.merged:
            update = self.lora_B(self.lora_A(self.lora_dropout(x)))    # (..., in) -> (..., r) -> (..., out)
            result = result + update * self.scaling
        return result


class LoRAAttention(nn.Module):
    """Causal multi-head self-attention with LoRA on q_proj and v_proj (peft's default targets).

    LoRAAttention(hidden_dim, num_heads, r, lora_alpha, use_rslora=False, lora_dropout=0.0,
                  init_lora_weights=True)
      q_proj, v_proj  LoRALinear(hidden_dim, hidden_dim, ...)
      k_proj, o_proj  nn.Linear(hidden_dim, hidden_dim, bias=False), frozen
    forward(x) -> (B, L, hidden_dim): x (B, L, hidden_dim), causal softmax(q k^T / sqrt(head_dim)) v
      over num_heads heads, then o_proj
    merge() / unmerge(): the same on q_proj and v_proj
    """

    def __init__(self, hidden_dim: int, num_heads: int, r: int, lora_alpha: float, use_rslora: bool = False,
                 lora_dropout: float = 0.0, init_lora_weights: bool = True):
        super().__init__()
        if hidden_dim % num_heads != 0:
            raise ValueError(f"hidden_dim={hidden_dim} is not divisible by num_heads={num_heads}")
        self.num_heads = num_heads
        self.head_dim = hidden_dim // num_heads
        lora = dict(r=r, lora_alpha=lora_alpha, use_rslora=use_rslora, lora_dropout=lora_dropout,
                    init_lora_weights=init_lora_weights)
        self.q_proj = LoRALinear(hidden_dim, hidden_dim, **lora)
        self.k_proj = nn.Linear(hidden_dim, hidden_dim, bias=False)
        self.v_proj = LoRALinear(hidden_dim, hidden_dim, **lora)
        self.o_proj = nn.Linear(hidden_dim, hidden_dim, bias=False)
        for frozen in (self.k_proj, self.o_proj):
            frozen.weight.requires_grad_(False)

    def merge(self) -> None:
        self.q_proj.merge()
        self.v_proj.merge()

    def unmerge(self) -> None:
        self.q_proj.unmerge()
        self.v_proj.unmerge()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, L, E = x.shape
        H, D = self.num_heads, self.head_dim
        q = self.q_proj(x).view(B, L, H, D).transpose(1, 2)           # (B, H, L, D)
        k = self.k_proj(x).view(B, L, H, D).transpose(1, 2)           # (B, H, L, D)
        v = self.v_proj(x).view(B, L, H, D).transpose(1, 2)           # (B, H, L, D)
        scores = q @ k.transpose(-2, -1) / math.sqrt(D)                # (B, H, L, L)
        causal = torch.ones(L, L, dtype=torch.bool, device=x.device).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
        out = torch.softmax(scores, dim=-1) @ v                        # (B, H, L, D)
        out = out.transpose(1, 2).contiguous().view(B, L, E)           # (B, L, E)
        return self.o_proj(out)
