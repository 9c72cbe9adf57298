"""Follow-up questions for `attention_sinks` (see attn_drill/bank/quiz.py for the format)."""
from attn_drill.bank.quiz import Choice, Number, Ref


def attended_pairs(seq_len, num_sinks, window_size):
    """True entries of streaming_mask: per query i, the window min(i + 1, W) plus the sinks that have left it."""
    total = 0
    for i in range(seq_len):
        recent = min(i + 1, window_size)
        old_sinks = max(0, min(num_sinks, i - window_size + 1))
        total += recent + old_sinks
    return total


def query_position(stream_index, num_sinks, window_size):
    """The RoPE position of a new query: the last cache entry, n - 1, with n = min(stream_index + 1, S + W)."""
    return min(stream_index + 1, num_sinks + window_size) - 1


def sink_cache_bytes(num_sinks, window_size, layers, heads, head_dim, bytes_per_element):
    """Keys and values of a full StreamingLLM cache, every layer: independent of the stream's length."""
    return 2 * layers * heads * head_dim * (num_sinks + window_size) * bytes_per_element


QUESTIONS = [
    Number(
        "attended_pairs",
        en="How many True entries does streaming_mask(seq_len=2048, num_sinks=4, window_size=512) have, i.e. how "
           "many (query, key) scores does the stream compute? (Full causal attention would compute 2 098 176.)",
        zh="streaming_mask(seq_len=2048, num_sinks=4, window_size=512) 中有多少个 True，也就是整个流一共要算多少个 "
           "(query, key) 分数？（完整的因果注意力要算 2 098 176 个。）",
        answer=lambda: attended_pairs(2048, 4, 512),
        unit=("pairs", "对"),
        explain=("The first 512 queries see 1 .. 512 keys (131 328 pairs), every later one 512 window keys plus the "
                 "sinks that have left the window (1, 2, 3, then 4): 923 898 in all, 44 % of full causal attention. Work per token is bounded by "
                 "num_sinks + window_size, so it grows linearly with the stream instead of quadratically.",
                 "前 512 个 query 分别看到 1 .. 512 个 key（131 328 对），之后每个 query 看到窗口里的 512 个 key，再加上已经离开"
                 "窗口的 sink（依次 1、2、3，之后一直是 4）：共 923 898 对，是完整因果注意力的 44 %。每个 token 的工作量以 num_sinks + window_size "
                 "为上限，所以总量随流长线性增长，而不是平方增长。"),
        see=Ref("reference", "return causal & (sink | recent)"),
        proof=lambda ref: int(ref.streaming_mask(2048, 4, 512).sum()),
    ),
    Number(
        "query_position",
        en="num_sinks = 4 and window_size = 28. The token with stream index 100 arrives. At which RoPE position is "
           "its query rotated?",
        zh="num_sinks = 4，window_size = 28。流中下标为 100 的 token 到来。它的 query 在哪个 RoPE 位置上旋转？",
        answer=lambda: query_position(100, 4, 28),
        unit=("(position)", "（位置）"),
        explain=("After eviction and appending the cache holds 4 + 28 = 32 tokens and the query is the last, at "
                 "position 31, not 100: positions are places in the cache, so no distance ever exceeds 31, however "
                 "long the stream.",
                 "淘汰并追加之后，缓存里有 4 + 28 = 32 个 token，query 是最后一个，位于位置 31 而不是 100：位置是缓存中的位置，"
                 "所以无论流有多长，任何距离都不会超过 31。"),
        see=Ref("reference", "pos_q = keep.sum(dim=-1) - 1"),
        proof=lambda ref: _query_position_measured(ref, 100, 4, 28),
    ),
    Number(
        "cache_bytes",
        en="A model with 32 layers, 32 heads, head_dim = 128 streams with num_sinks = 4 and window_size = 1020, keys "
           "and values in float16. How many bytes does its full cache hold, all layers, after 1 000 000 tokens?",
        zh="一个 32 层、32 个头、head_dim = 128 的模型以 num_sinks = 4、window_size = 1020 做流式生成，key 和 value 为 "
           "float16。生成 1 000 000 个 token 之后，它的缓存装满时一共占多少字节（所有层）？",
        answer=lambda: sink_cache_bytes(4, 1020, 32, 32, 128, 2),
        unit=("bytes", "字节"),
        explain=("2 · 32 · 32 · 128 · 1024 · 2 = 512 MiB, the same after a thousand tokens or a million: the cache never "
                 "holds more than num_sinks + window_size entries. A plain cache of a million tokens would need "
                 "about 488 GiB.",
                 "2 · 32 · 32 · 128 · 1024 · 2 = 512 MiB，一千个 token 后和一百万个 token 后都一样：缓存最多只有 "
                 "num_sinks + window_size 项。普通缓存存一百万个 token 大约需要 488 GiB。"),
        see=Ref("statement", "the cache never holds more than `num_sinks + window_size` tokens"),
    ),
    Choice(
        "why_sinks",
        en="Why does a plain sliding window (no sinks) break down once the first tokens are evicted, and why do four "
           "sink tokens fix it?",
        zh="为什么普通的滑动窗口（没有 sink）在最早的 token 被淘汰后就失效了？为什么留下四个 sink token 就能修好？",
        right=("Trained models park a large share of attention on the first tokens, because each softmax row must put "
               "its mass somewhere; evicting them spreads that mass over the window and shifts the activations, while "
               "keeping them, whatever their content, restores the pattern the model was trained with.",
               "训练好的模型会把很大一部分注意力放在最早的几个 token 上，因为 softmax 的每一行都必须把权重放在某处；淘汰它们会让"
               "这部分权重散到窗口里，激活随之偏移；而把它们留下（不管内容是什么）就恢复了模型训练时的模式。"),
        wrong=[("The first tokens hold the prompt's instructions, which the model must keep reading to stay on task.",
                "最早的 token 里有 prompt 的指令，模型必须一直读到它们才能不跑题。"),
               ("Without the sinks the RoPE positions of the window would exceed the trained context length.",
                "没有 sink 的话，窗口的 RoPE 位置会超出训练时的上下文长度。"),
               ("The sinks keep a softmax row from being empty, which would otherwise give NaN.",
                "sink 防止 softmax 的某一行为空，否则会得到 NaN。")],
        explain=("The sinks matter for their place, not their meaning: the StreamingLLM paper gets nearly the same effect "
                 "from four newline tokens. The window always holds the current token, so no row is ever empty, and "
                 "positions are bounded by the cache positions, sinks or not.",
                 "sink 起作用靠的是位置，而不是语义：StreamingLLM 论文用四个换行符当开头效果也几乎一样。窗口里总有当前 token，"
                 "所以不会有空行；位置则由缓存位置限定，与是否有 sink 无关。"),
        see=Ref("statement", "which soak up a large share of the attention weight in trained models"),
    ),
    Choice(
        "cache_positions",
        en="Why rotate the cached keys at their positions in the cache (0 .. n-1) instead of at their indices in the "
           "stream?",
        zh="为什么缓存中的 key 按它们在缓存中的位置（0 .. n-1）旋转，而不是按它们在流中的下标旋转？",
        right=("With stream indices the distance from a new query to the sinks grows without bound, past any distance "
               "seen in training; with cache positions every distance stays below num_sinks + window_size.",
               "按流中下标，新 query 到 sink 的距离会无限增长，超过训练中见过的任何距离；按缓存位置，所有距离都小于 "
               "num_sinks + window_size。"),
        wrong=[("With stream indices the distances inside the window would change from step to step, so recent tokens "
                "would be scored differently each time.",
                "按流中下标，窗口内部的距离每一步都会变，最近的 token 每次的得分都不一样。"),
               ("Cache positions let the keys be rotated once when they are written and never again.",
                "按缓存位置，key 只需在写入时旋转一次，以后不用再转。"),
               ("Stream indices beyond 65 504 overflow float16, so the angles could not be computed.",
                "超过 65 504 的流下标会让 float16 溢出，角度就算不出来了。")],
        explain=("Inside the window both schemes give the same distances; only the gap to the sinks differs. The price: "
                 "positions move as the cache shifts, so a key cannot be rotated once when it is written; it is cached "
                 "unrotated and rotated again at every step. The angles are computed in float64, so nothing overflows.",
                 "在窗口内部两种做法的距离相同；只有到 sink 的距离不同。代价是：缓存移动时位置也会变，"
                 "key 不能在写入时旋转一次了事，而要以未旋转的形式缓存、每一步重新旋转。角度用 float64 计算，不会溢出。"),
        see=Ref("statement", "Positions are positions in the cache"),
    ),
]


def _query_position_measured(ref, stream_index, num_sinks, window_size):
    """Stream stream_index + 1 tokens through a tiny reference module in one call and record the positions it hands
    to its RoPE helper for the queries (its first call in forward)."""
    import torch

    calls = []
    original = ref._rope_cos_sin

    def recording(positions, *args, **kwargs):
        calls.append(positions.clone())
        return original(positions, *args, **kwargs)

    ref._rope_cos_sin = recording
    try:
        m = ref.StreamingAttention(4, 1, num_sinks=num_sinks, window_size=window_size).double()
        m.init_cache(1)
        with torch.no_grad():
            m(torch.randn(1, stream_index + 1, 4, dtype=torch.float64))
    finally:
        ref._rope_cos_sin = original
    return int(calls[0][-1])
