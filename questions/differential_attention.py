"""Follow-up questions for `differential_attention` (see attn_drill/bank/quiz.py for the format)."""
import math

from attn_drill.bank.quiz import Choice, Number, Ref


def extra_parameters(hidden_dim, num_heads):
    """Parameters beyond the four projections: four lambda vectors of d and the (2d,) weight of the head norm."""
    d = hidden_dim // (2 * num_heads)
    return 4 * d + 2 * d


def lambda_init(depth):
    return 0.8 - 0.6 * math.exp(-0.3 * depth)


def differential_row_sum(lam):
    """Each softmax row sums to 1, so a row of map1 - lambda * map2 sums to 1 - lambda."""
    return 1 - lam


QUESTIONS = [
    Number(
        "extra_parameters",
        en="DifferentialAttention(hidden_dim=2048, num_heads=8, depth=3) has the same four projection matrices as a "
           "standard multi-head attention with 16 heads of width 128 (no biases). How many parameters does it have "
           "beyond those four matrices?",
        zh="DifferentialAttention(hidden_dim=2048, num_heads=8, depth=3) 的四个投影矩阵与一个 16 头、每头宽 128 的标准多头"
           "注意力（无 bias）相同。除了这四个矩阵，它还有多少个参数？",
        answer=lambda: extra_parameters(2048, 8),
        unit=("parameters", "个参数"),
        explain=("d = 2048 / 16 = 128: four lambda vectors of 128 and a shared norm weight of 256, 768 in all next to "
                 "4 · 2048² ≈ 16.8 million. The cost of the design is in compute (two maps per head), not in "
                 "parameters; lambda_init is a constant, not a parameter.",
                 "d = 2048 / 16 = 128：四个长度 128 的 lambda 向量，加一个长度 256 的共享 norm 权重，共 768 个，而四个投影有 "
                 "4 · 2048² ≈ 1680 万个。这种设计的代价在计算（每个头两张图），不在参数；lambda_init 是常数，不是参数。"),
        see=Ref("reference", "self.subln = _RMSNorm(2 * d, eps=1e-5)"),
        proof=lambda ref: _extra_measured(ref, 2048, 8, 3),
    ),
    Number(
        "differential_row_sum",
        en="At depth = 1 with the four lambda vectors all zero, lambda equals lambda_init. What does each row of a "
           "differential map A_h = map(2h) - lambda · map(2h + 1) sum to? (Two significant digits are enough.)",
        zh="depth = 1 且四个 lambda 向量全为零时，lambda 等于 lambda_init。差分图 A_h = map(2h) - lambda · map(2h + 1) 的"
           "每一行之和是多少？（两位有效数字即可。）",
        answer=lambda: differential_row_sum(lambda_init(1)),
        unit=("(row sum)", "（行和）"),
        rel_tol=0.01,
        explain=("lambda_init(1) = 0.8 - 0.6·e^-0.3 ≈ 0.3555, and each softmax row sums to 1, so A_h's rows sum to "
                 "1 - 0.3555 ≈ 0.644; some weights can be negative. The per-head RMSNorm removes this scale, which "
                 "differs from head to head and layer to layer, before the fixed (1 - lambda_init) factor.",
                 "lambda_init(1) = 0.8 - 0.6·e^-0.3 ≈ 0.3555，softmax 每行之和为 1，所以 A_h 每行之和为 1 - 0.3555 ≈ 0.644；"
                 "有些权重可能是负的。逐头的 RMSNorm 会去掉这个随头、随层而变的尺度，之后再乘固定的 (1 - lambda_init)。"),
        see=Ref("reference", "diff = maps[:, :, 0] - lam * maps[:, :, 1]"),
        proof=lambda ref: _row_sum_measured(ref, 1),
    ),
    Choice(
        "why_difference",
        en="What does taking the difference of two softmax maps buy over a single map?",
        zh="取两张 softmax 图之差，比只用一张图好在哪里？",
        right=("Weight that both maps put on irrelevant tokens, common-mode noise, cancels in the difference, while a "
               "key the first map favours more survives; the result is sparser and more focused than either softmax "
               "can be on its own.",
               "两张图都分给无关 token 的权重（共模噪声）在相减时抵消，而第一张图更偏好的 key 会保留下来；结果比单独任何一个 "
               "softmax 都更稀疏、更集中。"),
        wrong=[("The difference makes every row sum to zero, so padding tokens automatically get no weight.",
                "相减使每一行之和为零，所以 padding token 自动得不到权重。"),
               ("It doubles the number of heads at no cost, and the extra heads are where the gain comes from.",
                "它免费让头数翻倍，收益来自多出来的头。"),
               ("The second map acts as dropout: it randomly removes part of the attention weight during training.",
                "第二张图相当于 dropout：训练时随机去掉一部分注意力权重。")],
        explain=("A softmax cannot give exactly zero weight, so a single map always spreads some mass over irrelevant "
                 "context; subtracting a second estimate of that spread removes it, like a differential amplifier. "
                 "Rows sum to 1 - lambda, not 0, and the differential heads are half as many, not twice.",
                 "softmax 无法给出恰好为零的权重，所以单张图总会把一些权重散到无关的上下文上；减去对这部分散布的第二次估计就能"
                 "去掉它，就像差分放大器。行和是 1 - lambda 而不是 0；差分头的数量是原来的一半，而不是两倍。"),
        see=Ref("statement", "so that attention noise common to both cancels out"),
    ),
    Choice(
        "per_head_norm",
        en="Why is each head normalised on its own (RMSNorm over its 2d values) rather than the concatenated "
           "hidden_dim vector?",
        zh="为什么每个头单独归一化（在它自己的 2d 个值上做 RMSNorm），而不是对拼接后的 hidden_dim 向量归一化？",
        right=("Differential heads have very different output scales (their maps are sparse and sum to 1 - lambda); "
               "a norm over all heads would let the loudest head set the scale of the rest, while a per-head norm puts "
               "every head on the same footing.",
               "各差分头的输出尺度差别很大（它们的图很稀疏、行和为 1 - lambda）；对所有头一起归一化，会让最响的头决定其他头的"
               "尺度，而逐头归一化让每个头处在同一起点上。"),
        wrong=[("The norm must see the whole hidden_dim vector so that the heads can exchange information before "
                "out_proj.",
                "norm 必须看到整个 hidden_dim 向量，这样各个头才能在 out_proj 之前交换信息。"),
               ("The per-head norm is what removes the negative weights of the differential map.",
                "逐头的 norm 正是用来去掉差分图中的负权重的。"),
               ("The per-head norm replaces the 1/sqrt(d) scaling of the scores, which is why (1 - lambda_init) "
                "follows it.",
                "逐头的 norm 取代了分数的 1/sqrt(d) 缩放，所以后面要乘 (1 - lambda_init)。")],
        explain=("The norm acts on A_h V_h after the maps are combined, so it rescales outputs, not weights; the "
                 "heads mix only in out_proj. The fixed (1 - lambda_init) factor then keeps the gradients close to "
                 "those of a standard Transformer.",
                 "norm 作用在两张图合并之后的 A_h V_h 上，缩放的是输出而不是权重；各头只在 out_proj 里混合。之后固定的 "
                 "(1 - lambda_init) 让梯度保持在接近标准 Transformer 的水平。"),
        see=Ref("reference", "out = self.subln(out)"),
    ),
    Choice(
        "scale_width",
        en="Each value head is 2d wide. Why are the scores still divided by sqrt(d)?",
        zh="每个 value 头宽 2d。为什么分数仍然除以 sqrt(d)？",
        right=("Each map is a dot product of a query head and a key head of width d, so its variance grows with d; the "
               "width of the values plays no part in the scores.",
               "每张图都是宽度为 d 的 query 头与 key 头的点积，方差随 d 增长；value 的宽度与分数无关。"),
        wrong=[("Because two maps are subtracted, each must be scaled by 1/sqrt(2d) to keep their difference at unit "
                "variance.",
                "因为要把两张图相减，每张图都要乘 1/sqrt(2d)，才能让差保持单位方差。"),
               ("The scale follows the output head, so it should be 1/sqrt(2d); sqrt(d) is an approximation.",
                "缩放应跟随输出头的宽度，所以应是 1/sqrt(2d)；sqrt(d) 只是近似。"),
               ("1/sqrt(d) is chosen so that it cancels the (1 - lambda_init) factor applied after the norm.",
                "选 1/sqrt(d) 是为了抵消 norm 之后乘上的 (1 - lambda_init)。")],
        explain=("The scaling is about the logits fed to each softmax, computed before anything is subtracted. Using "
                 "sqrt(2d) makes every map flatter than intended.",
                 "缩放针对的是送进每个 softmax 的 logits，在任何相减之前就已算好。用 sqrt(2d) 会让每张图比预期"
                 "更平。"),
        see=Ref("reference", "scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d)"),
    ),
]


def _extra_measured(ref, hidden_dim, num_heads, depth):
    """Parameters of the reference module, built on meta, that are not one of the four projection weights."""
    import torch

    with torch.device("meta"):
        m = ref.DifferentialAttention(hidden_dim, num_heads, depth)
    return sum(p.numel() for name, p in m.named_parameters() if not name.endswith("_proj.weight"))


def _row_sum_measured(ref, depth):
    """Constant values v = 1 make A_h V_h the row sum of A_h. With the head norm replaced by the identity and
    out_proj the identity, the output is (1 - lambda) · (1 - lambda_init): divide the constant factor out."""
    import torch

    E = 8
    m = ref.DifferentialAttention(E, 1, depth).double()
    with torch.no_grad():
        for name in ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2"):
            getattr(m, name).zero_()
        m.v_proj.weight.fill_(1.0 / E)
        m.out_proj.weight.copy_(torch.eye(E, dtype=torch.float64))
        m.subln = torch.nn.Identity()
        out = m(torch.ones(1, 5, E, dtype=torch.float64))
    return float(out[0, -1, 0]) / (1 - m.lambda_init)
