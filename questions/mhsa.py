"""Follow-up questions for `mhsa` (see attn_drill/bank/quiz.py for the format)."""
from attn_drill.bank.quiz import Choice, Number, Ref


def attention_flops(B, L, E, H):
    """Multiply-adds x 2 of one forward pass: the QKV and output projections, then QKᵀ and weights @ V."""
    projections = 2 * B * L * E * (3 * E) + 2 * B * L * E * E
    core = 2 * B * H * L * L * (E // H) * 2
    return projections + core


def scores_bytes(B, H, L, bytes_per_element):
    """The (B, H, L, L) score matrix a hand-written attention keeps for the backward pass."""
    return B * H * L * L * bytes_per_element


QUESTIONS = [
    Choice(
        "why_sqrt_d",
        en="Why are the scores divided by sqrt(head_dim) before the softmax?",
        zh="为什么在 softmax 之前要把分数除以 sqrt(head_dim)？",
        right=("With entries of unit variance, q·k has variance head_dim; dividing by its square root keeps the "
               "logits near unit scale, so the softmax does not saturate and its gradients do not vanish.",
               "若各分量方差为 1，q·k 的方差是 head_dim；除以它的平方根让 logits 保持在单位尺度，softmax 不会饱和，"
               "梯度也不会消失。"),
        wrong=[("It normalises each row of the attention weights so that they sum to one.",
                "它对注意力权重的每一行做归一化，使其和为 1。"),
               ("It keeps exp() from overflowing in float32, which is why FlashAttention needs no row maximum.",
                "它防止 float32 中 exp() 溢出，所以 FlashAttention 不需要减去行最大值。"),
               ("It averages the heads: each head contributes 1/sqrt(head_dim) of the output.",
                "它对多头取平均：每个头贡献输出的 1/sqrt(head_dim)。")],
        explain=("The softmax's sensitivity grows with the spread of its inputs. Scaling by 1/sqrt(d) is about "
                 "the variance of the dot product; the row sums come from the softmax itself, and overflow is "
                 "avoided by subtracting the row maximum, not by this scale.",
                 "softmax 的敏感程度随输入的离散程度增大。乘以 1/sqrt(d) 是为了控制点积的方差；行和为 1 来自 softmax "
                 "本身，避免溢出靠的是减去行最大值，而不是这个缩放。"),
        see=Ref("reference", "/ math.sqrt(D)"),
    ),
    Choice(
        "padding_axis",
        en="key_padding_mask has shape (B, L). Why is it broadcast as mask[:, None, None, :] on the (B, H, L, L) "
           "scores?",
        zh="key_padding_mask 的形状是 (B, L)。为什么在 (B, H, L, L) 的分数上要广播为 mask[:, None, None, :]？",
        right=("Padding removes keys: the last axis of the scores is the key axis, and the same keys are hidden "
               "from every head and every query.",
               "padding 去掉的是 key：分数的最后一维是 key 维，同样的 key 对每个头、每个 query 都要屏蔽。"),
        wrong=[("Padding removes queries, and the last axis of the scores is the query axis.",
                "padding 去掉的是 query，而分数的最后一维是 query 维。"),
               ("The mask must be (B, 1, 1, L) so that masked_fill can run in place.",
                "掩码必须是 (B, 1, 1, L)，这样 masked_fill 才能原地执行。"),
               ("Either axis gives the same output once the softmax has run.",
                "softmax 之后，掩码放在哪一维输出都一样。")],
        explain=("Row i of the scores holds query i against every key j. Masking a padded key j sets column j to "
                 "-inf in every row, so no query attends to it; masking rows instead would leave padded keys "
                 "visible and turn the padded queries' rows into NaN.",
                 "分数的第 i 行是 query i 与所有 key j 的得分。屏蔽一个填充的 key j，就是把每一行的第 j 列设为 -inf，"
                 "这样没有 query 会关注它；若屏蔽行，填充的 key 仍然可见，而填充 query 的行会变成 NaN。"),
        see=Ref("reference", "key_padding_mask[:, None, None, :]"),
    ),
    Number(
        "forward_flops",
        en="Count the floating-point operations (2 per multiply-add) of one forward pass with B = 8, L = 2048, "
           "hidden_dim = 1024 and 16 heads: the QKV projection, QKᵀ, weights @ V and the output projection "
           "(ignore the softmax, the scaling and the masks).",
        zh="统计一次前向传播的浮点运算次数（每次乘加记 2 次）：B = 8，L = 2048，hidden_dim = 1024，16 个头；包括 QKV 投影、"
           "QKᵀ、weights @ V 和输出投影（忽略 softmax、缩放和掩码）。",
        answer=lambda: attention_flops(8, 2048, 1024, 16),
        unit=("FLOPs", "次浮点运算"),
        rel_tol=0.01,
        explain=("The projections cost 2·B·L·E·3E + 2·B·L·E·E = 8·B·L·E², the core 2 · 2·B·H·L²·(E/H) = 4·B·L²·E. "
                 "At L = 2048 and E = 1024 the two are equal: beyond L = 2E the L² core dominates.",
                 "投影的开销是 2·B·L·E·3E + 2·B·L·E·E = 8·B·L·E²，核心部分是 2 · 2·B·H·L²·(E/H) = 4·B·L²·E。"
                 "当 L = 2048、E = 1024 时两者相等：L 超过 2E 之后，L² 的核心部分占主导。"),
        see=Ref("reference", "torch.matmul(q, k.transpose(-2, -1))"),
        proof=lambda ref: _measured_flops(ref, 8, 2048, 1024, 16),
    ),
    Number(
        "scores_memory",
        en="A hand-written attention keeps its (B, H, L, L) attention weights for the backward pass. How many "
           "bytes is that for B = 4, 32 heads, L = 4096 in bfloat16?",
        zh="手写的注意力会为反向传播保存 (B, H, L, L) 的注意力权重。当 B = 4、32 个头、L = 4096、bfloat16 时，它占多少字节？",
        answer=lambda: scores_bytes(4, 32, 4096, 2),
        unit=("bytes", "字节"),
        explain=("B·H·L² elements of 2 bytes: 4 GiB for one layer. This quadratic tensor is what FlashAttention "
                 "never materialises: it keeps only the output and one log-sum-exp per row.",
                 "B·H·L² 个元素，每个 2 字节：一层就是 4 GiB。FlashAttention 从不生成这个平方级的张量：它只保存输出和每行"
                 "一个 log-sum-exp。"),
        see=Ref("reference", "weights = torch.softmax(scores, dim=-1)"),
    ),
]


def _measured_flops(ref, B, L, E, H):
    """The reference's own forward, counted by torch.utils.flop_counter at a small L and scaled exactly:
    its matmul FLOPs are a polynomial in L of degree 2, fixed by three sizes."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    def count(length):
        m = ref.MultiHeadSelfAttention(E, H, dropout=0.0).eval()
        with torch.device("meta"):
            x = torch.empty(B, length, E)
        m = m.to("meta")
        with FlopCounterMode(display=False) as fc:
            m(x)
        return fc.get_total_flops()

    a, b, c = count(1), count(2), count(3)
    # f(L) = p L² + q L + r through three points
    p = (c - 2 * b + a) / 2
    q = b - a - 3 * p
    r = a - p - q
    return p * L * L + q * L + r
