"""Follow-up questions for `native_sparse_attention` (see attn_drill/quiz.py for the format)."""
from attn_drill.bank.quiz import Choice, Number, Ref


def selected_tokens(t, block_size, block_count):
    """Tokens the selection branch reads for query t when it has at least block_count blocks to choose
    from: block_count - 1 whole blocks in the past and its own block up to t."""
    return (block_count - 1) * block_size + t % block_size + 1


def compressed_keys_seen(t, block_size):
    """Compressed block c is seen iff (c + 1) * block_size - 1 <= t."""
    return (t + 1) // block_size


def keys_per_query(T, block_size, block_count, window):
    """At the last query of a long sequence: every compressed key, block_count whole blocks, the window."""
    return T // block_size + block_count * block_size + window


QUESTIONS = [
    Number(
        "selected_tokens",
        en="block_size = 4 and block_count = 4. How many tokens does the selection branch of query t = 21 attend "
           "to (T = 24)?",
        zh="block_size = 4，block_count = 4。query t = 21 的选择分支关注多少个 token（T = 24）？",
        answer=lambda: selected_tokens(21, 4, 4),
        unit=("tokens", "个 token"),
        explain=("Block 0, the chosen candidate and block 4 give 3 · 4 = 12 tokens; the query's own block 5 holds "
                 "tokens 20-23, of which only 20 and 21 are not in its future: 14 in all. Without the causal mask "
                 "inside the own block it would be 16, two of them future tokens.",
                 "块 0、选中的候选块和块 4 共 3 · 4 = 12 个 token；query 自己所在的块 5 包含 token 20-23，其中只有 20 "
                 "和 21 不在它的未来：一共 14 个。如果在自己的块里不加因果掩码，就会是 16 个，其中两个是未来的 token。"),
        see=Ref("statement", "Its selection branch then attends"),
        proof=lambda ref: _selected_measured(ref, 24, 21, 4, 4),
    ),
    Number(
        "compressed_keys_seen",
        en="block_size = 64. How many compressed keys does the query at position t = 1000 see?",
        zh="block_size = 64。位置 t = 1000 上的 query 能看到多少个压缩 key？",
        answer=lambda: compressed_keys_seen(1000, 64),
        unit=("compressed keys", "个压缩 key"),
        explain=("Block c is seen once complete, (c + 1) · 64 - 1 <= 1000, so c <= 14: blocks 0-14, 15 keys. Block "
                 "15 (tokens 960-1023) is not complete; its mean would carry 23 future tokens.",
                 "块 c 完整之后才能被看到，即 (c + 1) · 64 - 1 <= 1000，所以 c <= 14：块 0-14，共 15 个 key。块 15"
                 "（token 960-1023）还不完整；它的均值里会含有 23 个未来的 token。"),
        see=Ref("reference", "visible = ends[None, :] <= t[:, None]"),
        proof=lambda ref: _compressed_measured(ref, 1001, 64),
    ),
    Number(
        "keys_per_query",
        en="block_size = 64, block_count = 16 and window = 512, at T = 65536. The last query reads every compressed "
           "key, 16 whole blocks and the window. How many keys is that in all (count a token again for each branch "
           "that reads it)?",
        zh="block_size = 64，block_count = 16，window = 512，T = 65536。最后一个 query 读取所有压缩 key、16 个完整的块"
           "以及窗口。加起来一共是多少个 key（一个 token 被几个分支读取就算几次）？",
        answer=lambda: keys_per_query(65536, 64, 16, 512),
        unit=("keys", "个 key"),
        explain=("1024 compressed keys + 16 · 64 = 1024 selected tokens + 512 in the window = 2560, under 4% of "
                 "the 65536 keys dense attention reads. The compressed branch still grows as T / 64; the other "
                 "two are fixed.",
                 "1024 个压缩 key + 16 · 64 = 1024 个被选 token + 窗口里的 512 个 = 2560，不到稠密注意力所读 65536 个 "
                 "key 的 4%。压缩分支仍随 T / 64 增长；另外两个分支的大小是固定的。"),
        see=Ref("statement", "one summary key per block"),
    ),
    Choice(
        "why_group_selection",
        en="Why is one selection made per KV group (the sum of its heads' scores) rather than one per query head?",
        zh="为什么每个 KV 组只做一次选择（用组内各头分数之和），而不是每个 query 头各选一次？",
        right=("A kernel loads the selected blocks of a KV head once and serves every query head of its group from "
               "them; separate choices per head would have to load the union of their blocks, which undoes the "
               "saving in memory traffic that decoding is bound by.",
               "kernel 对一个 KV 头只加载一次被选中的块，并用它们服务组内所有 query 头；若每个头各自选择，就得加载它们所选"
               "块的并集，这抵消了解码时最受限制的访存节省。"),
        wrong=[("The heads of a group share their query projection, so their scores are equal anyway.",
                "同一组的各个头共用 query 投影，所以它们的分数本来就相同。"),
               ("Without it the selection branch would not be causal.",
                "不这样做，选择分支就不是因果的了。"),
               ("A softmax over the heads of a group requires them to attend to the same keys.",
                "在组内各头之间做 softmax，要求它们关注同样的 key。")],
        explain=("The query heads of a group have different queries and different compressed weights; summing them "
                 "picks the blocks that matter to the group as a whole. Causality comes from the masks, not from "
                 "the grouping.",
                 "同一组的 query 头有不同的 query、不同的压缩权重；把它们相加，选出的是对整个组最重要的块。因果性来自掩码，"
                 "与分组无关。"),
        see=Ref("reference", "score = probs.view(B, T, Hkv, group, probs.shape[-1]).sum(dim=3)"),
    ),
    Choice(
        "why_forced_blocks",
        en="Why is the query's own block always selected instead of competing by its score?",
        zh="为什么 query 自己所在的块总是被选中，而不是按分数竞争？",
        right=("It has no complete compressed key yet (its mean would include future tokens), so it cannot be "
               "scored; yet it holds the nearest tokens and the query itself, so the selection branch always has a "
               "key to attend to.",
               "它还没有完整的压缩 key（其均值会包含未来的 token），所以无法打分；但它包含最近的 token 以及 query 本身，"
               "保证选择分支总有可以关注的 key。"),
        wrong=[("The window branch does not cover the nearest tokens, so the selection branch must.",
                "窗口分支不覆盖最近的 token，所以必须由选择分支覆盖。"),
               ("torch.topk cannot return two adjacent block indices.",
                "torch.topk 不能返回两个相邻的块下标。"),
               ("Forcing it makes the output independent of the compressed scores.",
                "强制选中它能让输出与压缩分数无关。")],
        explain=("The window covers the latest tokens too; the forced blocks make sure the selection branch is never "
                 "empty and never waits for a block to be complete. The other slots still depend on the scores.",
                 "窗口同样覆盖最近的 token；强制块保证选择分支永远不为空，也不必等块完整。其余名额仍由分数决定。"),
        see=Ref("reference", "forced = (j == 0) | (j == own) | (j == own - 1)"),
    ),
]


def _selected_measured(ref, T, t, block_size, block_count):
    """Count the tokens s <= t of the blocks select_blocks picks for query t (one KV group)."""
    import torch

    gen = torch.Generator().manual_seed(0)
    q = torch.randn(1, T, 2, 8, generator=gen, dtype=torch.float64)
    k = torch.randn(1, T, 1, 8, generator=gen, dtype=torch.float64)
    selected = ref.select_blocks(q, k, block_size, block_count)                      # (1, T, 1, NB)
    tokens = selected[0, t, 0].repeat_interleave(block_size)[:T]                      # (T,)
    return int(tokens[: t + 1].sum())


def _compressed_measured(ref, T, block_size):
    """The number of compressed keys with weight at the last query."""
    import torch

    gen = torch.Generator().manual_seed(0)
    q = torch.randn(1, T, 1, 4, generator=gen, dtype=torch.float64)
    k = torch.randn(1, T, 1, 4, generator=gen, dtype=torch.float64)
    probs = ref._compressed_probs(q, k, block_size, 0.5)                              # (1, T, 1, NC)
    return int((probs[0, -1, 0] > 0).sum())
