"""Follow-up questions for `moe_router` (see attn_drill/quiz.py for the format)."""
from attn_drill.bank.quiz import Choice, Number, Ref


def balanced_loss(num_experts, top_k):
    """Uniform probabilities (P_e = 1/E) and equal counts (f_e = k/E): E * sum_e (k/E)(1/E) = k."""
    return num_experts * sum((top_k / num_experts) * (1.0 / num_experts) for _ in range(num_experts))


def capacity(tokens, num_experts, top_k, factor):
    """Switch / GShard: each expert takes factor * (tokens * k) / E assignments, rounded down."""
    return int(factor * tokens * top_k / num_experts)


def _measured_balanced(ref, E, k):
    import torch
    N = 4 * E
    probs = torch.full((N, E), 1.0 / E, dtype=torch.float64)
    experts = torch.stack([torch.arange(j * k, j * k + k) % E for j in range(N)])   # every expert k*N/E times
    return float(ref.load_balancing_loss(probs, experts, E))


QUESTIONS = [
    Number(
        "balanced_value",
        en="A router with 64 experts and top_k = 6 is perfectly balanced: every expert gets the same share of the "
           "assignments and every token's probabilities are uniform. What does load_balancing_loss return?",
        zh="一个有 64 个专家、top_k = 6 的路由器完全均衡：每个专家分到的分配一样多，每个 token 的概率都是均匀分布。"
           "load_balancing_loss 返回多少？",
        answer=lambda: balanced_loss(64, 6),
        unit=("", ""),
        rel_tol=1e-9,
        explain=("f_e = 6/64 and P_e = 1/64, so E · Σ f_e P_e = 64 · 64 · (6/64)(1/64) = 6 = k. The factor E makes "
                 "the minimum independent of the number of experts; the minimum is k, not 1, because f counts top-k "
                 "assignments per token.",
                 "f_e = 6/64，P_e = 1/64，所以 E · Σ f_e P_e = 64 · 64 · (6/64)(1/64) = 6 = k。系数 E 让最小值与专家数无关；"
                 "最小值是 k 而不是 1，因为 f 统计的是每个 token 的 top-k 分配。"),
        see=Ref("reference", "return E * (f * P).sum()"),
        proof=lambda ref: _measured_balanced(ref, 64, 6),
    ),
    Number(
        "capacity_count",
        en="A batch row of 4096 tokens is routed top-2 over 64 experts with capacity factor 1.25. How many "
           "assignments can one expert take (capacity = factor · tokens · k / E, rounded down)?",
        zh="一个 batch 行有 4096 个 token，在 64 个专家上做 top-2 路由，容量因子为 1.25。一个专家最多能接收多少次分配"
           "（capacity = factor · tokens · k / E，向下取整）？",
        answer=lambda: capacity(4096, 64, 2, 1.25),
        unit=("assignments", "次分配"),
        explain=("4096 · 2 / 64 = 128 assignments per expert if the load were perfectly even, and the factor 1.25 "
                 "leaves 25% slack: 160. Whatever goes to an expert beyond its first 160 is dropped and carried on by "
                 "the residual connection alone.",
                 "若负载完全均匀，每个专家接收 4096 · 2 / 64 = 128 次分配；因子 1.25 留出 25% 的余量：160。超过前 160 次的"
                 "分配会被丢弃，只靠残差连接往后传。"),
        see=Ref("statement", "Each expert accepts at most `capacity`"),
    ),
    Choice(
        "why_choice_major",
        en="With top-2 routing and a full expert, why serve every token's first choice before any second choice?",
        zh="在 top-2 路由中，专家容量不够时，为什么要先受理所有 token 的第一选择，再受理第二选择？",
        right=("A first choice carries the larger weight, so dropping a second choice costs less; serving token by "
               "token would let early tokens' second choices push out later tokens' first choices.",
               "第一选择的权重更大，丢弃第二选择的损失更小；如果逐个 token 受理，靠前 token 的第二选择就会挤掉靠后 token "
               "的第一选择。"),
        wrong=[("It makes the auxiliary loss differentiable.", "这样辅助损失才可微。"),
               ("Second choices are never kept when capacity is limited.", "容量有限时第二选择永远不会被保留。"),
               ("It lets the experts run in sequence order, which the attention layer needs for causality.",
                "这样专家可以按序列顺序运行，注意力层的因果性需要这一点。")],
        explain=("The order only matters once an expert overflows. Choice-major priority (GShard) protects the "
                 "assignment each token cares most about; later positions still lose out within one round, which is "
                 "why some systems sort by router score instead.",
                 "只有专家溢出时顺序才有影响。选择优先的顺序（GShard）保护了每个 token 最看重的那次分配；同一轮内靠后的"
                 "位置仍然吃亏，所以有些系统改为按路由分数排序。"),
        see=Ref("reference", "order = experts.transpose(1, 2).reshape(B, k * S)                   # (B, k*S): choice-major"),
    ),
    Choice(
        "why_full_probs",
        en="Why does the balancing loss use the full softmax P_e rather than the renormalised top-k weights?",
        zh="为什么负载均衡损失用完整 softmax 的 P_e，而不是重新归一化后的 top-k 权重？",
        right=("The counts f carry no gradient; P is the only path by which the loss can move probability toward "
               "unpopular experts, and an expert that is never chosen only has a gradient through the full "
               "distribution.",
               "计数 f 没有梯度；P 是损失把概率推向冷门专家的唯一途径，而一个从未被选中的专家只有在完整分布中才有梯度。"),
        wrong=[("The top-k weights are integers.", "top-k 权重是整数。"),
               ("Using the top-k weights would make the loss always equal to k.", "用 top-k 权重会让损失恒等于 k。"),
               ("The full softmax is cheaper to compute than the top-k.", "完整 softmax 比 top-k 更便宜。")],
        explain=("With P taken from the chosen weights, an expert outside every token's top-k has P_e = 0 and no "
                 "gradient, so the loss cannot revive it; the full distribution keeps every expert in play.",
                 "如果 P 取自选中的权重，不在任何 token top-k 中的专家 P_e = 0 且没有梯度，损失无法让它重新被选中；完整分布"
                 "让每个专家都参与其中。"),
        see=Ref("reference", "# the balancing loss sees every expert's share of the token, not only the chosen ones"),
    ),
]
