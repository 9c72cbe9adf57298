"""Follow-up questions for `einsum_attention` (see attn_drill/bank/quiz.py for the format)."""
from attn_drill.bank.quiz import Choice, Number, Ref


def einsum_flops(B, H, Lq, Lk, D, Dv):
    """2 FLOPs per multiply-add: "bhqd,bhkd->bhqk" sums over d, "bhqk,bhke->bhqe" over k (for each e)."""
    scores = 2 * B * H * Lq * Lk * D
    output = 2 * B * H * Lq * Lk * Dv
    return scores + output


def largest_tensor_bytes(B, H, Lq, Lk, D, Dv, bytes_per_elem):
    """The biggest tensor of the forward: the (B, H, Lq, Lk) scores, unless an input or the output is bigger."""
    return max(B * H * Lq * Lk, B * H * Lq * D, B * H * Lk * D, B * H * Lk * Dv, B * H * Lq * Dv) * bytes_per_elem


QUESTIONS = [
    Choice(
        "summed_axis",
        en="In torch.einsum(\"bhqd,bhkd->bhqk\", query, key), which axis is summed, and why is no transpose of "
           "the key needed?",
        zh="在 torch.einsum(\"bhqd,bhkd->bhqk\", query, key) 中，哪个维度被求和？为什么不需要转置 key？",
        right=("d, because it appears in the inputs but not in the output; the letters name each operand's axes in "
               "their stored order, so \"bhkd\" reads the key as it is.",
               "d，因为它出现在输入中却不在输出中；字母按各操作数存储的顺序给维度命名，所以 \"bhkd\" 直接按原样读取 key。"),
        wrong=[("k, since the product runs over the keys of each query.",
                "k，因为乘积是对每个 query 的所有 key 进行的。"),
               ("b and h, because they appear in all three terms of the equation.",
                "b 和 h，因为它们出现在等式的三个部分中。"),
               ("None: einsum only forms the product of every pair, and the softmax does the sum.",
                "都不求和：einsum 只计算每一对的乘积，求和由 softmax 完成。")],
        explain=("einsum sums exactly the letters missing from the output, here d, giving one dot product per "
                 "(query, key) pair. Letters kept everywhere, like b and h, are batch axes, and k survives into "
                 "the output as the key axis of the scores.",
                 "einsum 恰好对输出中缺失的字母求和，这里是 d，于是每个 (query, key) 对得到一个点积。像 b、h 这样到处都保留"
                 "的字母是 batch 维，k 则作为分数的 key 维保留到输出中。"),
        see=Ref("reference", "torch.einsum(\"bhqd,bhkd->bhqk\", query, key)"),
    ),
    Choice(
        "einsum_cost",
        en="Does writing the two contractions with torch.einsum cost more time or memory than matmul?",
        zh="用 torch.einsum 写这两次缩并，会比 matmul 多花时间或显存吗？",
        right=("No: for two operands it permutes and reshapes them into one batched matmul (bmm), so the FLOPs and "
               "memory are those of q @ k.transpose(-2, -1).",
               "不会：对两个操作数，它把它们 permute、reshape 成一次批量矩阵乘法（bmm），所以 FLOPs 和显存与 "
               "q @ k.transpose(-2, -1) 相同。"),
        wrong=[("Yes: it first builds the (B, H, Lq, Lk, D) product of all pairs and then sums over d.",
                "会：它先构造所有配对的 (B, H, Lq, Lk, D) 乘积，再对 d 求和。"),
               ("Yes: it loops in Python over the letters of the equation.",
                "会：它在 Python 里逐个字母循环。"),
               ("It is cheaper than matmul, which has to copy K into transposed order first.",
                "它比 matmul 更省，因为 matmul 要先把 K 复制成转置后的顺序。")],
        explain=("The equation is parsed once per call and lowered to views plus a single bmm. Broadcasting "
                 "q[..., :, None, :] * k[..., None, :, :] and summing would build a tensor D times the size of "
                 "the scores; k.transpose(-2, -1) is only a view, so matmul does not need a copy of K either.",
                 "每次调用只解析一次等式，并转换为若干视图操作加一次 bmm。若用 q[..., :, None, :] * k[..., None, :, :] "
                 "广播再求和，会构造一个比分数大 D 倍的张量；k.transpose(-2, -1) 只是视图，matmul 也不需要复制 K。"),
        see=Ref("reference", "return torch.einsum(\"bhqk,bhke->bhqe\", weights, value)"),
    ),
    Choice(
        "default_scale",
        en="Why is the default scale 1 / sqrt(D) with D = query.size(-1), and not computed from the value's "
           "head size Dv?",
        zh="为什么默认缩放是 1 / sqrt(D)，其中 D = query.size(-1)，而不是用 value 的头维度 Dv 来算？",
        right=("The dot product sums D terms, so its spread grows like sqrt(D); Dv only sets the width of the "
               "output and never enters the scores.",
               "点积是 D 项之和，它的离散程度按 sqrt(D) 增长；Dv 只决定输出的宽度，根本不参与分数的计算。"),
        wrong=[("It should be Dv: the scale is there to normalise the size of the output vectors.",
                "应该用 Dv：缩放是为了归一化输出向量的大小。"),
               ("It should be sqrt(D · Dv), since both head sizes take part in the attention.",
                "应该用 sqrt(D · Dv)，因为两个头维度都参与了注意力。"),
               ("Either works: the softmax does not change when every score is multiplied by the same constant.",
                "用哪个都行：所有分数乘以同一个常数时，softmax 不变。")],
        explain=("With unit-variance entries q · k has variance D, and 1 / sqrt(D) brings the logits back to unit "
                 "scale. Multiplying the scores by a constant changes the softmax's temperature (only adding one "
                 "leaves it alone), and the output is a weighted average of values, so it needs no scale.",
                 "若各分量方差为 1，q · k 的方差就是 D，乘以 1 / sqrt(D) 把 logits 拉回单位尺度。把分数乘以常数会改变 "
                 "softmax 的温度（只有加常数才不变）；而输出是 value 的加权平均，本身不需要缩放。"),
        see=Ref("reference", "scale = 1.0 / math.sqrt(D)"),
    ),
    Number(
        "flops",
        en="Count the FLOPs (2 per multiply-add) of the two einsums for B = 2, 16 heads, Lq = 128, Lk = 4096, "
           "D = 64 and Dv = 128.",
        zh="统计两次 einsum 的 FLOPs（每次乘加计 2）：B = 2，16 个头，Lq = 128，Lk = 4096，D = 64，Dv = 128。",
        answer=lambda: einsum_flops(2, 16, 128, 4096, 64, 128),
        unit=("FLOPs", "次浮点运算"),
        rel_tol=0.01,
        explain=("The scores cost 2·B·H·Lq·Lk·D and the weighted sum 2·B·H·Lq·Lk·Dv: 2·2·16·128·4096·(64 + 128) ≈ "
                 "6.44e9. The second contraction sums over keys once for each of the Dv output features, so "
                 "with Dv = 2D it costs twice the first; 4·B·H·Lq·Lk·D would assume Dv = D.",
                 "分数的开销是 2·B·H·Lq·Lk·D，加权求和是 2·B·H·Lq·Lk·Dv：2·2·16·128·4096·(64 + 128) ≈ 6.44e9。第二次缩并"
                 "对 Dv 个输出特征各在 key 上求和一次，所以 Dv = 2D 时它是第一次的两倍；4·B·H·Lq·Lk·D 是假定了 Dv = D。"),
        see=Ref("statement", "`Lq` and `Lk` may differ, and so may `D` and `Dv`."),
        proof=lambda ref: _measured_flops(ref, 2, 16, 128, 4096, 64, 128),
    ),
    Number(
        "largest_tensor",
        en="With B = 1, 8 heads, Lq = Lk = 1024, D = Dv = 64 in float32 and no mask, how many bytes does the "
           "largest tensor created by this function take?",
        zh="B = 1，8 个头，Lq = Lk = 1024，D = Dv = 64，float32，不传掩码时，这个函数创建的最大张量占多少字节？",
        answer=lambda: largest_tensor_bytes(1, 8, 1024, 1024, 64, 64, 4),
        unit=("bytes", "字节"),
        explain=("The scores and the weights are (B, H, Lq, Lk): 8 · 1024² · 4 bytes = 32 MiB, 16 times the 2 MiB "
                 "of each input. einsum never builds the (B, H, Lq, Lk, D) product, which would be 64 times "
                 "larger, 2 GiB.",
                 "分数和权重的形状是 (B, H, Lq, Lk)：8 · 1024² · 4 字节 = 32 MiB，是每个 2 MiB 输入的 16 倍。einsum 从不"
                 "构造 (B, H, Lq, Lk, D) 的乘积，那会再大 64 倍，达到 2 GiB。"),
        see=Ref("reference", "weights = torch.softmax(scores, dim=-1)"),
        proof=lambda ref: _measured_largest(ref, 1, 8, 1024, 1024, 64, 64),
    ),
]


def _meta_inputs(B, H, Lq, Lk, D, Dv):
    import torch

    with torch.device("meta"):
        return torch.empty(B, H, Lq, D), torch.empty(B, H, Lk, D), torch.empty(B, H, Lk, Dv)


def _measured_flops(ref, B, H, Lq, Lk, D, Dv):
    """The reference's own einsums, counted by torch.utils.flop_counter on the meta device."""
    from torch.utils.flop_counter import FlopCounterMode

    query, key, value = _meta_inputs(B, H, Lq, Lk, D, Dv)
    with FlopCounterMode(display=False) as counter:
        ref.scaled_dot_product_einsum(query, key, value)
    return counter.get_total_flops()


def _measured_largest(ref, B, H, Lq, Lk, D, Dv):
    """Bytes of the largest new tensor any op of the reference outputs (views excluded), on the meta device."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class Largest(TorchDispatchMode):
        most = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            is_view = any(r.alias_info is not None for r in func._schema.returns)
            if isinstance(out, torch.Tensor) and not is_view:
                Largest.most = max(Largest.most, out.numel() * out.element_size())
            return out

    query, key, value = _meta_inputs(B, H, Lq, Lk, D, Dv)
    with Largest():
        ref.scaled_dot_product_einsum(query, key, value)
    return Largest.most
