"""Follow-up questions for `chunked_attention` (see attn_drill/bank/quiz.py for the format)."""
from attn_drill.bank.quiz import Choice, Number, Ref


def score_block_bytes(B, H, chunk, bytes_per_elem):
    """One (B, H, chunk, chunk) block of scores; the sequence lengths do not appear."""
    return B * H * chunk * chunk * bytes_per_elem


def block_pairs(Lq, Lk, chunk):
    """(query block, key block) pairs the two loops visit: ceil(Lq / chunk) · ceil(Lk / chunk)."""
    return -(-Lq // chunk) * -(-Lk // chunk)


QUESTIONS = [
    Choice(
        "why_rescale",
        en="When a key block raises a row's running max from m_old to m_new, the accumulator is multiplied by "
           "exp(m_old − m_new). Why?",
        zh="当某个 key 块把一行的当前最大值从 m_old 提高到 m_new 时，累加器要乘以 exp(m_old − m_new)。为什么？",
        right=("It was summed with weights exp(s − m_old); the factor turns them into exp(s − m_new), so old and "
               "new terms share one reference and acc / l is exactly the softmax-weighted sum.",
               "它是按权重 exp(s − m_old) 累加的；乘上这个因子就变成 exp(s − m_new)，新旧项用同一个基准，acc / l 就"
               "恰好是 softmax 加权和。"),
        wrong=[("It is a numerical correction that keeps the error small; the result still depends slightly on "
                "chunk_size.",
                "这是一个让误差变小的数值修正；结果仍会随 chunk_size 略有不同。"),
               ("It is only needed in low precision; in float64 it can be skipped.",
                "只有低精度下才需要；float64 时可以省略。"),
               ("It keeps l below 1, so that the final division stays stable.",
                "它让 l 保持小于 1，使最后的除法保持稳定。")],
        explain=("The online softmax is exact: after the rescaling every term carries exp(s − m_final), whatever "
                 "the chunk size. Skipping it mixes terms with different references and is wrong in every "
                 "precision; and l is at least 1, since the row's largest score contributes exp(0).",
                 "在线 softmax 是精确的：经过修正，无论块多大，每一项都带着 exp(s − m_final)。省掉它会把基准不同的项混在"
                 "一起，在任何精度下都是错的；而 l 至少为 1，因为一行中最大的分数贡献了 exp(0)。"),
        see=Ref("reference", "acc = alpha * acc + torch.matmul(p, v)"),
    ),
    Choice(
        "masked_block",
        en="You add a mask by setting masked scores to -inf. For one query row, the first key block is entirely "
           "masked. What happens in this loop?",
        zh="你用把被屏蔽分数设为 -inf 的方式加入掩码。对某个 query 行，第一个 key 块被完全屏蔽。这个循环会发生什么？",
        right=("m_new stays −inf, so exp(m − m_new) and exp(s − m_new) compute exp(−inf + inf) = NaN, and the NaN "
               "survives every later block; the max needs a guard (e.g. use 0 where it is −inf).",
               "m_new 仍是 −inf，于是 exp(m − m_new) 和 exp(s − m_new) 计算的是 exp(−inf + inf) = NaN，并且这个 NaN 会"
               "一直保留到之后的所有块；需要对最大值做保护（例如在它为 −inf 的地方用 0）。"),
        wrong=[("Nothing: exp(−inf) is 0, so the masked block adds 0 to l and to the accumulator.",
                "没有问题：exp(−inf) 是 0，所以被屏蔽的块只是给 l 和累加器加 0。"),
               ("Only the final division fails, and only if every key block of the row is masked.",
                "只有最后的除法会出错，而且只在这一行所有 key 块都被屏蔽时才会。"),
               ("Later blocks are rescaled by exp(−inf) = 0, so the row's output ends up 0.",
                "之后的块会被乘以 exp(−inf) = 0，所以这一行的输出最终为 0。")],
        explain=("exp(−inf) = 0 holds only when the max is finite; here both terms of the difference are −inf. Once "
                 "l and acc are NaN, multiplying them by alpha keeps them NaN. FlashAttention-style kernels "
                 "replace a −inf max by 0 before subtracting it.",
                 "只有在最大值有限时才有 exp(−inf) = 0；这里相减的两项都是 −inf。l 和 acc 一旦成为 NaN，乘以 alpha 后"
                 "仍是 NaN。FlashAttention 一类的 kernel 会在相减之前把 −inf 的最大值换成 0。"),
        see=Ref("reference", "alpha = torch.exp(m - m_new)"),
    ),
    Choice(
        "query_blocks",
        en="The key loop alone already avoids the full (Lq, Lk) matrix. Why cut the queries into blocks too?",
        zh="只靠 key 的循环就已经避免了完整的 (Lq, Lk) 矩阵。为什么还要把 query 也切块？",
        right=("With all queries at once a block of scores is (Lq, chunk), which still grows with Lq; query blocks "
               "bound it by chunk², and on a GPU each query block is an independent job with its own m, l and "
               "accumulator.",
               "一次处理所有 query 时，一块分数是 (Lq, chunk)，仍随 Lq 增长；query 切块后它以 chunk² 为上限，而且在 "
               "GPU 上每个 query 块都是一个独立的任务，有自己的 m、l 和累加器。"),
        wrong=[("Without query blocks the answer would be wrong, because the online softmax needs every query at "
                "once.",
                "不切 query 结果就会出错，因为在线 softmax 需要同时拿到所有 query。"),
               ("Query blocks cut the FLOPs, because each query block only reads the key blocks near it.",
                "query 切块能减少 FLOPs，因为每个 query 块只读取它附近的 key 块。"),
               ("It is needed so that m and l can be single numbers instead of one per query row.",
                "这样 m 和 l 才能是单个数，而不是每个 query 行一个。")],
        explain=("The softmax is per query row, so query blocks never interact and can run in parallel. Without a "
                 "mask every query block still visits every key block, so the FLOPs are unchanged; m and l stay "
                 "one per row, shape (B, H, cq, 1).",
                 "softmax 是按 query 行做的，所以各 query 块互不影响，可以并行。没有掩码时每个 query 块仍要遍历所有 key 块，"
                 "FLOPs 不变；m 和 l 也仍是每行一个，形状为 (B, H, cq, 1)。"),
        see=Ref("reference", "for i in range(0, Lq, chunk_size)"),
    ),
    Number(
        "score_block_bytes",
        en="B = 1, 32 heads, Lq = Lk = 32768, head dim 128, chunk_size = 256, float32. How many bytes does one "
           "block of scores s take?",
        zh="B = 1，32 个头，Lq = Lk = 32768，头维度 128，chunk_size = 256，float32。一块分数 s 占多少字节？",
        answer=lambda: score_block_bytes(1, 32, 256, 4),
        unit=("bytes", "字节"),
        explain=("B · H · chunk² · 4 = 8 MiB, whatever the sequence length; the full score matrix would be "
                 "32 · 32768² · 4 bytes = 128 GiB. The head dim sets the size of Q, K and V blocks, not of s.",
                 "B · H · chunk² · 4 = 8 MiB，与序列长度无关；完整的分数矩阵则要 32 · 32768² · 4 字节 = 128 GiB。头维度决定"
                 "Q、K、V 块的大小，而不是 s 的大小。"),
        see=Ref("reference", "s = scale * torch.matmul(q, k.transpose(-2, -1))"),
        proof=lambda ref: _measured_block_bytes(ref, 1, 32, 128, 256),
    ),
    Number(
        "block_pairs",
        en="With Lq = 1000 queries, Lk = 3000 keys and chunk_size = 256, how many (query block, key block) pairs "
           "does the function process, each with one online-softmax update?",
        zh="Lq = 1000 个 query、Lk = 3000 个 key、chunk_size = 256 时，这个函数要处理多少个（query 块，key 块）对"
           "（每对做一次在线 softmax 更新）？",
        answer=lambda: block_pairs(1000, 3000, 256),
        unit=("pairs", "对"),
        explain=("ceil(1000 / 256) = 4 query blocks times ceil(3000 / 256) = 12 key blocks = 48, the last blocks "
                 "being short (232 queries, 184 keys). Looping over keys up to Lq would visit only 4 key blocks "
                 "and never see keys 1024..2999.",
                 "ceil(1000 / 256) = 4 个 query 块乘以 ceil(3000 / 256) = 12 个 key 块 = 48，最后的块较短（232 个 query、"
                 "184 个 key）。若 key 循环的上界用 Lq，只会遍历 4 个 key 块，key 1024..2999 永远看不到。"),
        see=Ref("reference", "for j in range(0, Lk, chunk_size)"),
        proof=lambda ref: _measured_pairs(ref, 1000, 3000, 256),
    ),
]


def _largest_square_block(ref, B, H, Lq, Lk, D, chunk):
    """Bytes of the largest new tensor of shape (..., chunk, chunk) the reference creates, on the meta device."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class Largest(TorchDispatchMode):
        most = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            is_view = any(r.alias_info is not None for r in func._schema.returns)
            if isinstance(out, torch.Tensor) and not is_view and tuple(out.shape[-2:]) == (chunk, chunk):
                Largest.most = max(Largest.most, out.numel() * out.element_size())
            return out

    with torch.device("meta"):
        Q, K, V = torch.empty(B, H, Lq, D), torch.empty(B, H, Lk, D), torch.empty(B, H, Lk, D)
    with Largest():
        ref.chunked_attention(Q, K, V, chunk_size=chunk)
    return Largest.most


def _measured_block_bytes(ref, B, H, D, chunk):
    """Measured at two shorter lengths (one not a multiple of the chunk): the block does not depend on L."""
    a = _largest_square_block(ref, B, H, 4 * chunk, 4 * chunk, D, chunk)
    b = _largest_square_block(ref, B, H, 5 * chunk + 7, 3 * chunk + 1, D, chunk)
    return a if a == b else -1


def _measured_pairs(ref, Lq, Lk, chunk):
    """Count the reference's exp calls on the meta device: each pair runs two (alpha and p)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class CountExp(TorchDispatchMode):
        calls = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func is torch.ops.aten.exp.default:
                CountExp.calls += 1
            return func(*args, **(kwargs or {}))

    with torch.device("meta"):
        Q, K, V = torch.empty(1, 1, Lq, 8), torch.empty(1, 1, Lk, 8), torch.empty(1, 1, Lk, 8)
    with CountExp():
        ref.chunked_attention(Q, K, V, chunk_size=chunk)
    return CountExp.calls // 2
