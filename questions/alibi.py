"""Follow-up questions for `alibi` (see attn_drill/bank/quiz.py for the format)."""
import math

from attn_drill.bank.quiz import Choice, Number, Ref


def alibi_slopes(n):
    """The paper's slopes: geometric for a power of two, else c slopes plus every other one of 2c."""
    def power_of_two(m):
        start = 2.0 ** (-8.0 / m)
        return [start ** (i + 1) for i in range(m)]

    if n & (n - 1) == 0:
        return power_of_two(n)
    c = 1 << (n.bit_length() - 1)                 # the largest power of two below n
    return power_of_two(c) + power_of_two(2 * c)[0::2][: n - c]


def alibi_bias(num_heads, head, i, j):
    """The bias added to the scaled score of query i against key j (j <= i) in one head."""
    return -alibi_slopes(num_heads)[head] * (i - j)


def recency_ratio(slope, distance):
    """With equal content scores, weight(newest key) / weight(key `distance` tokens back)."""
    return math.exp(slope * distance)


QUESTIONS = [
    Choice(
        "extrapolation",
        en="ALiBi models are often run on sequences longer than any they were trained on. What in this layer "
           "makes that possible?",
        zh="ALiBi 模型常常被用在比训练时更长的序列上。这个层里的什么设计使之成为可能？",
        right=("The bias is a fixed formula of the distance i − j with no learned per-position table, so it is "
               "defined for every L, and keys further back are simply penalised more.",
               "偏置是距离 i − j 的固定公式，没有按位置学习的表，所以对任意 L 都有定义，越远的 key 只是被惩罚得越多。"),
        wrong=[("The slopes are learned during training and adapt themselves to the new length.",
                "斜率是训练中学到的，会自动适应新的长度。"),
               ("The distance is divided by the sequence length, so the bias always stays in the same range.",
                "距离会除以序列长度，所以偏置总是落在同一个范围内。"),
               ("The bias is periodic in the distance, like sinusoidal embeddings, so new positions repeat known "
                "ones.",
                "偏置像正弦位置编码一样随距离周期变化，所以新位置只是重复已见过的位置。")],
        explain=("Nothing in the layer depends on a maximum length: the slopes are constants and the penalty grows "
                 "linearly with distance, which is also why the bias is built in forward for the current L. "
                 "Dividing by L would change every bias as the sequence grows, and a linear penalty has no period.",
                 "这个层里没有任何东西依赖最大长度：斜率是常数，惩罚随距离线性增长，这也是偏置要在 forward 里按当前 L "
                 "构造的原因。若除以 L，序列一变长所有偏置都会改变；而线性惩罚也没有周期。"),
        see=Ref("reference", "pos = torch.arange(L, device=x.device)"),
    ),
    Choice(
        "plus_mj",
        en="Why may the bias be written as +m_h · j instead of −m_h · (i − j)?",
        zh="为什么偏置可以写成 +m_h · j，而不是 −m_h · (i − j)？",
        right=("In row i the two differ by m_h · i, the same for every key, and the softmax does not change when "
               "one constant is added to a whole row.",
               "在第 i 行两者相差 m_h · i，对所有 key 都一样；而给整行加同一个常数不会改变 softmax。"),
        wrong=[("Under the causal mask j ≤ i, so the two biases are equal entry by entry.",
                "在因果掩码下 j ≤ i，所以两个偏置逐元素相等。"),
               ("The slopes are small, so the difference m_h · i is negligible.",
                "斜率很小，所以差值 m_h · i 可以忽略。"),
               ("The softmax runs over the queries, so any term that depends only on the key cancels.",
                "softmax 是在 query 维上做的，所以只依赖 key 的项会被消掉。")],
        explain=("softmax(s + c) = softmax(s) for a constant c per row, and −m_h · i depends on the query only. "
                 "The entries are far from equal (at i = 1000 they differ by 1000 · m_h). The trick leans on the "
                 "causal mask: a bidirectional model needs −m_h · |i − j|, and |i − j| is not a row constant away "
                 "from j.",
                 "对每行一个常数 c，softmax(s + c) = softmax(s)，而 −m_h · i 只依赖 query。两者逐元素远不相等（i = 1000 "
                 "时相差 1000 · m_h）。这个技巧依赖因果掩码：双向模型需要 −m_h · |i − j|，而 |i − j| 与 j 之间并不只差"
                 "一个行常数。"),
        see=Ref("statement", "adding `+m_h * j` instead of `-m_h * (i - j)` gives the same softmax"),
    ),
    Choice(
        "many_slopes",
        en="Why does every head get its own slope, spread geometrically (1/2, 1/4, ..., 1/256 for 8 heads), "
           "instead of one shared slope?",
        zh="为什么每个头都有自己的斜率，并按几何级数分布（8 个头时为 1/2, 1/4, ..., 1/256），而不是共用一个斜率？",
        right=("A steep slope confines a head to the last few tokens while a shallow one lets it reach thousands "
               "of tokens back, so the layer gets heads at many distance scales.",
               "陡的斜率让一个头只关注最近几个 token，平缓的斜率让它能看到几千个 token 之前，这样一层里就有覆盖多种距离"
               "尺度的头。"),
        wrong=[("Distinct slopes make the heads' outputs orthogonal, so out_proj can tell them apart.",
                "不同的斜率让各头的输出相互正交，out_proj 才能把它们区分开。"),
               ("The slopes normalise each head's scores so that every head has the same softmax temperature.",
                "斜率用来归一化每个头的分数，使所有头的 softmax 温度相同。"),
               ("They only break the symmetry between heads at initialisation; one shared slope would train just "
                "as well.",
                "它们只是在初始化时打破各头之间的对称性；共用一个斜率训练效果也一样。")],
        explain=("A key d tokens back loses m · d logits: with m = 1/2 it is down by e^−5 after 10 tokens, with "
                 "m = 1/256 it takes about 2,560 tokens to lose 10 logits. The slopes are fixed constants, so they "
                 "play no part in symmetry breaking (the random projections do that).",
                 "d 个 token 之前的 key 会损失 m · d 的 logit：m = 1/2 时 10 个 token 之后就衰减到 e^−5，m = 1/256 时"
                 "大约要 2,560 个 token 才损失 10 个 logit。斜率是固定常数，与打破对称性无关（那是随机初始化的投影的作用）。"),
        see=Ref("reference", "def power_of_two_slopes(n: int)"),
    ),
    Number(
        "far_key_bias",
        en="A model has 12 heads and follows the paper's slope rule. What bias is added to the scaled score of "
           "the query at position 1000 against the key at position 0 in the last head (index 11, counting "
           "from 0)?",
        zh="一个模型有 12 个头，斜率按论文的规则取。在最后一个头（下标 11，从 0 开始数）中，位置 1000 的 query 对位置 0 "
           "的 key，缩放后的分数上要加的偏置是多少？",
        answer=lambda: alibi_bias(12, 11, 1000, 0),
        unit=("logits (a negative number)", "logit（负数）"),
        rel_tol=0.01,
        explain=("Heads 8..11 take every other slope of the 16-head sequence, so head 11 has slope 2^−3.5 ≈ 0.0884 "
                 "and the bias is −1000 · 0.0884 ≈ −88.4. The list is not monotonic: the common formula "
                 "2^(−8/12 · 12) = 1/256 would give only −3.9.",
                 "头 8..11 取 16 头序列中隔一个的斜率，所以头 11 的斜率是 2^−3.5 ≈ 0.0884，偏置为 −1000 · 0.0884 ≈ −88.4。"
                 "斜率序列不是单调的：常见公式 2^(−8/12 · 12) = 1/256 只会给出 −3.9。"),
        see=Ref("reference", "extra = power_of_two_slopes(2 * closest)[0::2][: num_heads - closest]"),
        proof=lambda ref: -float(ref.get_alibi_slopes(12)[11]) * (1000 - 0),
    ),
    Number(
        "recency_ratio",
        en="Take head 1 of an 8-head ALiBi layer (slope 1/4) and suppose q · k is the same for every key. For the "
           "query at position 10, how many times more attention weight does key 10 (itself) get than key 0?",
        zh="取 8 头 ALiBi 层中的头 1（斜率 1/4），并假设对所有 key 的 q · k 都相同。对位置 10 的 query，key 10（它自己）"
           "得到的注意力权重是 key 0 的多少倍？",
        answer=lambda: recency_ratio(alibi_slopes(8)[1], 10 - 0),
        unit=("times", "倍"),
        rel_tol=0.01,
        explain=("With equal content scores the weights are proportional to exp(−m · (i − j)), so the ratio is "
                 "exp(10 / 4) = e^2.5 ≈ 12.2. The same ten-token gap costs a factor e^5 ≈ 148 in head 0 (slope 1/2) "
                 "and only about 1.04 in head 7 (slope 1/256).",
                 "内容分数相同时，权重正比于 exp(−m · (i − j))，所以比值是 exp(10 / 4) = e^2.5 ≈ 12.2。同样相隔 10 个 "
                 "token，在头 0（斜率 1/2）中相差 e^5 ≈ 148 倍，在头 7（斜率 1/256）中只差约 1.04 倍。"),
        see=Ref("reference", "bias = -slopes[:, None, None] * distance"),
        proof=lambda ref: _measured_ratio(ref, num_heads=8, head=1, L=11),
    ),
]


def _measured_ratio(ref, num_heads, head, L):
    """Run the reference with q = k = 0 (so the scores are the bias alone), v = one-hot positions and an
    identity out_proj: output[i, head * D + j] is then the attention weight of query i on key j."""
    import torch

    D = L
    E = num_heads * D
    m = ref.AlibiSelfAttention(E, num_heads, dropout=0.0).double().eval()
    with torch.no_grad():
        w = torch.zeros(3 * E, E, dtype=torch.float64)
        w[2 * E:] = torch.eye(E, dtype=torch.float64)           # W_q = W_k = 0, W_v = I
        m.qkv_proj.weight.copy_(w)
        m.out_proj.weight.copy_(torch.eye(E, dtype=torch.float64))
        x = torch.zeros(1, L, E, dtype=torch.float64)
        pos = torch.arange(L)
        for h in range(num_heads):
            x[0, pos, h * D + pos] = 1.0                         # position j is the one-hot e_j in every head
        y = m(x)[0]                                              # (L, E)
    weights = y[L - 1, head * D:(head + 1) * D]                  # query L-1 over its keys
    return float(weights[L - 1] / weights[0])
