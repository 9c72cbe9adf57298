"""Cases for `mha_unit_test`: the user's test must pass a correct MultiHeadSelfAttention and fail
each of the grader's wrong ones. The official module handed to the test records how it was built
and called, so a test that fails on correct code can be told apart (weights not copied,
batch_first missing, mask convention not inverted)."""
from __future__ import annotations

import contextlib
import math

import torch
import torch.nn as nn

from attn_drill.api import Case, Ctx, Failure

# Captured when the grader is imported, before any guard is installed: the test under grading is
# meant to use the official module, which runs F.multi_head_attention_forward internally.
_REAL_MHA = nn.MultiheadAttention
_REAL_FUNCTIONS = {name: getattr(torch.nn.functional, name)
                   for name in ("multi_head_attention_forward", "scaled_dot_product_attention")}
assert _REAL_FUNCTIONS["multi_head_attention_forward"].__module__ == "torch.nn.functional", \
    "grader imported under a guard"

NON_MASK_BUGS = ("softmax_query_axis", "missing_scale", "split_heads_direct_view", "merge_heads_without_transpose")
MASK_BUGS = ("padding_mask_ignored", "padding_mask_inverted", "attn_mask_ignored", "attn_mask_true_means_blocked")


def make_mhsa(bug: str | None = None, calls: list | None = None):
    """A MultiHeadSelfAttention with the interface of `mhsa`, correct or with one known bug."""

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
            q, k, v = self.qkv_proj(x).split(E, dim=-1)              # 3 x (B, L, E)
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
            return self.out_proj(out)

    MultiHeadSelfAttention.__qualname__ = f"MultiHeadSelfAttention[{bug or 'correct'}]"
    return MultiHeadSelfAttention


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
            with _official_allowed():
                return super().forward(query, key, value, *args, **kwargs)

    return MultiheadAttention


@contextlib.contextmanager
def _official_allowed():
    """Inside the official module only: let it run its own functional implementation (which the
    engine guards against while user code runs). The user's own code stays guarded."""
    F = torch.nn.functional
    saved = {name: getattr(F, name) for name in _REAL_FUNCTIONS}
    for name, fn in _REAL_FUNCTIONS.items():
        setattr(F, name, fn)
    try:
        yield
    finally:
        for name, fn in saved.items():
            setattr(F, name, fn)


def _run(test, attention_cls, records) -> BaseException | None:
    try:
        test(attention_cls, make_official(records))
    except Exception as exc:  # noqa: BLE001 - the user's test signals a mismatch by raising
        return exc
    return None


def _why_fails_on_correct(exc, calls, records):
    first = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
    inits = [r for r in records if r["kind"] == "init"]
    made = [r for r in records if r["kind"] == "call"]
    shapes = {tuple(c["x"].shape) for c in calls}
    if any(not r["batch_first"] for r in inits) and (
            not made or any(not r["batch_first"] and r["query_shape"] in shapes for r in made)):
        return Failure(f"your test fails on a correct implementation ({first}): the official module was built "
                       f"without batch_first=True, so it reads (B, L, E) as (L, B, E)", mistake="batch_first_missing")
    mine = {id(c["module"]): c["module"] for c in calls}.values()
    copied = any(
        r["in_proj_weight"] is not None and any(
            r["in_proj_weight"].shape == m.qkv_proj.weight.shape and
            torch.allclose(r["in_proj_weight"].double(), m.qkv_proj.weight.detach().double()) and
            torch.allclose(r["out_weight"].double(), m.out_proj.weight.detach().double()) for m in mine)
        for r in made)
    if made and not copied:
        return Failure(f"your test fails on a correct implementation ({first}): the official module's "
                       f"in_proj_weight/out_proj.weight never equal the implementation's qkv_proj/out_proj "
                       f"weights; copy them before comparing", mistake="weights_not_copied")
    ours = [c["attn_mask"] for c in calls if isinstance(c["attn_mask"], torch.Tensor)]
    same = any(isinstance(r["attn_mask"], torch.Tensor) and r["attn_mask"].dtype == torch.bool and
               any(m.shape == r["attn_mask"].shape and torch.equal(m, r["attn_mask"]) for m in ours)
               for r in made)
    if same:
        return Failure(f"your test fails on a correct implementation ({first}): it hands the official module "
                       f"the same boolean attn_mask; nn.MultiheadAttention reads True as NOT allowed, so pass "
                       f"~attn_mask", mistake="mask_convention_not_inverted")
    if not calls or not made:
        return Failure(f"your test raised {first} before comparing anything (it must build attention_cls and "
                       f"official_cls and compare their outputs)")
    return Failure(f"your test fails on a correct implementation: {first}")


def unit_test_check(sub, ref, case):
    test = getattr(sub, "check_against_official", None)
    if test is None:
        return ["define check_against_official(attention_cls, official_cls)"]
    calls, records = [], []
    exc = _run(test, make_mhsa(None, calls), records)
    if exc is not None:
        return [_why_fails_on_correct(exc, calls, records)]
    if not calls or not any(r["kind"] == "call" for r in records):
        return [Failure("your test passed without calling both modules; build attention_cls and official_cls "
                        "and compare their outputs")]
    used_masks = any(c["key_padding_mask"] is not None or c["attn_mask"] is not None for c in calls)
    missed = [bug for bug in NON_MASK_BUGS + MASK_BUGS if _run(test, make_mhsa(bug), []) is None]
    n = len(NON_MASK_BUGS + MASK_BUGS)
    if not missed:
        return []
    share = f"it caught {n - len(missed)} of {n} wrong implementations ({100 * (n - len(missed)) / n:.0f}%)"
    missed_non_mask = [b for b in missed if b in NON_MASK_BUGS]
    if missed_non_mask:
        return [Failure(f"{share}; it passes {', '.join(missed_non_mask)}, whose outputs differ clearly: is the "
                        f"tolerance too loose (use about 1e-5 in float32, 1e-9 in float64), or is the output "
                        f"compared at all?", mistake="tolerance_too_loose")]
    return [Failure(f"{share}; it passes {', '.join(missed)}"
                    + ("" if used_masks else ": the test never passes key_padding_mask or attn_mask")
                    + "; compare with padding, with a causal attn_mask, and with both",
                    mistake="masks_never_tested")]


def cases(ctx: Ctx) -> list[Case]:
    return [Case(name="catches_wrong_mhsa", target="check_against_official", grad=False,
                 check=unit_test_check,
                 note=f"passes a correct MHSA, fails {len(NON_MASK_BUGS + MASK_BUGS)} wrong ones")]
