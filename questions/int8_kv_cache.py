"""Follow-up questions for `int8_kv_cache` (see attn_drill/bank/quiz.py for the format)."""
from attn_drill.bank.quiz import Choice, Number, Ref


def int8_cache_bytes(B, H, T, D, scale_bytes):
    """Int8KVCache's buffers: int8 codes for K and V, plus one scale per (batch, head, position) for each."""
    codes = 2 * B * H * T * D * 1
    scales = 2 * B * H * T * 1 * scale_bytes
    return codes + scales


def ratio_vs_float(D, float_bytes, scale_bytes):
    """How many times smaller than a float cache of the same shape: per token and head, D floats against
    D int8 codes and one scale."""
    return (D * float_bytes) / (D * 1 + scale_bytes)


def worst_rounding_error(absmax):
    """Per-token absmax quantisation: the step is absmax / 127 and rounding moves an entry by at most half a step."""
    return absmax / 127 / 2


QUESTIONS = [
    Number(
        "cache_bytes",
        en="How many bytes do the buffers of Int8KVCache(batch_size=1, num_heads=32, max_len=4096, head_dim=128, "
           "dtype=torch.float32) hold in all (k_cache, v_cache, k_scale and v_scale)?",
        zh="Int8KVCache(batch_size=1, num_heads=32, max_len=4096, head_dim=128, dtype=torch.float32) 的所有 buffer"
           "（k_cache、v_cache、k_scale 和 v_scale）一共占多少字节？",
        answer=lambda: int8_cache_bytes(1, 32, 4096, 128, 4),
        unit=("bytes", "字节"),
        explain=("The codes take 2·B·H·T·D bytes (32 MiB) and the float32 scales 2·B·H·T·4 bytes (1 MiB). A float32 "
                 "cache of the same shape would take 128 MiB; the scales are the price of per-token scaling.",
                 "编码占 2·B·H·T·D 字节（32 MiB），float32 的 scale 占 2·B·H·T·4 字节（1 MiB）。同样形状的 float32 缓存要 "
                 "128 MiB；scale 是按 token 量化要付出的代价。"),
        see=Ref("reference", 'self.register_buffer("k_scale"'),
        proof=lambda ref: _buffer_bytes(ref, 1, 32, 4096, 128),
    ),
    Number(
        "ratio_vs_bf16",
        en="With head_dim = 128 and one float32 scale per token and head, how many times smaller is this int8 cache "
           "than a bfloat16 cache of the same (batch, heads, max_len, head_dim) keys and values? (A ratio; two "
           "significant digits are enough.)",
        zh="head_dim = 128、每个 token 每个头一个 float32 scale 时，这个 int8 缓存比同样 (batch, heads, max_len, head_dim) "
           "的 bfloat16 key/value 缓存小多少倍？（填一个比值，两位有效数字即可。）",
        answer=lambda: ratio_vs_float(128, 2, 4),
        unit=("times", "倍"),
        rel_tol=0.01,
        explain=("Per token and head it is 128 · 2 = 256 bytes against 128 + 4 = 132 bytes, about 1.94×, not 2×: the "
                 "scales cost 4 extra bytes per row. The smaller the head_dim, the more the scales eat into the saving.",
                 "每个 token 每个头是 128 · 2 = 256 字节对 128 + 4 = 132 字节，约 1.94 倍而不是 2 倍：每行的 scale 多占 4 字节。"
                 "head_dim 越小，scale 吃掉的节省越多。"),
        see=Ref("reference", 'self.register_buffer("k_cache"'),
        proof=lambda ref: _ratio_measured(ref, 128),
    ),
    Number(
        "rounding_error",
        en="A key row has max|x| = 31.75 and is quantised per token with a dynamic scale. What is the largest "
           "|x - dequantize_int8(quantize_int8(x))| any entry of that row can have?",
        zh="某个 key 行的 max|x| = 31.75，按 token 用动态 scale 量化。该行任一元素的 "
           "|x - dequantize_int8(quantize_int8(x))| 最大可能是多少？",
        answer=lambda: worst_rounding_error(31.75),
        unit=("(absolute error)", "（绝对误差）"),
        explain=("The scale is 31.75 / 127 = 0.25 and rounding to the nearest code moves an entry by at most half a "
                 "step, 0.125; an entry at an exact tie, such as 0.125 itself, reaches it. No entry saturates, because "
                 "the scale comes from the row's own absmax.",
                 "scale 是 31.75 / 127 = 0.25，取最近的编码最多移动半个步长，即 0.125；恰好在中间的元素（比如 0.125 本身）"
                 "正好达到这个值。因为 scale 来自该行自己的 absmax，不会有元素饱和。"),
        see=Ref("reference", "q = torch.round(xf / scale).clamp(-QMAX, QMAX).to(torch.int8)"),
        proof=lambda ref: _max_error_measured(ref, 31.75),
    ),
    Choice(
        "per_channel_keys",
        en="Keys often have a few outlier channels that are large in every token. Why does KIVI quantise keys per "
           "channel rather than per token, as this cache does?",
        zh="key 中常有少数在每个 token 上都很大的离群通道。为什么 KIVI 对 key 按通道量化，而不是像本题的缓存那样按 token？",
        right=("With one scale per token, the outlier channels set that scale, so the ordinary channels are left with "
               "only a few of the 255 codes; a scale per channel gives each channel a step that fits its own range.",
               "每个 token 一个 scale 时，scale 由离群通道决定，普通通道只能用到 255 个编码中的寥寥几个；按通道给 scale，"
               "每个通道的步长都与它自己的范围相称。"),
        wrong=[("Per-token scales cannot be used while decoding, because a token's absmax is only known once the whole "
                "sequence has been seen.",
                "解码时无法使用按 token 的 scale，因为一个 token 的 absmax 要等整条序列都出现后才知道。"),
               ("Per-channel scales make the error of the outlier channels exactly zero, since their codes never "
                "round.",
                "按通道量化让离群通道的误差恰好为零，因为它们的编码从不需要取整。"),
               ("The softmax ignores a constant added to every score, so an error shared by a channel cancels out; "
                "per-token errors do not.",
                "softmax 对所有分数加同一个常数不敏感，所以同一通道共有的误差会抵消；按 token 的误差则不会。")],
        explain=("Rounding error is half a step, and the step is set by the largest entry sharing the scale. The first "
                 "wrong answer has it backwards: a per-token scale is known at once, while per-channel "
                 "scales need a group of tokens, which is why KIVI keeps the newest tokens in full precision until a "
                 "group is complete.",
                 "取整误差是半个步长，而步长由共享该 scale 的最大元素决定。第一个错误选项恰好说反了：按 token 的 scale "
                 "立刻可得，按通道的 scale 需要先攒够一组 token，所以 KIVI 把最新的 token 以全精度保留，直到凑满一组。"),
        see=Ref("statement", "which is why per-channel scales suit keys better (KIVI)"),
    ),
    Choice(
        "dequantise_whole_cache",
        en="Every forward of this cache dequantises all cached positions into float tensors before the matmuls. "
           "What is the cost, and how do production kernels avoid it?",
        zh="这个缓存每次 forward 都先把所有已缓存的位置反量化成浮点张量，再做矩阵乘法。代价是什么？生产环境的 kernel 如何避免？",
        right=("Each step briefly materialises a float copy of the whole cache, so peak memory and memory traffic are "
               "back to those of an unquantised cache; fused kernels load int8 tiles and dequantise them in registers "
               "while computing the scores.",
               "每一步都会临时生成整个缓存的浮点副本，峰值显存和访存量又回到了未量化缓存的水平；融合 kernel 读入 int8 的"
               "分块，在寄存器里边反量化边计算分数。"),
        wrong=[("There is no cost: the dequantised tensors are views of the int8 buffers, so nothing is allocated.",
                "没有代价：反量化得到的张量是 int8 buffer 的视图，不会分配新内存。"),
               ("The cost is accuracy: dequantising the same codes at every step compounds the rounding error over "
                "time.",
                "代价是精度：每一步都对同样的编码反量化，取整误差会随时间累积。"),
               ("The cost is correctness: positions past the current one are dequantised too, so the queries can "
                "see future keys.",
                "代价是正确性：当前位置之后的位置也被反量化了，query 会看到未来的 key。")],
        explain=("q * scale creates a new tensor; the saving of an int8 cache is in what is stored and read, and it "
                 "only reaches the compute if the kernel reads the codes directly. Dequantisation is exact and "
                 "deterministic, so nothing compounds, and the slice stops at start_pos + L.",
                 "q * scale 会生成新张量；int8 缓存省下的是存储和读取的字节，只有 kernel 直接读编码时这份节省才能体现在计算上。"
                 "反量化是确定且精确的运算，误差不会累积；切片也只取到 start_pos + L。"),
        see=Ref("reference", "keys = dequantize_int8(self.k_cache"),
    ),
]


def _buffer_bytes(ref, B, H, T, D):
    """Bytes of the reference cache's buffers, built on the meta device (nothing is allocated)."""
    import torch

    with torch.device("meta"):
        cache = ref.Int8KVCache(B, H, T, D, dtype=torch.float32)
    return sum(b.numel() * b.element_size() for b in cache.buffers())


def _ratio_measured(ref, D):
    """bfloat16 K and V of the cache's shape, against the bytes the reference cache holds."""
    import torch

    with torch.device("meta"):
        cache = ref.Int8KVCache(1, 2, 8, D, dtype=torch.float32)
        k = torch.empty(cache.k_cache.shape, dtype=torch.bfloat16)
    bf16 = 2 * k.numel() * k.element_size()
    return bf16 / sum(b.numel() * b.element_size() for b in cache.buffers())


def _max_error_measured(ref, absmax):
    """Quantise a fine grid over [-absmax, absmax] (exact ties included) as one row and take the largest error."""
    import torch

    x = torch.arange(-4064, 4065, dtype=torch.float64) / 128.0        # steps of 1/128: 31.75 = 4064 / 128
    assert float(x.abs().max()) == absmax
    q, scale = ref.quantize_int8(x[None, :], dim=-1)
    return float((x - ref.dequantize_int8(q, scale)[0]).abs().max())
