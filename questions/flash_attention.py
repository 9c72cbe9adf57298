"""Follow-up questions for `flash_attention` (see attn_drill/bank/quiz.py for the format)."""
from attn_drill.bank.quiz import Choice, Number, Ref


def saved_bytes(B, H, L, D, bytes_per_element):
    """What the forward keeps for backward: Q, K, V, O of (B, H, L, D) each, and one LSE per query row."""
    qkvo = 4 * B * H * L * D * bytes_per_element
    lse = B * H * L * bytes_per_element
    return qkvo + lse


def backward_matmul_flops(B, H, L, D):
    """2 per multiply-add. Each (query block, key block) tile runs five products of bq·bk·D
    multiply-adds: S = Q Kᵀ again, dV += Pᵀ dO, dP = dO Vᵀ, dQ += dS K and dK += dSᵀ Q.
    Summed over all tiles that is five full L x L x D products, whatever the block size."""
    products = 5
    return products * 2 * B * H * L * L * D


QUESTIONS = [
    Choice(
        "why_lse",
        en="The forward saves one number per query row, LSE = m + log(l). Why is that enough for the backward "
           "to rebuild each tile of P, without a running max and without dividing by a row sum?",
        zh="前向只为每个 query 行保存一个数 LSE = m + log(l)。为什么反向只靠它就能重建每个 P 块，既不需要"
           "当前最大值，也不需要再除以行和？",
        right=("P_ij = exp(s_ij) / Σ_k exp(s_ik) = exp(s_ij − LSE_i), so exp(s − LSE) is the final, normalised "
               "P of the tile; its exponent is never above 0, so it cannot overflow either.",
               "P_ij = exp(s_ij) / Σ_k exp(s_ik) = exp(s_ij − LSE_i)，所以 exp(s − LSE) 就是该块最终已归一化的 P；"
               "指数永远不大于 0，也不会溢出。"),
        wrong=[("exp(s − LSE) is only the numerator; each tile must still be divided by its own row sum before "
                "it is used.",
                "exp(s − LSE) 只是分子；每个块在使用前还要除以它自己的行和。"),
               ("The backward has to redo the online softmax over the key blocks to get m again; LSE only "
                "replaces the saved running sum l.",
                "反向必须在 key 块上重新做一遍在线 softmax 才能得到 m；LSE 只是代替了保存的累加和 l。"),
               ("LSE is only a check value for the output; the backward uses the m of the last key block, which "
                "is the row maximum.",
                "LSE 只是用来校验输出的值；反向用的是最后一个 key 块的 m，也就是行最大值。")],
        explain=("Subtracting the log of the full row normaliser is the same as dividing by it, and the forward "
                 "has already summed over every key block. Saving m alone gives exp(s − m), which is not "
                 "normalised: that is the saved_max_not_lse mistake.",
                 "减去整行归一化因子的对数就等于除以它，而前向已经对所有 key 块求过和。只保存 m 得到的是 "
                 "exp(s − m)，没有归一化：这正是 saved_max_not_lse 这个错误。"),
        see=Ref("reference", "p = torch.exp(s - lse)"),
    ),
    Choice(
        "drow_identity",
        en="The softmax backward needs rowsum(P ∘ dP) over all keys, yet one tile sees only some of them. Why may "
           "the code use Drow = rowsum(dO ∘ O), computed once before the loops?",
        zh="softmax 的反向需要在所有 key 上求 rowsum(P ∘ dP)，但一个块只看到其中一部分 key。为什么代码可以用"
           "在循环之前一次算好的 Drow = rowsum(dO ∘ O)？",
        right=("Because dP_ij = dO_i · V_j, so Σ_j P_ij dP_ij = dO_i · Σ_j P_ij V_j = dO_i · O_i: an exact "
               "identity that needs only two (Lq, Dv) tensors.",
               "因为 dP_ij = dO_i · V_j，所以 Σ_j P_ij dP_ij = dO_i · Σ_j P_ij V_j = dO_i · O_i：这是精确的恒等式，"
               "只需要两个 (Lq, Dv) 的张量。"),
        wrong=[("It is an approximation that becomes exact as block_size grows; small blocks trade accuracy for "
                "memory.",
                "这是一个近似，block_size 越大越精确；小块是用精度换显存。"),
               ("The softmax gradient is local to each tile, so summing P ∘ dP inside the tile would be just as "
                "correct; Drow is only faster.",
                "softmax 的梯度在每个块内是局部的，所以在块内对 P ∘ dP 求和同样正确；Drow 只是更快。"),
               ("Drow is the gradient of the saved LSE, which only matters when the scores carry a mask.",
                "Drow 是保存的 LSE 的梯度，只有分数带掩码时才有影响。")],
        explain=("The sum must run over every key of the row: a per-tile sum is the d_term_per_tile mistake and "
                 "gives wrong dQ and dK whenever Lk exceeds the block. The identity through O makes the full sum "
                 "available before any tile is visited.",
                 "这个和必须覆盖该行的所有 key：只在块内求和就是 d_term_per_tile 错误，只要 Lk 大于块大小，dQ 和 dK "
                 "就会出错。借助 O 的这个恒等式，在访问任何块之前就能拿到完整的和。"),
        see=Ref("reference", "Drow = torch.sum(dO * O, dim=-1, keepdim=True)"),
    ),
    Choice(
        "running_max_start",
        en="A candidate starts the running max m at 0 instead of -inf. Every score of some row is about -1000. "
           "What does that row of the forward return?",
        zh="候选人把当前最大值 m 的初值设为 0 而不是 -inf。某一行的所有分数都约为 -1000。前向在这一行返回什么？",
        right=("NaN: m stays 0 because no score exceeds it, every exp(s − 0) underflows to 0, so l = 0 and the "
               "row is 0 / 0.",
               "NaN：没有分数超过 0，m 一直是 0，每个 exp(s − 0) 都下溢为 0，于是 l = 0，这一行是 0 / 0。"),
        wrong=[("The correct output: the first key block raises m to the row's maximum anyway.",
                "正确的输出：第一个 key 块总会把 m 提高到该行的最大值。"),
               ("inf: exp of a large negative number overflows.",
                "inf：大负数的 exp 会溢出。"),
               ("A uniform average of V, since all the weights are equally tiny.",
                "V 的均匀平均，因为所有权重都同样小。")],
        explain=("torch.maximum(0, s) keeps 0 when every score is negative, so nothing is subtracted that brings "
                 "the largest score to exp(0) = 1. Starting at -inf makes the first block's max the row's own, "
                 "so at least one term of l is 1.",
                 "所有分数都为负时 torch.maximum(0, s) 一直是 0，没有把最大的分数移到 exp(0) = 1。从 -inf 开始时，"
                 "第一个块的最大值就是该行自己的，l 中至少有一项为 1。"),
        see=Ref("reference", "# running max"),
    ),
    Number(
        "saved_bytes",
        en="How many bytes does the forward save for backward (Q, K, V, O and the LSE) with B = 2, 16 heads, "
           "Lq = Lk = 4096, D = Dv = 64, every tensor (the LSE included) in bfloat16?",
        zh="当 B = 2、16 个头、Lq = Lk = 4096、D = Dv = 64，且所有张量（包括 LSE）都是 bfloat16 时，前向为反向保存了"
           "多少字节（Q、K、V、O 和 LSE）？",
        answer=lambda: saved_bytes(2, 16, 4096, 64, 2),
        unit=("bytes", "字节"),
        explain=("4·B·H·L·D·2 = 64 MiB for Q, K, V, O plus B·H·L·2 = 256 KiB for the LSE: linear in L. Saving P "
                 "instead would add B·H·L²·2 bytes, 1 GiB here, 16 times more than everything else together.",
                 "Q、K、V、O 占 4·B·H·L·D·2 = 64 MiB，LSE 占 B·H·L·2 = 256 KiB：随 L 线性增长。若改为保存 P，要多出 "
                 "B·H·L²·2 字节，这里是 1 GiB，是其余全部之和的 16 倍。"),
        see=Ref("reference", "ctx.save_for_backward(Q, K, V, O, LSE)"),
        proof=lambda ref: _measured_saved_bytes(ref, 2, 16, 4096, 64),
    ),
    Number(
        "backward_flops",
        en="Count the matrix-product FLOPs (2 per multiply-add) of the backward pass with B = 1, 32 heads, "
           "Lq = Lk = 4096 and D = Dv = 128, including the recomputation of the scores (ignore exp and the "
           "elementwise products).",
        zh="统计反向传播中矩阵乘法的浮点运算次数（每次乘加记 2 次）：B = 1，32 个头，Lq = Lk = 4096，D = Dv = 128，"
           "包括重新计算分数（忽略 exp 和逐元素乘法）。",
        answer=lambda: backward_matmul_flops(1, 32, 4096, 128),
        unit=("FLOPs", "次浮点运算"),
        explain=("Five L×L×D products, 10·B·H·L²·D, against four in the forward's two (4·B·H·L²·D): the backward "
                 "costs 2.5 times the forward instead of 2 times, the price of recomputing S rather than reading "
                 "an L² tensor from memory, which on a GPU is the slower of the two.",
                 "五次 L×L×D 的矩阵乘，共 10·B·H·L²·D；前向的两次是 4·B·H·L²·D。反向是前向的 2.5 倍而不是 2 倍，"
                 "这是重新计算 S 而不是从显存读回一个 L² 张量的代价；在 GPU 上，读显存才是更慢的那一个。"),
        see=Ref("statement", "for every tile recompute"),
        proof=lambda ref: _measured_backward_flops(ref, 1, 32, 4096, 128),
    ),
]


def _meta_inputs(B, H, L, D, dtype):
    import torch

    with torch.device("meta"):
        return [torch.empty(B, H, L, D, dtype=dtype, requires_grad=True) for _ in range(3)]


def _measured_saved_bytes(ref, B, H, L, D):
    """Bytes of the tensors the reference's forward hands to save_for_backward, on the meta device
    (one block of L rows: what is saved does not depend on the block size)."""
    import torch

    Q, K, V = _meta_inputs(B, H, L, D, torch.bfloat16)
    O = ref.FlashAttention.apply(Q, K, V, D ** -0.5, L)
    return sum(t.numel() * t.element_size() for t in O.grad_fn.saved_tensors)


def _measured_backward_flops(ref, B, H, L, D):
    """The reference's own backward, counted by torch.utils.flop_counter on the meta device."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    Q, K, V = _meta_inputs(B, H, L, D, torch.float32)
    O = ref.FlashAttention.apply(Q, K, V, D ** -0.5, 1024)
    with FlopCounterMode(display=False) as fc:
        torch.autograd.grad(O, (Q, K, V), torch.empty_like(O))
    return fc.get_total_flops()
