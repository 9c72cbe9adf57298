"""Follow-up questions for `mixed_precision` (see attn_drill/bank/quiz.py for the format)."""
from attn_drill.bank.quiz import Choice, Number, Ref

FP16_MAX = (2 - 2 ** -10) * 2 ** 15          # 65504, the largest finite float16
FP16_ULP_AT_MAX = 2 ** (15 - 10)             # spacing of float16 numbers in [2**15, 2**16)


def smallest_overflowing_entry(head_dim):
    """Smallest integer a with q = k = (a, ..., a) whose float16 dot product rounds to inf: the exact value
    head_dim·a² must reach the midpoint between the largest finite float16 and the next power step."""
    a = 1
    while head_dim * a * a < FP16_MAX + FP16_ULP_AT_MAX / 2:
        a += 1
    return a


def bf16_spacing(x):
    """Gap between neighbouring bfloat16 numbers around x: 8 significant bits (7 stored)."""
    exponent = 0
    while 2 ** (exponent + 1) <= x:
        exponent += 1
    return 2 ** (exponent - 7)


QUESTIONS = [
    Choice(
        "float_inside_autocast",
        en="The usual version writes q.float() @ k.float().transpose(-2, -1) inside the autocast region. Why does "
           "that matmul still run in low precision?",
        zh="常见版本在 autocast 区域内写 q.float() @ k.float().transpose(-2, -1)。为什么这个 matmul 仍以低精度运行？",
        right=("autocast intercepts the matmul and casts its inputs to the autocast dtype whatever their dtype, "
               "so the .float() is undone; the core needs autocast switched off.",
               "autocast 会拦截 matmul，不管输入是什么 dtype 都转成 autocast 的 dtype，所以 .float() 被抵消了；核心部分"
               "必须关闭 autocast。"),
        wrong=[(".float() returns a view that keeps the bfloat16 storage, so the data never changes precision.",
                ".float() 返回的是保留 bfloat16 存储的视图，所以数据的精度从未改变。"),
               ("It does not: .float() is enough, and disabling autocast only matters for the softmax.",
                "并不会：.float() 就够了，关闭 autocast 只对 softmax 有影响。"),
               ("autocast only affects nn.Linear modules, so the matmul runs in float32 but the projections "
                "around it lose precision.",
                "autocast 只影响 nn.Linear 模块，所以这个 matmul 以 float32 运行，只是周围的投影损失了精度。")],
        explain=("autocast works per op: matmul, bmm and linear are on its low-precision list and have their "
                 "inputs cast on entry. Inside torch.autocast(device_type, enabled=False) the float32 tensors stay "
                 "float32, which the grader checks on every bmm and softmax of the core.",
                 "autocast 按算子起作用：matmul、bmm 和 linear 都在它的低精度列表里，进入时输入就会被转换。在 "
                 "torch.autocast(device_type, enabled=False) 里，float32 张量保持 float32，评测会在核心部分的每个 bmm 和 "
                 "softmax 上检查这一点。"),
        see=Ref("reference", "with torch.autocast(device_type=device_type, enabled=False):"),
    ),
    Number(
        "fp16_overflow",
        en="q and k are float16 vectors of head_dim = 64 with every entry equal to a. What is the smallest integer "
           "a for which the float16 product q · k comes out as inf (before the 1/sqrt(head_dim) scaling)?",
        zh="q 和 k 是 head_dim = 64 的 float16 向量，每个元素都等于 a。使 float16 乘积 q · k 结果为 inf（在乘以 "
           "1/sqrt(head_dim) 之前）的最小整数 a 是多少？",
        answer=lambda: smallest_overflowing_entry(64),
        unit=("value of a", "a 的值"),
        explain=("64·a² must reach 65520, the midpoint between 65504 (the largest finite float16) and the next "
                 "step: a = 31 gives 61504, a = 32 gives 65536, which rounds to inf. Outlier features of that size "
                 "do occur in q and k, and dividing by sqrt(d) afterwards is too late: inf / 8 is still inf.",
                 "64·a² 要达到 65520，即 65504（最大的有限 float16）与下一个台阶之间的中点：a = 31 得 61504，a = 32 得 "
                 "65536，会舍入为 inf。q、k 中确实会出现这么大的离群特征，而事后再除以 sqrt(d) 已经太晚：inf / 8 仍是 inf。"),
        see=Ref("statement", "float16 tops out at 65504"),
        proof=lambda ref: _measured_fp16_overflow(64),
    ),
    Number(
        "bf16_spacing",
        en="A logit has the value 100. What is the gap between neighbouring bfloat16 numbers there, i.e. how "
           "coarsely can a bfloat16 score near 100 be stored?",
        zh="一个 logit 的值是 100。在这个位置相邻两个 bfloat16 数之间的间隔是多少，即 100 附近的 bfloat16 分数能存储得多粗？",
        answer=lambda: bf16_spacing(100),
        unit=("(absolute gap)", "（绝对间隔）"),
        explain=("100 lies in [64, 128), where 8 significant bits leave steps of 64 · 2⁻⁷ = 0.5. A rounding error "
                 "of up to 0.25 in a logit multiplies its softmax weight by up to e^0.25 ≈ 1.28, a 28% error: range "
                 "is no problem for bfloat16, precision is.",
                 "100 位于 [64, 128) 之间，8 位有效数字留下的步长是 64 · 2⁻⁷ = 0.5。logit 上最多 0.25 的舍入误差会让它的 "
                 "softmax 权重最多乘上 e^0.25 ≈ 1.28，即 28% 的误差：bfloat16 的问题不在范围，而在精度。"),
        see=Ref("statement", "bfloat16 has the range but only 8 bits of mantissa"),
        proof=lambda ref: _measured_bf16_spacing(100.0),
    ),
    Choice(
        "fp16_vs_bf16",
        en="Both float16 and bfloat16 take 2 bytes. Which statement about them is right for attention?",
        zh="float16 和 bfloat16 都占 2 个字节。关于它们在注意力中的表现，哪种说法是对的？",
        right=("float16 has more mantissa bits but overflows above 65504, so large logits become inf and the "
               "softmax NaN; bfloat16 has float32's range, so it does not overflow, but rounds scores far more "
               "coarsely.",
               "float16 的尾数位更多，但超过 65504 就溢出，大 logit 变成 inf，softmax 得到 NaN；bfloat16 的范围与 float32 "
               "相同，不会溢出，但对分数的舍入粗糙得多。"),
        wrong=[("bfloat16 has the smaller range, so it overflows first and float16 is the safer choice for "
                "logits.",
                "bfloat16 的范围更小，所以先溢出；logit 用 float16 更安全。"),
               ("They differ only in speed on a given GPU; numerically both have float32's range with fewer "
                "mantissa bits.",
                "它们只在特定 GPU 上的速度不同；数值上两者都有 float32 的范围，只是尾数位更少。"),
               ("bfloat16 is exact for all integers up to 65504, so integer-valued logits lose nothing.",
                "bfloat16 能精确表示 65504 以内的所有整数，所以整数值的 logit 不会损失任何精度。")],
        explain=("float16 splits its bits as 5 exponent and 10 mantissa, bfloat16 as 8 and 7. That is why the "
                 "grader has a float16 case with logits beyond 65504 (overflow) and compares bfloat16 cases on "
                 "accuracy: each format fails in its own way, and a float32 core protects against both.",
                 "float16 的位分配是 5 位指数、10 位尾数，bfloat16 是 8 位和 7 位。所以评测用 logit 超过 65504 的 float16 "
                 "用例检查溢出，而对 bfloat16 用例比较精度：两种格式各有各的失败方式，float32 的核心计算同时防住了两者。"),
        see=Ref("reference", "# over keys, in float32"),
    ),
]


def _measured_fp16_overflow(head_dim):
    """The smallest integer a whose float16 matmul of (a, ..., a) with itself is inf, found by torch."""
    import torch

    a = 1
    while True:
        v = torch.full((1, head_dim), float(a), dtype=torch.float16)
        if torch.isinf(v @ v.T).item():
            return a
        a += 1


def _measured_bf16_spacing(x):
    """The smallest gap between distinct bfloat16 values that a fine float32 grid around x rounds to."""
    import torch

    grid = torch.linspace(x - 4, x + 4, 100001).to(torch.bfloat16).unique().float()
    return (grid[1:] - grid[:-1]).min().item()
