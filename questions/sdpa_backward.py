"""Follow-up questions for `sdpa_backward` (see attn_drill/bank/quiz.py for the format)."""
from attn_drill.bank.quiz import Choice, Number, Ref


def backward_flops(B, H, Lq, Lk, D, Dv):
    """2 FLOPs per multiply-add for the four matmuls of the backward: dV = Pᵀ dO, dP = dO Vᵀ, dQ = dS K,
    dK = dSᵀ Q (the elementwise softmax backward and the scale are not counted)."""
    dv = 2 * B * H * Lk * Lq * Dv
    dp = 2 * B * H * Lq * Lk * Dv
    dq = 2 * B * H * Lq * Lk * D
    dk = 2 * B * H * Lk * Lq * D
    return dv + dp + dq + dk


QUESTIONS = [
    Choice(
        "row_term",
        en="Where does the term rowsum(P ∘ dP) in dS = P ∘ (dP - rowsum(P ∘ dP)) come from?",
        zh="dS = P ∘ (dP - rowsum(P ∘ dP)) 中的 rowsum(P ∘ dP) 这一项从何而来？",
        right=("From the softmax normaliser: every score of a row changes every weight of that row, and the "
               "Jacobian diag(p) - p pᵀ gives exactly this correction.",
               "来自 softmax 的归一化：一行中的每个分数都会改变该行的所有权重，其 Jacobian diag(p) - p pᵀ 恰好给出"
               "这一修正项。"),
        wrong=[("It is a stability trick, like subtracting the row maximum in the forward pass; it could be "
                "dropped in float64.",
                "它是一个数值稳定技巧，类似前向中减去行最大值；在 float64 下可以去掉。"),
               ("It comes from the mask: it removes the gradient that would flow into masked keys.",
                "它来自掩码：用来去掉本会流向被屏蔽 key 的梯度。"),
               ("It comes from the scale: S = scale · Q Kᵀ adds a second term to the chain rule.",
                "它来自缩放：S = scale · Q Kᵀ 在链式法则里多出一项。")],
        explain=("∂p_j/∂s_k = p_j(δ_jk - p_k), so dS_k = Σ_j dP_j p_j(δ_jk - p_k) = p_k(dP_k - Σ_j p_j dP_j). "
                 "Without the row term dQ and dK are wrong in every precision; the scale only multiplies dQ and dK "
                 "at the end.",
                 "∂p_j/∂s_k = p_j(δ_jk - p_k)，所以 dS_k = Σ_j dP_j p_j(δ_jk - p_k) = p_k(dP_k - Σ_j p_j dP_j)。"
                 "缺了这一项，dQ 和 dK 在任何精度下都是错的；缩放只在最后乘到 dQ 和 dK 上。"),
        see=Ref("reference", "row_dot = torch.sum(P * dP, dim=-1, keepdim=True)"),
    ),
    Choice(
        "mask_free",
        en="P came from a causal forward, yet the backward applies no mask. Why is no gradient leaked into the "
           "masked (future) keys?",
        zh="P 来自带因果掩码的前向，但反向没有任何掩码。为什么梯度不会泄漏到被屏蔽的（未来的）key 上？",
        right=("dS = P ∘ (dP - row) and P is exactly 0 at masked entries, so dS is 0 there and neither dQ nor dK "
               "receives anything through them.",
               "dS = P ∘ (dP - row)，而被屏蔽位置的 P 恰好为 0，所以那里的 dS 为 0，dQ 和 dK 都不会经由它们得到梯度。"),
        wrong=[("Because dP = dO Vᵀ is already 0 at the masked entries.",
                "因为 dP = dO Vᵀ 在被屏蔽的位置已经是 0。"),
               ("Because the -inf scores have an infinite derivative that autograd drops.",
                "因为 -inf 分数的导数为无穷大，会被 autograd 丢掉。"),
               ("It does leak; dK must be multiplied by the mask afterwards.",
                "确实会泄漏；之后必须把 dK 乘上掩码。")],
        explain=("dP_ij = dO_i · V_j is generally non-zero for a masked pair; it is the factor P_ij = 0 in dS "
                 "that stops the gradient. dV = Pᵀ dO is protected the same way.",
                 "对被屏蔽的位置，dP_ij = dO_i · V_j 一般不为 0；是 dS 中的因子 P_ij = 0 挡住了梯度。dV = Pᵀ dO 也以同样"
                 "的方式被保护。"),
        see=Ref("reference", "dS = P * (dP - row_dot)"),
    ),
    Choice(
        "flash_row_term",
        en="FlashAttention's backward never stores P. How does it get the row term Σ_j P_ij dP_ij before it "
           "walks over the key blocks?",
        zh="FlashAttention 的反向从不保存 P。它如何在遍历 key 块之前就得到行求和项 Σ_j P_ij dP_ij？",
        right=("Σ_j P_ij (dO_i · V_j) = dO_i · Σ_j P_ij V_j = dO_i · O_i, so it is rowsum(dO ∘ O), computed from "
               "the saved output in one pass.",
               "Σ_j P_ij (dO_i · V_j) = dO_i · Σ_j P_ij V_j = dO_i · O_i，也就是 rowsum(dO ∘ O)，用保存的输出一次"
               "就能算出。"),
        wrong=[("It is 0, because each row of P sums to 1.",
                "它等于 0，因为 P 的每一行和为 1。"),
               ("It approximates the term from the log-sum-exp alone, which is why its gradients are not exact.",
                "它只用 log-sum-exp 近似这一项，所以它的梯度并不精确。"),
               ("It keeps P in shared memory between the forward and the backward kernels.",
                "它在前向和反向 kernel 之间把 P 保存在 shared memory 里。")],
        explain=("The identity is exact, so FlashAttention's gradients match a materialised backward up to "
                 "rounding. Rows of P summing to 1 say nothing about Σ_j P_ij dP_ij, which depends on dO.",
                 "这个恒等式是精确的，所以 FlashAttention 的梯度与显式计算 P 的反向只差舍入误差。P 的行和为 1 并不能说明"
                 "Σ_j P_ij dP_ij 的值，它取决于 dO。"),
        see=Ref("reference", "# softmax backward, row by row: dS = P * (dP - sum_k P * dP)"),
    ),
    Number(
        "backward_flops",
        en="Count the FLOPs (2 per multiply-add) of this backward's four matmuls for B = 2, 16 heads, "
           "Lq = Lk = 4096, D = Dv = 128 (ignore the elementwise softmax backward and the scale).",
        zh="统计这个反向中四次矩阵乘法的浮点运算次数（每次乘加记 2 次）：B = 2，16 个头，Lq = Lk = 4096，"
           "D = Dv = 128（忽略逐元素的 softmax 反向和缩放）。",
        answer=lambda: backward_flops(2, 16, 4096, 4096, 128, 128),
        unit=("FLOPs", "次浮点运算"),
        explain=("Each matmul costs 2·B·H·Lq·Lk times D or Dv: 4·B·H·Lq·Lk·(D + Dv) in all, twice the forward's "
                 "QKᵀ and PV. FlashAttention, which recomputes S from Q and K instead of reading P, adds one more "
                 "QKᵀ: about 2.5 times the forward.",
                 "每次矩阵乘法的开销是 2·B·H·Lq·Lk 乘以 D 或 Dv：合计 4·B·H·Lq·Lk·(D + Dv)，是前向 QKᵀ 与 PV 的两倍。"
                 "FlashAttention 不读 P 而是用 Q 和 K 重算 S，多一次 QKᵀ：约为前向的 2.5 倍。"),
        see=Ref("reference", "dP = torch.matmul(dO, V.transpose(-2, -1))"),
        proof=lambda ref: _measured_flops(ref, 2, 16, 4096, 4096, 128, 128),
    ),
]


def _measured_flops(ref, B, H, Lq, Lk, D, Dv):
    """The reference's backward on meta tensors of the full size, counted by torch.utils.flop_counter."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    with torch.device("meta"):
        dO, Q = torch.empty(B, H, Lq, Dv), torch.empty(B, H, Lq, D)
        K, V = torch.empty(B, H, Lk, D), torch.empty(B, H, Lk, Dv)
        P = torch.empty(B, H, Lq, Lk)
    with FlopCounterMode(display=False) as fc:
        ref.scaled_dot_product_attention_backward(dO, Q, K, V, P, D ** -0.5)
    return fc.get_total_flops()
