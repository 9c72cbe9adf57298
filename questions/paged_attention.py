"""Follow-up questions for `paged_attention` (see attn_drill/bank/quiz.py for the format)."""
from attn_drill.bank.quiz import Choice, Number, Ref


def slot_of_token(block_table, block_size, j):
    """Token j lives in table entry j // block_size, at offset j % block_size; slot = block * block_size + offset."""
    block = block_table[j // block_size]
    return block * block_size + j % block_size


def wasted_slots(context_lens, block_size):
    """Slots allocated to the sequences but not holding a token: the unused end of each last block."""
    ceil_div = lambda n, d: -(-n // d)                                   # noqa: E731 - integer ceil
    return sum(ceil_div(n, block_size) * block_size - n for n in context_lens)


def block_bytes(block_size, layers, kv_heads, head_dim, bytes_per_element):
    """One block of the pool across every layer: keys and values of block_size tokens."""
    return 2 * layers * block_size * kv_heads * head_dim * bytes_per_element


QUESTIONS = [
    Number(
        "slot_of_token",
        en="block_size = 16 and a sequence has the block table [12, 3, 40, 7] (and context_lens = 50). Which slot of "
           "the pool holds its token number 37 (0-based)?",
        zh="block_size = 16，某条序列的 block table 为 [12, 3, 40, 7]（context_lens = 50）。它的第 37 号 token（从 0 数起）"
           "存放在池中的哪个 slot？",
        answer=lambda: slot_of_token([12, 3, 40, 7], 16, 37),
        unit=("(slot index)", "（slot 编号）"),
        explain=("37 // 16 = 2 picks table entry 2, block 40, and 37 % 16 = 5 is the offset in it: slot 40 · 16 + 5 "
                 "= 645. Swapping the division and the modulo (entry 5, offset 2) reads another sequence's data.",
                 "37 // 16 = 2 选中 table 的第 2 项，即 block 40；37 % 16 = 5 是块内偏移：slot 为 40 · 16 + 5 = 645。"
                 "把整除和取模弄反（第 5 项、偏移 2）就会读到别的序列的数据。"),
        see=Ref("reference", "blocks = block_tables[i, pos // block_size].long()"),
        proof=lambda ref: _slot_measured(ref, [12, 3, 40, 7], 16, 37),
    ),
    Number(
        "wasted_slots",
        en="block_size = 16 and four sequences have context_lens [100, 17, 1, 64]. Each gets the blocks it needs and "
           "no more. How many allocated slots hold no token?",
        zh="block_size = 16，四条序列的 context_lens 为 [100, 17, 1, 64]。每条序列只分配它需要的块。已分配的 slot 中有多少个"
           "没有存放 token？",
        answer=lambda: wasted_slots([100, 17, 1, 64], 16),
        unit=("slots", "个 slot"),
        explain=("Only each sequence's last block can be partly empty: 12 + 15 + 15 + 0 = 42 slots, fewer than "
                 "block_size per sequence. A contiguous cache reserving max_len = 2048 per sequence would leave "
                 "4 · 2048 - 182 = 8010 slots empty.",
                 "只有每条序列的最后一个块可能没填满：12 + 15 + 15 + 0 = 42 个 slot，每条序列不到一个 block_size。若连续缓存为"
                 "每条序列预留 max_len = 2048，空着的 slot 有 4 · 2048 - 182 = 8010 个。"),
        see=Ref("statement", "uses its first `ceil(context_lens[i] / block_size)` entries"),
    ),
    Number(
        "block_bytes",
        en="A model has 32 layers, 8 KV heads and head_dim = 128, and caches keys and values in bfloat16. How many "
           "bytes does one block of block_size = 16 tokens hold, keys and values of all layers together?",
        zh="某模型有 32 层、8 个 KV 头、head_dim = 128，key 和 value 以 bfloat16 缓存。一个 block_size = 16 的块，把所有层的 key "
           "和 value 加在一起，占多少字节？",
        answer=lambda: block_bytes(16, 32, 8, 128, 2),
        unit=("bytes", "字节"),
        explain=("2 (K and V) · 32 layers · 16 tokens · 8 heads · 128 dims · 2 bytes = 2 MiB, 128 KiB per token. Paging "
                 "does not shrink a token's bytes; it only stops memory from being reserved for tokens that never come.",
                 "2（K 和 V）· 32 层 · 16 个 token · 8 个头 · 128 维 · 2 字节 = 2 MiB，每个 token 128 KiB。分页并不减少每个 token "
                 "的字节数；它只是不再为永远不会到来的 token 预留显存。"),
        see=Ref("statement", "`key_cache`, `value_cache`: `(num_blocks, block_size, Hkv, D)`, shared by all sequences"),
    ),
    Choice(
        "masked_scores_not_enough",
        en="Why does the reference gather exactly the first context_lens[i] tokens instead of gathering whole blocks "
           "and setting the scores past the context to -inf?",
        zh="为什么参考实现只 gather 前 context_lens[i] 个 token，而不是 gather 整个块再把上下文之外的分数设为 -inf？",
        right=("The unread slots may hold inf or NaN; their weight after the softmax is 0, but 0 · inf and 0 · NaN are "
               "NaN in weights @ V, so the output would be NaN.",
               "没读的 slot 里可能是 inf 或 NaN；softmax 之后它们的权重是 0，但 weights @ V 里的 0 · inf 和 0 · NaN 都是 NaN，"
               "输出就会变成 NaN。"),
        wrong=[("exp(-inf) is only a tiny positive number in float32, so masked slots would still leak a little "
                "weight.",
                "在 float32 里 exp(-inf) 只是一个很小的正数，被掩码的 slot 仍会漏进一点权重。"),
               ("A row whose scores are all -inf would appear for every sequence, and its softmax is NaN.",
                "每条序列都会出现分数全为 -inf 的行，而它的 softmax 是 NaN。"),
               ("Both are equally correct; gathering exactly the tokens is only done to save memory.",
                "两种做法同样正确；只 gather 需要的 token 仅仅是为了省内存。")],
        explain=("exp(-inf) is exactly 0 and every row keeps at least the new token, so the softmax itself is fine; "
                 "the danger is the values. Gathering only valid tokens, or replacing the invalid values with "
                 "torch.where, keeps poison out of the matmul.",
                 "exp(-inf) 恰好是 0，而且每一行至少保留新 token，所以 softmax 本身没有问题；危险在 value。只 gather 有效的 "
                 "token，或者用 torch.where 替换无效的 value，才能让脏数据进不了矩阵乘法。"),
        see=Ref("reference", "k = key_cache[blocks, offsets]"),
    ),
    Choice(
        "why_paging",
        en="What problem does the paged pool solve compared with giving each sequence one contiguous cache of "
           "max_len tokens?",
        zh="与给每条序列分配一段连续的、长度为 max_len 的缓存相比，分页的池解决了什么问题？",
        right=("A contiguous cache must be reserved for the longest possible sequence up front; blocks are handed out as "
               "a sequence grows and returned when it ends, so at most one partly filled block per sequence is wasted "
               "and many more sequences fit in the batch.",
               "连续缓存必须预先按最长可能的序列预留；块则随序列增长逐个分配、序列结束时归还，每条序列最多浪费一个没填满的块，"
               "一个 batch 能容纳多得多的序列。"),
        wrong=[("It stores fewer bytes per token, because a block shares one copy of the keys among its tokens.",
                "每个 token 占的字节更少，因为一个块里的 token 共享一份 key。"),
               ("It reduces the FLOPs of attention, because each block is attended to separately.",
                "它减少了注意力的 FLOPs，因为每个块是分别做注意力的。"),
               ("It is needed for correctness: GPU kernels cannot index a tensor longer than block_size tokens.",
                "这是正确性所必需的：GPU kernel 不能索引长于 block_size 个 token 的张量。")],
        explain=("The bytes and FLOPs per token are unchanged; what changes is fragmentation: memory follows the "
                 "tokens that exist, not those that might. The same indirection also lets two sequences share the "
                 "blocks of a common prefix.",
                 "每个 token 的字节数和 FLOPs 都不变；变的是碎片：显存跟着已经存在的 token 走，而不是可能出现的 token。同样的"
                 "间接寻址还能让两条序列共享公共前缀的块。"),
        see=Ref("statement", "like pages of virtual memory"),
    ),
]


def _slot_measured(ref, table, block_size, j):
    """Fill the value pool with each slot's own index and attend with all-zero queries and keys: the weights are
    uniform, so (j + 1) · out(context j + 1) - j · out(context j) is the value of token j, its slot."""
    import torch

    num_blocks, Hkv, D = max(table) + 1, 1, 1
    key_cache = torch.zeros(num_blocks, block_size, Hkv, D, dtype=torch.float64)
    value_cache = torch.arange(num_blocks * block_size, dtype=torch.float64).view(num_blocks, block_size, Hkv, D)
    tables = torch.tensor([table, table], dtype=torch.int32)
    lens = torch.tensor([j + 1, j], dtype=torch.int32)
    query = torch.zeros(2, 1, D, dtype=torch.float64)
    out = ref.paged_attention(query, key_cache, value_cache, tables, lens)           # (2, 1, 1)
    return float((j + 1) * out[0, 0, 0] - j * out[1, 0, 0])
