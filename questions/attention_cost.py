"""Follow-up questions for `attention_cost` (see attn_drill/bank/quiz.py for the format)."""
from attn_drill.bank.quiz import Choice, Number, Ref


def attention_flops(B, H, Lq, Lk, D):
    """Q Kᵀ and P V, 2 FLOPs per multiply-add: 2·B·H·Lq·Lk·D each."""
    return 2 * B * H * Lq * Lk * D + 2 * B * H * Lq * Lk * D


def training_flops(B, H, L, D):
    """Forward plus backward: the backward runs four matmuls of the forward's size (dQ, dK, dP, dV)."""
    forward = attention_flops(B, H, L, L, D)
    backward = 2 * forward
    return forward + backward


def score_bytes(B, H, Lq, Lk, bytes_per_elem):
    """The scores S and the probabilities P, each (B, H, Lq, Lk)."""
    return 2 * B * H * Lq * Lk * bytes_per_elem


QUESTIONS = [
    Choice(
        "flash_saves",
        en="FlashAttention computes exactly the same softmax(scale · Q Kᵀ) V. Which of the two numbers this "
           "function returns does it change, and why?",
        zh="FlashAttention 计算的仍是同一个 softmax(scale · Q Kᵀ) V。本函数返回的两个数中，它改变的是哪一个？为什么？",
        right=("Only the memory: it runs the same two matmuls block by block but never stores S or P, so the "
               "L² term of memory_bytes disappears while the FLOPs stay 4·B·H·L·Lk·D.",
               "只改变显存：它按块执行同样的两次矩阵乘法，但从不保存 S 和 P，所以 memory_bytes 中的 L² 项消失了，"
               "而 FLOPs 仍是 4·B·H·L·Lk·D。"),
        wrong=[("Only the FLOPs: it skips the softmax, which costs more than the two matmuls.",
                "只改变 FLOPs：它省掉了 softmax，而 softmax 比两次矩阵乘法更贵。"),
               ("Both: it approximates Q Kᵀ by a low-rank product, so FLOPs and memory become linear in L.",
                "两者都改变：它用低秩乘积近似 Q Kᵀ，所以 FLOPs 和显存都变成 L 的线性函数。"),
               ("Both: Q Kᵀ is symmetric, so computing only its upper triangle halves the FLOPs and the memory.",
                "两者都改变：Q Kᵀ 是对称的，只算上三角就能把 FLOPs 和显存都减半。")],
        explain=("FlashAttention is exact: the online softmax lets it discard each block of scores once it is used. "
                 "Its speed comes from moving far fewer bytes to and from HBM, not from fewer FLOPs (its backward "
                 "even recomputes S). Q Kᵀ is not symmetric, since Q and K come from different projections.",
                 "FlashAttention 是精确算法：在线 softmax 让每块分数用完即可丢弃。它的提速来自与 HBM 之间搬运的字节大幅减少，"
                 "而不是 FLOPs 减少（它的反向传播甚至要重算 S）。Q Kᵀ 也不对称，因为 Q 和 K 来自不同的投影。"),
        see=Ref("reference", "memory_bytes = 2 * score_elems * bytes_per_elem"),
    ),
    Choice(
        "decode_bound",
        en="In decoding with a KV cache each step has Lq = 1 and Lk = T. Why is attention then limited by memory "
           "bandwidth rather than by compute?",
        zh="使用 KV cache 解码时，每一步 Lq = 1、Lk = T。为什么这时注意力受限于显存带宽而不是算力？",
        right=("The step does 4·B·H·T·D FLOPs but must read 2·B·H·T·D cached elements, about one FLOP per byte in "
               "fp16, far below what a GPU can compute per byte it loads.",
               "这一步做 4·B·H·T·D 次 FLOP，却要读取 2·B·H·T·D 个缓存元素，fp16 下大约每字节 1 次 FLOP，远低于 GPU "
               "每读入一字节所能完成的计算量。"),
        wrong=[("The softmax over T keys costs more than the two matmuls.",
                "对 T 个 key 做 softmax 比两次矩阵乘法更贵。"),
               ("The full (T, T) score matrix is rebuilt at every step.",
                "每一步都要重新生成完整的 (T, T) 分数矩阵。"),
               ("A matmul with a single row cannot run on tensor cores, so its FLOPs are not counted.",
                "只有一行的矩阵乘法不能用 tensor core，所以它的 FLOPs 不算数。")],
        explain=("With one query, every cached key and value is used for just one multiply-add per element, so "
                 "the time is the time to stream K and V from memory. The scores of a step are only (B, H, 1, T); "
                 "batching more sequences or queries per step is what raises the FLOPs per byte.",
                 "只有一个 query 时，每个缓存的 key 和 value 元素只参与一次乘加，所以耗时就是从显存读出 K 和 V 的时间。"
                 "一步的分数只有 (B, H, 1, T)；要提高每字节的 FLOPs，就得在一步里批处理更多序列或更多 query。"),
        see=Ref("statement", "The optional `Lk`, for cross-attention and KV caches, is new here."),
    ),
    Number(
        "decode_step_flops",
        en="One decoding step with a KV cache: a single new query attends to 4096 cached keys (the new one "
           "included). B = 1, 32 heads, head dim 128. How many FLOPs (2 per multiply-add, Q Kᵀ and P V only) "
           "does this step's attention take in one layer?",
        zh="使用 KV cache 的一个解码步：一个新 query 关注 4096 个缓存的 key（包括新的那个）。B = 1，32 个头，头维度 128。"
           "这一步在一层中的注意力需要多少 FLOPs（每次乘加计 2，只算 Q Kᵀ 和 P V）？",
        answer=lambda: attention_flops(1, 32, 1, 4096, 128),
        unit=("FLOPs", "次浮点运算"),
        explain=("4 · B · H · Lq · Lk · D = 4 · 32 · 4096 · 128 ≈ 6.7e7: linear in the context length, not "
                 "quadratic, because there is one query. Using L² here (as if Lk = Lq = 4096) would overcount by "
                 "a factor of 4096.",
                 "4 · B · H · Lq · Lk · D = 4 · 32 · 4096 · 128 ≈ 6.7e7：因为只有一个 query，它与上下文长度成线性而不是"
                 "平方关系。这里若用 L²（当作 Lk = Lq = 4096），会多算 4096 倍。"),
        see=Ref("reference", "qk_flops = 2 * B * H * L * Lk * D"),
        proof=lambda ref: _measured_flops(1, 32, 1, 4096, 128, backward=False),
    ),
    Number(
        "training_flops",
        en="Forward plus backward of the attention core (Q Kᵀ and P V, 2 FLOPs per multiply-add; the softmax "
           "counts 0) for B = 8, 96 heads, L = 2048, head dim 128: how many FLOPs?",
        zh="注意力核心部分（Q Kᵀ 和 P V，每次乘加计 2；softmax 计 0）的前向加反向：B = 8，96 个头，L = 2048，头维度 128，"
           "共多少 FLOPs？",
        answer=lambda: training_flops(8, 96, 2048, 128),
        unit=("FLOPs", "次浮点运算"),
        rel_tol=0.01,
        explain=("Each forward matmul has two gradient matmuls of the same size (dQ and dK for S = Q Kᵀ, dP and dV "
                 "for O = P V), so the backward costs twice the forward and the total is 3 × 1.65e12 ≈ 4.95e12. "
                 "A FlashAttention backward adds one more Q Kᵀ to recompute S.",
                 "每个前向矩阵乘法都对应两个同样大小的梯度矩阵乘法（S = Q Kᵀ 对应 dQ 和 dK，O = P V 对应 dP 和 dV），所以"
                 "反向是前向的两倍，总计 3 × 1.65e12 ≈ 4.95e12。FlashAttention 的反向还要多做一次 Q Kᵀ 来重算 S。"),
        see=Ref("reference", "pv_flops = 2 * B * H * L * Lk * D"),
        proof=lambda ref: _measured_flops(8, 96, 2048, 2048, 128, backward=True),
    ),
    Number(
        "cross_memory",
        en="A cross-attention layer: 512 decoder queries, 1024 encoder keys, B = 16, 16 heads, float32. How many "
           "bytes do the scores S and the probabilities P take together?",
        zh="一个交叉注意力层：512 个 decoder query，1024 个 encoder key，B = 16，16 个头，float32。分数 S 和概率 P "
           "一共占多少字节？",
        answer=lambda: score_bytes(16, 16, 512, 1024, 4),
        unit=("bytes", "字节"),
        explain=("2 · B · H · Lq · Lk · 4 bytes = 2^30, exactly 1 GiB. The matrices are Lq × Lk, so squaring "
                 "either length (2^29 or 2^31 bytes) is wrong; the head dim plays no part.",
                 "2 · B · H · Lq · Lk · 4 字节 = 2^30，正好 1 GiB。矩阵是 Lq × Lk，把任一长度平方（得到 2^29 或 2^31 字节）"
                 "都是错的；头维度与此无关。"),
        see=Ref("reference", "score_elems = B * H * L * Lk"),
        proof=lambda ref: _measured_score_bytes(16, 16, 512, 1024, 64),
    ),
]


def _measured_flops(B, H, Lq, Lk, D, backward):
    """FlopCounterMode over a plain matmul attention on the meta device (no memory, any size)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    with torch.device("meta"):
        q = torch.empty(B, H, Lq, D, requires_grad=backward)
        k = torch.empty(B, H, Lk, D, requires_grad=backward)
        v = torch.empty(B, H, Lk, D, requires_grad=backward)
    with FlopCounterMode(display=False) as counter:
        s = torch.matmul(q * D ** -0.5, k.transpose(-2, -1))     # (B, H, Lq, Lk)
        o = torch.matmul(torch.softmax(s, dim=-1), v)            # (B, H, Lq, D)
        if backward:
            o.sum().backward()
    return counter.get_total_flops()


def _measured_score_bytes(B, H, Lq, Lk, D):
    """Bytes of the ops' outputs that have the score shape (B, H, Lq, Lk), in float32 on the meta device."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class ScoreBytes(TorchDispatchMode):
        total = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            is_view = any(r.alias_info is not None for r in func._schema.returns)   # expand, view: no new bytes
            if isinstance(out, torch.Tensor) and tuple(out.shape) == (B, H, Lq, Lk) and not is_view:
                ScoreBytes.total += out.numel() * out.element_size()
            return out

    with torch.device("meta"):
        q, k, v = torch.empty(B, H, Lq, D), torch.empty(B, H, Lk, D), torch.empty(B, H, Lk, D)
    with ScoreBytes():
        s = torch.matmul(q * D ** -0.5, k.transpose(-2, -1))     # S
        p = torch.softmax(s, dim=-1)                             # P
        torch.matmul(p, v)
    return ScoreBytes.total
