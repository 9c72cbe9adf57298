"""Follow-up questions for `mha_unit_test` (see attn_drill/bank/quiz.py for the format)."""
from attn_drill.bank.quiz import Choice, Number, Ref


def keys_seen_without_batch_first(B, L):
    """A sequence-first module reads (B, L, E) as (seq = B, batch = L, E): each of its queries attends over
    the B entries of the first axis, which are the batch elements at one position."""
    seq_len = B                  # the first axis, taken for the sequence
    return seq_len


QUESTIONS = [
    Choice(
        "why_these_sizes",
        en="The test uses B = 3, L = 7, hidden_dim = 30 and 5 heads rather than B = L = 4 with a single head. "
           "What do the odd sizes buy?",
        zh="测试用的是 B = 3、L = 7、hidden_dim = 30、5 个头，而不是 B = L = 4 加单个头。这些“奇怪”的尺寸有什么用？",
        right=("With one head, splitting and merging heads cannot go wrong, and with B == L a batch/sequence "
               "mix-up keeps every shape valid; distinct sizes make such bugs change the output or fail loudly.",
               "只有一个头时，分头与合并头不可能出错；B == L 时，batch 与序列维的混淆不会让任何形状出错。各不相同的尺寸让这类"
               "错误要么改变输出，要么直接报错。"),
        wrong=[("Powers of two take a fast path on CPU that nn.MultiheadAttention does not share, which would make "
                "the outputs differ by rounding.",
                "2 的幂在 CPU 上会走 nn.MultiheadAttention 不走的快速路径，输出会因舍入而不同。"),
               ("With B == L the official module switches to a fused fast path that a hand-written module cannot "
                "match to 1e-9.",
                "B == L 时官方模块会切换到融合的快速路径，手写模块无法在 1e-9 的精度上与它一致。"),
               ("Small odd sizes make float64 rounding errors cancel, so the tight tolerance can be used.",
                "较小的奇数尺寸能让 float64 的舍入误差相互抵消，所以才能用严格的容差。")],
        explain=("A test can only catch a bug that changes something it looks at. Heads only get mixed up when "
                 "there are several, and a transposed (B, L) pair only breaks shapes or values when B and L differ.",
                 "测试只能发现会改变它所检查内容的错误。只有存在多个头时才会把头弄混；只有 B 与 L 不同时，把 (B, L) 转置才会"
                 "破坏形状或数值。"),
        see=Ref("reference", "B, L, E, H = 3, 7, 30, 5"),
    ),
    Number(
        "keys_without_batch_first",
        en="The test feeds x of shape (3, 7, 30), batch first. If the official module were built without "
           "batch_first=True, over how many keys would each of its queries attend?",
        zh="测试输入的 x 形状为 (3, 7, 30)，batch 在前。如果构造官方模块时没有 batch_first=True，它的每个 query 会关注"
           "多少个 key？",
        answer=lambda: keys_seen_without_batch_first(3, 7),
        unit=("keys", "个 key"),
        explain=("The default layout is (L, B, E), so (3, 7, 30) is read as 7 sequences of length 3: each query "
                 "attends across the 3 batch elements at its position instead of the 7 tokens of its sentence. "
                 "The shapes still match, so only the comparison of values reveals it.",
                 "默认布局是 (L, B, E)，所以 (3, 7, 30) 被当作 7 条长度为 3 的序列：每个 query 关注的是同一位置上的 3 个 "
                 "batch 元素，而不是自己句子里的 7 个 token。形状仍然对得上，只有比较数值才能发现。"),
        see=Ref("reference", "official = official_cls(E, H, dropout=0.0, bias=False, batch_first=True)"),
        proof=lambda ref: _measured_keys_without_batch_first(ref),
    ),
    Choice(
        "keep_one_key",
        en="Why does the test make sure every query row keeps at least one visible key?",
        zh="为什么测试要保证每个 query 行至少有一个可见的 key？",
        right=("nn.MultiheadAttention returns NaN for a row with no key, and assert_close treats NaN as unequal "
               "by default, so a fully masked row would fail the test on correct code or compare against a "
               "convention nobody specified.",
               "nn.MultiheadAttention 对没有 key 的行返回 NaN，而 assert_close 默认认为 NaN 不相等，所以全屏蔽的行要么让"
               "正确的代码也测试失败，要么是在与一个谁都没规定的约定作比较。"),
        wrong=[("assert_close skips NaN entries, so a fully masked row would silently hide bugs in that row.",
                "assert_close 会跳过 NaN，所以全屏蔽的行会悄悄掩盖这一行里的错误。"),
               ("masked_fill cannot fill a whole row with -inf, so such a row raises an error in both modules.",
                "masked_fill 不能把一整行都填成 -inf，所以这样的行在两个模块中都会报错。"),
               ("Only the gradients of a fully masked row are NaN; the forward outputs would still agree.",
                "只有全屏蔽行的梯度是 NaN；前向输出仍然一致。")],
        explain=("What a row without a key should return is a convention (NaN, 0, the mean of V); the module "
                 "under test and the official one need not agree, so the test keeps out of that case. Here key 0 "
                 "is never padding and the causal mask always keeps the diagonal.",
                 "没有 key 的行应该返回什么只是一种约定（NaN、0、V 的平均值）；被测模块与官方模块不必一致，所以测试避开这种"
                 "情形。这里 key 0 从不是填充，因果掩码也总是保留对角线。"),
        see=Ref("reference", "lengths = torch.tensor([L, 4, 6])"),
    ),
    Choice(
        "tolerance",
        en="The test compares in float64 with rtol = 1e-7 and atol = 1e-9. Why is that threshold both safe and "
           "sharp?",
        zh="测试在 float64 下以 rtol = 1e-7、atol = 1e-9 比较。为什么这个阈值既安全又灵敏？",
        right=("Two correct float64 implementations differ only by rounding, around 1e-15, far below it, while "
               "each of the listed bugs moves the outputs by orders of magnitude more than it.",
               "两个正确的 float64 实现只因舍入而不同，约为 1e-15，远低于这个阈值；而列出的每个错误都会让输出变化好几个"
               "数量级以上。"),
        wrong=[("Correct float64 implementations are bit-identical, so any nonzero tolerance is only a courtesy.",
                "正确的 float64 实现是逐位相同的，所以任何非零的容差都只是客气一下。"),
               ("It has to be that tight because a missing 1/sqrt(d) changes the outputs by only about 1e-6.",
                "必须这么严格，因为漏掉 1/sqrt(d) 只会让输出变化约 1e-6。"),
               ("nn.MultiheadAttention only guarantees 1e-9 in float64, so a tighter value would be flaky.",
                "nn.MultiheadAttention 在 float64 下只保证 1e-9，更严格的值会让测试时好时坏。")],
        explain=("Summing in a different order changes the last bits, so exact equality is too strict, while "
                 "atol = 1 would pass almost anything. A threshold belongs in the wide gap between rounding noise "
                 "and the smallest bug effect; float64 makes that gap enormous.",
                 "求和顺序不同会改变最后几位，所以要求完全相等太严格，而 atol = 1 几乎什么都能通过。阈值应该落在舍入噪声与最小"
                 "错误效应之间那段宽阔的空隙里；float64 让这段空隙变得非常大。"),
        see=Ref("reference", "torch.testing.assert_close(got, want, rtol=1e-7, atol=1e-9"),
    ),
]


def _measured_keys_without_batch_first(ref):
    """Run the reference test with an official module that drops batch_first and records the key length
    of its attention weights; the class under test is a stand-in whose output fails the first compare."""
    import torch
    import torch.nn as nn

    seen = []

    class SequenceFirst(nn.MultiheadAttention):
        def __init__(self, *args, batch_first=False, **kwargs):
            super().__init__(*args, **kwargs)               # batch_first dropped: (L, B, E)

        def forward(self, query, key, value, **kwargs):
            kwargs["need_weights"] = True
            out, weights = super().forward(query, key, value, **kwargs)
            seen.append(weights.shape[-1])
            return out, weights

    class StandIn(nn.Module):
        def __init__(self, hidden_dim, num_heads, dropout=0.0):
            super().__init__()
            self.qkv_proj = nn.Linear(hidden_dim, 3 * hidden_dim, bias=False)
            self.out_proj = nn.Linear(hidden_dim, hidden_dim, bias=False)

        def forward(self, x, key_padding_mask=None, attn_mask=None):
            return torch.zeros_like(x)

    try:
        ref.check_against_official(StandIn, SequenceFirst)
    except AssertionError:
        pass
    return seen[0]
