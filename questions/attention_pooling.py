"""Follow-up questions for `attention_pooling` (see attn_drill/bank/quiz.py for the format)."""
from attn_drill.bank.quiz import Choice, Number, Ref


def pooling_params(E):
    """The query (E), key_proj and value_proj (E² each, no bias), out_proj (E² + E bias)."""
    return E + 2 * E * E + (E * E + E)


def pooling_flops(B, L, E, H):
    """2 FLOPs per multiply-add: key and value projections, one query's scores and weighted sum, out_proj."""
    D = E // H
    projections = 2 * (2 * B * L * E * E)
    core = 2 * B * H * 1 * L * D + 2 * B * H * 1 * L * D
    out = 2 * B * E * E
    return projections + core + out


QUESTIONS = [
    Choice(
        "zero_query",
        en="Suppose the learned query is all zeros. What does the layer compute for one sequence?",
        zh="假设可学习的 query 全为 0。这个层对一条序列计算的是什么？",
        right=("Every score is 0, so the weights are uniform over the real positions: out_proj applied to the mean "
               "of the projected values, padding left out.",
               "所有分数都是 0，所以权重在真实位置上均匀分布：结果是对（不含填充的）投影后 value 取平均，再经过 out_proj。"),
        wrong=[("The zero vector: with no query there is nothing to attend with, so only out_proj's bias remains.",
                "零向量：没有 query 就无从关注，只剩下 out_proj 的偏置。"),
               ("NaN: the softmax of a row of zeros divides 0 by 0.",
                "NaN：对一行 0 做 softmax 会出现 0 除以 0。"),
               ("The projected value of the first position, since the first of several equal scores wins.",
                "第一个位置的投影 value，因为多个相等分数中第一个胜出。")],
        explain=("A zero query makes the pooling mean pooling: exp(0) = 1 for every real key, so each gets 1/n. "
                 "The softmax only divides by zero when every key is masked, and it is a weighted average, not an "
                 "argmax. Training moves the query away from this starting point.",
                 "query 为 0 时，注意力池化就退化成平均池化：每个真实 key 的 exp(0) = 1，各得 1/n 的权重。只有所有 key 都"
                 "被屏蔽时 softmax 才会除以 0；而且它是加权平均，不是取最大。训练会让 query 离开这个起点。"),
        see=Ref("reference", "weights = torch.softmax(scores, dim=-1)"),
    ),
    Choice(
        "heads_cost",
        en="Going from num_heads=1 to num_heads=12 with the same hidden_dim: what happens to the parameters and "
           "to what the layer can express?",
        zh="在 hidden_dim 不变的情况下，把 num_heads 从 1 改成 12：参数量和这个层的表达能力会怎样变化？",
        right=("The parameters stay the same; the query and projections are only cut into slices, but each head "
               "now has its own softmax and can pool from different positions.",
               "参数量不变；query 和各投影只是被切成了若干段，但每个头现在有自己的 softmax，可以从不同的位置池化。"),
        wrong=[("Parameters grow 12-fold: every head has its own full-width query and projections.",
                "参数量变为 12 倍：每个头都有自己全宽度的 query 和投影。"),
               ("Parameters stay the same and so does the output, because the heads are concatenated back "
                "together.",
                "参数量不变，输出也不变，因为各头最后又被拼接回去。"),
               ("Parameters grow by one out_proj per head, which mixes that head's pooled vector.",
                "每个头多一个 out_proj 来混合该头的池化向量，所以参数量增加。")],
        explain=("Head h uses features h·head_dim..(h+1)·head_dim − 1 of the same query and the same projections. "
                 "With one head there is a single weight distribution over the positions; with 12 heads there are "
                 "12, so the output changes even though the weights do not.",
                 "头 h 使用同一个 query 和同一组投影的第 h·head_dim..(h+1)·head_dim − 1 个特征。一个头时，位置上只有一个"
                 "权重分布；12 个头时有 12 个，所以即使参数不变，输出也会改变。"),
        see=Ref("reference", "q = self.query.view(1, 1, H, D).transpose(1, 2)"),
    ),
    Choice(
        "mask_then_softmax",
        en="Why are padded positions given a score of -inf before the softmax, rather than a weight of 0 after "
           "it?",
        zh="为什么要在 softmax 之前把填充位置的分数设为 -inf，而不是在 softmax 之后把它们的权重设为 0？",
        right=("With -inf the softmax gives padding exactly 0 and renormalises over the real positions; zeroing "
               "afterwards leaves weights that sum to less than 1, so the pooled vector shrinks with the amount "
               "of padding.",
               "用 -inf 时，softmax 给填充位置的权重恰好为 0，并在真实位置上重新归一化；事后置零会让权重之和小于 1，"
               "池化向量会随填充的多少而缩小。"),
        wrong=[("The two are the same, because the weights of padded positions are already close to 0.",
                "两者一样，因为填充位置的权重本来就接近 0。"),
               ("Setting the padded scores to 0 before the softmax would work just as well and avoids infinities.",
                "在 softmax 之前把填充位置的分数设为 0 效果一样，还能避免出现无穷大。"),
               ("-inf is only there to keep exp() from overflowing; the normalisation does not depend on it.",
                "-inf 只是为了防止 exp() 溢出；归一化与它无关。")],
        explain=("Padded positions hold arbitrary vectors, so their scores are not small in general, and a score "
                 "of 0 still gets weight exp(0 − max). Only -inf removes them from both the numerator and the "
                 "denominator, so the same sentence pools to the same vector whatever its padding.",
                 "填充位置的向量是任意的，它们的分数一般并不小，而分数 0 仍会得到 exp(0 − max) 的权重。只有 -inf 能把它们"
                 "同时从分子和分母中去掉，这样同一句话无论填充多少，池化结果都相同。"),
        see=Ref("reference", "scores = scores.masked_fill(mask[:, None, None, :], float(\"-inf\"))"),
    ),
    Number(
        "param_count",
        en="How many parameters does AttentionPooling(hidden_dim=768, num_heads=12) have (the query, the three "
           "projections and out_proj's bias)?",
        zh="AttentionPooling(hidden_dim=768, num_heads=12) 有多少个参数（query、三个投影以及 out_proj 的偏置）？",
        answer=lambda: pooling_params(768),
        unit=("parameters", "个参数"),
        explain=("3 · 768² weights for key_proj, value_proj and out_proj, plus 768 for the query and 768 for the "
                 "bias: 1,771,008. There is no query projection (the query is learned directly), and num_heads "
                 "does not appear in the count.",
                 "key_proj、value_proj 和 out_proj 共 3 · 768² 个权重，再加上 query 的 768 个和偏置的 768 个："
                 "1,771,008。这里没有 query 投影（query 直接学习得到），num_heads 也不影响参数量。"),
        see=Ref("reference", "self.query = nn.Parameter(torch.randn(1, 1, hidden_dim))"),
        proof=lambda ref: sum(p.numel() for p in ref.AttentionPooling(768, num_heads=12).parameters()),
    ),
    Number(
        "forward_flops",
        en="Count the FLOPs (2 per multiply-add; the softmax, scaling and bias add count 0) of one forward pass "
           "with B = 32, L = 512, hidden_dim = 768 and 12 heads: the key and value projections, the scores, the "
           "weighted sum and out_proj.",
        zh="统计一次前向传播的 FLOPs（每次乘加计 2；softmax、缩放和加偏置计 0）：B = 32，L = 512，hidden_dim = 768，"
           "12 个头；包括 key 和 value 投影、分数、加权求和以及 out_proj。",
        answer=lambda: pooling_flops(32, 512, 768, 12),
        unit=("FLOPs", "次浮点运算"),
        rel_tol=0.01,
        explain=("The projections cost 4·B·L·E² ≈ 3.87e10 and out_proj 2·B·E² ≈ 3.8e7, but the attention itself "
                 "only 4·B·L·E ≈ 5.0e7: with one query it is linear in L, where self-attention over the same "
                 "sequence would cost 4·B·L²·E. The total is about 3.87e10.",
                 "投影的开销是 4·B·L·E² ≈ 3.87e10，out_proj 是 2·B·E² ≈ 3.8e7，而注意力本身只有 4·B·L·E ≈ 5.0e7："
                 "只有一个 query 时它与 L 成线性关系，而同一序列上的自注意力要 4·B·L²·E。总计约 3.87e10。"),
        see=Ref("reference", "pooled = torch.matmul(weights, v)"),
        proof=lambda ref: _measured_flops(ref, 32, 512, 768, 12),
    ),
]


def _measured_flops(ref, B, L, E, H):
    """The reference's own forward on the meta device, counted by torch.utils.flop_counter."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    m = ref.AttentionPooling(E, num_heads=H).to("meta")
    with torch.device("meta"):
        x = torch.empty(B, L, E)
    with FlopCounterMode(display=False) as counter:
        m(x)
    return counter.get_total_flops()
