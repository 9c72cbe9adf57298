"""Follow-up questions for `causal` (see attn_drill/bank/quiz.py for the format)."""
from attn_drill.bank.quiz import Choice, Number, Ref


def kept_entries(L):
    """Entries [i, j] with j <= i in an (L, L) causal mask: the lower triangle with its diagonal."""
    return L * (L + 1) // 2


def tiles_computed(L, tile):
    """Tiles of a (L, L) score matrix that hold at least one kept entry: n(n + 1) / 2 for n tiles a side."""
    n = -(-L // tile)
    return n * (n + 1) // 2


QUESTIONS = [
    Choice(
        "parallel_training",
        en="What does the causal mask buy during training, compared with running the model one token at a time?",
        zh="与逐个 token 运行模型相比，因果掩码在训练时带来了什么？",
        right=("One forward pass yields a next-token prediction at every position, each computed only from the "
               "tokens it would see during generation, so all L losses are trained in parallel.",
               "一次前向就在每个位置上给出下一个 token 的预测，而每个预测只用到生成时它能看到的 token，所以 L 个损失可以"
               "并行训练。"),
        wrong=[("It halves the FLOPs of attention, since the masked half of the scores is never computed.",
                "它让注意力的 FLOPs 减半，因为被屏蔽的那一半分数根本不会计算。"),
               ("It lets position i look at token i + 1, the target it has to predict.",
                "它让位置 i 能看到 token i + 1，也就是它要预测的目标。"),
               ("It stops gradients from flowing between positions, which keeps training stable.",
                "它阻止梯度在位置之间流动，从而让训练更稳定。")],
        explain=("Without the mask, position i could copy token i + 1 and the loss would teach nothing. This "
                 "module still computes the full L × L scores and then discards the upper triangle; only tiled "
                 "kernels skip those blocks. Gradients do flow from later positions into earlier tokens' keys "
                 "and values.",
                 "没有掩码时，位置 i 可以直接抄 token i + 1，损失就学不到任何东西。这个模块仍然算出完整的 L × L 分数，"
                 "再丢掉上三角；只有分块的 kernel 才会跳过那些块。梯度也确实会从后面的位置流回前面 token 的 key 和 value。"),
        see=Ref("reference", "return torch.tril(ones)"),
    ),
    Choice(
        "left_padding",
        en="The statement pads on the right. What goes wrong with this module if a batch is padded on the left "
           "instead?",
        zh="题目中填充在右侧。如果一个 batch 改为在左侧填充，这个模块会出什么问题？",
        right=("The query at padded position 0 may only see key 0, which is padding, so its whole row is -inf and "
               "the softmax gives NaN, which can spread into the gradients.",
               "填充位置 0 的 query 只能看到 key 0，而它正是填充，于是整行都是 -inf，softmax 得到 NaN，并可能传播到梯度中。"),
        wrong=[("Nothing: the causal mask and the padding mask act on different axes, so they never interact.",
                "没有问题：因果掩码和 padding 掩码作用在不同的维度上，两者互不影响。"),
               ("The outputs stay finite but are shifted by the pad length, which the loss corrects for.",
                "输出仍然有限，只是整体平移了填充的长度，损失会对此加以修正。"),
               ("The real tokens can then see the padding, because the padding is in their past.",
                "真实 token 会看到填充，因为填充位于它们的过去。")],
        explain=("Both masks act on the same key axis and combine: with left padding the first queries have no "
                 "allowed key at all. Real tokens are still fine, since the padding mask hides the padded keys "
                 "from them; decoders that use left padding must guard the fully masked rows (e.g. SDPA returns 0 "
                 "for them).",
                 "两个掩码作用在同一个 key 维上并叠加：左侧填充时，最前面的 query 一个可用的 key 都没有。真实 token 仍然"
                 "没问题，因为 padding 掩码对它们隐藏了填充的 key；使用左侧填充的 decoder 必须处理整行被屏蔽的情况"
                 "（例如 SDPA 对这样的行返回 0）。"),
        see=Ref("statement", "Padding is on the right, so every query keeps at least key 0."),
    ),
    Choice(
        "decode_mask",
        en="At generation time with a KV cache, one new query at position T − 1 attends to the T cached keys. "
           "What mask does this step need?",
        zh="生成时使用 KV cache，位置 T − 1 的一个新 query 关注 T 个缓存的 key。这一步需要什么掩码？",
        right=("None: every cached key is at a position ≤ T − 1. A mask is needed again only when several new "
               "queries are processed at once.",
               "不需要：每个缓存的 key 的位置都 ≤ T − 1。只有一次处理多个新 query 时才又需要掩码。"),
        wrong=[("The full causal mask over the T positions; without it the query would see keys of later "
                "positions in the cache.",
                "覆盖 T 个位置的完整因果掩码；否则这个 query 会看到缓存中更靠后位置的 key。"),
               ("torch.tril(torch.ones(1, T)), so that the query keeps the same triangle as in training.",
                "torch.tril(torch.ones(1, T))，让这个 query 保持与训练时相同的三角形。"),
               ("A mask hiding the key of the new token itself, since a token must not attend to itself.",
                "一个屏蔽新 token 自身 key 的掩码，因为 token 不能关注自己。")],
        explain=("The future does not exist yet, so nothing has to be hidden. tril(ones(1, T)) would keep only "
                 "key 0, a top-left alignment that is wrong whenever Lq < Lk; a chunk of ℓ new queries needs the "
                 "bottom-right triangle tril(ones(ℓ, T), diagonal=T − ℓ). The diagonal is always kept.",
                 "未来还不存在，所以没有什么需要屏蔽。tril(ones(1, T)) 只会保留 key 0，这是左上对齐，在 Lq < Lk 时是错的；"
                 "一次处理 ℓ 个新 query 需要右下对齐的三角 tril(ones(ℓ, T), diagonal=T − ℓ)。对角线总是保留的。"),
        see=Ref("reference", "causal_mask = generate_causal_mask(L, x.device)"),
    ),
    Number(
        "kept_entries",
        en="For seq_len = 2048, how many entries of the causal mask are 1 (kept)?",
        zh="seq_len = 2048 时，因果掩码中有多少个元素为 1（保留）？",
        answer=lambda: kept_entries(2048),
        unit=("entries", "个元素"),
        explain=("Row i keeps keys 0..i, i + 1 of them, so the total is L(L + 1)/2 = 2,098,176, a little over half "
                 "of L². Forgetting the diagonal (L(L − 1)/2) leaves the first row empty.",
                 "第 i 行保留 key 0..i，共 i + 1 个，所以总数是 L(L + 1)/2 = 2,098,176，比 L² 的一半稍多。漏掉对角线"
                 "（L(L − 1)/2）会让第一行一个 key 都没有。"),
        see=Ref("reference", "ones = torch.ones(seq_len, seq_len, device=device)"),
        proof=lambda ref: int(ref.generate_causal_mask(2048, "cpu").count_nonzero()),
    ),
    Number(
        "tiles_computed",
        en="A tiled attention kernel cuts the (L, L) scores of each head into 128 × 128 tiles and skips every tile "
           "that the causal mask hides entirely. For L = 4096, how many tiles per head does it compute?",
        zh="一个分块的注意力 kernel 把每个头的 (L, L) 分数切成 128 × 128 的块，并跳过被因果掩码完全屏蔽的块。L = 4096 "
           "时，它每个头要计算多少个块？",
        answer=lambda: tiles_computed(4096, 128),
        unit=("tiles", "个块"),
        explain=("There are 32 tiles a side; tile row r is needed for tile columns 0..r, giving 32 · 33 / 2 = 528 "
                 "of the 1024 tiles. The 32 diagonal tiles still need the mask inside them, so the saving is a "
                 "bit under half.",
                 "每边 32 个块；第 r 行块需要第 0..r 列块，共 32 · 33 / 2 = 528 个，占全部 1024 个块的一半多一点。对角线上"
                 "的 32 个块内部仍需掩码，所以节省的略少于一半。"),
        see=Ref("reference", "scores = scores.masked_fill(causal_mask == 0, float(\"-inf\"))"),
        proof=lambda ref: _measured_tiles(ref, 4096, 128),
    ),
]


def _measured_tiles(ref, L, tile):
    """Cut the reference's mask into tiles and count those holding at least one kept entry."""
    n = L // tile
    mask = ref.generate_causal_mask(L, "cpu")                     # (L, L), 1 = keep
    per_tile = mask.view(n, tile, n, tile).amax(dim=(1, 3))       # (n, n): 1 where a tile keeps anything
    return int(per_tile.count_nonzero())
