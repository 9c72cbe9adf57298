"""Follow-up questions for `rope_scaling` (see attn_drill/bank/quiz.py for the format)."""
import math

from attn_drill.bank.quiz import Choice, Number, Ref


def yarn_logit_factor(s):
    """cos and sin are both multiplied by 0.1 ln s + 1, so q·k is multiplied by its square."""
    f = 0.1 * math.log(s) + 1.0 if s > 1 else 1.0
    return f * f


def dynamic_ntk_base(theta, dim, s, seq_len, M):
    """The base dynamic NTK scaling uses for a sequence of seq_len tokens."""
    L = max(seq_len, M)
    return theta * (s * L / M - (s - 1)) ** (dim / (dim - 2))


def llama3_unchanged(dim, theta, L_o, high_freq_factor):
    """Frequencies whose wavelength 2π / base[i] is shorter than L_o / high_freq_factor are kept as they are."""
    base = [theta ** (-2 * i / dim) for i in range(dim // 2)]
    return sum(2 * math.pi / b < L_o / high_freq_factor for b in base)


LLAMA31 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
           "original_max_position_embeddings": 8192}


QUESTIONS = [
    Number(
        "yarn_logit_factor",
        en="YaRN with factor 8 and no mscale keys: by what factor are the q·k logits multiplied, compared with "
           "unscaled RoPE at the same angles?",
        zh="YaRN 取 factor 为 8，且没有 mscale 相关的键：与同样角度下不缩放的 RoPE 相比，q·k 的 logits 被乘上了多大的"
           "系数？",
        answer=lambda: yarn_logit_factor(8.0),
        unit=("times", "倍"),
        rel_tol=0.01,
        explain=("attention_factor = 0.1 · ln 8 + 1 ≈ 1.208 multiplies both cos and sin, so q and k are each "
                 "scaled by it and their dot product by 1.208² ≈ 1.459: a lower softmax temperature that offsets "
                 "the flatter attention over a longer context. Scaling only cos would not even be a rotation.",
                 "attention_factor = 0.1 · ln 8 + 1 ≈ 1.208 同时乘到 cos 和 sin 上，所以 q 和 k 各被放大这么多，点积放大 "
                 "1.208² ≈ 1.459：相当于降低 softmax 温度，抵消长上下文中注意力变平的趋势。只乘 cos 的话连旋转都不是了。"),
        see=Ref("reference", "cos = (emb.cos() * attention_factor).to(real)[:, None]"),
        proof=lambda ref: _measured_logit_factor(ref, 8.0),
    ),
    Number(
        "dynamic_base",
        en="Dynamic NTK with theta = 10000, dim = 128, factor 2 and max_position_embeddings = 4096: what base "
           "does a sequence of 8192 tokens use?",
        zh="动态 NTK，theta = 10000，dim = 128，factor 为 2，max_position_embeddings = 4096：长度为 8192 的序列使用的"
           "底数是多少？",
        answer=lambda: dynamic_ntk_base(10000.0, 128, 2.0, 8192, 4096),
        unit=("base (theta')", "底数（theta'）"),
        rel_tol=0.01,
        explain=("theta' = 10000 · (2 · 8192/4096 - 1)^(128/126) = 10000 · 3^(1.016) ≈ 30 500. The exponent "
                 "dim/(dim - 2) makes the slowest pair stretch by exactly 3, while the fastest pair (exponent 0) "
                 "does not move at all.",
                 "theta' = 10000 · (2 · 8192/4096 - 1)^(128/126) = 10000 · 3^(1.016) ≈ 30 500。指数 dim/(dim - 2) 让最慢"
                 "的一对恰好拉长 3 倍，而最快的一对（指数为 0）完全不变。"),
        see=Ref("reference", "new_theta = theta * (s * L / M - (s - 1)) ** (dim / (dim - 2))"),
        proof=lambda ref: _measured_dynamic_base(ref, 10000.0, 128, 2.0, 8192, 4096),
    ),
    Number(
        "llama3_unchanged",
        en="Llama-3.1-8B: head_dim = 128, theta = 500000, llama3 scaling with factor 8, low_freq_factor 1, "
           "high_freq_factor 4, original_max_position_embeddings 8192. How many of the 64 frequencies are left "
           "exactly as they were?",
        zh="Llama-3.1-8B：head_dim = 128，theta = 500000，llama3 缩放，factor 为 8，low_freq_factor 为 1，"
           "high_freq_factor 为 4，original_max_position_embeddings 为 8192。64 个频率中有多少个保持原样？",
        answer=lambda: llama3_unchanged(128, 500000.0, 8192, 4.0),
        unit=("frequencies", "个频率"),
        explain=("A frequency is kept when its wavelength is below 8192/4 = 2048 positions; that holds for "
                 "i = 0 .. 28, so 29. Another 29 (wavelength above 8192) are divided by 8, and the 6 in between "
                 "are blended.",
                 "波长小于 8192/4 = 2048 个位置的频率保持不变；i = 0 .. 28 满足，共 29 个。另有 29 个（波长大于 8192）"
                 "除以 8，中间的 6 个做平滑混合。"),
        see=Ref("reference", "smooth = ((L_o / wavelen - low_f) / (high_f - low_f)).clamp(0.0, 1.0)"),
        proof=lambda ref: _measured_llama3_unchanged(ref),
    ),
    Choice(
        "keep_fast_dims",
        en="Linear interpolation divides every frequency by s. Why do YaRN and Llama 3 leave the fast "
           "(high-frequency) dims untouched?",
        zh="线性插值把所有频率都除以 s。为什么 YaRN 和 Llama 3 保留快的（高频）维度不动？",
        right=("Fast dims turn many times within the training length, so long positions show them no new angle; "
               "dividing them by s would squeeze the angle between neighbouring tokens and blur local order. "
               "Only the slow dims meet unseen angles.",
               "快的维度在训练长度内已经转了很多圈，长位置不会给它们带来新的角度；把它们除以 s 只会压缩相邻 token 之间的"
               "角度差，让局部顺序变模糊。只有慢的维度会遇到没见过的角度。"),
        wrong=[("Fast dims carry no positional information, so scaling them would be wasted work.",
                "快的维度不携带位置信息，缩放它们是白费功夫。"),
               ("Slow dims are interpolated because their angles overflow float32 at long positions.",
                "慢的维度要插值，是因为它们的角度在长位置处会让 float32 溢出。"),
               ("Keeping them lets the model skip recomputing cos and sin for those dims.",
                "保留它们可以让模型省去重新计算这些维度的 cos 和 sin。")],
        explain=("A dim whose wavelength is much shorter than the training length has already seen every angle "
                 "in [0, 2π) many times. The fast dims are exactly the ones that resolve nearby tokens, which is "
                 "why plain interpolation hurts short-range accuracy.",
                 "波长远短于训练长度的维度，早已多次见过 [0, 2π) 内的所有角度。快的维度正是用来区分相邻 token 的，这就是"
                 "单纯插值会损害短距离精度的原因。"),
        see=Ref("reference", "ramp = ((i - low) / (high - low)).clamp(0.0, 1.0)                 # 0: fast dims kept, 1: slow dims / s"),
    ),
    Choice(
        "dynamic_and_cache",
        en="Dynamic NTK picks its base from the current length. What goes wrong when it is used with a KV cache "
           "that stores rotated keys?",
        zh="动态 NTK 按当前长度选择底数。如果配合一个存放已旋转 key 的 KV cache 使用，会出什么问题？",
        right=("Once the length passes max_position_embeddings the base changes, but the cached keys keep the "
               "old rotation while new queries use the new one, so q·k no longer depends only on the distance.",
               "长度一旦超过 max_position_embeddings，底数就会变化，但缓存中的 key 仍保持旧的旋转，而新的 query 用的是新的"
               "旋转，于是 q·k 不再只依赖于距离。"),
        wrong=[("Nothing: RoPE is relative, so the base cancels in q·k.",
                "没有问题：RoPE 是相对的，底数会在 q·k 中抵消。"),
               ("The cache has to be reallocated, because a new base changes the shape of the keys.",
                "缓存必须重新分配，因为新的底数会改变 key 的形状。"),
               ("Only the attention factor changes, and that can be applied to the query alone.",
                "只有 attention factor 会变，而它只需作用于 query。")],
        explain=("Relative invariance needs q and k rotated with the same frequencies. Hugging Face recomputes the "
                 "base only when the length grows, and keys cached earlier keep the old base unless the cache is "
                 "re-rotated; the shapes never change.",
                 "相对不变性要求 q 和 k 用相同的频率旋转。Hugging Face 只在长度增长时重新计算底数，之前缓存的 key 保持旧底数，"
                 "除非把整个缓存重新旋转；张量形状始终不变。"),
        see=Ref("reference", "L = M if seq_len is None else max(seq_len, M)"),
    ),
]


def _measured_logit_factor(ref, s):
    """q = k = the same vector at position 0 (no rotation): q_rot·k_rot over q·k is the logit factor."""
    import torch
    D = 64
    x = torch.ones(1, 1, 1, D, dtype=torch.float64)
    positions = torch.zeros(1, 1, dtype=torch.long)
    scaling = {"rope_type": "yarn", "factor": s, "original_max_position_embeddings": 4096}
    q, k = ref.apply_scaled_rope(x, x.clone(), positions, 10000.0, scaling)
    return float((q * k).sum() / (x * x).sum())


def _measured_dynamic_base(ref, theta, dim, s, seq_len, M):
    """inv_freq[1] = base^(-2/dim), so base = inv_freq[1]^(-dim/2)."""
    scaling = {"rope_type": "dynamic", "factor": s, "max_position_embeddings": M}
    inv_freq, _ = ref.scaled_inv_freq(dim, theta, scaling, seq_len)
    return float(inv_freq[1]) ** (-dim / 2)


def _measured_llama3_unchanged(ref):
    import torch
    base, _ = ref.scaled_inv_freq(128, 500000.0)
    scaled, _ = ref.scaled_inv_freq(128, 500000.0, LLAMA31)
    return int(torch.isclose(scaled, base, rtol=1e-12, atol=0.0).sum())
