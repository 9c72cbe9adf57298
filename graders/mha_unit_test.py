"""Cases for `mha_unit_test`: the user's test must pass two correct MultiHeadSelfAttentions (one
computed as the official module does, one rounding once from float64: a test must allow float32's
rounding) and fail each of the grader's wrong ones (probes/mha_unit_test.py runs it). The official module handed to the
test records how it was built and called, so a test that fails on correct code can be told apart
(weights not copied, batch_first missing, mask convention not inverted). The test runs once per
implementation, each run in a room opened for it: nothing it keeps (a counter of its calls) can tell
it which implementation it is given."""
from __future__ import annotations

import torch

from attn_drill.bank.api import Case, Ctx, Failure
from attn_drill.i18n import pick

NON_MASK_BUGS = ("softmax_query_axis", "missing_scale", "split_heads_direct_view", "merge_heads_without_transpose")
MASK_BUGS = ("padding_mask_ignored", "padding_mask_inverted", "attn_mask_ignored", "attn_mask_true_means_blocked")


def _why_fails_on_correct(obs):
    first = obs["error"]
    made = obs["official_calls"]
    mine = obs["impl_calls"]
    shapes = {tuple(c["x_shape"]) for c in mine}
    if any(not b for b in obs["inits_batch_first"]) and (
            not made or any(not r["batch_first"] and tuple(r["query_shape"]) in shapes for r in made)):
        return Failure(pick(f"your test fails on a correct implementation ({first}): the official module was built "
                            f"without batch_first=True, so it reads (B, L, E) as (L, B, E)",
                            f"你的测试在正确的实现上失败了（{first}）：官方模块构造时没有传 batch_first=True，"
                            f"所以它把 (B, L, E) 当成了 (L, B, E)"), mistake="batch_first_missing")
    copied = any(
        isinstance(r["in_proj_weight"], torch.Tensor) and any(
            isinstance(m["qkv_weight"], torch.Tensor) and r["in_proj_weight"].shape == m["qkv_weight"].shape and
            torch.allclose(r["in_proj_weight"].double(), m["qkv_weight"].double()) and
            isinstance(r["out_weight"], torch.Tensor) and isinstance(m["out_weight"], torch.Tensor) and
            r["out_weight"].shape == m["out_weight"].shape and
            torch.allclose(r["out_weight"].double(), m["out_weight"].double()) for m in mine)
        for r in made)
    if made and not copied:
        return Failure(pick(f"your test fails on a correct implementation ({first}): the official module's "
                            f"in_proj_weight/out_proj.weight never equal the implementation's qkv_proj/out_proj "
                            f"weights; copy them before comparing",
                            f"你的测试在正确的实现上失败了（{first}）：官方模块的 in_proj_weight/out_proj.weight "
                            f"从未与被测实现的 qkv_proj/out_proj 权重相同；比较之前先把权重复制过去"),
                       mistake="weights_not_copied")
    ours = [c["attn_mask"] for c in mine if isinstance(c["attn_mask"], torch.Tensor)]
    same = any(isinstance(r["attn_mask"], torch.Tensor) and r["attn_mask"].dtype == torch.bool and
               any(m.shape == r["attn_mask"].shape and torch.equal(m, r["attn_mask"]) for m in ours)
               for r in made)
    if same:
        return Failure(pick(f"your test fails on a correct implementation ({first}): it hands the official module "
                            f"the same boolean attn_mask; nn.MultiheadAttention reads True as NOT allowed, so pass "
                            f"~attn_mask",
                            f"你的测试在正确的实现上失败了（{first}）：它把同一个布尔 attn_mask 传给了官方模块；"
                            f"nn.MultiheadAttention 把 True 理解为不允许关注，所以应传 ~attn_mask"),
                       mistake="mask_convention_not_inverted")
    if not mine or not made:
        return Failure(pick(f"your test raised {first} before comparing anything (it must build attention_cls and "
                            f"official_cls and compare their outputs)",
                            f"你的测试在比较任何东西之前就抛出了 {first}（它必须构造 attention_cls 和 official_cls，"
                            f"并比较两者的输出）"))
    return Failure(pick(f"your test fails on a correct implementation: {first}",
                        f"你的测试在正确的实现上失败了：{first}"))


def passes_correct(sub, ref, case):
    """sub: the probe `run_test` with a correct implementation (`precise`: one whose float32 results
    differ from the official module's in the last bits)."""
    if sub["error"] is not None:
        why = _why_fails_on_correct(sub)
        if case.probe_args.get("precise") and why.mistake is None and sub["impl_calls"] and sub["official_calls"]:
            first = sub["error"]
            return [Failure(pick(f"your test fails on a correct implementation that rounds differently from the "
                                 f"official module ({first}): in float32 two correct implementations differ in the "
                                 f"last bits, about 1e-7; compare in float64 (.double() both modules and x) at about "
                                 f"1e-9, or in float32 at about 1e-5",
                                 f"你的测试在一个舍入方式与官方模块不同的正确实现上失败了（{first}）：在 float32 下，"
                                 f"两个正确实现的结果在最后几位上会有约 1e-7 的差别；请在 float64 下比较（两个模块和 x "
                                 f"都 .double()），容差约 1e-9，或在 float32 下用约 1e-5 的容差"),
                            mistake="tolerance_too_tight")]
        return [why]
    if not sub["impl_calls"] or not sub["official_calls"]:
        return [Failure(pick("your test passed without calling both modules; build attention_cls and official_cls "
                             "and compare their outputs",
                             "你的测试没有调用两个模块就通过了；"
                             "应构造 attention_cls 和 official_cls，并比较两者的输出"))]
    return []


def catches(sub, ref, case):
    """sub: the probe `run_test` with one wrong implementation: the test must raise."""
    if sub["error"] is not None:
        return []
    bug = case.probe_args["bug"]
    passes = pick(f"your test passes the implementation with {bug}", f"你的测试放过了有 {bug} 错误的实现")
    returned = [v for v in sub.get("returned", []) if v is not None]
    if returned and all(v is False or v == 0 for v in returned):
        return [pick(f"{passes}: it returns False where it finds a mismatch instead of raising; a test must fail "
                     f"by raising (assert torch.allclose(...), or torch.testing.assert_close(...))",
                     f"{passes}：测试发现不一致时返回 False，而不是抛出异常；测试必须通过抛出异常来表示失败"
                     f"（assert torch.allclose(...) 或 torch.testing.assert_close(...)）")]
    heads = {c.get("heads") for c in sub["impl_calls"]}
    if heads == {1} and bug in ("split_heads_direct_view", "merge_heads_without_transpose"):
        return [pick(f"{passes}; it only ever builds a single head, where splitting and merging heads cannot go "
                     f"wrong: test with num_heads > 1 (and L > 1)",
                     f"{passes}；它只构造过单头模块，而单头时拆分和合并多头不可能出错：请用 num_heads > 1"
                     f"（并且 L > 1）来测试")]
    if bug in NON_MASK_BUGS:
        return [Failure(pick(f"{passes}, whose outputs differ clearly: is the tolerance too loose (use about 1e-5 in "
                             f"float32, 1e-9 in float64), or is the output compared at all?",
                             f"{passes}，而这个实现的输出明显不同：是容差太宽（float32 用约 1e-5，float64 用约 "
                             f"1e-9），还是根本没有比较输出？"),
                        mistake="tolerance_too_loose")]
    used_masks = any(c["masked"] for c in sub["impl_calls"])
    return [Failure(pick(f"{passes}" + ("" if used_masks else ": the test never passes key_padding_mask or attn_mask")
                         + "; compare with padding, with a causal attn_mask, and with both",
                         f"{passes}" + ("" if used_masks else "：测试从来没有传入 key_padding_mask 或 attn_mask")
                         + "；请分别在有 padding、有因果 attn_mask 以及两者都有的情况下比较"),
                    mistake="masks_never_tested")]


def cases(ctx: Ctx) -> list[Case]:
    """The test is run once per implementation, each time in a room opened for it (fresh=True)."""
    out = [Case(name="passes_correct_mhsa", target="check_against_official", grad=False, probe="run_test",
                probe_args={"bug": None}, check=passes_correct, fresh=True,
                note="a correct MultiHeadSelfAttention: the test must return"),
           Case(name="passes_correct_rounded", target="check_against_official", grad=False, probe="run_test",
                probe_args={"bug": None, "precise": True}, check=passes_correct, fresh=True,
                note="a correct MultiHeadSelfAttention rounding once from float64: the test must return")]
    for bug in NON_MASK_BUGS + MASK_BUGS:
        out.append(Case(name=f"catches_{bug}", target="check_against_official", grad=False, probe="run_test",
                        probe_args={"bug": bug}, check=catches, fresh=True,
                        note=f"a MultiHeadSelfAttention with {bug}: the test must raise"))
    return out
