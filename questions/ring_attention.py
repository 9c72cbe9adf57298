"""Follow-up questions for `ring_attention` (see attn_drill/bank/quiz.py for the format)."""
import math

from attn_drill.bank.quiz import Choice, Number, Ref


def block_partial(scores, values):
    """One query over one block: (softmax-weighted value, natural-log log-sum-exp)."""
    lse = math.log(sum(math.exp(s) for s in scores))
    out = sum(math.exp(s - lse) * v for s, v in zip(scores, values))
    return out, lse


def merged_output(scores_a, values_a, scores_b, values_b):
    """Merge two partials through their log-sum-exps: each weighted by its share of the total denominator."""
    out_a, lse_a = block_partial(scores_a, values_a)
    out_b, lse_b = block_partial(scores_b, values_b)
    lse = math.log(math.exp(lse_a) + math.exp(lse_b))
    return math.exp(lse_a - lse) * out_a + math.exp(lse_b - lse) * out_b


def block_scores_bytes(B, H, L, N, bytes_per_element):
    """One device's block of scores: (B, H, L/N, L/N)."""
    block = L // N
    return B * H * block * block * bytes_per_element


def causal_block_calls(N):
    """With causal=True device r attends to blocks 0 .. r: 1 + 2 + ... + N block attentions in all."""
    return sum(r + 1 for r in range(N))


QUESTIONS = [
    Number(
        "merge_value",
        en="One query. Block a has the (scaled) scores [0, ln 2] over the values [1, 4]; block b has the score "
           "[ln 6] over the value [10]. Both partials are normalised within their block. What output does "
           "merge_partials return?",
        zh="只有一个 query。块 a 的（已缩放）分数为 [0, ln 2]，对应 value [1, 4]；块 b 的分数为 [ln 6]，对应 value [10]。"
           "两个部分结果都在各自块内归一化。merge_partials 返回的输出是多少？",
        answer=lambda: merged_output([0.0, math.log(2)], [1.0, 4.0], [math.log(6)], [10.0]),
        unit=("(output value)", "（输出值）"),
        rel_tol=0.01,
        explain=("out_a = (1 + 2·4)/3 = 3 with lse_a = ln 3, out_b = 10 with lse_b = ln 6; the total is ln 9, so "
                 "out = (3/9)·3 + (6/9)·10 = 23/3 ≈ 7.67, the softmax over weights 1, 2, 6. Averaging the two "
                 "partials (6.5) ignores that block b holds two thirds of the mass.",
                 "out_a = (1 + 2·4)/3 = 3，lse_a = ln 3；out_b = 10，lse_b = ln 6；合并后 lse 为 ln 9，所以 "
                 "out = (3/9)·3 + (6/9)·10 = 23/3 ≈ 7.67，正是权重 1、2、6 上的 softmax。直接平均两个部分结果（6.5）忽略了"
                 "块 b 占了三分之二的权重。"),
        see=Ref("reference", "w_b = torch.exp(lse_b - lse).unsqueeze(-1)"),
        proof=lambda ref: _merge_measured(ref),
    ),
    Number(
        "block_scores_bytes",
        en="L = 65 536 tokens are split evenly over N = 4 devices, batch 1, 32 heads, float32 scores, no causal "
           "mask. How many bytes is one block of scores (B, H, L/N, L/N) that a device holds in this implementation?",
        zh="L = 65 536 个 token 平均分到 N = 4 个设备上，batch 为 1，32 个头，分数为 float32，不加因果掩码。在这个实现里，"
           "一个设备持有的一块分数 (B, H, L/N, L/N) 占多少字节？",
        answer=lambda: block_scores_bytes(1, 32, 65536, 4, 4),
        unit=("bytes", "字节"),
        explain=("32 · 16 384² · 4 bytes = 32 GiB, 1/N² = 1/16 of the full 512 GiB matrix, yet still too large. Real "
                 "ring attention runs a FlashAttention kernel on each block, which never forms the block either, so "
                 "memory per device grows only linearly in L/N.",
                 "32 · 16 384² · 4 字节 = 32 GiB，是完整 512 GiB 矩阵的 1/N² = 1/16，但仍然太大。真实的 ring attention 在每个块上"
                 "运行 FlashAttention kernel，连这一块分数也不会生成，所以每个设备的显存只随 L/N 线性增长。"),
        see=Ref("reference", "s = scale * torch.matmul(q, k.transpose(-2, -1))"),
        proof=lambda ref: _largest_tensor_bytes(ref, 1, 32, 65536, 4, 128),
    ),
    Number(
        "causal_block_calls",
        en="With causal=True and N = 8 devices, how many times is block_attention called in all, over every device "
           "and every step?",
        zh="causal=True、N = 8 个设备时，把所有设备和所有步骤加起来，block_attention 一共被调用多少次？",
        answer=lambda: causal_block_calls(8),
        unit=("calls", "次"),
        explain=("Device r uses blocks 0 .. r and skips the rest: 1 + 2 + ... + 8 = 36 calls instead of 64. The work "
                 "is unbalanced, though: device 7 computes at all 8 steps while device 0 idles after the first.",
                 "设备 r 只用块 0 .. r，其余跳过：1 + 2 + ... + 8 = 36 次，而不是 64 次。但工作量不均衡：设备 7 每一步都在算，"
                 "设备 0 第一步之后就闲着。"),
        see=Ref("reference", "if causal and j > r:"),
        proof=lambda ref: _count_block_calls(ref, 8),
    ),
    Choice(
        "why_lse",
        en="Each device receives block outputs that are already softmax-normalised. Why can they not simply be "
           "averaged, and what does the log-sum-exp add?",
        zh="每个设备收到的块输出都已经过 softmax 归一化。为什么不能直接取平均？log-sum-exp 提供了什么？",
        right=("Each partial is divided by its own block's denominator; the merge must weight it by its share "
               "e^(lse_part - lse) of the total denominator, and the log-sum-exp is exactly that denominator, kept in "
               "log space.",
               "每个部分结果除的是它自己块的分母；合并时必须按它在总分母中的占比 e^(lse_part - lse) 加权，而 log-sum-exp "
               "正是这个分母，以对数形式保存。"),
        wrong=[("Averaging is exact whenever the blocks have the same number of keys; lse is only needed for uneven "
                "blocks.",
                "只要各块的 key 数相同，取平均就是精确的；只有块大小不一时才需要 lse。"),
               ("The forward pass can add the partial outputs; the log-sum-exp is only kept for the backward pass.",
                "前向时把部分结果相加就行；log-sum-exp 只是为反向传播保存的。"),
               ("The log-sum-exps are added, lse_a + lse_b, to rescale the sum of the outputs.",
                "把两个 log-sum-exp 相加（lse_a + lse_b），用来重新缩放输出之和。")],
        explain=("Equal block sizes do not mean equal softmax mass: one block may hold all the large scores. Adding "
                 "the lses gives the log of the product of the denominators, not of their sum.",
                 "块大小相同并不意味着 softmax 的权重相同：大分数可能全在一个块里。把 lse 相加得到的是分母乘积的对数，"
                 "而不是分母之和的对数。"),
        see=Ref("reference", "lse = torch.logaddexp(lse_a, lse_b)"),
    ),
    Choice(
        "causal_balance",
        en="With contiguous blocks and a causal mask, what limits the speed of this ring, and what do real "
           "implementations do about it?",
        zh="块是连续的且有因果掩码时，这个 ring 的速度受什么限制？真实的实现怎么处理？",
        right=("Device r has work at only r + 1 of the N steps, so every step waits for the last device, which works "
               "at all of them; striped or zigzag layouts give each device early and late tokens so all do the same "
               "work.",
               "设备 r 只在 N 步中的 r + 1 步里有活，而每一步都要等一直在算的最后一个设备；条带（striped）或 zigzag 布局让每个"
               "设备同时拿到靠前和靠后的 token，工作量就一样了。"),
        wrong=[("Nothing: skipping the future blocks saves the same amount of time on every device.",
                "没有限制：跳过未来块在每个设备上省下的时间都一样。"),
               ("The later devices see future keys unless the causal mask is applied to every block they receive.",
                "除非对收到的每个块都加因果掩码，否则靠后的设备会看到未来的 key。"),
               ("The first device must wait for all the others to finish before it can merge its own block.",
                "第一个设备必须等其他设备都算完，才能合并它自己的块。")],
        explain=("Skipped blocks save work only on the early devices, and a synchronous ring is as slow as its busiest "
                 "member. Blocks from earlier devices lie wholly in the past, so only the own block needs the "
                 "triangle.",
                 "跳过块只为靠前的设备省了工作，而同步的 ring 和它最忙的成员一样慢。来自更早设备的块完全在过去，所以只有自己的"
                 "块需要三角掩码。"),
        see=Ref("statement", "Blocks of devices `j > r` are skipped"),
    ),
]


def _merge_measured(ref):
    """The example run through the reference's block_attention (scale 1, one query of value 1) and merge_partials."""
    import torch

    def block(scores, values):
        q = torch.ones(1, 1, 1, 1, dtype=torch.float64)
        k = torch.tensor(scores, dtype=torch.float64).view(1, 1, -1, 1)
        v = torch.tensor(values, dtype=torch.float64).view(1, 1, -1, 1)
        return ref.block_attention(q, k, v, 1.0)

    out_a, lse_a = block([0.0, math.log(2)], [1.0, 4.0])
    out_b, lse_b = block([math.log(6)], [10.0])
    out, _ = ref.merge_partials(out_a, lse_a, out_b, lse_b)
    return float(out.flatten()[0])


def _largest_tensor_bytes(ref, B, H, L, N, D):
    """The largest output of any op while the reference runs on meta tensors (nothing is allocated)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class Largest(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.most = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in out if isinstance(out, (tuple, list)) else [out]:
                if isinstance(t, torch.Tensor):
                    self.most = max(self.most, t.numel() * t.element_size())
            return out

    with torch.device("meta"):
        q = torch.empty(B, H, L, D)
    with Largest() as mode:
        ref.ring_attention(q, q, q, [L // N] * N)
    return mode.most


def _count_block_calls(ref, N):
    """Count the reference's calls of block_attention on a small causal input (restored afterwards)."""
    import torch

    calls = []
    original = ref.block_attention

    def counted(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    ref.block_attention = counted
    try:
        x = torch.randn(1, 1, 2 * N, 4, dtype=torch.float64)
        ref.ring_attention(x, x, x, [2] * N, causal=True)
    finally:
        ref.block_attention = original
    return len(calls)
