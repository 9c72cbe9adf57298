"""Follow-up questions for `flash_decoding` (see attn_drill/quiz.py for the format)."""
import math

from attn_drill.bank.quiz import Choice, Number, Ref


def merged(partials):
    """partials: [(out_s, lse_s)] of one query over disjoint splits -> the merged output."""
    M = max(lse for _, lse in partials)
    w = [math.exp(lse - M) for _, lse in partials]
    return sum(wi * o for wi, (o, _) in zip(w, partials)) / sum(w)


def empty_splits(L, split_size, cache_len):
    """Splits of a cache of capacity L that hold no valid key of a sequence of cache_len tokens."""
    return math.ceil(L / split_size) - math.ceil(cache_len / split_size)


def partial_bytes(B, Hq, D, L, split_size, bytes_per_element):
    """out_partial (S, B, Hq, D) and lse_partial (S, B, Hq) together."""
    S = math.ceil(L / split_size)
    return (S * B * Hq * D + S * B * Hq) * bytes_per_element


QUESTIONS = [
    Number(
        "merge_value",
        en="One query, three splits. Their partial outputs and log-sum-exps are (out, lse) = (2, ln 1), "
           "(5, ln 3) and (0, -inf), the last split being empty. What output does combine_partials return?",
        zh="一个 query，三个 split。它们的部分输出和 log-sum-exp 为 (out, lse) = (2, ln 1)、(5, ln 3) 和 (0, -inf)，"
           "最后一个 split 是空的。combine_partials 返回的输出是多少？",
        answer=lambda: merged([(2.0, 0.0), (5.0, math.log(3)), (0.0, -math.inf)]),
        unit=("(output value)", "（输出值）"),
        rel_tol=0.01,
        explain=("The weights are e^(lse_s - lse) with lse = ln(1 + 3) = ln 4: 1/4 and 3/4, and 0 for the empty "
                 "split. out = 2/4 + 15/4 = 4.25. Averaging the two non-empty partials (3.5) ignores that the second "
                 "split holds three quarters of the softmax mass.",
                 "权重为 e^(lse_s - lse)，其中 lse = ln(1 + 3) = ln 4：分别是 1/4 和 3/4，空 split 为 0。"
                 "out = 2/4 + 15/4 = 4.25。直接平均两个非空部分结果（3.5）忽略了第二个 split 占了 softmax 总量的四分之三。"),
        see=Ref("reference", "w = torch.exp(lse_partial - M)"),
        proof=lambda ref: _merge_measured(ref),
    ),
    Number(
        "empty_splits",
        en="A cache of capacity L = 4096 is cut into splits of 512 keys. How many of the splits are empty for a "
           "sequence whose cache_lens is 1000?",
        zh="容量 L = 4096 的 cache 被切成每个 512 个 key 的 split。对 cache_lens 为 1000 的序列，有多少个 split 是空的？",
        answer=lambda: empty_splits(4096, 512, 1000),
        unit=("splits", "个 split"),
        explain=("S = 4096 / 512 = 8 splits; positions 0 .. 999 fill splits 0 and 1 (the second only partly), so 6 "
                 "are empty: they store out 0 and lse -inf and cost a launch each. That is why kernels that size "
                 "the splits from a padded length waste work on short sequences, and why some size them per "
                 "sequence instead.",
                 "S = 4096 / 512 = 8 个 split；位置 0 .. 999 落在 split 0 和 1 中（第二个只占一部分），所以有 6 个是空的："
                 "它们保存 out 0 和 lse -inf，而且每个都要占一次调度。这就是按填充长度划分 split 的 kernel 在短序列上浪费"
                 "工作的原因，也是有些 kernel 改为按每条序列自己的长度划分的原因。"),
        see=Ref("statement", "every split past a short sequence's length"),
        proof=lambda ref: _empty_measured(ref, 4096, 512, 1000),
    ),
    Number(
        "partial_bytes",
        en="Batch 1, 32 query heads of dimension 128, a cache of 32 768 tokens, splits of 2 048 keys, partials "
           "kept in float32. How many bytes do out_partial and lse_partial take together?",
        zh="batch 为 1，32 个维度为 128 的 query 头，cache 有 32 768 个 token，每个 split 2 048 个 key，部分结果以 "
           "float32 保存。out_partial 和 lse_partial 一共占多少字节？",
        answer=lambda: partial_bytes(1, 32, 128, 32768, 2048, 4),
        unit=("bytes", "字节"),
        explain=("S = 16 splits: 16 · 32 · 128 · 4 = 262 144 bytes of outputs plus 16 · 32 · 4 = 2 048 of "
                 "log-sum-exps, 264 192 in all. The full score row would be 32 · 32 768 · 4 = 4 MiB; the "
                 "partials grow with the number of splits, not with the length of the cache.",
                 "S = 16 个 split：输出占 16 · 32 · 128 · 4 = 262 144 字节，log-sum-exp 占 16 · 32 · 4 = 2 048 字节，"
                 "一共 264 192 字节。完整的分数行是 32 · 32 768 · 4 = 4 MiB；部分结果随 split 数增长，而不随 cache "
                 "长度增长。"),
        see=Ref("reference", "return torch.stack(outs), torch.stack(lses)"),
        proof=lambda ref: _partial_bytes_measured(ref, 1, 32, 128, 32768, 2048),
    ),
    Choice(
        "why_split",
        en="Decoding one token for batch 2 with 32 heads on a GPU with 132 SMs: why split the cache along its "
           "length at all, when one block per (sequence, head) already computes the exact answer?",
        zh="在有 132 个 SM 的 GPU 上，为 batch 2、32 个头解码一个 token：既然每个（序列，头）一个 block 就能算出精确结果，"
           "为什么还要沿长度切分 cache？",
        right=("64 blocks cannot fill 132 SMs, and each would read its whole cache alone; splits add blocks that read "
               "parts of the cache in parallel, and the exact merge through the log-sum-exps costs almost nothing.",
               "64 个 block 占不满 132 个 SM，而且每个 block 都要独自读完整个 cache；切分增加了并行读取 cache 各部分的 "
               "block，而通过 log-sum-exp 的精确合并几乎不花时间。"),
        wrong=[("Splitting reduces the number of FLOPs of attention from quadratic to linear in the cache length.",
                "切分把注意力的 FLOP 数从与 cache 长度成平方降到了成线性。"),
               ("The softmax over a long cache overflows unless the keys are cut into short splits.",
                "除非把 key 切成短的 split，否则对长 cache 做 softmax 会溢出。"),
               ("Each split may skip the keys with small scores, so less of the cache is read.",
                "每个 split 可以跳过分数小的 key，因此读取的 cache 更少。")],
        explain=("Decode attention is one query row: its FLOPs are linear in the length either way, and the exact "
                 "merge reads every key. What splitting buys is parallelism when B · H is small: the work is "
                 "memory-bound, so more blocks reading the cache at once finish sooner. Overflow is handled by the "
                 "max subtraction, with or without splits.",
                 "解码注意力只有一行 query：无论是否切分，它的 FLOP 都与长度成线性，精确合并也要读每个 key。切分换来的是 "
                 "B · H 很小时的并行度：这份工作受显存带宽限制，更多的 block 同时读取 cache 就能更快完成。溢出靠减去最大值"
                 "来处理，与是否切分无关。"),
        see=Ref("statement", "leaves most of the GPU idle"),
    ),
    Choice(
        "gqa_no_copy",
        en="With 32 query heads and 8 KV heads, why does a decode kernel put the 4 query heads of one KV head into "
           "one block rather than repeat_interleave the cache to 32 heads?",
        zh="有 32 个 query 头和 8 个 KV 头时，为什么解码 kernel 把同一个 KV 头的 4 个 query 头放进一个 block，而不是用 "
           "repeat_interleave 把 cache 扩展到 32 个头？",
        right=("Decode is limited by reading the cache; sharing one read of each KV head among its 4 query heads reads "
               "the cache once instead of 4 times, and copying it would also cost 4 times its memory.",
               "解码受读取 cache 的速度限制；让同一个 KV 头的 4 个 query 头共享一次读取，cache 只读一遍而不是四遍，而复制"
               "还要多占四倍的显存。"),
        wrong=[("repeat_interleave gives query head h the KV head h % 8, which is the wrong pairing.",
                "repeat_interleave 让 query 头 h 使用 KV 头 h % 8，配对是错的。"),
               ("The softmax must be taken over the 4 query heads of a group together, so they must sit in one block.",
                "softmax 必须在一组的 4 个 query 头上一起计算，所以它们必须在同一个 block 里。"),
               ("A block can only hold one KV head, so the answer would differ if the cache were copied.",
                "一个 block 只能放一个 KV 头，所以复制 cache 会改变结果。")],
        explain=("The copy gives the same numbers (repeat_interleave keeps h // 4, the right pairing); it only costs "
                 "memory and bandwidth, which is exactly what decode is short of. Each query head still has its own "
                 "softmax over the keys.",
                 "复制得到的数值相同（repeat_interleave 保持 h // 4，配对是对的）；它只是耗费显存和带宽，而这正是解码最缺的。"
                 "每个 query 头仍然在 key 上做各自的 softmax。"),
        see=Ref("statement", "never copied per query head"),
    ),
]


def _merge_measured(ref):
    import torch
    out = torch.tensor([2.0, 5.0, 0.0], dtype=torch.float64).view(3, 1, 1, 1)
    lse = torch.tensor([0.0, math.log(3), -math.inf], dtype=torch.float64).view(3, 1, 1)
    o, _ = ref.combine_partials(out, lse)
    return float(o.flatten()[0])


def _empty_measured(ref, L, split_size, cache_len):
    import torch
    q = torch.randn(1, 1, 4, dtype=torch.float64)
    k = torch.randn(1, L, 1, 4, dtype=torch.float64)
    _, lse = ref.split_partials(q, k, k, torch.tensor([cache_len]), split_size)
    return int((lse == -math.inf).sum())


def _partial_bytes_measured(ref, B, Hq, D, L, split_size):
    """The reference's partials on meta tensors (nothing is allocated)."""
    import torch
    with torch.device("meta"):
        q = torch.empty(B, Hq, D)
        k = torch.empty(B, L, 1, D)
        lens = torch.empty(B, dtype=torch.int64)
    out, lse = ref.split_partials(q, k, k, lens, split_size)
    return out.numel() * out.element_size() + lse.numel() * lse.element_size()
