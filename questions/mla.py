"""Follow-up questions for `mla` (see attn_drill/bank/quiz.py for the format)."""
from attn_drill.bank.quiz import Choice, Number, Ref

# DeepSeek-V3's attention sizes: hidden, heads, q_lora_rank, kv_lora_rank, qk_nope, qk_rope, v_head_dim
V3 = dict(E=7168, H=128, rq=1536, r=512, dn=128, dr=64, dv=128)


def latent_cache_bytes(T, r, dr, bytes_per_element, batch=1):
    """What MLA caches per token: the normalised latent (r) and the shared rotated k_pe (dr)."""
    return batch * T * (r + dr) * bytes_per_element


def expanded_over_latent(H, dn, dr, dv, r):
    """Per-token numbers of per-head keys (dn + dr each) and values (dv each) over the latent cache's r + dr."""
    return H * (dn + dr + dv) / (r + dr)


def softmax_scale(dn, dr):
    """The query/key head dim includes the rope part."""
    return (dn + dr) ** -0.5


QUESTIONS = [
    Number(
        "cache_bytes",
        en="With DeepSeek-V3's sizes (kv_lora_rank = 512, qk_rope_head_dim = 64, 128 heads), how many bytes do "
           "kv_cache and pe_cache take together for one layer, batch 1, max_len = 4096, in bfloat16?",
        zh="按 DeepSeek-V3 的尺寸（kv_lora_rank = 512，qk_rope_head_dim = 64，128 个头），一层、batch 为 1、"
           "max_len = 4096、bfloat16 时，kv_cache 和 pe_cache 一共占多少字节？",
        answer=lambda: latent_cache_bytes(4096, V3["r"], V3["dr"], 2),
        unit=("bytes", "字节"),
        explain=("576 numbers per token (512 latent + 64 rotated key), 2 bytes each: 4096 · 576 · 2 = 4.5 MiB. "
                 "The number of heads does not appear: the latent and k_pe are shared by all 128 heads.",
                 "每个 token 576 个数（512 维潜在向量 + 64 维已旋转 key），每个 2 字节：4096 · 576 · 2 = 4.5 MiB。"
                 "头数不出现在式子里：潜在向量和 k_pe 由全部 128 个头共享。"),
        see=Ref("reference", "self.kv_cache = torch.zeros(batch_size, max_len, self.kv_lora_rank,"),
        proof=lambda ref: _measured_cache_bytes(ref, 4096),
    ),
    Number(
        "cache_ratio",
        en="Same sizes (qk_nope_head_dim = 128, qk_rope_head_dim = 64, v_head_dim = 128, kv_lora_rank = 512, "
           "128 heads). How many times more numbers per token would a cache of the per-head keys "
           "(qk_nope + qk_rope each) and values (v_head_dim each) hold than MLA's latent cache?",
        zh="同样的尺寸（qk_nope_head_dim = 128，qk_rope_head_dim = 64，v_head_dim = 128，kv_lora_rank = 512，128 个头）。"
           "如果缓存每个头的 key（每个 qk_nope + qk_rope 维）和 value（每个 v_head_dim 维），每个 token 存的数是 MLA "
           "潜在缓存的多少倍？",
        answer=lambda: expanded_over_latent(V3["H"], V3["dn"], V3["dr"], V3["dv"], V3["r"]),
        unit=("times", "倍"),
        rel_tol=0.01,
        explain=("128 · (192 + 128) = 40 960 numbers against 512 + 64 = 576, about 71 times. The cache is small "
                 "because the keys and values are linear images of one latent; the price is the up-projection "
                 "work, which absorption moves into the query and the output.",
                 "128 · (192 + 128) = 40 960 个数对 512 + 64 = 576 个，约 71 倍。缓存之所以小，是因为 key 和 value 都是"
                 "同一个潜在向量的线性像；代价是上投影的计算，而权重吸收把它挪到了 query 和输出上。"),
        see=Ref("reference", "pe_cache (B, max_len, dr): the rotated k_pe."),
    ),
    Number(
        "scale",
        en="With qk_nope_head_dim = 128, qk_rope_head_dim = 64 and v_head_dim = 128 (and no YaRN factor), what "
           "softmax scale multiplies the scores?",
        zh="qk_nope_head_dim = 128、qk_rope_head_dim = 64、v_head_dim = 128（且没有 YaRN 因子）时，分数要乘以多大的 "
           "softmax 缩放？",
        answer=lambda: softmax_scale(V3["dn"], V3["dr"]),
        unit=("scale factor", "缩放系数"),
        rel_tol=0.01,
        explain=("A score is the sum of the nope and the rope dot products, a dot product over dn + dr = 192 "
                 "dims, so the scale is 192^-0.5 ≈ 0.0722. dv only sizes the values, and 128^-0.5 would leave the "
                 "rope part out.",
                 "一个分数是 nope 点积与 rope 点积之和，相当于 dn + dr = 192 维上的点积，所以缩放是 192^-0.5 ≈ 0.0722。"
                 "dv 只决定 value 的大小，用 128^-0.5 则漏掉了 rope 部分。"),
        see=Ref("reference", "self.softmax_scale = (dn + dr) ** -0.5"),
        proof=lambda ref: _measured_scale(ref),
    ),
    Choice(
        "decoupled_rope",
        en="Why does MLA rotate a separate small k_pe shared by all heads instead of applying RoPE to the "
           "per-head keys W_UK[h] c_t?",
        zh="为什么 MLA 单独旋转一个所有头共享的小 k_pe，而不是对每个头的 key W_UK[h] c_t 做 RoPE？",
        right=("The rotation depends on the key's position and would sit between q and W_UK, so W_UK could no "
               "longer be folded into the query once for all positions; keeping RoPE off the latent path keeps "
               "absorption exact.",
               "旋转依赖 key 的位置，会夹在 q 和 W_UK 之间，于是无法把 W_UK 一次性并入对所有位置通用的 query；让 RoPE "
               "不经过潜在向量这条路径，吸收才保持精确。"),
        wrong=[("Because RoPE would change the norm of c_t and break the RMSNorm in front of the cache.",
                "因为 RoPE 会改变 c_t 的范数，破坏缓存之前的 RMSNorm。"),
               ("Because RoPE needs an even dimension and kv_lora_rank is usually odd.",
                "因为 RoPE 需要偶数维，而 kv_lora_rank 通常是奇数。"),
               ("To save compute: rotating 64 dims is cheaper than rotating 128 dims per head, with the same "
                "result.",
                "为了省计算：旋转 64 维比每个头旋转 128 维便宜，结果相同。")],
        explain=("q·(R_t W_UK c_t) = (W_UKᵀ R_tᵀ q)·c_t depends on t through R_t, so there is no single absorbed "
                 "query per step. A rotation keeps norms, and rotating per-head keys is a different model, not the "
                 "same result more cheaply.",
                 "q·(R_t W_UK c_t) = (W_UKᵀ R_tᵀ q)·c_t 通过 R_t 依赖于 t，所以每一步不存在唯一的吸收后 query。旋转保持"
                 "范数；对每个头的 key 做旋转是另一个模型，而不是更便宜地得到同样的结果。"),
        see=Ref("reference", "k_pe = _rope(k_pe, cos, sin)"),
    ),
    Choice(
        "absorb_tradeoff",
        en="The cached path absorbs W_UK into the query and W_UV into the output. What does this trade, and "
           "when does it pay off?",
        zh="带缓存的路径把 W_UK 吸收进 query、把 W_UV 吸收进输出。这是在用什么换什么？什么时候划算？",
        right=("It skips expanding T cached latents into per-head keys and values at every step, at the price of "
               "dot products over r = 512 dims per head instead of dn = 128: a win for decoding, where few "
               "queries face a long cache and memory traffic dominates.",
               "它省去了每一步把 T 个缓存潜在向量展开成每个头的 key 和 value，代价是每个头的点积长度从 dn = 128 变成 "
               "r = 512：在解码时划算，因为那时少量 query 面对很长的缓存，内存访问占主导。"),
        wrong=[("It is an approximation that trades a little accuracy for speed.",
                "它是一种近似，用一点精度换速度。"),
               ("It makes the pe_cache unnecessary, because k_pe is absorbed into the query as well.",
                "它使 pe_cache 变得不必要，因为 k_pe 也被吸收进了 query。"),
               ("It is always faster, so training uses the absorbed path too.",
                "它总是更快，所以训练也用吸收路径。")],
        explain=("Absorption is exact (associativity of the matmuls). With many queries per sequence, as in "
                 "training or a long prefill, expanding K and V once and attending in dn dims costs fewer FLOPs, which is "
                 "why the uncached path expands. k_pe stays separate because it is rotated per position.",
                 "吸收是精确的（矩阵乘法的结合律）。当每个序列有很多 query 时，如训练或长的 prefill，先把 K 和 V 展开一次、"
                 "在 dn 维上做注意力所需的浮点运算更少，所以不带缓存的路径选择展开。k_pe 保持独立，因为它按位置旋转。"),
        see=Ref("reference", "q_lat = q_nope @ w_uk"),
    ),
]


def _v3_on_meta(ref):
    import torch
    with torch.device("meta"):
        m = ref.MultiHeadLatentAttention(V3["E"], V3["H"], V3["rq"], V3["r"], V3["dn"], V3["dr"], V3["dv"])
    return m


def _measured_cache_bytes(ref, max_len):
    import torch
    m = _v3_on_meta(ref).to(torch.bfloat16)
    m.init_cache(1, max_len, device="meta")
    return sum(t.numel() * t.element_size() for t in (m.kv_cache, m.pe_cache))


def _measured_scale(ref):
    return _v3_on_meta(ref).softmax_scale
