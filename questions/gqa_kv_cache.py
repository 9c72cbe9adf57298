"""Follow-up questions for `gqa_kv_cache` (see attn_drill/bank/quiz.py for the format)."""
from attn_drill.bank.quiz import Choice, Number, Ref

GiB = 2 ** 30


def cache_bytes(batch_size, num_kv_heads, max_len, head_dim, bytes_per_element):
    """k_cache and v_cache of one layer, each (batch_size, num_kv_heads, max_len, head_dim)."""
    return 2 * batch_size * num_kv_heads * max_len * head_dim * bytes_per_element


def sequences_that_fit(budget_bytes, num_layers, num_kv_heads, seq_len, head_dim, bytes_per_element):
    """Whole sequences of seq_len tokens whose caches (every layer) fit in the budget."""
    per_sequence = num_layers * cache_bytes(1, num_kv_heads, seq_len, head_dim, bytes_per_element)
    return budget_bytes // per_sequence


def decode_flops_per_cache_byte(num_query_heads, num_kv_heads, cached, head_dim, bytes_per_element):
    """One decode step (one query per head): QKᵀ and weights @ V cost 2 · 2·Hq·T·D FLOPs; the step reads
    the cached K and V, 2·Hkv·T·D elements."""
    flops = 2 * (2 * num_query_heads * cached * head_dim)
    read = 2 * num_kv_heads * cached * head_dim * bytes_per_element
    return flops / read


QUESTIONS = [
    Number(
        "cache_bytes",
        en="init_cache(batch_size=4, max_len=8192) on a layer with hidden_dim = 4096, 32 query heads and 8 KV "
           "heads, weights in bfloat16: how many bytes do k_cache and v_cache take together?",
        zh="在 hidden_dim = 4096、32 个 query 头、8 个 KV 头、权重为 bfloat16 的层上调用 "
           "init_cache(batch_size=4, max_len=8192)：k_cache 和 v_cache 一共占多少字节？",
        answer=lambda: cache_bytes(4, 8, 8192, 4096 // 32, 2),
        unit=("bytes", "字节"),
        explain=("2 · B · Hkv · max_len · head_dim · 2 bytes = 128 MiB for this one layer, a quarter of what one "
                 "entry per query head would take (512 MiB). The whole max_len is allocated up front, whether "
                 "or not the sequence gets that long.",
                 "2 · B · Hkv · max_len · head_dim · 2 字节，这一层就是 128 MiB，是每个 query 头各存一份（512 MiB）的"
                 "四分之一。整个 max_len 在一开始就分配好，不管序列最终有没有那么长。"),
        see=Ref("reference", "self.k_cache = torch.zeros(batch_size, self.num_kv_heads, max_len, self.head_dim,"),
        proof=lambda ref: _measured_cache_bytes(ref, 4096, 32, 8, 4, 8192),
    ),
    Number(
        "sequences_in_budget",
        en="A 32-layer model, every layer as in the previous question (hidden_dim 4096, 32 query heads, 8 KV "
           "heads, bfloat16), has 40 GiB left for its KV cache. How many sequences of 8192 tokens fit?",
        zh="一个 32 层的模型，每层都与上一题相同（hidden_dim 4096，32 个 query 头，8 个 KV 头，bfloat16），还剩 "
           "40 GiB 可用于 KV cache。能放下多少条 8192 个 token 的序列？",
        answer=lambda: sequences_that_fit(40 * GiB, 32, 8, 8192, 128, 2),
        unit=("sequences", "条序列"),
        explain=("One sequence needs 32 · 2 · 8 · 8192 · 128 · 2 bytes = 1 GiB, so 40 fit; with one KV entry per "
                 "query head (multi-head attention) it would be 4 GiB each and only 10. A larger batch is where "
                 "GQA's memory saving turns into throughput.",
                 "一条序列需要 32 · 2 · 8 · 8192 · 128 · 2 字节 = 1 GiB，所以能放 40 条；若每个 query 头各存一份（多头"
                 "注意力），每条要 4 GiB，只能放 10 条。GQA 省下的显存正是通过更大的 batch 变成吞吐量的。"),
        see=Ref("statement", "The cache is `n_rep` times smaller than one per query head"),
        proof=lambda ref: 40 * GiB // (32 * _measured_cache_bytes(ref, 4096, 32, 8, 1, 8192)),
    ),
    Number(
        "decode_intensity",
        en="One decode step (L = 1) of this layer attends over 4096 cached positions, with 32 query heads, 8 KV "
           "heads, head_dim 128 and a bfloat16 cache. How many FLOPs of QKᵀ and weights @ V (2 per "
           "multiply-add) does it do per byte of K and V it reads from the cache?",
        zh="该层的一个 decode 步（L = 1）要关注缓存中的 4096 个位置，32 个 query 头，8 个 KV 头，head_dim 为 128，"
           "缓存为 bfloat16。它从缓存中每读取 1 字节的 K 和 V，做多少次 QKᵀ 和 weights @ V 的浮点运算（每次乘加记 2 次）？",
        answer=lambda: decode_flops_per_cache_byte(32, 8, 4096, 128, 2),
        unit=("FLOPs per byte", "次浮点运算 / 字节"),
        explain=("FLOPs 4·Hq·T·D over bytes 4·Hkv·T·D: exactly n_rep = 4, and 1 for multi-head attention. A GPU "
                 "does hundreds of FLOPs in the time it reads one byte, so decode attention is bound by memory "
                 "traffic, and cutting the bytes read is what makes it faster.",
                 "FLOPs 为 4·Hq·T·D，字节数为 4·Hkv·T·D：恰好是 n_rep = 4，多头注意力则是 1。GPU 读取一个字节的时间里"
                 "能做几百次浮点运算，所以 decode 阶段的注意力受限于显存带宽，减少读取的字节数才能让它更快。"),
        see=Ref("reference", "keys = self.k_cache[:, :, :end].repeat_interleave(n_rep, dim=1)"),
        proof=lambda ref: _measured_decode_intensity(ref, 32, 8, 128, 4096),
    ),
    Choice(
        "cache_repeated_heads",
        en="A candidate repeats K and V to num_query_heads before writing them into the cache, then attends "
           "without any broadcast. What is the consequence?",
        zh="候选人在写入缓存之前就把 K、V 复制到 num_query_heads 份，之后做注意力时不再广播。后果是什么？",
        right=("The outputs are identical, but the cache and the bytes read at every decode step grow by n_rep: "
               "exactly the cost GQA exists to cut.",
               "输出完全相同，但缓存以及每个 decode 步读取的字节数都变成 n_rep 倍：这正是 GQA 要削减的开销。"),
        wrong=[("It is the better design: the repeat runs once per token instead of at every step, and the "
                "memory is the same because the copies are views.",
                "这是更好的设计：复制每个 token 只做一次，而不是每一步都做；显存也一样，因为副本只是视图。"),
               ("The outputs drift: the n_rep copies of a KV head are updated separately at each step and stop "
                "agreeing.",
                "输出会漂移：一个 KV 头的 n_rep 份副本每一步分别更新，逐渐不再一致。"),
               ("The causal mask breaks, because the mask is built for num_kv_heads heads and the cache now has "
                "more.",
                "因果掩码会失效，因为掩码是按 num_kv_heads 个头构造的，而缓存里现在有更多头。")],
        explain=("Writing a copy into a buffer materialises it, so the saving is lost for the whole life of the "
                 "cache. The repeat at attention time is a temporary that fused kernels avoid altogether; the "
                 "grader checks the cache shape (B, num_kv_heads, max_len, head_dim) for this reason.",
                 "把副本写进缓冲区就是真正分配了它，整个缓存的生命周期里都失去了节省。注意力时的复制只是临时张量，"
                 "融合 kernel 甚至完全不需要它；评测正因此检查缓存形状 (B, num_kv_heads, max_len, head_dim)。"),
        see=Ref("reference", "self.k_cache[:, :, start_pos:end] = k"),
    ),
]


def _measured_cache_bytes(ref, E, Hq, Hkv, batch, max_len):
    """Bytes of the reference's own k_cache and v_cache, built on the meta device in bfloat16."""
    import torch

    with torch.device("meta"):
        m = ref.GQAWithCache(E, Hq, Hkv, dropout=0.0).to(torch.bfloat16)
    m.init_cache(batch, max_len, "meta")
    return sum(t.numel() * t.element_size() for t in (m.k_cache, m.v_cache))


def _measured_decode_intensity(ref, Hq, Hkv, D, cached):
    """The reference's decode step on the meta device: the FLOPs of its batched matmuls (the attention core;
    the projections are plain mm) over the bytes of the cache slice it attends over."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    E = Hq * D
    with torch.device("meta"):
        m = ref.GQAWithCache(E, Hq, Hkv, dropout=0.0).to(torch.bfloat16).eval()
        x = torch.empty(1, 1, E, dtype=torch.bfloat16)
    m.init_cache(1, cached, "meta")
    with FlopCounterMode(display=False) as fc:
        m(x, cached - 1)
    core = sum(n for op, n in fc.get_flop_counts()["Global"].items() if "bmm" in str(op))
    read = sum(t[:, :, :cached].numel() * t.element_size() for t in (m.k_cache, m.v_cache))
    return core / read
