"""Follow-up questions for `sliding_window` (see attn_drill/bank/quiz.py for the format)."""
from attn_drill.bank.quiz import Choice, Number, Ref


def causal_window_pairs(L, W):
    """(query, key) pairs with 0 <= i - j < W: query i sees min(i + 1, W) keys."""
    return sum(min(i + 1, W) for i in range(L))


def receptive_field(W, layers):
    """How far back a token can draw information after `layers` causal windows of W keys (own included):
    each layer reaches W - 1 positions further."""
    return layers * (W - 1)


def rolling_cache_bytes(layers, kv_heads, head_dim, W, bytes_per_element, batch=1):
    """Keys and values of the last W positions (the new token included), every layer."""
    return 2 * layers * batch * kv_heads * W * head_dim * bytes_per_element


QUESTIONS = [
    Number(
        "visible_pairs",
        en="For seq_len = 10 and a causal window_size = 4 (this problem's convention), how many True entries "
           "does create_sliding_window_mask return?",
        zh="seq_len = 10、因果 window_size = 4（本题的约定）时，create_sliding_window_mask 返回的掩码中有多少个 True？",
        answer=lambda: causal_window_pairs(10, 4),
        unit=("entries", "个"),
        explain=("Queries 0, 1, 2 see 1, 2, 3 keys and the other seven see W = 4 each: 6 + 28 = 34, that is "
                 "W·L - W(W - 1)/2. The `i - W <= j` version would give up to 5 per row and 40 in all.",
                 "query 0、1、2 分别看到 1、2、3 个 key，其余 7 个各看到 W = 4 个：6 + 28 = 34，即 W·L - W(W - 1)/2。"
                 "若写成 `i - W <= j`，每行最多 5 个，总数为 40。"),
        see=Ref("reference", "return (distance >= 0) & (distance < window_size)"),
        proof=lambda ref: int(ref.create_sliding_window_mask(10, 4).sum()),
    ),
    Number(
        "receptive_field",
        en="A decoder stacks 32 causal sliding-window layers with window_size = 4096 (this convention: W keys, "
           "the query's own included). At the top layer, up to how many positions back can a token's output "
           "depend on the input?",
        zh="一个解码器堆叠了 32 层因果滑动窗口注意力，window_size = 4096（本题约定：W 个 key，包括 query 自己）。在最顶层，"
           "一个 token 的输出最远能依赖多少个位置之前的输入？",
        answer=lambda: receptive_field(4096, 32),
        unit=("positions", "个位置"),
        explain=("One layer reaches W - 1 = 4095 positions back; each further layer extends the reach by another "
                 "4095 through the tokens in between: 32 · 4095 = 131 040. The window limits one hop, not the "
                 "flow of information through the stack.",
                 "一层能回看 W - 1 = 4095 个位置；每多一层，通过中间的 token 再向前延伸 4095：32 · 4095 = 131 040。"
                 "窗口限制的是一跳的距离，而不是信息在整个网络中的传播。"),
        see=Ref("reference", "causal:        0 <= i - j < window_size"),
    ),
    Number(
        "rolling_cache",
        en="At decode time a causal window only needs a rolling buffer of the keys and values of the last "
           "window_size positions (the new token included). How many bytes is that buffer for 32 layers, "
           "8 KV heads, head_dim = 128, window_size = 4096, batch 1, bfloat16?",
        zh="解码时，因果窗口只需要一个滚动缓冲区，保存最近 window_size 个位置（包括新 token）的 key 和 value。"
           "32 层、8 个 KV 头、head_dim = 128、window_size = 4096、batch 为 1、bfloat16 时，这个缓冲区占多少字节？",
        answer=lambda: rolling_cache_bytes(32, 8, 128, 4096, 2),
        unit=("bytes", "字节"),
        explain=("2 (K and V) · 32 · 8 · 4096 · 128 · 2 bytes = 512 MiB, and it stays that size however long the "
                 "sequence grows; a full cache at 32 768 tokens would be 8 times larger.",
                 "2（K 和 V）· 32 · 8 · 4096 · 128 · 2 字节 = 512 MiB，而且不论序列多长都保持这个大小；32 768 个 token 的"
                 "完整缓存会大 8 倍。"),
        see=Ref("reference", "(window_size keys, the query's own position included)"),
    ),
    Choice(
        "what_it_saves",
        en="This reference builds the full (B, H, L, L) score matrix and then masks it. What does the window "
           "save here, compared with full causal attention?",
        zh="本题的参考实现先算出完整的 (B, H, L, L) 分数矩阵再做掩码。与完整的因果注意力相比，窗口在这里省了什么？",
        right=("Nothing in compute or memory: all L² scores are still computed and stored. The O(L·W) saving "
               "needs a kernel that skips the blocks outside the band.",
               "计算和内存都没有省：L² 个分数仍然全部计算并保存。O(L·W) 的节省需要一个跳过带外分块的 kernel。"),
        wrong=[("The matmul skips the masked entries, so the cost drops to O(L·W).",
                "矩阵乘法会跳过被屏蔽的元素，所以开销降为 O(L·W)。"),
               ("masked_fill turns the scores into a sparse tensor, so the memory drops to O(L·W).",
                "masked_fill 把分数变成了稀疏张量，所以内存降为 O(L·W)。"),
               ("The softmax only exponentiates the visible keys, which halves the total cost.",
                "softmax 只对可见的 key 求指数，总开销因此减半。")],
        explain=("masked_fill writes -inf into a dense tensor after the full matmul. Windowed kernels (for "
                 "example FlashAttention with a window size) never load key blocks that lie entirely outside the "
                 "band, which is where the O(L·W) comes from.",
                 "masked_fill 是在完整的矩阵乘法之后往稠密张量里写 -inf。带窗口的 kernel（例如设置了窗口大小的 "
                 "FlashAttention）从不加载完全落在带外的 key 块，O(L·W) 正是这样来的。"),
        see=Ref("reference", "scores = scores.masked_fill(keep.logical_not(), float(\"-inf\"))"),
    ),
    Choice(
        "empty_row",
        en="With a window and a key padding mask together, a query can end up with no visible key. What does "
           "this module return for it?",
        zh="窗口和 key padding 掩码同时使用时，某个 query 可能一个可见的 key 都没有。这个模块对它返回什么？",
        right=("NaN: its whole score row is -inf, the softmax computes 0/0, and the NaN spreads to the output "
               "and to the gradients.",
               "NaN：它的整行分数都是 -inf，softmax 算出 0/0，NaN 会扩散到输出和梯度。"),
        wrong=[("Zeros, because the softmax of an all -inf row is defined as 0.",
                "全零，因为全 -inf 行的 softmax 定义为 0。"),
               ("A uniform average over the padded keys.",
                "对填充 key 的均匀平均。"),
               ("The query's own value, because the diagonal is always kept.",
                "该 query 自己的 value，因为对角线总是保留。")],
        explain=("exp(-inf - max) with max = -inf is NaN. Some fused kernels return 0 for such rows, but a plain "
                 "softmax does not; this is why the statement promises at least one visible key per query.",
                 "当最大值本身是 -inf 时，exp(-inf - max) 得到 NaN。有些融合 kernel 对这种行返回 0，但普通的 softmax "
                 "不会；所以题目保证每个 query 至少有一个可见的 key。"),
        see=Ref("reference", "scores = scores.masked_fill(key_padding_mask[:, None, None, :], float(\"-inf\"))"),
    ),
]
