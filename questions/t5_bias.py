"""Follow-up questions for `t5_bias` (see attn_drill/bank/quiz.py for the format)."""
import math

from attn_drill.bank.quiz import Choice, Number, Ref


def t5_bucket(relative_position, num_buckets=32, max_distance=128, bidirectional=True):
    """T5's bucket of one relative position (key_pos - query_pos), in plain Python."""
    bucket = 0
    if bidirectional:
        num_buckets //= 2
        if relative_position > 0:
            bucket += num_buckets
        n = abs(relative_position)
    else:
        n = max(-relative_position, 0)
    max_exact = num_buckets // 2
    if n < max_exact:
        return bucket + n
    large = max_exact + int(math.log(n / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact))
    return bucket + min(large, num_buckets - 1)


def first_distance_in_bucket(target, num_buckets=32, max_distance=128, bidirectional=False):
    """The smallest distance n into the past (relative position -n) that lands in bucket `target`."""
    n = 0
    while t5_bucket(-n, num_buckets, max_distance, bidirectional) != target:
        n += 1
    return n


def bias_table_params(num_buckets, num_heads):
    """One learned scalar per (bucket, head), whatever the sequence length."""
    return num_buckets * num_heads


QUESTIONS = [
    Number(
        "bucket_plus_50",
        en="Bidirectional, 32 buckets, max_distance = 128: which bucket does relative position +50 (the key 50 "
           "positions after the query) get?",
        zh="双向、32 个桶、max_distance = 128：相对位置 +50（key 在 query 之后 50 个位置）落在哪个桶？",
        answer=lambda: t5_bucket(50),
        unit=("bucket id", "号桶"),
        explain=("Keys after the query start at bucket 16 and each direction has 16 buckets, max_exact = 8. "
                 "50 is past the exact range: 8 + floor(ln(50/8) / ln(128/8) · 8) = 8 + floor(5.29) = 13, "
                 "so 16 + 13 = 29. The same key 50 positions before the query gets 13.",
                 "query 之后的 key 从 16 号桶开始，每个方向 16 个桶，max_exact = 8。50 超出了精确区间："
                 "8 + floor(ln(50/8) / ln(128/8) · 8) = 8 + floor(5.29) = 13，所以是 16 + 13 = 29。同样距离但在 query "
                 "之前 50 个位置的 key 得到 13。"),
        see=Ref("reference", "buckets = buckets + (relative_position > 0).long() * num_buckets"),
        proof=lambda ref: _measured_bucket(ref, 50, bidirectional=True),
    ),
    Number(
        "last_bucket_start",
        en="Causal (bidirectional=False), 32 buckets, max_distance = 128: what is the smallest distance into the "
           "past that already lands in the last bucket, 31?",
        zh="因果（bidirectional=False）、32 个桶、max_distance = 128：向过去看的距离至少为多少时，就已经落入最后一个桶 "
           "31？",
        answer=lambda: first_distance_in_bucket(31),
        unit=("positions", "个位置"),
        explain=("The last bucket is reached when floor(ln(n/16) / ln 8 · 16) = 15, i.e. n ≥ 16 · 8^(15/16) ≈ "
                 "112.4, so n = 113: the last bucket holds distances 113 to 128 and everything beyond, not only "
                 "those past max_distance.",
                 "当 floor(ln(n/16) / ln 8 · 16) = 15 时进入最后一个桶，即 n ≥ 16 · 8^(15/16) ≈ 112.4，所以 n = 113："
                 "最后一个桶装的是 113 到 128 以及更远的所有距离，而不只是超过 max_distance 的那些。"),
        see=Ref("reference", "val_if_large = val_if_large.clamp(max=num_buckets - 1)"),
        proof=lambda ref: _measured_last_bucket_start(ref),
    ),
    Number(
        "bias_params",
        en="T5Attention(768, 12) with the default 32 buckets runs on sequences of 2048 tokens. How many "
           "parameters does its rel_bias hold?",
        zh="使用默认 32 个桶的 T5Attention(768, 12) 处理长度为 2048 的序列。它的 rel_bias 有多少个参数？",
        answer=lambda: bias_table_params(32, 12),
        unit=("parameters", "个参数"),
        explain=("32 buckets × 12 heads = 384 scalars, independent of the sequence length; a learned absolute "
                 "position table for 512 positions of width 768 would hold 393 216 and would stop at position 512. "
                 "T5 itself keeps the table only in the first layer of each stack and reuses that bias in the "
                 "others.",
                 "32 个桶 × 12 个头 = 384 个标量，与序列长度无关；一张 512 个位置、宽 768 的可学习绝对位置表有 393 216 个"
                 "参数，而且只能用到第 512 个位置。T5 本身只在每个栈的第一层保存这张表，其余各层复用这份偏置。"),
        see=Ref("reference", "self.relative_bias = nn.Embedding(num_buckets, num_heads)"),
        proof=lambda ref: sum(p.numel() for p in ref.T5Attention(768, 12).rel_bias.parameters()),
    ),
    Choice(
        "no_scale",
        en="T5 adds the bias to the raw Q Kᵀ, with no 1/sqrt(head_dim). Why does this not make its softmax "
           "saturate?",
        zh="T5 把偏置加在未缩放的 Q Kᵀ 上，没有 1/sqrt(head_dim)。为什么它的 softmax 不会因此饱和？",
        right=("T5 initialises the query projection with a correspondingly smaller scale, so the factor lives in "
               "the weights; a port that also divides by sqrt(head_dim) changes the logits of a trained model.",
               "T5 用相应更小的尺度初始化 query 投影，这个因子被并进了权重；移植时若再除以 sqrt(head_dim)，就会改变已训练"
               "模型的 logits。"),
        wrong=[("The relative bias normalises each row of scores, which replaces the scaling.",
                "相对位置偏置会对每一行分数做归一化，取代了缩放。"),
               ("Scaling only matters with absolute position embeddings; with relative biases it cancels in the "
                "softmax.",
                "缩放只在使用绝对位置嵌入时才有意义；用相对偏置时它会在 softmax 中抵消。"),
               ("Because the bias is added after the softmax, the scale of Q Kᵀ does not matter.",
                "因为偏置加在 softmax 之后，Q Kᵀ 的尺度无关紧要。")],
        explain=("Multiplying all logits by a constant is not cancelled by the softmax: it sharpens or flattens it. "
                 "T5 trained with unscaled scores and a scaled initialisation, so its checkpoints expect exactly "
                 "that, and the biases were learned on that scale too.",
                 "把所有 logits 乘上一个常数不会被 softmax 抵消：它会让分布变尖或变平。T5 训练时用的是未缩放的分数加缩放过的"
                 "初始化，所以它的 checkpoint 正是按此预期的，偏置也是在这个尺度上学到的。"),
        see=Ref("reference", "scores = torch.matmul(q, k.transpose(-2, -1))                  # (B, H, L, L), no scaling (T5)"),
    ),
    Choice(
        "why_log_buckets",
        en="What do the log-spaced buckets, capped at the last one, buy T5 compared with one bucket per distance?",
        zh="与每个距离一个桶相比，按对数间隔、并在最后一个桶封顶的分桶给 T5 带来了什么？",
        right=("Fine resolution where it matters (every small offset has its own bias), few parameters, and a "
               "bias defined for any length: every distance past the cap reuses one trained bucket.",
               "在重要的地方分辨率高（每个小偏移都有自己的偏置），参数少，而且对任意长度都有定义：超过上限的所有距离都复用"
               "同一个训练过的桶。"),
        wrong=[("It forces the bias to decrease with distance, so far tokens always get less attention.",
                "它迫使偏置随距离递减，所以远处的 token 总是得到更少的注意力。"),
               ("It keeps bucket ids non-negative, which linear buckets cannot do.",
                "它保证桶编号非负，而线性分桶做不到。"),
               ("It makes the bias identical for keys before and after the query.",
                "它让 query 之前和之后的 key 得到相同的偏置。")],
        explain=("The buckets only say which distances share a learned scalar; the values themselves are free, so "
                 "nothing forces a decay. Direction is handled separately by the +num_buckets/2 offset, and "
                 "linear buckets can be kept in range just as well with a clamp.",
                 "分桶只决定哪些距离共用一个学习到的标量；这些标量本身不受约束，没有什么强迫它们衰减。方向由 "
                 "+num_buckets/2 的偏移单独处理，线性分桶加上截断同样能保持编号在范围内。"),
        see=Ref("reference", "val_if_large = max_exact + (log_ratio * (num_buckets - max_exact)).long()"),
    ),
]


def _measured_bucket(ref, relative_position, bidirectional):
    import torch
    rel = torch.tensor([relative_position])
    return int(ref.T5RelativeBias._relative_position_bucket(rel, 32, 128, bidirectional)[0])


def _measured_last_bucket_start(ref):
    import torch
    distances = torch.arange(0, 400)
    buckets = ref.T5RelativeBias._relative_position_bucket(-distances, 32, 128, False)
    return int(distances[buckets == 31].min())
