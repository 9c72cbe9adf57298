"""Probes for `mha_unit_test` (they run beside the submission and hold no answers): the user's test
is run against a correct MultiHeadSelfAttention and against wrong ones, and an official module that
records how it was built and called."""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from attn_drill.room import kit

_REAL_MHA = nn.MultiheadAttention
NON_MASK_BUGS = ("softmax_query_axis", "missing_scale", "split_heads_direct_view", "merge_heads_without_transpose")
MASK_BUGS = ("padding_mask_ignored", "padding_mask_inverted", "attn_mask_ignored", "attn_mask_true_means_blocked")

def make_mhsa(bug: str | None = None, calls: list | None = None, precise: bool = False):
    """A MultiHeadSelfAttention with the interface of `mhsa`, correct or with one known bug. `precise`:
    correct, computed in float64 and rounded once to the input's dtype, so in float32 its last bits
    differ from the official module's (as two correct float32 implementations' do)."""

    class MultiHeadSelfAttention(nn.Module):
        def __init__(self, hidden_dim, num_heads, dropout=0.1):
            super().__init__()
            self.num_heads, self.head_dim = num_heads, hidden_dim // num_heads
            self.qkv_proj = nn.Linear(hidden_dim, 3 * hidden_dim, bias=False)
            self.out_proj = nn.Linear(hidden_dim, hidden_dim, bias=False)
            self.dropout = nn.Dropout(dropout)

        def forward(self, x, key_padding_mask=None, attn_mask=None):
            if calls is not None:
                calls.append({"module": self, "x": x.detach().clone(), "key_padding_mask": key_padding_mask,
                              "attn_mask": attn_mask})
            B, L, E = x.shape
            H, D = self.num_heads, self.head_dim
            dtype = x.dtype
            w_qkv, w_out = self.qkv_proj.weight, self.out_proj.weight
            if precise:
                x, w_qkv, w_out = x.double(), w_qkv.double(), w_out.double()
            q, k, v = F.linear(x, w_qkv).split(E, dim=-1)             # 3 x (B, L, E)
            if bug == "split_heads_direct_view":
                q, k, v = (t.reshape(B, H, L, D) for t in (q, k, v))  # wrong: mixes positions and heads
            else:
                q, k, v = (t.view(B, L, H, D).transpose(1, 2) for t in (q, k, v))  # (B, H, L, D)
            scores = q @ k.transpose(-2, -1)                           # (B, H, L, L)
            if bug != "missing_scale":
                scores = scores / math.sqrt(D)
            if key_padding_mask is not None and bug != "padding_mask_ignored":
                pad = ~key_padding_mask if bug == "padding_mask_inverted" else key_padding_mask
                scores = scores.masked_fill(pad[:, None, None, :], float("-inf"))
            if attn_mask is not None and bug != "attn_mask_ignored":
                if attn_mask.dim() == 3:
                    attn_mask = attn_mask.unsqueeze(1)                 # (B, 1, L, L)
                blocked = attn_mask if bug == "attn_mask_true_means_blocked" else ~attn_mask
                scores = scores.masked_fill(blocked, float("-inf"))
            weights = torch.softmax(scores, dim=-2 if bug == "softmax_query_axis" else -1)
            out = self.dropout(weights) @ v                            # (B, H, L, D)
            if bug == "merge_heads_without_transpose":
                out = out.reshape(B, L, E)
            else:
                out = out.transpose(1, 2).reshape(B, L, E)             # (B, L, E)
            return F.linear(out, w_out).to(dtype)

    return MultiHeadSelfAttention       # every version looks the same from outside: only its outputs differ


def make_official(records: list):
    """nn.MultiheadAttention that records its construction and every call."""

    class MultiheadAttention(_REAL_MHA):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            records.append({"kind": "init", "module": self, "batch_first": self.batch_first})

        def forward(self, query, key, value, *args, **kwargs):
            records.append({"kind": "call", "module": self, "batch_first": self.batch_first,
                            "query_shape": tuple(query.shape), "attn_mask": kwargs.get("attn_mask"),
                            "in_proj_weight": None if self.in_proj_weight is None else
                            self.in_proj_weight.detach().clone(),
                            "out_weight": self.out_proj.weight.detach().clone()})
            # the weights' path computes the attention itself (no fused kernel, which the room blocks)
            want_weights = kwargs.pop("need_weights", args[1] if len(args) > 1 else True)
            if len(args) > 1:
                args = (args[0], True, *args[2:])
            else:
                kwargs["need_weights"] = True
            out, weights = super().forward(query, key, value, *args, **kwargs)
            return out, (weights if want_weights else None)

    # torch's MultiheadAttention.forward calls F.multi_head_attention_forward, forbidden in the room:
    # let it through for this class exactly (a subclass the test makes still trips)
    kit.let_through("multi_head_attention_forward", _REAL_MHA.forward.__code__, MultiheadAttention)
    return MultiheadAttention


def _run(test, attention_cls, records, returned: list | None = None) -> BaseException | None:
    try:
        value = test(attention_cls, make_official(records))
    except Exception as exc:  # noqa: BLE001 - the user's test signals a mismatch by raising
        return exc
    if returned is not None:
        returned.append(kit.describe(value))
    return None




def _summary(calls, records) -> dict:
    def t(v):
        return v.detach().clone() if isinstance(v, torch.Tensor) else None
    return {"inits_batch_first": [bool(r["batch_first"]) for r in records if r["kind"] == "init"],
            "official_calls": [{"batch_first": bool(r["batch_first"]), "query_shape": list(r["query_shape"]),
                                "attn_mask": t(r["attn_mask"]), "in_proj_weight": t(r["in_proj_weight"]),
                                "out_weight": t(r["out_weight"])} for r in records if r["kind"] == "call"],
            "impl_calls": [{"x_shape": list(c["x"].shape), "heads": int(c["module"].num_heads),
                            "masked": c["key_padding_mask"] is not None or
                            c["attn_mask"] is not None, "attn_mask": t(c["attn_mask"]),
                            "qkv_weight": t(c["module"].qkv_proj.weight), "out_weight": t(c["module"].out_proj.weight)}
                           for c in calls]}


def run_test(p):
    """The user's check_against_official against one implementation (`p.args["bug"]`: None for the
    correct one), with everything it did. Each case runs in a room opened for it (Case(fresh=True)):
    the test cannot tell by what it kept from an earlier call which implementation it is given."""
    test = p.target
    calls, records, returned = [], [], []
    exc = _run(test, make_mhsa(p.args.get("bug"), calls, bool(p.args.get("precise"))), records, returned)
    said = str(exc).splitlines()[0][:200] if exc is not None and str(exc) else ""
    return {"error": None if exc is None else f"{type(exc).__name__}: {said}", "returned": returned,
            **_summary(calls, records)}
