"""Follow-up questions for `kv_eviction` (see attn_drill/quiz.py for the format)."""
from attn_drill.bank.quiz import Choice, Number, Ref


def h2o_cache_bytes(layers, kv_heads, head_dim, bytes_per_element, heavy, recent, tokens):
    """K and V of every layer for the tokens an H2O cache holds: min(tokens, heavy + recent)."""
    held = min(tokens, heavy + recent)
    return layers * 2 * kv_heads * head_dim * bytes_per_element * held


def snapkv_voted(T, window, capacity):
    """Prefix positions SnapKV keeps by their votes (the window is kept besides)."""
    return capacity - window if T > capacity else T


QUESTIONS = [
    Number(
        "h2o_cache_bytes",
        en="A Llama-2-7B-like model (32 layers, 32 KV heads of dimension 128, float16) runs H2O with "
           "heavy_size = recent_size = 256 on a prompt of 3 000 tokens followed by 100 decode steps. How many "
           "bytes of K and V does the cache of one sequence hold at the end, over all layers?",
        zh="一个类似 Llama-2-7B 的模型（32 层，32 个维度为 128 的 KV 头，float16）在 3 000 个 token 的 prompt 之后解码 "
           "100 步，使用 heavy_size = recent_size = 256 的 H2O。最后一条序列的 cache 在所有层上一共存了多少字节的 K 和 V？",
        answer=lambda: h2o_cache_bytes(32, 32, 128, 2, 256, 256, 3100),
        unit=("bytes", "字节"),
        explain=("The cache holds heavy_size + recent_size = 512 tokens whatever the length: 32 · 2 · 32 · 128 · 2 "
                 "bytes = 512 KiB per token, 256 MiB in all, against 1.5 GiB for the 3 100 tokens of a full "
                 "cache. The budget is fixed; what H2O chooses is which tokens fill it.",
                 "无论序列多长，cache 都只存 heavy_size + recent_size = 512 个 token：每个 token 32 · 2 · 32 · 128 · 2 "
                 "字节 = 512 KiB，一共 256 MiB，而完整 cache 存 3 100 个 token 要 1.5 GiB。预算是固定的，H2O 决定的是用哪些 "
                 "token 填满它。"),
        see=Ref("reference", "if n <= heavy_size + recent_size:"),
        proof=lambda ref: _h2o_bytes_measured(ref),
    ),
    Number(
        "snapkv_voted",
        en="SnapKV with window_size = 32 and capacity = 256 on a prompt of 1 000 tokens: how many of the kept "
           "positions are chosen by the pooled votes (the rest being the window)?",
        zh="SnapKV 使用 window_size = 32、capacity = 256，prompt 有 1 000 个 token：被保留的位置中有多少是由池化后的投票"
           "选出的（其余的是窗口）？",
        answer=lambda: snapkv_voted(1000, 32, 256),
        unit=("positions", "个位置"),
        explain=("capacity - W = 224 prefix positions out of 968 are voted in; the 32 window positions are always "
                 "kept. The window's own keys get no vote, which is why the top-k runs over the prefix only.",
                 "968 个前缀位置中有 capacity - W = 224 个靠投票入选；32 个窗口位置总是保留。窗口自己的 key 不参与投票，所以"
                 "top-k 只在前缀上进行。"),
        see=Ref("reference", "prefix = top_positions(pooled, capacity - W)"),
        proof=lambda ref: _snapkv_voted_measured(ref, 1000, 32, 256),
    ),
    Choice(
        "early_tokens",
        en="On random inputs H2O ends up keeping the first few tokens of the prompt in every head, like "
           "StreamingLLM. Why?",
        zh="在随机输入上，H2O 最后在每个头中都保留了 prompt 开头的几个 token，就像 StreamingLLM 一样。为什么？",
        right=("A score is a sum over every query that saw the token: under the causal mask the first keys are seen "
               "by every query (key 0 even gets weight 1 from query 0), so they collect the most terms.",
               "分数是对所有见过该 token 的 query 求和：在因果掩码下，最前面的 key 被每个 query 都看到（key 0 还从 query 0 得到"
               "权重 1），所以它们累加的项最多。"),
        wrong=[("The recent window is counted from the start of the sequence, so it covers the first tokens.",
                "最近窗口是从序列开头算起的，所以它覆盖了开头的 token。"),
               ("The first tokens have the largest keys after RoPE, so every query attends to them most.",
                "加了 RoPE 之后开头 token 的 key 最大，所以每个 query 都最关注它们。"),
               ("Ties are broken toward the earlier position, and on random data most scores tie.",
                "相等的分数偏向靠前的位置，而在随机数据上大多数分数都相等。")],
        explain=("Accumulated attention favours age: a token present for more steps gathers more weight. On real "
                 "models the first token also acts as an attention sink, so both effects keep it. To test the "
                 "selection itself, a case must plant heavy hitters in the middle.",
                 "累积注意力偏爱老 token：在 cache 中待得越久，积累的权重越多。在真实模型中第一个 token 还是注意力汇聚点"
                 "（attention sink），两种效应都让它被保留。要检验选择本身，用例必须把重要 token 埋在中间。"),
        see=Ref("statement", "the column sums of the causal weight matrix"),
    ),
    Choice(
        "why_pool",
        en="Why does SnapKV pool the votes along the positions before taking the top positions?",
        zh="为什么 SnapKV 在选出最高的位置之前，要先沿位置对投票做池化？",
        right=("Important information spans several neighbouring tokens; pooling also keeps the neighbours of a "
               "strongly voted token, so the cache holds whole pieces of text rather than isolated tokens.",
               "重要信息往往跨越几个相邻的 token；池化会把得票高的 token 的邻居也一并保留，于是 cache 里存的是完整的片段，"
               "而不是孤立的 token。"),
        wrong=[("Pooling normalises the votes so that they sum to 1 over the prefix, as a softmax would.",
                "池化对投票做归一化，使它们在前缀上的和为 1，就像 softmax 一样。"),
               ("Without pooling the top-k would also pick the window's own keys.",
                "不池化的话，top-k 也会选中窗口自己的 key。"),
               ("Pooling removes the causal mask's effect on the window's votes.",
                "池化消除了因果掩码对窗口投票的影响。")],
        explain=("The SnapKV paper motivates the pooling by keeping clusters of features: a single selected token "
                 "without its context loses meaning. With kernel_size 1 the selection is the raw top-k of the votes.",
                 "SnapKV 论文用保留特征簇来说明池化的动机：一个被选中的 token 若没有上下文就失去了意义。kernel_size 为 1 时，"
                 "选择就是投票本身的 top-k。"),
        see=Ref("statement", "`kernel_size = 1` is no pooling"),
    ),
    Choice(
        "prompt_output",
        en="SnapKV decides what to evict from the attention of the last W prompt queries. Does the prompt's own "
           "output use the compressed cache?",
        zh="SnapKV 根据 prompt 最后 W 个 query 的注意力决定淘汰什么。prompt 自己的输出用的是压缩后的 cache 吗？",
        right=("No: the prompt attends over all its keys; only what is stored for the decode steps is compressed, so "
               "the first generated token is the first to see the smaller cache.",
               "不是：prompt 在它的全部 key 上做注意力；被压缩的只是为解码存下来的 cache，所以第一个生成的 token 才是第一个"
               "看到较小 cache 的。"),
        wrong=[("Yes: the selection is made first, then the whole prompt attends over the kept positions.",
                "是的：先做选择，然后整个 prompt 在被保留的位置上做注意力。"),
               ("Only the window's queries use the compressed cache; the other prompt queries use the full one.",
                "只有窗口里的 query 用压缩后的 cache；其他 prompt query 用完整的 cache。"),
               ("Yes, but the evicted keys are replaced by their pooled average, so nothing is lost.",
                "是的，但被淘汰的 key 会被替换成它们池化后的平均值，所以没有损失。")],
        explain=("The prompt's keys are all in memory during the prefill anyway; compressing before its attention "
                 "would only lose accuracy (and a query whose keys were all evicted would have nothing to attend to).",
                 "在 prefill 期间 prompt 的所有 key 反正都在显存里；在它做注意力之前就压缩只会损失精度（而所有 key 都被淘汰的 "
                 "query 将无处可关注）。"),
        see=Ref("statement", "nothing is evicted for the prompt itself"),
    ),
]


def _h2o_bytes_measured(ref):
    """The reference's cache length after a long prompt and 100 steps (one small head), times the model's
    bytes per token."""
    import torch
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1, 1, 3100, 2, generator=g, dtype=torch.float64)
    _, kept, _ = ref.h2o_attention(x, x, x, 3000, 256, 256)
    return kept.shape[-1] * 32 * 2 * 32 * 128 * 2


def _snapkv_voted_measured(ref, T, W, capacity):
    import torch
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1, 1, T, 4, generator=g, dtype=torch.float64)
    _, kept, _, _ = ref.snapkv_prefill(x, x, x, W, capacity)
    return int((kept < T - W).sum())
