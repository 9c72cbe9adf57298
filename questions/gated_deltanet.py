"""Follow-up questions for `gated_deltanet` (see attn_drill/quiz.py for the format)."""
import math

from attn_drill.bank.quiz import Choice, Number, Ref


def scalar_delta_rule(vs, beta, alpha):
    """K = V = 1, k = q = 1: S = alpha S; u = beta (v - S); S = S + u; the last output S."""
    S = 0.0
    for v in vs:
        S = alpha * S
        S = S + beta * (v - S)
    return S


def state_bytes(heads, K, V, bytes_per_element):
    return heads * K * V * bytes_per_element


QUESTIONS = [
    Number(
        "three_tokens",
        en="One head, K = V = 1, k = q = 1 after normalisation (take scale = 1), beta = 1/2, g = ln(1/2), zero "
           "initial state. The values are 4, 4, 0. What is the output at the third token?",
        zh="一个头，K = V = 1，归一化后 k = q = 1（取 scale = 1），beta = 1/2，g = ln(1/2)，初始状态为零。value 依次为 "
           "4、4、0。第三个 token 的输出是多少？",
        answer=lambda: scalar_delta_rule([4.0, 4.0, 0.0], 0.5, 0.5),
        unit=("(output)", "（输出）"),
        rel_tol=1e-4,
        explain=("After two tokens S = 2.5. Token 3 decays it to 1.25, the correction is (0 − 1.25)/2 = −0.625, so "
                 "S = 0.625. A value of 0 pulls the memory toward 0 instead of adding nothing, as linear attention "
                 "would.",
                 "两个 token 之后 S = 2.5。第三个 token 先把它衰减到 1.25，修正量为 (0 − 1.25)/2 = −0.625，于是 S = 0.625。"
                 "value 为 0 会把记忆拉向 0，而不是像线性注意力那样什么都不加。"),
        see=Ref("reference", "u = beta[:, t, :, None] * (v_t - pred)"),
        proof=lambda ref: _three_tokens_measured(ref),
    ),
    Number(
        "state_bytes",
        en="A Gated DeltaNet layer with 32 heads, K = V = 128, keeps its state in bfloat16. How many bytes is "
           "the state of one sequence, at a context of 100 000 tokens?",
        zh="一个有 32 个头、K = V = 128 的 Gated DeltaNet 层以 bfloat16 保存状态。上下文为 100 000 个 token 时，一条序列的"
           "状态占多少字节？",
        answer=lambda: state_bytes(32, 128, 128, 2),
        unit=("bytes", "字节"),
        explain=("32 · 128 · 128 · 2 bytes = 1 MiB, whatever the length: the state replaces the KV cache, which for "
                 "the same heads would take 2 · 32 · 128 · 2 = 16 KiB per token, 1.5 GiB at 100 000 tokens.",
                 "32 · 128 · 128 · 2 字节 = 1 MiB，与长度无关：状态取代了 KV cache；同样的头数下 KV cache 每个 token 要 "
                 "2 · 32 · 128 · 2 = 16 KiB，100 000 个 token 就是 1.5 GiB。"),
        see=Ref("reference", "# (B, H, K, V), whatever T"),
        proof=lambda ref: _state_bytes_measured(ref, 32, 128, 128),
    ),
    Choice(
        "why_solve",
        en="Chunked linear attention just adds each chunk's Kᵀ V to the state. Why does the chunked delta rule "
           "need a triangular solve inside each chunk?",
        zh="分块的线性注意力只需把每块的 Kᵀ V 加进状态。为什么分块的 delta 规则在每块内部需要一次三角求解？",
        right=("Each token's write depends on the state left by the earlier tokens of the same chunk (u_t reads Sᵀk_t), "
               "so the corrections are coupled; (I + A)⁻¹ solves that lower-triangular system for all of them at once.",
               "每个 token 的写入依赖于同一块中之前 token 留下的状态（u_t 要读 Sᵀk_t），于是各个修正量相互耦合；(I + A)⁻¹ "
               "一次性解出这个下三角方程组中的所有修正量。"),
        wrong=[("The solve normalises the keys of the chunk, which the recurrence does token by token.",
                "求解是对块内的 key 做归一化，而递推形式是逐个 token 做的。"),
               ("The solve is only there to avoid overflow of exp(gam_i − gam_j).",
                "求解只是为了避免 exp(gam_i − gam_j) 溢出。"),
               ("Without it the chunked form would be exact but slower.",
                "没有它分块形式也是精确的，只是更慢。")],
        explain=("Linear attention's update is additive, so chunk sums commute; the delta rule's update multiplies the "
                 "state by (I − βkkᵀ), and products of such factors are what the WY / UT form expresses with one "
                 "triangular matrix per chunk.",
                 "线性注意力的更新是加法，各块的和可以交换顺序；delta 规则的更新要把状态乘以 (I − βkkᵀ)，这些因子的乘积正是 "
                 "WY / UT 形式用每块一个三角矩阵来表达的。"),
        see=Ref("reference", "Tm = _unit_lower_inverse(A)"),
    ),
    Choice(
        "why_unit_keys",
        en="Why must the keys be L2-normalised (and beta kept in (0, 1)) for the delta rule to be stable?",
        zh="为什么 delta 规则要保持稳定，key 必须做 L2 归一化（并且 beta 保持在 (0, 1) 内）？",
        right=("The update multiplies the state by I − βkkᵀ, whose eigenvalue along k is 1 − β‖k‖²; with ‖k‖ = 1 "
               "and 0 < β < 1 it lies in (0, 1), so no direction is ever amplified.",
               "更新把状态乘以 I − βkkᵀ，它在 k 方向上的特征值是 1 − β‖k‖²；当 ‖k‖ = 1 且 0 < β < 1 时它在 (0, 1) 内，"
               "任何方向都不会被放大。"),
        wrong=[("Normalised keys make the state's entries sum to one, like softmax weights.",
                "归一化的 key 让状态的各元素之和为 1，就像 softmax 权重一样。"),
               ("Unnormalised keys would make the decay exp(g) larger than one.",
                "未归一化的 key 会让衰减 exp(g) 大于 1。"),
               ("The normalisation replaces the 1/sqrt(K) scale, which the delta rule cannot use.",
                "归一化取代了 1/sqrt(K) 缩放，因为 delta 规则不能使用这个缩放。")],
        explain=("With ‖k‖² = 4 and β = 0.9 the factor along k is 1 − 3.6 = −2.6: the state flips sign and grows at every "
                 "token. The decay is a separate gate, and q keeps its scale after the norm.",
                 "若 ‖k‖² = 4、β = 0.9，k 方向上的因子为 1 − 3.6 = −2.6：状态每个 token 都变号并增长。衰减是另一个独立的门，"
                 "q 在归一化之后仍然乘以它的 scale。"),
        see=Ref("statement", "First `q` and `k` are L2-normalised over `K`"),
    ),
    Choice(
        "mask_before_exp",
        en="In the chunked form, why mask gam_i − gam_j to −inf before the exp, rather than multiply exp(gam_i − gam_j) "
           "by the causal mask afterwards?",
        zh="在分块形式中，为什么要在 exp 之前把 gam_i − gam_j 屏蔽为 −inf，而不是之后再把 exp(gam_i − gam_j) 乘以因果掩码？",
        right=("Above the diagonal gam_i − gam_j is positive and grows with the decay; its exp can overflow to inf, and "
               "inf · 0 is NaN, while exp(−inf) is exactly 0.",
               "对角线以上 gam_i − gam_j 为正，并随衰减增大；它的 exp 可能溢出为 inf，而 inf · 0 是 NaN，exp(−inf) 则恰好为 0。"),
        wrong=[("Multiplying by the mask would also zero the diagonal, which must be 1.",
                "乘以掩码也会把对角线置零，而对角线必须是 1。"),
               ("masked_fill is required for autograd; a product with a mask has no gradient.",
                "autograd 需要 masked_fill；与掩码相乘就没有梯度了。"),
               ("The exp of a negative number underflows, and masking first avoids that.",
                "负数的 exp 会下溢，先屏蔽可以避免这一点。")],
        explain=("With g ≈ −60 per token, 16 tokens apart gives gam_i − gam_j ≈ 900 above the diagonal, beyond float64's "
                 "709. Underflow below the diagonal is harmless: those weights really are about 0.",
                 "每个 token 的 g ≈ −60 时，相隔 16 个 token 在对角线以上就有 gam_i − gam_j ≈ 900，超过了 float64 的 709。"
                 "对角线以下的下溢无害：那些权重本来就约等于 0。"),
        see=Ref("reference", "Gam = torch.exp(diff.masked_fill(~causal, float(\"-inf\")))"),
    ),
]


def _three_tokens_measured(ref):
    """The reference's recurrent form on the example (q = k = 1 before an l2norm that barely changes them)."""
    import torch
    T = 3
    one = torch.ones(1, T, 1, 1, dtype=torch.float64)
    v = torch.tensor([4.0, 4.0, 0.0], dtype=torch.float64).view(1, T, 1, 1)
    g = torch.full((1, T, 1), math.log(0.5), dtype=torch.float64)
    beta = torch.full((1, T, 1), 0.5, dtype=torch.float64)
    o, _ = ref.gated_delta_recurrent(one, one, v, g, beta, scale=1.0)
    return float(o[0, -1, 0, 0])


def _state_bytes_measured(ref, H, K, V):
    """The final state's size for one token in bfloat16 (it does not depend on the length)."""
    import torch
    q = torch.randn(1, 1, H, K).to(torch.bfloat16)
    v = torch.randn(1, 1, H, V).to(torch.bfloat16)
    g = torch.zeros(1, 1, H, dtype=torch.bfloat16)
    _, S = ref.gated_delta_recurrent(q, q, v, g, g)
    return S.numel() * S.element_size()
