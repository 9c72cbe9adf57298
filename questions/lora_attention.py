"""Follow-up questions for `lora_attention` (see attn_drill/quiz.py for the format)."""
from attn_drill.bank.quiz import Choice, Number, Ref


def lora_params(hidden_dim, r, num_targets):
    """A (r, in) and B (out, r) per adapted square projection: 2 * r * hidden_dim each."""
    return num_targets * 2 * r * hidden_dim


def _measured_trainable(ref, hidden_dim, r):
    m = ref.LoRAAttention(hidden_dim, 8, r, 16.0)
    return sum(p.numel() for p in m.parameters() if p.requires_grad)


def _measured_scaling_ratio(ref):
    plain = ref.LoRALinear(8, 8, 64, 16.0).scaling
    rs = ref.LoRALinear(8, 8, 64, 16.0, use_rslora=True).scaling
    return rs / plain


QUESTIONS = [
    Number(
        "trainable_params",
        en="LoRAAttention(4096, 8 heads, r = 16): how many parameters train (q_proj and v_proj adapted, no bias)?",
        zh="LoRAAttention(4096，8 个头，r = 16)：有多少个参数参与训练（q_proj 和 v_proj 加了适配器，无偏置）？",
        answer=lambda: lora_params(4096, 16, 2),
        unit=("parameters", "个参数"),
        explain=("Each adapted projection trains A (16 × 4096) and B (4096 × 16): 131 072 numbers, twice: 262 144, "
                 "against 4 · 4096² ≈ 67 million frozen weights in the four projections, 0.4%.",
                 "每个加了适配器的投影训练 A（16 × 4096）和 B（4096 × 16）：131 072 个数，两个投影共 262 144 个；四个投影中"
                 "冻结的权重有 4 · 4096² ≈ 6700 万个，只占 0.4%。"),
        see=Ref("reference", "self.lora_A = nn.Linear(in_features, r, bias=False)            # weight (r, in)"),
        proof=lambda ref: _measured_trainable(ref, 4096, 16),
    ),
    Number(
        "rslora_ratio",
        en="With lora_alpha = 16 and r = 64, how many times larger is rsLoRA's scaling than plain LoRA's?",
        zh="lora_alpha = 16、r = 64 时，rsLoRA 的缩放系数是普通 LoRA 的多少倍？",
        answer=lambda: (16 / 64 ** 0.5) / (16 / 64),
        unit=("times", "倍"),
        rel_tol=1e-9,
        explain=("alpha / sqrt(r) = 2 against alpha / r = 0.25: sqrt(r) = 8 times. With alpha / r the update of a "
                 "high-rank adapter is scaled down so much that it learns slowly; alpha / sqrt(r) keeps its size "
                 "stable as r grows.",
                 "alpha / sqrt(r) = 2，而 alpha / r = 0.25：相差 sqrt(r) = 8 倍。用 alpha / r 时，高秩适配器的增量被缩得太小，"
                 "学得很慢；alpha / sqrt(r) 让增量的大小不随 r 增大而变化。"),
        see=Ref("reference", "self.scaling = lora_alpha / math.sqrt(r) if use_rslora else lora_alpha / r"),
        proof=_measured_scaling_ratio,
    ),
    Choice(
        "why_b_zero",
        en="Why is B initialised to zero and A random, rather than both random or both zero?",
        zh="为什么 B 初始化为零而 A 随机，而不是两者都随机或者都为零？",
        right=("B = 0 makes the adapted model start exactly at the pretrained one, and a random A still gives B a "
               "non-zero gradient; with both zero, neither would ever get a gradient.",
               "B = 0 让适配后的模型恰好从预训练模型出发，而随机的 A 仍能让 B 得到非零梯度；如果两者都为零，谁都不会得到梯度。"),
        wrong=[("A zero B would make the merged weight singular.", "B 为零会让合并后的权重奇异。"),
               ("Random B would make the adapter untrainable.", "随机的 B 会让适配器无法训练。"),
               ("Zero B halves the memory of the adapter.", "B 为零能让适配器的显存减半。")],
        explain=("dL/dB = (dL/dy) (A x)^T is non-zero as soon as A is, and dL/dA = B^T (dL/dy) x^T becomes non-zero "
                 "after the first step. Both zero is a saddle: every gradient of the branch vanishes.",
                 "只要 A 非零，dL/dB = (dL/dy) (A x)^T 就非零；第一步之后 dL/dA = B^T (dL/dy) x^T 也变为非零。两者都为零则是"
                 "一个鞍点：分支的所有梯度都为零。"),
        see=Ref("reference", "nn.init.zeros_(self.lora_B.weight)                         # the update starts at zero"),
    ),
    Choice(
        "why_merge",
        en="What does merging the adapter into the base weight buy at inference time?",
        zh="在推理时，把适配器合并进基座权重有什么好处？",
        right=("No extra latency: the layer is a single matmul again, with the same outputs; the price is that "
               "switching adapters needs an unmerge (and a merge of the next one).",
               "没有额外延迟：该层重新变成一次矩阵乘法，输出相同；代价是切换适配器时需要先拆分（再合并下一个）。"),
        wrong=[("It makes the outputs more accurate, because the low-rank branch rounds more.",
                "输出更准确，因为低秩分支的舍入误差更大。"),
               ("It reduces the rank of the base weight to r.", "它把基座权重的秩降到 r。"),
               ("It lets the adapter keep training during inference.", "它让适配器在推理时继续训练。")],
        explain=("W + s·BA has W's shape, so the merged layer costs exactly what the base layer costs. Unmerged, "
                 "each call also runs two thin matmuls, cheap in FLOPs but extra kernel launches on a GPU.",
                 "W + s·BA 与 W 形状相同，所以合并后的层开销与基座层完全一样。不合并时，每次调用还要多做两次很窄的矩阵乘法，"
                 "浮点运算不多，但在 GPU 上要多启动几个 kernel。"),
        see=Ref("reference", "self.base_layer.weight += self.delta_weight()"),
    ),
]
