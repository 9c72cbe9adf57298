"""Follow-up questions for `moba` (see attn_drill/quiz.py for the format)."""
from attn_drill.bank.quiz import Choice, Number, Ref


def keys_attended(t, chunk_size, topk):
    """Keys of query t: topk - 1 whole past blocks (when it has that many) and its own block up to t."""
    own = t // chunk_size
    past = min(topk - 1, own)
    return past * chunk_size + t % chunk_size + 1


def sparsity(T, chunk_size, topk):
    """The share of the T keys that the last query does not attend to."""
    return 1 - topk * chunk_size / T


QUESTIONS = [
    Number(
        "keys_attended",
        en="chunk_size = 3 and topk = 2, T = 10. How many keys does query t = 7 attend to?",
        zh="chunk_size = 3，topk = 2，T = 10。query t = 7 关注多少个 key？",
        answer=lambda: keys_attended(7, 3, 2),
        unit=("keys", "个 key"),
        explain=("Its own block 2 holds tokens 6-8, of which 6 and 7 are not in its future; the one free slot brings "
                 "a whole past block of 3 tokens: 5 keys. Giving it topk past blocks besides its own would make "
                 "it 8.",
                 "它自己的块 2 包含 token 6-8，其中 6 和 7 不在它的未来；唯一的空余名额带来一个完整的过去块，共 3 个 "
                 "token：一共 5 个 key。如果在自己的块之外再给它 topk 个过去块，就会变成 8 个。"),
        see=Ref("statement", "and attends to those 3 tokens plus 6 and 7"),
        proof=lambda ref: _keys_measured(ref, 10, 7, 3, 2),
    ),
    Number(
        "sparsity_at_1m",
        en="MoBA's defaults are chunk_size = 4096 and topk = 12. At T = 1,048,576 tokens, what share of the keys "
           "does the last query skip? (a fraction, e.g. 0.5)",
        zh="MoBA 的默认值是 chunk_size = 4096、topk = 12。在 T = 1,048,576 个 token 时，最后一个 query 跳过了多大比例的 "
           "key？（填小数，例如 0.5）",
        answer=lambda: sparsity(1_048_576, 4096, 12),
        unit=("of the keys", "的 key"),
        rel_tol=0.001,
        explain=("12 · 4096 = 49152 keys of 1,048,576: it skips 1 - 0.046875 = 0.953 of them (the MoBA paper's "
                 "95.31% sparsity at 1M). The cost per query is fixed by chunk_size · topk, while the gate still "
                 "reads T / chunk_size = 256 mean keys.",
                 "1,048,576 个 key 中只读 12 · 4096 = 49152 个：跳过了 1 - 0.046875 = 0.953（即 MoBA 论文中 1M 长度下 "
                 "95.31% 的稀疏度）。每个 query 的代价由 chunk_size · topk 决定，而门控仍要读 T / chunk_size = 256 个"
                 "均值 key。"),
        see=Ref("statement", "`chunk_size = 4096`"),
    ),
    Choice(
        "why_force_own_block",
        en="Why is the query's own block always selected instead of being gated like the others?",
        zh="为什么 query 自己所在的块总是被选中，而不是像其他块一样经过门控？",
        right=("Its mean key would include keys after the query, so gating on it leaks the future; and the nearest "
               "tokens (the query itself among them) matter most, so it must never be dropped.",
               "它的均值 key 会包含 query 之后的 key，按它做门控就泄露了未来的信息；而且最近的 token（包括 query 自己）"
               "最重要，绝不能被丢掉。"),
        wrong=[("Its gate is always the largest anyway, so forcing it changes nothing.",
                "它的门控值本来就总是最大的，所以强制选中它什么也不改变。"),
               ("Top-k cannot select the block that contains the query.",
                "top-k 无法选中包含 query 的那个块。"),
               ("The own block is attended by a separate sliding window, and forcing it keeps the two consistent.",
                "自己的块由另外一个滑动窗口负责关注，强制选中它是为了让两者一致。")],
        explain=("A query does not always match its own block's mean best, and a gate on it would read future keys. "
                 "MoBA's efficient kernel even treats the own block as a separate causal attention and merges it "
                 "with the selected past blocks through their log-sum-exps.",
                 "query 并不总是与自己块的均值最匹配，而且在它上面做门控会读到未来的 key。MoBA 的高效 kernel 甚至把自己的块"
                 "单独做一次因果注意力，再通过 log-sum-exp 与选中的过去块合并。"),
        see=Ref("reference", "current = j == own"),
    ),
    Choice(
        "why_token_causal_mask",
        en="The selection never includes future blocks. Why does moba_attention still need a token-level causal "
           "mask?",
        zh="选择结果从不包含未来的块。为什么 moba_attention 还需要 token 级的因果掩码？",
        right=("The own block is selected whole, and the tokens after the query in that block are in its future.",
               "自己所在的块是整块被选中的，而块内 query 之后的 token 都在它的未来。"),
        wrong=[("Past blocks may hold padding that the causal mask removes.",
                "过去的块里可能有填充，需要因果掩码去掉。"),
               ("The gate is computed without a scale, and the causal mask compensates for it.",
                "门控计算时没有乘缩放，因果掩码起到了补偿作用。"),
               ("It is not needed; it only makes the softmax numerically safer.",
                "并不需要；它只是让 softmax 在数值上更稳定。")],
        explain=("Past blocks are entirely before the query, so the mask changes nothing there; inside the own block "
                 "it is what keeps the attention causal. (Upstream's naive code also relies on it to drop the future "
                 "blocks its top-k returns for early queries.)",
                 "过去的块完全位于 query 之前，掩码在那里不起作用；在自己所在的块内，正是它保证了注意力是因果的。（上游的朴素"
                 "实现还依靠它去掉 top-k 对靠前的 query 返回的未来块。）"),
        see=Ref("reference", "keep = in_block.transpose(1, 2) & causal"),
    ),
]


def _keys_measured(ref, T, t, chunk_size, topk):
    """Count the keys with weight at query t: values v = one-hot rows make the output the weights."""
    import torch

    gen = torch.Generator().manual_seed(0)
    q = torch.randn(1, T, 1, 4, generator=gen, dtype=torch.float64)
    k = torch.randn(1, T, 1, 4, generator=gen, dtype=torch.float64)
    v = torch.eye(T, dtype=torch.float64)[None, :, None, :]                          # (1, T, 1, T)
    out = ref.moba_attention(q, k, v, chunk_size, topk)                               # (1, T, 1, T)
    return int((out[0, t, 0] > 0).sum())
