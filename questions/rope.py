"""Follow-up questions for `rope` (see attn_drill/bank/quiz.py for the format)."""
import math

from attn_drill.bank.quiz import Choice, Number, Ref


def slowest_wavelength(dim, theta):
    """Positions per full turn of the slowest pair, i = dim/2 - 1: 2π / theta^(-(dim - 2) / dim)."""
    i = dim // 2 - 1
    return 2 * math.pi * theta ** (2 * i / dim)


def table_bytes(max_len, head_dim, bytes_per_complex):
    """freqs_cis holds one complex number per (position, pair)."""
    return max_len * (head_dim // 2) * bytes_per_complex


QUESTIONS = [
    Choice(
        "why_relative",
        en="Why does the score between a query rotated at position m and a key rotated at position n depend "
           "only on m - n?",
        zh="为什么在位置 m 旋转过的 query 与在位置 n 旋转过的 key 之间的分数只依赖于 m - n？",
        right=("Each pair is turned by a 2-D rotation, and R(mω)ᵀ R(nω) = R((n - m)ω): in the dot product the "
               "two absolute angles cancel down to their difference.",
               "每一对维度做的是二维旋转，而 R(mω)ᵀ R(nω) = R((n - m)ω)：在点积里两个绝对角度相消，只剩下它们的差。"),
        wrong=[("Because every entry of freqs_cis has modulus 1, so the absolute position is normalised away.",
                "因为 freqs_cis 的每个元素模长都为 1，绝对位置被归一化掉了。"),
               ("Because V is not rotated, so the absolute positions never reach the output.",
                "因为 V 没有被旋转，绝对位置不会进入输出。"),
               ("Because the 1/sqrt(head_dim) scale cancels the part of the angle that depends on m + n.",
                "因为 1/sqrt(head_dim) 的缩放抵消了角度中依赖 m + n 的部分。")],
        explain=("(R_m q)·(R_n k) = qᵀ R_mᵀ R_n k = qᵀ R_{n-m} k, because rotations of one plane compose by adding "
                 "angles. Unit modulus only keeps the norms; it is the composition rule, not the normalisation, "
                 "that leaves the distance.",
                 "(R_m q)·(R_n k) = qᵀ R_mᵀ R_n k = qᵀ R_{n-m} k，因为同一平面内的旋转复合时角度相加。模长为 1 只保证"
                 "范数不变；留下距离的是旋转的复合规律，而不是归一化。"),
        see=Ref("reference", "rotated = xc * freqs_cis.to(complex_dtype)"),
    ),
    Choice(
        "rotate_v",
        en="A candidate also rotates V with freqs_cis. What changes?",
        zh="候选人把 V 也用 freqs_cis 旋转了。会有什么变化？",
        right=("The scores and weights stay the same, but each output mixes values turned by their keys' "
               "absolute positions, so the output carries absolute position and loses the shift invariance.",
               "分数和权重不变，但每个输出混合的是按各自 key 的绝对位置旋转过的 value，于是输出带上了绝对位置，"
               "失去了平移不变性。"),
        wrong=[("The scores change, because the softmax now sees rotated values.",
                "分数会变，因为 softmax 现在看到的是旋转过的 value。"),
               ("Nothing: a rotation is orthogonal, so the weighted sum of rotated values equals the weighted sum "
                "of the originals.",
                "没有变化：旋转是正交变换，所以旋转后 value 的加权和等于原 value 的加权和。"),
               ("The weights no longer sum to one over the keys.",
                "注意力权重在 key 上的和不再为 1。")],
        explain=("Rotating V does not touch Q·Kᵀ, so the weights are unchanged. But each value is turned by a "
                 "different angle, and a sum of differently rotated vectors is not the rotated sum: the output now "
                 "depends on where the sequence sits, not only on relative offsets.",
                 "旋转 V 不影响 Q·Kᵀ，所以权重不变。但每个 value 转过的角度不同，不同角度旋转后的向量之和并不等于和的"
                 "旋转：输出开始依赖序列所处的绝对位置，而不只是相对偏移。"),
        see=Ref("reference", "k = apply_rotary_pos_emb(k, freqs_cis)"),
    ),
    Choice(
        "layout_port",
        en="You load a checkpoint trained with the Hugging Face rotate_half layout (dim i paired with i + D/2) "
           "into this interleaved implementation. What happens, and what is the cheapest fix?",
        zh="把一个用 Hugging Face rotate_half 布局（第 i 维与第 i + D/2 维配对）训练的 checkpoint 加载进本题的相邻配对"
           "实现。会发生什么？最省事的修正是什么？",
        right=("The wrong dims get paired and the outputs are wrong; permuting the rows of W_q and W_k per head "
               "(so that dims i and i + D/2 become adjacent) makes the two layouts give identical scores.",
               "配对的维度错了，输出不对；按头把 W_q 和 W_k 的行重新排列（让第 i 维和第 i + D/2 维相邻），两种布局就能"
               "得到完全相同的分数。"),
        wrong=[("Nothing changes: both layouts rotate by the same angles, so the outputs are identical.",
                "没有变化：两种布局旋转的角度相同，所以输出完全一样。"),
               ("Only the sign of the rotation differs; conjugating freqs_cis fixes it.",
                "只是旋转方向相反；对 freqs_cis 取共轭即可。"),
               ("The model has to be fine-tuned, because the layouts cannot be converted into each other.",
                "必须重新微调模型，因为两种布局无法相互转换。")],
        explain=("The two layouts apply the same set of rotations to different pairs of dims; they agree up to a "
                 "fixed permutation of each head's dims. Applying that permutation to the q and k projection rows "
                 "(V and out_proj untouched) converts one checkpoint into the other exactly.",
                 "两种布局对不同的维度对施加同一组旋转；它们只差每个头内维度的一个固定置换。把这个置换作用在 q 和 k "
                 "投影矩阵的行上（V 和 out_proj 不动），就能把一种 checkpoint 精确地转成另一种。"),
        see=Ref("reference", "pairs = x.to(real).reshape(*lead, L, D // 2, 2)"),
    ),
    Number(
        "slowest_wavelength",
        en="With head_dim = 128 and theta = 10000, how many positions does the slowest pair (i = 63) need for "
           "one full turn of 2π?",
        zh="head_dim = 128、theta = 10000 时，最慢的那一对（i = 63）转满一圈 2π 需要多少个位置？",
        answer=lambda: slowest_wavelength(128, 10000.0),
        unit=("positions", "个位置"),
        rel_tol=0.01,
        explain=("Its frequency is theta^(-126/128) ≈ 1.15e-4 rad per position, so a turn takes 2π · "
                 "10000^(126/128) ≈ 54 400 positions. The fastest pair turns once every 2π ≈ 6.3 positions: the "
                 "pairs span wavelengths from a few tokens to tens of thousands.",
                 "它的频率是 theta^(-126/128) ≈ 1.15e-4 弧度/位置，转一圈需要 2π · 10000^(126/128) ≈ 54 400 个位置。"
                 "最快的一对每 2π ≈ 6.3 个位置转一圈：各对的波长从几个 token 跨到几万个 token。"),
        see=Ref("reference", "inv_freq = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))"),
        proof=lambda ref: _measured_wavelength(ref, 128, 10000.0),
    ),
    Number(
        "table_bytes",
        en="precompute_rope_freqs(128, 8192) returns the complex64 table (one complex64 is 8 bytes). How many "
           "bytes does it take?",
        zh="precompute_rope_freqs(128, 8192) 返回 complex64 的表（每个 complex64 占 8 字节）。它占多少字节？",
        answer=lambda: table_bytes(8192, 128, 8),
        unit=("bytes", "字节"),
        explain=("8192 positions × 64 pairs × 8 bytes = 4 MiB, shared by every layer and head: RoPE adds no "
                 "parameters, only this fixed table (or cos and sin computed on the fly).",
                 "8192 个位置 × 64 对 × 8 字节 = 4 MiB，所有层和头共用：RoPE 不增加任何参数，只有这张固定的表（或即时"
                 "计算的 cos 和 sin）。"),
        see=Ref("reference", "return torch.polar(torch.ones_like(angles), angles).to(torch.complex64)"),
        proof=lambda ref: _measured_table_bytes(ref, 128, 8192),
    ),
]


def _measured_wavelength(ref, dim, theta):
    """2π over the angle the reference's table turns the last pair by in one position."""
    import torch
    table = ref.precompute_rope_freqs(dim, 2, theta)              # (2, dim/2)
    step = torch.angle(table[1, -1].to(torch.complex128)).item()  # rad per position of the slowest pair
    return 2 * math.pi / step


def _measured_table_bytes(ref, dim, seq_len):
    table = ref.precompute_rope_freqs(dim, seq_len)
    return table.numel() * table.element_size()
