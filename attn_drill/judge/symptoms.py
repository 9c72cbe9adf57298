"""Symptom rules: what the pattern of a failure says when no known mistake (mutant) matches.

A rule names something only when the evidence is specific to it; otherwise it stays silent and the
report shows what was measured. Two kinds:

  one case   read off the first failing case: NaN in whole query rows; attention weights that put
             mass on later keys, on padded keys, or none on the diagonal (from the captured first
             softmax of both sides); error only in the batch elements that have padding
  all cases  the failing cases share a trait (Case.traits, the dtype, gradients only) that no
             passing case has: "fails only with batch size 1"

Each returns a Symptom (id, English, Chinese) or None. The ids are stable: reports and JSON carry them.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..bank.api import TRAITS
from ..i18n import spaced
from ..results import FAIL, PASS


@dataclass
class Symptom:
    id: str
    en: str
    zh: str


def explain(first, runs) -> Symptom | None:
    """The symptom of a grading no mutant named. `first`: (case, output, truth, weights, bound) of the
    first failing tensor case, or None, where weights is (the submission's, the reference's, whether the
    code multiplies on its own unchanged) or None; `runs`: (CaseResult, Case) of every case that ran.
    The most specific evidence first."""
    sym = None
    if first is not None:
        case, sub_out, truth_out, weights, bound = first
        # the weights tell only where they are the ones the code multiplies on (weights[2]: the trace saw
        # no other op change them first, such as a mask applied after the softmax)
        if weights is not None and weights[2] and _weights_used(weights[0], sub_out):
            sym = weights_pattern(weights[0], weights[1], case.kwargs)
        if sym is None:
            sym = nan_rows(sub_out, truth_out, traits_of(case))
        if sym is None:
            sym = padded_batches_only(sub_out, truth_out, case.kwargs, bound)
    if sym is None:
        sym = across_cases([r for r, _ in runs], [c for _, c in runs])
    return sym


# ---------------------------------------------------------------- one failing case
def nan_rows(out: torch.Tensor, truth: torch.Tensor, traits) -> Symptom | None:
    """Non-finite values filling whole query rows (every feature of some positions)."""
    if not isinstance(out, torch.Tensor) or out.dim() < 2 or out.shape != truth.shape or not out.is_floating_point():
        return None
    bad = ~torch.isfinite(out.detach().cpu())
    if not bad.any() or not torch.isfinite(truth).all():
        return None
    rows = bad.all(dim=-1)
    if not torch.equal(bad, rows[..., None].expand_as(bad)):
        return None
    n = int(rows.sum())
    if "large_logits" in traits:
        return Symptom("softmax_overflow",
                       f"{n} whole row(s) of the output are NaN/inf, with large logits: exp() overflowed. Subtract "
                       f"the largest value before exp: each row's maximum score (torch.softmax does), or, where "
                       f"partial results are merged, the largest log-sum-exp.",
                       f"输出中有 {n} 整行是 NaN/inf，且 logits 很大：exp() 溢出了。请在 exp 之前减去最大值：每行分数的"
                       f"最大值（torch.softmax 会这样做），或者在合并部分结果时减去最大的 log-sum-exp。")
    if {"pad", "causal", "mask3d"} & set(traits):
        return Symptom("mask_removes_every_key",
                       f"{n} whole row(s) of the output are NaN or inf, in a case with a mask: a -inf reached those "
                       f"rows' sums. Most often the mask removes every key of those queries (True and False "
                       f"swapped, or the mask on the queries' axis instead of the keys'); or the masked scores "
                       f"are used without the softmax that turns -inf into 0.",
                       f"输出中有 {n} 整行是 NaN 或 inf，且这个用例带掩码：有 -inf 进入了这些行的求和。最常见的原因是"
                       f"掩码去掉了这些 query 的所有 key（True/False 弄反了，或者掩码加在了 query 的维度上而不是 "
                       f"key 的维度上）；也可能是被掩码的分数没有经过把 -inf 变成 0 的 softmax 就直接用了。")
    return None


def _padding(kwargs: dict, B: int, Lk: int) -> torch.Tensor | None:
    for name in ("key_padding_mask", "mask", "padding_mask"):
        m = kwargs.get(name)
        if isinstance(m, torch.Tensor) and m.dtype == torch.bool and tuple(m.shape) == (B, Lk):
            return m
    return None


def _causal_inverted(extra, missing, future, ref_masked) -> Symptom | None:
    if extra.any() and missing.any() and bool(extra[~future].logical_not().all()) and \
            bool(missing[future].logical_not().all()) and bool((ref_masked == future).all()):
        # the reference's zeros are exactly the future keys: a causal mask, whatever else the case has
        return Symptom("causal_inverted",
                       "your attention weights look at the future and not the past: the causal mask is inverted "
                       "(triu for tril, or True and False swapped).",
                       "你的注意力权重看向未来而不是过去：因果掩码反了（把 tril 写成了 triu，或 True/False 弄反）。")
    return None


def _mask_inverted(s, r, finite) -> Symptom | None:
    rows = finite.all(dim=-1)
    if bool((r == 0).any()) and bool(rows.any()):
        kept_sub, kept_ref = (s > 1e-12) & finite, r > 0
        if bool((kept_sub == ~kept_ref)[rows].all()):
            return Symptom("mask_inverted",
                           "your attention weights keep exactly the keys the mask removes, and remove the ones it "
                           "keeps: the mask's convention is inverted (which value means keep and which means masked).",
                           "你的注意力权重恰好保留了掩码要去掉的 key、去掉了要保留的：掩码的约定反了（哪个值表示保留、"
                           "哪个值表示屏蔽）。")
    return None


def _weights_used(w_sub, out) -> bool:
    """False when the output shows that the softmax the trace saw was changed before it was used: an
    output row (weights @ values) exactly zero where that softmax row carries mass."""
    if not isinstance(w_sub, torch.Tensor) or not isinstance(out, torch.Tensor) or out.dim() != w_sub.dim() \
            or out.shape[:-1] != w_sub.shape[:-1] or out.dtype == torch.bool:
        return True
    w = w_sub.detach().cpu().double()
    mass = torch.isfinite(w).all(dim=-1) & (w.sum(dim=-1) > 0.5)
    return not bool(((out.detach().cpu() == 0).all(dim=-1) & mass).any())


def weights_pattern(w_sub: torch.Tensor, w_ref: torch.Tensor, kwargs: dict) -> Symptom | None:
    """Where the submission's attention weights differ from the reference's, on (..., Lq, Lk)."""
    if w_sub is None or w_ref is None or w_sub.shape != w_ref.shape or w_ref.dim() < 2:
        return None
    s = w_sub.detach().cpu().double()
    r = w_ref.detach().cpu().double()
    if not torch.isfinite(r).all():
        return None
    Lq, Lk = r.shape[-2], r.shape[-1]
    tol = 1e-3
    finite = torch.isfinite(s)
    extra = finite & (r == 0) & (s > tol)                     # mass where the reference gives none
    missing = finite & (r > tol) & (s.abs() <= 1e-12)         # none where the reference gives some
    if not (extra.any() or missing.any()):
        return None
    i = torch.arange(Lq)[:, None]
    j = torch.arange(Lk)[None, :]
    future = (j > i + (Lk - Lq)).expand(r.shape)              # keys after the query (bottom-right aligned)
    diagonal = (j == i + (Lk - Lq)).expand(r.shape)
    ref_masked = (r == 0)
    if extra.any() and not missing.any() and bool(extra[~future].logical_not().all()) and \
            bool((ref_masked == future | ref_masked).all()):
        return Symptom("causal_leak",
                       "your softmax puts mass on later keys (key j after query i), where the reference gives "
                       "none: the causal mask is missing, inverted, aligned to the top-left when there are fewer "
                       "queries than keys (keep key j for query i iff j <= i + Lk - Lq), or applied to the weights "
                       "after the softmax instead of to the scores before it.",
                       "你的 softmax 把概率分给了之后的 key（key j 在 query i 之后），而参考实现在那里为 0：因果掩码"
                       "缺失、反了、在 query 比 key 少时按左上角对齐（应当是 j <= i + Lk - Lq 时保留），或者是在 "
                       "softmax 之后作用在权重上，而不是在 softmax 之前作用在分数上。")
    if missing.any() and bool(missing[~diagonal].logical_not().all()):
        return Symptom("diagonal_masked",
                       "your attention weights are zero on the diagonal, where each query should see its own key: "
                       "the mask is off by one (keep j <= i, not j < i).",
                       "你的注意力权重在对角线上为 0，但每个 query 应该能看到自己位置的 key：掩码差了一位（应保留 "
                       "j <= i，而不是 j < i）。")
    # a mask the case passes in (attn_mask) whose keys were swapped is that mask's convention; one the
    # submission builds itself (the causal problems) is its causal mask
    given = any(isinstance(v, torch.Tensor) and v.dtype == torch.bool and v.dim() >= 2 and "padding" not in k
                and tuple(v.shape[-2:]) == (Lq, Lk) for k, v in kwargs.items())
    order = (_mask_inverted(s, r, finite), _causal_inverted(extra, missing, future, ref_masked))
    for sym in (order if given else order[::-1]):
        if sym is not None:
            return sym
    B = r.shape[0]
    pad = _padding(kwargs, B, Lk)
    if pad is not None and pad.any():
        shape = (B,) + (1,) * (r.dim() - 3) + (1, Lk)
        padded = pad.reshape(shape).expand(r.shape)
        if Lq == Lk:
            qpad = pad.reshape((B,) + (1,) * (r.dim() - 3) + (Lk, 1)).expand(r.shape)
            broken = ~finite.all(dim=-1)                       # rows the submission's softmax turned to NaN
            qrows = qpad[..., 0]
            # both halves of what it says must be seen: the padded rows broken, and padded keys given weight
            if broken.any() and bool(broken[~qrows].logical_not().all()) and bool(extra[padded].any()) and \
                    bool(extra[~padded].logical_not().all()):
                return Symptom("padding_on_query_axis",
                               "the rows of padded positions are NaN and padded keys still get weight: the padding "
                               "mask was applied to the queries (rows) instead of the keys (columns); broadcast it "
                               "as key_padding_mask[:, None, None, :].",
                               "填充位置所在的行变成 NaN，而填充的 key 仍有权重："
                               "padding 掩码被加在了 query（行）上而不是 "
                               "key（列）上；应广播为 key_padding_mask[:, None, None, :]。")
        if extra.any() and not missing.any() and bool(extra[~padded].logical_not().all()):
            return Symptom("padding_not_applied",
                           "your attention weights give padded keys nonzero weight: the key padding mask does not "
                           "remove them (not applied, True and False swapped: True means padding, or the masked "
                           "scores filled with a finite value such as 0 instead of -inf before the softmax).",
                           "你的注意力权重给了填充位置的 key 非零权重：key padding 掩码没有把它们去掉（没有应用掩码，"
                           "True/False 弄反：True 表示填充，或者在 softmax 之前把被屏蔽的分数"
                           "填成了 0 这样的有限值而不是 -inf）。")
    return None


def padded_batches_only(out: torch.Tensor, truth: torch.Tensor, kwargs: dict, bound: torch.Tensor | float) -> \
        Symptom | None:
    """The error is confined to the batch elements that have padding."""
    if not isinstance(out, torch.Tensor) or out.shape != truth.shape or out.dim() < 2:
        return None
    pad = None
    for v in kwargs.values():
        if isinstance(v, torch.Tensor) and v.dtype == torch.bool and v.dim() == 2 and v.shape[0] == out.shape[0]:
            pad = v
    if pad is None:
        return None
    has_pad = pad.any(dim=-1)
    if has_pad.all() or not has_pad.any():
        return None
    err = (out.detach().cpu().double() - truth.double()).abs().nan_to_num(nan=float("inf"))
    bad = (err > bound).reshape(out.shape[0], -1).any(dim=-1)
    if bad.any() and torch.equal(bad & ~has_pad, torch.zeros_like(bad)):
        return Symptom("padding_wrong",
                       "only the batch elements that have padding are wrong: look at how the padding mask is "
                       "applied (its polarity, its axis, its broadcast over heads) and at what becomes of the rows "
                       "it touches.",
                       "只有带填充的样本是错的：检查 padding 掩码的用法（极性、维度、在头维上的广播），以及被它影响的行"
                       "最后怎样处理。")
    return None


# ---------------------------------------------------------------- all cases
_ONLY = {
    "b1": ("a squeeze() that drops the batch axis, or a reshape that assumes B > 1?",
           "是不是 squeeze() 去掉了 batch 维，或 reshape 假设了 B > 1？"),
    "l1": ("a squeeze() that drops the length axis, or a view that assumes L > 1?",
           "是不是 squeeze() 去掉了长度维，或 view 假设了 L > 1？"),
    "lq_ne_lk": ("a size taken from the queries where the keys' is meant, positions counted from 0 instead of "
                 "where the new tokens start, or a causal mask aligned top-left?",
                 "是不是该用 key 长度的地方用了 query 的长度，位置从 0 数起而不是从新 token 的起点数起，"
                 "或因果掩码按左上角对齐了？"),
    "dv_ne_d": ("a shape or scale taken from Q or K where V's is meant (an output or accumulator shaped like Q)?",
                "是不是该用 V 的维度时用了 Q 或 K 的（例如输出或累加器按 Q 的形状分配）？"),
    "large_logits": ("subtract each row's maximum before exp, and keep the scores in float32",
                     "在 exp 之前减去每行的最大值，并让分数保持 float32"),
    "pad": ("check how the padding mask is applied (True = padding, on the key axis)",
            "检查 padding 掩码的用法（True 表示填充，作用在 key 维）"),
    "causal": ("whatever the causal setting changes: the mask itself (keep key j for query i iff j <= i) and "
               "everything the causal flag is passed on to",
               "因果设置所改变的一切：掩码本身（j <= i 时保留），以及因果标志被传给的每一处"),
    "mask3d": ("a 3-D mask is per batch element: unsqueeze it to (B, 1, Lq, Lk)",
               "3 维掩码按样本区分：扩展为 (B, 1, Lq, Lk)"),
    "long": ("something sized or hard-coded for short sequences?", "是不是有按短序列设定或写死的尺寸？"),
    "h1": ("something that only works with one head?", "是不是只在单头时才成立？"),
    "bf16": ("a cast, a constant or an op that does not hold up in bfloat16?",
             "是不是有在 bfloat16 下站不住的类型转换、常数或运算？"),
    "fp16": ("a cast, a constant or an op that does not hold up in float16 (overflow past 65504)?",
             "是不是有在 float16 下站不住的类型转换、常数或运算（超过 65504 会溢出）？"),
    "fp32": ("a precision problem that float64 hides?", "是不是 float64 掩盖了的精度问题？"),
    "fp64": ("float64 inputs handled differently (a cast to float32 and back?)",
             "float64 输入的处理不同（转成 float32 再转回？）"),
}
_DTYPE_TRAITS = {"float64": "fp64", "float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}
_DTYPE_WORDS = {"fp64": "float64", "fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
_ZH_TRAITS = {"b1": "batch 为 1", "l1": "序列长度为 1", "lq_ne_lk": "query 长度与 key 长度不同",
              "dv_ne_d": "V 的头维与 Q/K 不同", "large_logits": "logits 很大", "pad": "有 key padding",
              "causal": "有因果掩码", "mask3d": "有按样本的 3 维掩码", "long": "序列很长", "h1": "只有一个头"}


def traits_of(case) -> set[str]:
    out = set(getattr(case, "traits", ()) or ())
    dtype = str(getattr(case, "autocast", None) or case.dtype).replace("torch.", "")
    if dtype in _DTYPE_TRAITS:
        out.add(_DTYPE_TRAITS[dtype])
    return out


def _layout(value):
    """A case's data with each tensor reduced to its shape: what two cases alike but for a dtype share."""
    if isinstance(value, torch.Tensor):
        return ("tensor", tuple(value.shape))
    if isinstance(value, dict):
        return tuple(sorted((str(k), _layout(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_layout(v) for v in value)
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    return type(value).__name__


def dtype_twins(cf, cp, dtypes: set) -> bool:
    """Two cases alike but for their dtype: the same call, the same arguments (tensors by shape) and
    the same other traits."""
    return (cf.target, cf.probe, _layout(cf.inputs), _layout(cf.kwargs), _layout(cf.init), _layout(cf.probe_args)) \
        == (cp.target, cp.probe, _layout(cp.inputs), _layout(cp.kwargs), _layout(cp.init), _layout(cp.probe_args)) \
        and traits_of(cf) - dtypes == traits_of(cp) - dtypes


def across_cases(results: list, cases: list) -> Symptom | None:
    """results and cases in the same order (CaseResult, Case); skipped cases and custom checks left out."""
    pairs = [(r, c) for r, c in zip(results, cases) if r.status in (PASS, FAIL) and not c.is_check]
    failed = [(r, c) for r, c in pairs if r.status == FAIL and (not r.problem or r.problem.kind == "exception")]
    passed = [(r, c) for r, c in pairs if r.status == PASS]
    if not failed:
        return None
    if all(r.forward == PASS and r.gradient == FAIL and not r.problem for r, _ in failed):
        return Symptom("gradients_only",
                       "every failing case has a right forward pass and wrong gradients: is something detached "
                       "(.detach(), .data, torch.no_grad()), changed in place, or is a hand-written backward wrong?",
                       "所有失败的用例前向都对、梯度不对："
                       "是不是有东西被 detach 了（.detach()、.data、torch.no_grad()），"
                       "有原地修改，或手写的反向传播有误？")
    # only cases of the functions that failed tell a trait apart (a helper's cases passing say nothing)
    targets = {c.target for _, c in failed}
    passed = [(r, c) for r, c in passed if c.target in targets]
    if len(passed) < 2:
        return None
    common = set.intersection(*(traits_of(c) for _, c in failed))
    only = [t for t in _ONLY if t in common and not any(t in traits_of(c) for _, c in passed)]
    # a dtype tells the cases apart only where the dtype is all that differs: a failing case and a
    # passing one with the same arguments and other traits (else the float32 cases may merely be
    # the ones with more beams, and a precision hint would send the user the wrong way)
    dtypes = set(_DTYPE_TRAITS.values())
    hinted = only
    if not any(dtype_twins(cf, cp, dtypes) for _, cf in failed for _, cp in passed):
        # ...unless the failures say it themselves: float64 cases failing by the precision rule only
        # (float32-level error where float64 is asked) are a float64 input computed in float32
        said = {"fp64"} if all(r.tensor == "precision" for r, _ in failed) else set()
        hinted = [t for t in only if t not in dtypes or t in said]
    if not only:
        return None
    # every trait the failing cases share and no passing case has: all of them, if the cases cannot tell
    what = " and ".join(TRAITS.get(t) or _DTYPE_WORDS.get(t, t) for t in only)
    zh_what = "且".join(_ZH_TRAITS.get(t) or _DTYPE_WORDS.get(t, t) for t in only)
    en = f"the cases that fail are exactly those with {what}; every other case passes."
    zh = f"失败的恰好是{zh_what}的用例，其余用例都通过。"
    if hinted:
        en += (" Where to look first (a guess from that pattern, not a diagnosis): "
               + " Or ".join(_ONLY[t][0] for t in hinted))
        zh += "可以先看这里（这是根据该规律的猜测，不是诊断）：" + " 或者，".join(_ONLY[t][1] for t in hinted)
    else:
        en += " Those cases differ from the passing ones in more than their dtype, so this is a pattern, not a clue."
        zh += "这些用例与通过的用例之间不只是 dtype 不同，所以这只是一个规律，不是线索。"
    return Symptom("only_" + "_".join(only), en, spaced(zh))
