"""Follow-up questions for `rope_cached_decode` (see attn_drill/bank/quiz.py for the format)."""
from attn_drill.bank.quiz import Choice, Number, Ref


def kv_cache_bytes(batch, num_heads, max_len, head_dim, bytes_per_element):
    """k_cache and v_cache, each (batch, num_heads, max_len, head_dim)."""
    return 2 * batch * num_heads * max_len * head_dim * bytes_per_element


def chunk_mask_kept(start_pos, L):
    """Entries kept by the (L, start_pos + L) bottom-right causal mask: query i sees start_pos + i + 1 keys."""
    return sum(start_pos + i + 1 for i in range(L))


def decode_step_flops(E, T, B=1):
    """2 FLOPs per multiply-add for one new token attending over T cached positions: the qkv projection
    (E -> 3E), q·kᵀ and weights @ v over T keys (E = H·D numbers each), and the output projection."""
    projections = 2 * B * E * 3 * E + 2 * B * E * E
    core = 2 * B * T * E + 2 * B * T * E
    return projections + core


QUESTIONS = [
    Choice(
        "rotate_before_caching",
        en="Why cache keys already rotated instead of caching raw keys and rotating them when they are read?",
        zh="为什么缓存已经旋转过的 key，而不是缓存原始 key、在读取时再旋转？",
        right=("A key's angle depends only on its own absolute position, which never changes, so rotating it once "
               "at write time is exact and each step only rotates its new tokens; raw keys would have to be "
               "rotated again over the whole cache at every step.",
               "key 的旋转角只取决于它自己的绝对位置，而这个位置永远不变，所以在写入时旋转一次就是精确的，每一步只需旋转新"
               "token；缓存原始 key 则每一步都要把整个缓存重新旋转一遍。"),
        wrong=[("Raw keys would give different outputs, because a rotation applied after the cache is not the "
                "same as one applied before it.",
                "缓存原始 key 会得到不同的输出，因为缓存之后再旋转和之前旋转不一样。"),
               ("Rotated keys take less memory, because the rotation packs each pair into one complex number.",
                "旋转后的 key 占用内存更少，因为旋转把每一对维度打包成了一个复数。"),
               ("The causal mask can only be applied to rotated keys.",
                "因果掩码只能作用在旋转过的 key 上。")],
        explain=("Both designs give the same scores; the difference is the work (O(T) rotations per step instead "
                 "of O(L)) and what the cache holds. The rotated key is stored in the same dtype and shape as the "
                 "raw one.",
                 "两种做法得到的分数相同；区别在于计算量（每一步 O(T) 次旋转而不是 O(L) 次）以及缓存里存的是什么。旋转后的 "
                 "key 与原始 key 的 dtype 和形状都相同。"),
        see=Ref("reference", "self.k_cache[:, :, start_pos:end] = k                          # rotated once, never again"),
    ),
    Choice(
        "mask_alignment",
        en="For a chunk of L > 1 tokens at start_pos, why is the mask tril(diagonal=start_pos) on an "
           "(L, start_pos + L) grid rather than a plain tril()?",
        zh="对于从 start_pos 开始、长度 L > 1 的块，为什么掩码是 (L, start_pos + L) 网格上的 tril(diagonal=start_pos)，"
           "而不是普通的 tril()？",
        right=("Query i sits at absolute position start_pos + i and must see every cached key up to it; a plain "
               "tril() aligns the diagonal to the top-left and hides most of the cache from the chunk.",
               "query i 位于绝对位置 start_pos + i，必须能看到它之前的全部缓存 key；普通的 tril() 把对角线对齐到左上角，"
               "会让块看不到大部分缓存。"),
        wrong=[("A chunk needs no mask at all: all earlier tokens are in the cache, so nothing in the future is "
                "visible.",
                "块根本不需要掩码：之前的 token 都在缓存里，不会看到未来。"),
               ("tril() would be right, because the mask is relative to the chunk and the cached keys are always "
                "visible anyway.",
                "tril() 就是对的，因为掩码是相对于块而言的，缓存中的 key 本来就总是可见。"),
               ("diagonal=start_pos lets each query also see the next start_pos tokens of its own chunk.",
                "diagonal=start_pos 让每个 query 还能看到本块中之后的 start_pos 个 token。")],
        explain=("The chunk's own keys are written before attention, so without a mask its early queries see its "
                 "later tokens. The grid's columns are absolute positions 0 .. start_pos + L - 1, and shifting the "
                 "diagonal by start_pos keeps exactly j <= start_pos + i.",
                 "块自己的 key 在注意力之前就写进了缓存，没有掩码的话块中靠前的 query 会看到靠后的 token。网格的列是绝对位置 "
                 "0 .. start_pos + L - 1，把对角线平移 start_pos 恰好保留 j <= start_pos + i。"),
        see=Ref("reference", "keep = torch.ones(L, end, dtype=torch.bool, device=x.device).tril(diagonal=start_pos)"),
    ),
    Number(
        "chunk_mask_kept",
        en="After a prefill of 6 tokens, a chunk of 3 tokens arrives at start_pos = 6. How many (query, key) "
           "entries does its causal mask keep?",
        zh="prefill 了 6 个 token 之后，一个 3 个 token 的块在 start_pos = 6 处到来。它的因果掩码保留了多少个"
           "（query, key）元素？",
        answer=lambda: chunk_mask_kept(6, 3),
        unit=("entries", "个"),
        explain=("The mask is 3 × 9: the queries at positions 6, 7, 8 see 7, 8 and 9 keys, 24 in all. A top-left "
                 "tril() would keep only 1 + 2 + 3 = 6, and no mask all 27.",
                 "掩码是 3 × 9 的：位置 6、7、8 的 query 分别看到 7、8、9 个 key，共 24 个。左上角对齐的 tril() 只保留 "
                 "1 + 2 + 3 = 6 个，不加掩码则是全部 27 个。"),
        see=Ref("reference", "# query i sits at position start_pos + i and sees keys 0 .. start_pos + i"),
        proof=lambda ref: _measured_kept(ref, 6, 3),
    ),
    Number(
        "cache_bytes",
        en="RoPECachedAttention(4096, 32) in bfloat16 with init_cache(batch_size=1, max_len=4096): how many bytes "
           "do k_cache and v_cache take together?",
        zh="bfloat16 的 RoPECachedAttention(4096, 32) 调用 init_cache(batch_size=1, max_len=4096) 后，k_cache 和 "
           "v_cache 一共占多少字节？",
        answer=lambda: kv_cache_bytes(1, 32, 4096, 128, 2),
        unit=("bytes", "字节"),
        explain=("2 · 32 heads · 4096 positions · 128 dims · 2 bytes = 64 MiB for one layer. RoPE adds nothing: "
                 "the rotated keys have the same shape and dtype as the raw ones.",
                 "2 · 32 个头 · 4096 个位置 · 128 维 · 2 字节 = 一层 64 MiB。RoPE 不增加任何存储：旋转后的 key 与原始 key "
                 "形状和 dtype 都相同。"),
        see=Ref("reference", "self.k_cache = torch.zeros(batch_size, self.num_heads, max_len, self.head_dim,"),
        proof=lambda ref: _measured_cache_bytes(ref, 4096, 32, 4096),
    ),
    Number(
        "decode_flops",
        en="One decode step of RoPECachedAttention(4096, 32), batch 1: a single token at start_pos = 4095, so it "
           "attends over 4096 cached positions. Count the FLOPs (2 per multiply-add) of qkv_proj, q·kᵀ, "
           "weights @ v and out_proj (ignore the rotation, the softmax and the scaling).",
        zh="RoPECachedAttention(4096, 32) 的一步解码，batch 为 1：单个 token 位于 start_pos = 4095，因此要在 4096 个缓存"
           "位置上做注意力。统计 qkv_proj、q·kᵀ、weights @ v 和 out_proj 的浮点运算次数（每次乘加记 2 次；忽略旋转、"
           "softmax 和缩放）。",
        answer=lambda: decode_step_flops(4096, 4096),
        unit=("FLOPs", "次浮点运算"),
        explain=("The projections cost 8·E² ≈ 134 M and do not depend on the position; the attention over the cache "
                 "costs 4·T·E ≈ 67 M and grows linearly with it, reaching the projections at T = 2E. Each step also "
                 "reads the whole cache, which is why decoding is bound by memory traffic.",
                 "投影的开销是 8·E² ≈ 1.34 亿，与位置无关；在缓存上的注意力开销是 4·T·E ≈ 6700 万，随 T 线性增长，在 T = 2E "
                 "时与投影持平。每一步还要读完整个缓存，所以解码受限于内存访问。"),
        see=Ref("reference", "scores = torch.matmul(q, keys.transpose(-2, -1)) / math.sqrt(D)  # (B, H, L, end)"),
        proof=lambda ref: _measured_decode_flops(ref, 4096, 32, 4096),
    ),
]


def _table(rows, head_dim, theta=10000.0, device=None):
    import torch
    i = torch.arange(0, head_dim, 2, dtype=torch.float64, device=device)
    t = torch.arange(rows, dtype=torch.float64, device=device)
    angles = torch.outer(t, theta ** (-i / head_dim))
    return torch.polar(torch.ones_like(angles), angles)


def _measured_kept(ref, prefill, L):
    """Run the reference (small sizes, float64); count the positive weights of the chunk's softmax per head."""
    import torch
    from torch.overrides import TorchFunctionMode

    seen = []

    class CatchSoftmax(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func is torch.softmax:
                seen.append(out)
            return out

    torch.manual_seed(0)
    m = ref.RoPECachedAttention(8, 2).double().eval()
    m.init_cache(1, prefill + L)
    freqs = _table(prefill + L, 4)
    x = torch.randn(1, prefill + L, 8, dtype=torch.float64)
    with torch.no_grad():
        m(x[:, :prefill], 0, freqs)
        with CatchSoftmax():
            m(x[:, prefill:], prefill, freqs)
    weights = seen[-1]                                   # (1, H, L, prefill + L)
    return int((weights > 0).sum()) // weights.shape[1]


def _measured_cache_bytes(ref, E, H, max_len):
    import torch
    with torch.device("meta"):
        m = ref.RoPECachedAttention(E, H)
    m = m.to(torch.bfloat16)
    m.init_cache(1, max_len, device="meta")
    return sum(t.numel() * t.element_size() for t in (m.k_cache, m.v_cache))


def _measured_decode_flops(ref, E, H, T):
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    with torch.device("meta"):
        m = ref.RoPECachedAttention(E, H)
        x = torch.empty(1, 1, E)
    m.init_cache(1, T, device="meta")
    freqs = _table(T, E // H, device="meta")
    with FlopCounterMode(display=False) as fc, torch.no_grad():
        m(x, T - 1, freqs)
    return fc.get_total_flops()
