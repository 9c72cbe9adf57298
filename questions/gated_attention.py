"""Follow-up questions for `gated_attention` (see attn_drill/bank/quiz.py for the format)."""
import math

from attn_drill.bank.quiz import Choice, Number, Ref


def module_parameters(E, H, Hkv, D, qk_norm=True):
    """q_proj gives queries and gates (H * 2D outputs), k/v_proj Hkv * D each, o_proj H * D -> E, two norms of D."""
    q_and_gate = E * H * 2 * D
    kv = 2 * E * Hkv * D
    out = H * D * E
    norms = 2 * D if qk_norm else 0
    return q_and_gate + kv + out + norms


def slowest_wavelength(head_dim, partial_rotary_factor, theta):
    """Tokens per full turn of the slowest rotated pair: pair i turns by theta ** (-2i / rotary_dim) per position."""
    rotary_dim = int(head_dim * partial_rotary_factor)
    i = rotary_dim // 2 - 1
    return 2 * math.pi / theta ** (-2 * i / rotary_dim)


QUESTIONS = [
    Number(
        "module_parameters",
        en="How many parameters does GatedAttention(hidden_dim=2048, num_heads=16, num_kv_heads=2, head_dim=256, "
           "qk_norm=True) have?",
        zh="GatedAttention(hidden_dim=2048, num_heads=16, num_kv_heads=2, head_dim=256, qk_norm=True) 有多少个参数？",
        answer=lambda: module_parameters(2048, 16, 2, 256),
        unit=("parameters", "个参数"),
        explain=("q_proj 2048 · 8192 (half of it the gates), k_proj and v_proj 2048 · 512 each, o_proj 4096 · 2048, the "
                 "norms 2 · 256: 27 263 488. The gate alone is 2048 · 4096 ≈ 8.4 M, about 31 % of the module, because "
                 "it is as wide as all the query heads together, not as the 2 KV heads.",
                 "q_proj 2048 · 8192（其中一半是 gate），k_proj 和 v_proj 各 2048 · 512，o_proj 4096 · 2048，norm 2 · 256："
                 "共 27 263 488。仅 gate 就有 2048 · 4096 ≈ 8.4 M，约占模块的 31 %，因为它和全部 query 头一样宽，而不是和 "
                 "2 个 KV 头一样宽。"),
        see=Ref("reference", "self.q_proj = nn.Linear(hidden_dim, num_heads * 2 * head_dim, bias=False)"),
        proof=lambda ref: _parameters_measured(ref, 2048, 16, 2, 256),
    ),
    Number(
        "slowest_wavelength",
        en="head_dim = 256, partial_rotary_factor = 0.25, rope_theta = 10000. Over how many positions does the slowest "
           "rotated pair make one full turn (2π)? (Three significant digits are enough.)",
        zh="head_dim = 256，partial_rotary_factor = 0.25，rope_theta = 10000。旋转得最慢的那一对维度要经过多少个位置才转满"
           "一圈（2π）？（三位有效数字即可。）",
        answer=lambda: slowest_wavelength(256, 0.25, 10000.0),
        unit=("positions", "个位置"),
        rel_tol=0.01,
        explain=("rotary_dim = 64, and the last pair, i = 31, turns by 10000^(-62/64) ≈ 1.33e-4 rad per position: "
                 "2π / 1.33e-4 ≈ 47 100 positions. Spreading the frequencies over head_dim instead (10000^(-62/256)) "
                 "would make that pair turn once every ~58 positions, so the rotated part would carry no long-range "
                 "signal.",
                 "rotary_dim = 64，最后一对 i = 31 每个位置转 10000^(-62/64) ≈ 1.33e-4 弧度：2π / 1.33e-4 ≈ 47 100 个位置。"
                 "若把频率按 head_dim 铺开（10000^(-62/256)），这一对约每 58 个位置就转一圈，旋转部分就带不了远距离的信息。"),
        see=Ref("reference", "inv_freq = self.rope_theta ** (-torch.arange(0, rot, 2"),
    ),
    Choice(
        "why_gate",
        en="What does the sigmoid gate on each head's output give the model that plain attention lacks?",
        zh="每个头输出上的 sigmoid gate 给了模型哪些普通注意力没有的东西？",
        right=("A non-linearity between the value and output projections, which otherwise compose into one low-rank "
               "linear map, and an input-dependent way for a head to output little, instead of parking its softmax "
               "mass on a sink token.",
               "在 value 投影和输出投影之间加入了非线性（否则两者会合成一个低秩线性映射），并让头可以依据输入只输出很少的内容，"
               "而不必把 softmax 的权重堆到某个 sink token 上。"),
        wrong=[("It replaces the softmax normalisation, so the attention weights no longer need to sum to one.",
                "它取代了 softmax 归一化，所以注意力权重不再需要和为 1。"),
               ("It masks padding: padded positions get a gate of zero, so no key_padding_mask is needed.",
                "它负责屏蔽 padding：填充位置的 gate 为零，所以不需要 key_padding_mask。"),
               ("It is a cheaper stand-in for the MLP, so the layer can drop its feed-forward block.",
                "它是 MLP 的廉价替代品，所以这一层可以去掉前馈模块。")],
        explain=("The softmax still runs and still sums to one; the gate acts after it, on the output, per head and "
                 "channel. A softmax cannot output zero attention, so without a gate a head that has nothing to add "
                 "must dump its weight somewhere: that is the attention sink the gate removes.",
                 "softmax 照常计算、行和仍为 1；gate 作用在它之后的输出上，按头、按通道。softmax 无法给出零注意力，没有 gate 时，"
                 "无话可说的头只能把权重倒在某处：这就是 gate 消除的 attention sink。"),
        see=Ref("statement", "lets a head switch itself off without dumping its attention on a sink token"),
    ),
    Choice(
        "checkpoint_layout",
        en="A checkpoint trained with the official gated-attention code (q_proj grouped by KV head: each group's "
           "queries, then their gates) is loaded into this per-head [query | gate] layout with num_kv_heads < "
           "num_heads. What happens?",
        zh="一个用官方 gated attention 代码训练的 checkpoint（q_proj 按 KV 头分组：先是一组的所有 query，再是它们的 gate），"
           "在 num_kv_heads < num_heads 时加载到本题的逐头 [query | gate] 布局中。会发生什么？",
        right=("It loads silently, because the shapes are the same, but q_proj's rows are read in another order: some "
               "channels trained as gates act as queries and vice versa, and the output is wrong.",
               "加载时不会报错，因为形状相同；但 q_proj 的行被按另一种顺序读取：一些训练成 gate 的通道被当作 query 用，反之亦然，"
               "输出是错的。"),
        wrong=[("load_state_dict raises a size mismatch, because the two layouts give q_proj different shapes.",
                "load_state_dict 报尺寸不匹配，因为两种布局下 q_proj 的形状不同。"),
               ("Nothing changes: the layouts only reorder the heads, and attention does not depend on the order of "
                "its heads.",
                "没有变化：两种布局只是调换了头的顺序，而注意力与头的顺序无关。"),
               ("Only the gates are misread; the attention weights themselves are unaffected.",
                "只有 gate 读错了；注意力权重本身不受影响。")],
        explain=("Both layouts produce H · 2 · head_dim rows, a permutation of each other that mixes queries with gates, "
                 "not just heads with heads; they coincide only when num_kv_heads = num_heads. Weights must be loaded "
                 "in the layout they were trained with.",
                 "两种布局都有 H · 2 · head_dim 行，彼此是一个置换，而这个置换把 query 和 gate 混在了一起，而不只是头与头对调；"
                 "只有 num_kv_heads = num_heads 时两者才一致。权重必须按训练时的布局加载。"),
        see=Ref("statement", "That is a permutation of `q_proj`'s rows"),
    ),
    Choice(
        "qk_norm",
        en="What does the QK-norm (an RMSNorm on every query and key head before RoPE) protect against?",
        zh="QK-norm（在 RoPE 之前对每个 query 头和 key 头做 RMSNorm）防的是什么？",
        right=("It fixes the RMS of every query and key head, so the logits cannot grow without bound as the weights "
               "grow in training, a known cause of saturated softmaxes and loss spikes; the learned weight keeps the "
               "scale adjustable.",
               "它固定了每个 query 头和 key 头的 RMS，使 logits 不会随训练中权重变大而无限增长，这是 softmax 饱和和 loss "
               "尖峰的已知原因；可学习的权重让尺度仍可调节。"),
        wrong=[("It makes the 1/sqrt(head_dim) scale unnecessary, so the scores are no longer divided by it.",
                "它让 1/sqrt(head_dim) 缩放变得多余，所以分数不再除以它。"),
               ("It normalises the attention weights, so each row sums to one without a softmax.",
                "它对注意力权重归一化，不需要 softmax 每行之和就为 1。"),
               ("It makes RoPE unnecessary, because normalised vectors already encode their position.",
                "它让 RoPE 变得多余，因为归一化后的向量已经编码了位置。")],
        explain=("The norm acts on q and k, not on the weights: the scale and the softmax stay. It runs before RoPE, "
                 "and the rotation keeps each pair's length, so it does not undo the RMS the norm has set.",
                 "norm 作用在 q 和 k 上，而不是权重上：缩放和 softmax 都保留。它在 RoPE 之前执行；旋转不改变每对维度的长度，"
                 "所以不会破坏 norm 设定的 RMS。"),
        see=Ref("reference", "q = self.q_norm(q)"),
    ),
]


def _parameters_measured(ref, E, H, Hkv, D):
    import torch

    with torch.device("meta"):
        m = ref.GatedAttention(E, H, Hkv, D, qk_norm=True)
    return sum(p.numel() for p in m.parameters())
