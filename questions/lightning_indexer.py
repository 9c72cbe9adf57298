"""Follow-up questions for `lightning_indexer` (see attn_drill/quiz.py for the format)."""
from attn_drill.bank.quiz import Choice, Number, Ref


def indexer_macs_per_pair(heads, head_dim):
    """Multiply-adds the indexer spends on one (query, key) pair: a dot product per head, then the weighted sum."""
    return heads * head_dim + heads


def empty_slots(position, topk):
    """Slots left at -1 for a query that sees position + 1 keys."""
    return max(0, topk - (position + 1))


def attended_share(T, topk):
    """The share of the keys a query at the end of a T-token context attends to."""
    return min(topk, T) / T


QUESTIONS = [
    Number(
        "indexer_macs",
        en="DeepSeek-V3.2's indexer has 64 index heads of dim 128. How many multiply-adds does it spend on one "
           "(query, key) pair (the per-head dot products and the weighted sum over heads)?",
        zh="DeepSeek-V3.2 的索引器有 64 个 128 维的索引头。它在一对 (query, key) 上要做多少次乘加（各头的点积以及对各头"
           "的加权求和）？",
        answer=lambda: indexer_macs_per_pair(64, 128),
        unit=("multiply-adds", "次乘加"),
        explain=("64 · 128 = 8192 for the dot products plus 64 for the weighted sum: 8256. The same pair costs MLA's "
                 "absorbed attention 128 heads · (512 + 64) = 73728 multiply-adds for the scores alone, about 9 times "
                 "more, and the indexer runs in FP8: that is what makes scoring every pair affordable.",
                 "点积 64 · 128 = 8192 次，加权求和 64 次：共 8256 次。同样一对在 MLA 的吸收形式中，仅分数就要 128 个头 · "
                 "(512 + 64) = 73728 次乘加，约为 9 倍，而且索引器在 FP8 下运行：正因如此，给每一对打分才负担得起。"),
        see=Ref("reference", "dots = torch.einsum(\"bihd,bsd->bihs\", q_index, k_index) * d ** -0.5"),
        proof=lambda ref: _macs_measured(ref, 64, 128),
    ),
    Number(
        "empty_slots",
        en="topk = 8 and Lq = Lk (a prefill). How many of query 5's index slots are -1?",
        zh="topk = 8，Lq = Lk（prefill）。query 5 的下标名额中有多少个是 -1？",
        answer=lambda: empty_slots(5, 8),
        unit=("slots", "个名额"),
        explain=("Query 5 sees keys 0-5, six of them, so it keeps all six and two slots stay -1. The official code "
                 "fills them with masked future positions instead and relies on the attention's causal mask; a "
                 "consumer that trusts the indices would attend to the future.",
                 "query 5 能看到 key 0-5，共 6 个，于是全部保留，剩下 2 个名额为 -1。官方代码在这里填的是被屏蔽的未来位置，"
                 "依靠注意力中的因果掩码去掉它们；信任这些下标的下游就会关注到未来。"),
        see=Ref("statement", "fills the other slots with `-1`"),
        proof=lambda ref: _empty_measured(ref, 5, 8),
    ),
    Number(
        "attended_share",
        en="topk = 2048 at a context of 131072 tokens. What share of the keys does the last query attend to? "
           "(a fraction, e.g. 0.5)",
        zh="上下文为 131072 个 token，topk = 2048。最后一个 query 关注的 key 占多大比例？（填小数，例如 0.5）",
        answer=lambda: attended_share(131072, 2048),
        unit=("of the keys", "的 key"),
        rel_tol=0.001,
        explain=("2048 / 131072 = 1/64 = 0.015625. The main attention's cost per query becomes constant in T; the "
                 "indexer is still quadratic, only with far cheaper terms.",
                 "2048 / 131072 = 1/64 = 0.015625。主注意力每个 query 的代价变得与 T 无关；索引器仍是平方复杂度，只是每一项"
                 "便宜得多。"),
        see=Ref("statement", "its `topk` best keys (2048 in the model)"),
    ),
    Choice(
        "why_relu",
        en="Why does the indexer use ReLU per head and a weighted sum, rather than a softmax over the keys?",
        zh="为什么索引器对每个头用 ReLU 再加权求和，而不是在 key 上做 softmax？",
        right=("Only the ranking matters: a ReLU score of one key does not depend on the other keys, needs no "
               "normalisation pass over the context, and is cheap in FP8; a softmax would cost a reduction over "
               "every key without changing what is selected much.",
               "这里只关心排序：ReLU 给出的一个 key 的分数与其他 key 无关，不需要对整个上下文做归一化，在 FP8 下也很便宜；"
               "softmax 要在所有 key 上做一次归约，对选出的结果却没什么改变。"),
        wrong=[("A softmax would make the scores negative, and top-k cannot rank negative numbers.",
                "softmax 会让分数变成负数，而 top-k 不能给负数排序。"),
               ("ReLU makes every score positive, so the scores form a probability distribution.",
                "ReLU 让每个分数都为正，所以这些分数构成一个概率分布。"),
               ("ReLU is needed for causality: it zeroes the scores of future keys.",
                "ReLU 是因果性所必需的：它把未来 key 的分数置零。")],
        explain=("The head weights are signed, so the scores can be negative and are not a distribution; causality "
                 "comes from masking before the top-k. The indexer is trained to match the main attention's "
                 "distribution through a KL loss on its selected keys, but it never needs to be one itself.",
                 "各头的权重带符号，所以分数可以为负，也不是一个分布；因果性来自 top-k 之前的掩码。索引器通过在其选中的 key "
                 "上的 KL 损失去逼近主注意力的分布，但它本身从来不需要是一个分布。"),
        see=Ref("reference", "scores = torch.einsum(\"bih,bihs->bis\", weights, torch.relu(dots))"),
    ),
    Choice(
        "why_stable_sort",
        en="Why does the reference rank with torch.sort(..., stable=True) rather than torch.topk?",
        zh="为什么参考实现用 torch.sort(..., stable=True) 排序，而不用 torch.topk？",
        right=("Exact ties are common (every key that all heads score below zero has score 0), and topk does not "
               "promise which of equal values it returns; a stable descending sort keeps equal scores in key "
               "order, so the earlier key wins, as the statement asks.",
               "恰好相等的平局很常见（所有头都给出负点积的 key 分数都是 0），而 topk 不保证在相等的值中返回哪一个；稳定的"
               "降序排序让相等的分数保持 key 的顺序，于是靠前的 key 胜出，正如题目要求的那样。"),
        wrong=[("torch.topk cannot handle -inf scores.",
                "torch.topk 不能处理 -inf 分数。"),
               ("torch.topk is not differentiable, and the scores need gradients.",
                "torch.topk 不可微，而分数需要梯度。"),
               ("A sort is faster than topk when topk is small.",
                "topk 较小时，排序比 topk 更快。")],
        explain=("topk handles -inf fine and the indices carry no gradient either way; a full sort is slower, "
                 "which is why real kernels use topk and accept any tie order. Fixing the tie rule makes the "
                 "answer a function of the inputs.",
                 "topk 能正常处理 -inf，而且无论哪种方式下标都不带梯度；完整排序更慢，所以真实的 kernel 用 topk，接受任意的"
                 "平局顺序。规定平局规则是为了让答案完全由输入决定。"),
        see=Ref("reference", "order = torch.sort(masked, dim=-1, descending=True, stable=True).indices"),
    ),
]


def _macs_measured(ref, heads, head_dim):
    """FLOPs of the reference indexer on one query and one key, halved."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    q = torch.randn(1, 1, heads, head_dim, dtype=torch.float64)
    k = torch.randn(1, 1, head_dim, dtype=torch.float64)
    w = torch.randn(1, 1, heads, dtype=torch.float64)
    with FlopCounterMode(display=False) as counter:
        ref.lightning_indexer(q, k, w, 1)
    return counter.get_total_flops() // 2


def _empty_measured(ref, position, topk):
    import torch

    gen = torch.Generator().manual_seed(0)
    L = position + 3
    q = torch.randn(1, L, 2, 4, generator=gen, dtype=torch.float64)
    k = torch.randn(1, L, 4, generator=gen, dtype=torch.float64)
    w = torch.randn(1, L, 2, generator=gen, dtype=torch.float64)
    _, indices = ref.lightning_indexer(q, k, w, topk)
    return int((indices[0, position] == -1).sum())
