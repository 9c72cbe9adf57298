"""Follow-up questions for `kv_cache` (see attn_drill/bank/quiz.py for the format)."""
from attn_drill.bank.quiz import Choice, Number, Ref


def kept_in_chunk(start_pos, L):
    """Entries of the (L, start_pos + L) keep mask: query i (position start_pos + i) keeps keys 0 .. start_pos + i."""
    return sum(start_pos + i + 1 for i in range(L))


def recompute_ratio(num_tokens):
    """Tokens pushed through the projections to generate num_tokens one at a time: once each with the cache,
    the whole prefix again at every step without it. The projections' FLOPs are linear in that count."""
    with_cache = num_tokens
    without_cache = sum(t for t in range(1, num_tokens + 1))
    return without_cache / with_cache


QUESTIONS = [
    Choice(
        "why_not_cache_q",
        en="The module caches keys and values but never queries. Why is there nothing to gain from a query cache?",
        zh="这个模块缓存 key 和 value，却从不缓存 query。为什么缓存 query 没有任何好处？",
        right=("A new token's output needs only its own query, against the keys and values of every earlier "
               "token; past queries are never read again, while past keys and values are read at every step.",
               "新 token 的输出只需要它自己的 query，再与之前所有 token 的 key 和 value 计算；过去的 query 再也不会被读取，"
               "而过去的 key 和 value 每一步都要读。"),
        wrong=[("Queries change at every step because they depend on the whole prefix, so a cached query would be "
                "stale.",
                "query 每一步都会变，因为它依赖整个前缀，所以缓存的 query 会过时。"),
               ("Caching queries would break causality, since a past query could then see future keys.",
                "缓存 query 会破坏因果性，因为过去的 query 会看到未来的 key。"),
               ("Queries are cached too in practice; they are just much smaller than keys and values.",
                "实际上 query 也会被缓存，只是它们比 key 和 value 小得多。")],
        explain=("Under a causal mask the rows of earlier positions are already final: no later token changes "
                 "them. So each step computes one row of the attention matrix, and that row needs one query and "
                 "all keys and values: the cache holds exactly what is reused.",
                 "在因果掩码下，之前位置的行已经是最终结果，后来的 token 不会改变它们。所以每一步只计算注意力矩阵的一行，"
                 "这一行需要一个 query 以及所有的 key 和 value：缓存里存的正是会被重复使用的东西。"),
        see=Ref("reference", "self.k_cache[:, :, start_pos:end] = k"),
    ),
    Choice(
        "zero_slots",
        en="Why must the attention read cache[:, :, :start_pos + L] rather than the whole max_len buffer, whose "
           "unwritten slots are all zeros?",
        zh="为什么注意力必须读取 cache[:, :, :start_pos + L]，而不是整个 max_len 缓冲区（未写入的位置全是零）？",
        right=("A zero key gives the score 0, not -inf, so every unwritten slot still takes exp(0 − max) of the "
               "softmax and pulls the output toward its zero value.",
               "零向量 key 的分数是 0 而不是 -inf，所以每个未写入的位置仍在 softmax 中分到 exp(0 − max) 的权重，"
               "把输出拉向它的零 value。"),
        wrong=[("Only for speed: zero keys get zero weight, so the output would be the same.",
                "只是为了速度：零向量 key 的权重为 0，输出不会变。"),
               ("Because zero keys produce NaN in the softmax.",
                "因为零向量 key 会让 softmax 出现 NaN。"),
               ("Only at the first step; once the prompt is cached, the zero slots no longer matter.",
                "只有第一步需要；prompt 写入缓存之后，零位置就无关紧要了。")],
        explain=("The softmax turns a score of 0 into a positive weight; only -inf gives exactly 0. Slicing to the "
                 "written positions (or masking the rest with -inf) is the only correct way; the error is largest "
                 "when few slots are written, so a test with max_len well above the sequence catches it best.",
                 "softmax 会把 0 分变成正的权重；只有 -inf 才得到恰好为 0 的权重。切到已写入的位置（或用 -inf 屏蔽其余位置）"
                 "才是正确的做法；已写入的位置越少，误差越大，所以 max_len 远大于序列长度的测试最容易发现这个错误。"),
        see=Ref("reference", "keys = self.k_cache[:, :, :end]"),
    ),
    Number(
        "chunk_mask_entries",
        en="A chunk of L = 3 tokens arrives at start_pos = 5. How many entries of its (L, start_pos + L) keep "
           "mask are True, i.e. how many (query, key) pairs does one head score?",
        zh="一个 L = 3 个 token 的 chunk 在 start_pos = 5 处到来。它的 (L, start_pos + L) 保留掩码中有多少个元素为 "
           "True，即一个头要计算多少个 (query, key) 对？",
        answer=lambda: kept_in_chunk(5, 3),
        unit=("entries", "个元素"),
        explain=("Query i sits at position 5 + i and keeps keys 0 .. 5 + i: 6 + 7 + 8 = 21 of the 24. A top-left "
                 "tril() would keep only 1 + 2 + 3 = 6, hiding most of the prompt from the new tokens.",
                 "query i 位于位置 5 + i，保留 key 0 .. 5 + i：24 个中保留 6 + 7 + 8 = 21 个。若用左上角对齐的 tril()，"
                 "只保留 1 + 2 + 3 = 6 个，新 token 看不到 prompt 的大部分内容。"),
        see=Ref("reference", ".tril(diagonal=start_pos)"),
        proof=lambda ref: _measured_kept(ref, 5, 3),
    ),
    Number(
        "recompute_ratio",
        en="Generate 256 tokens one at a time, starting from an empty sequence. Without a cache every step runs "
           "the projections over the whole prefix again; with it every token is projected once. How many times "
           "more qkv_proj and out_proj FLOPs does the version without a cache spend?",
        zh="从空序列开始，逐个生成 256 个 token。没有缓存时，每一步都要对整个前缀重新做投影；有缓存时每个 token 只投影一次。"
           "没有缓存的版本在 qkv_proj 和 out_proj 上多花多少倍的 FLOPs？",
        answer=lambda: recompute_ratio(256),
        unit=("times", "倍"),
        explain=("Step t projects t tokens, Σ t = N(N + 1)/2 in all against N: a ratio of (N + 1)/2 = 128.5, "
                 "growing linearly with the length. The attention core goes from Σ t² ≈ N³/3 multiply-adds "
                 "per head dimension down to Σ t ≈ N²/2.",
                 "第 t 步要投影 t 个 token，总计 Σ t = N(N + 1)/2，而有缓存时只有 N：比值为 (N + 1)/2 = 128.5，随长度线性增长。"
                 "注意力核心部分则从每个头维约 Σ t² ≈ N³/3 次乘加降到 Σ t ≈ N²/2。"),
        see=Ref("statement", "keeps the keys and values of earlier tokens in a cache instead of recomputing them"),
        proof=lambda ref: _measured_recompute_ratio(ref, 256),
    ),
]


def _measured_kept(ref, start_pos, L):
    """Run the reference on a prefix and then the chunk; the softmax weights (caught on their way into
    the dropout) are positive exactly where the mask keeps a key. One head, one sequence."""
    import torch

    m = ref.SelfAttentionWithCache(4, 1, dropout=0.0).double().eval()
    seen = []
    m.dropout.register_forward_hook(lambda mod, args, out: seen.append(args[0]))
    m.init_cache(1, start_pos + L)
    x = torch.randn(1, start_pos + L, 4, dtype=torch.float64)
    with torch.no_grad():
        m(x[:, :start_pos], 0)
        m(x[:, start_pos:], start_pos)
    return int((seen[-1] > 0).sum())


def _measured_recompute_ratio(ref, N):
    """FLOPs of the reference's projections (aten.mm; the attention core is aten.bmm), counted on the
    meta device. They are linear in the tokens of a call, so the full forwards over prefixes of 1 and 2
    tokens fix the cost of every prefix, and a decode step costs the same at every position."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    E = 4
    with torch.device("meta"):
        m = ref.SelfAttentionWithCache(E, 1, dropout=0.0).eval()
        x = torch.empty(1, N, E)

    def projection_flops(start, L):
        m.init_cache(1, N, "meta")
        with FlopCounterMode(display=False) as fc:
            m(x[:, start:start + L], start)
        return sum(n for op, n in fc.get_flop_counts()["Global"].items() if str(op) == "aten.mm")

    one, two = projection_flops(0, 1), projection_flops(0, 2)
    without = sum(one + (t - 1) * (two - one) for t in range(1, N + 1))   # a full forward per prefix
    first_step, last_step = projection_flops(0, 1), projection_flops(N - 1, 1)
    if first_step != last_step:
        raise AssertionError("a decode step's projection cost depends on its position")
    return without / (N * first_step)
