"""Follow-up questions for `masks` (see attn_drill/bank/quiz.py for the format)."""
from attn_drill.bank.quiz import Choice, Number, Ref


def kept_causal_padded(num_heads, L, lengths):
    """Finite scores under a causal mask (key j <= query i) and right padding (key j < length)."""
    per_head = sum(min(i + 1, n) for n in lengths for i in range(L))
    return num_heads * per_head


def empty_rows_left_padded(num_heads, L, pads):
    """Rows without a key under a causal mask and LEFT padding (the first `pad` keys are padding):
    query i keeps keys pad .. i, so it has none when i < pad."""
    return num_heads * sum(sum(1 for i in range(L) if i < p) for p in pads)


QUESTIONS = [
    Choice(
        "finite_fill",
        en="Why not fill masked scores with torch.finfo(dtype).min instead of -inf, which would avoid the NaN of "
           "a fully masked row without any special case?",
        zh="为什么不用 torch.finfo(dtype).min 而用 -inf 填充被屏蔽的分数？前者不需要特殊处理就能避免全屏蔽行的 NaN。",
        right=("In a fully masked row every score is finfo.min, and the softmax subtracts the row max, which is "
               "finfo.min itself: every weight becomes 1/Lk and the row outputs the mean of V instead of 0.",
               "在全屏蔽行中每个分数都是 finfo.min，softmax 会减去行最大值，也就是 finfo.min 本身：每个权重都变成 1/Lk，"
               "这一行输出的是 V 的平均值而不是 0。"),
        wrong=[("It is equivalent: exp(finfo.min) is 0, so the row's weights are all 0 and its output is 0.",
                "两者等价：exp(finfo.min) 为 0，所以该行的权重全为 0，输出也是 0。"),
               ("It would give NaN as well, because finfo.min is converted to -inf inside the softmax.",
                "它同样会得到 NaN，因为 finfo.min 在 softmax 内部会被转换成 -inf。"),
               ("It breaks ordinary rows: a masked key at finfo.min still gets a visible share of the weights "
                "next to kept keys.",
                "它会破坏普通的行：取 finfo.min 的被屏蔽 key 在保留的 key 旁边仍能分到明显的权重。")],
        explain=("In a row with at least one kept key the max is a real score and finfo.min entries do vanish, "
                 "so normal rows look right; only the fully masked row differs, turning uniform. The rule here "
                 "asks for exactly 0 there, as SDPA returns.",
                 "只要一行中至少有一个保留的 key，最大值就是真实分数，finfo.min 的项确实会变成 0，所以普通的行看起来正确；"
                 "只有全屏蔽行不同，它会变成均匀分布。本题的规则要求那里恰好为 0，与 SDPA 的返回值一致。"),
        see=Ref("statement", "Filling with a large finite negative number instead of `-inf` does not satisfy the rule"),
    ),
    Choice(
        "mask3d_silent",
        en="A candidate forgets attn_mask.unsqueeze(1) for a (B, Lq, Lk) mask. When does the code run without an "
           "error, and what does it compute then?",
        zh="候选人对 (B, Lq, Lk) 的掩码忘了写 attn_mask.unsqueeze(1)。什么情况下代码不会报错？这时它算的是什么？",
        right=("When B equals H (or one of them is 1): broadcasting aligns from the right, so the batch axis of "
               "the mask meets the head axis and head h of every batch element gets batch element h's mask.",
               "当 B 等于 H（或其中之一为 1）时：广播从右往左对齐，掩码的 batch 维对上了头维，每个 batch 元素的第 h 个"
               "头拿到的是第 h 个 batch 元素的掩码。"),
        wrong=[("Never: a 3-D mask against 4-D scores always raises a shape error.",
                "永远不会：3 维掩码对 4 维分数总会报形状错误。"),
               ("Whenever Lq == Lk; the result is then correct, because broadcasting adds the missing axis in "
                "front.",
                "只要 Lq == Lk 就不会报错；这时结果是正确的，因为广播会在最前面补上缺少的维。"),
               ("Always, with the correct result: broadcasting aligns leading axes from the left, so the batch "
                "axes match.",
                "总是不报错，而且结果正确：广播从左往右对齐前面的维，所以 batch 维会对上。")],
        explain=("A (B, Lq, Lk) tensor broadcast to (B, H, Lq, Lk) is read as (1, B, Lq, Lk): the missing axis "
                 "is added in front, so the mask's batch axis lands on the head axis and the same mask set is "
                 "reused for every batch element. A silent bug whenever the sizes happen to fit.",
                 "(B, Lq, Lk) 的张量广播到 (B, H, Lq, Lk) 时会被当作 (1, B, Lq, Lk)：缺少的维补在最前面，于是掩码的 "
                 "batch 维落在头维上，同一组掩码被每个 batch 元素重复使用。只要尺寸恰好对得上，就是一个不报错的 bug。"),
        see=Ref("reference", "attn_mask = attn_mask.unsqueeze(1)"),
    ),
    Number(
        "kept_scores",
        en="B = 2, 4 heads, Lq = Lk = 6, a causal (L, L) attn_mask (key j kept for query i iff j <= i) and a "
           "key_padding_mask for lengths [6, 4] (padding at the end). How many of the B·H·Lq·Lk scores stay "
           "finite after apply_masks?",
        zh="B = 2，4 个头，Lq = Lk = 6，一个因果的 (L, L) attn_mask（当且仅当 j <= i 时 query i 保留 key j），以及长度"
           "为 [6, 4] 的 key_padding_mask（填充在末尾）。apply_masks 之后，B·H·Lq·Lk 个分数中有多少个仍是有限值？",
        answer=lambda: kept_causal_padded(4, 6, [6, 4]),
        unit=("scores", "个分数"),
        explain=("An entry survives only if both masks keep it. Query i keeps min(i + 1, length) keys: 21 for the "
                 "full sequence, 1 + 2 + 3 + 4 + 4 + 4 = 18 for length 4, so 4 · 39 = 156 of 288. Padded queries "
                 "still keep their real keys; padding never removes a row.",
                 "只有两个掩码都保留的位置才会留下。query i 保留 min(i + 1, length) 个 key：完整序列是 21，长度 4 的是 "
                 "1 + 2 + 3 + 4 + 4 + 4 = 18，所以 288 个中有 4 · 39 = 156 个。填充位置的 query 仍然保留真实的 key；"
                 "padding 从不删除一整行。"),
        see=Ref("reference", "pad = key_padding_mask[:, None, None, :]"),
        proof=lambda ref: _measured_kept(ref, 4, 6, [6, 4]),
    ),
    Number(
        "left_padding_empty_rows",
        en="A decoder batch is padded on the LEFT: B = 4, 8 heads, L = 10, with 0, 3, 5 and 9 padding keys at the "
           "start of the four sequences, and a causal attn_mask. How many (batch, head, query) rows keep no key "
           "at all?",
        zh="一个解码器的 batch 采用左侧填充：B = 4，8 个头，L = 10，四条序列开头分别有 0、3、5、9 个填充 key，再加一个"
           "因果 attn_mask。有多少个 (batch, head, query) 行一个 key 都没有保留？",
        answer=lambda: empty_rows_left_padded(8, 10, [0, 3, 5, 9]),
        unit=("rows", "行"),
        explain=("Query i sees keys pad .. i, none when i < pad: each padded query loses its row, 0 + 3 + 5 + 9 = "
                 "17 per head, 136 in all. This is the everyday case the rule is for: with left padding a naive "
                 "softmax puts NaN in those rows and the NaN reaches every gradient.",
                 "query i 能看到 key pad .. i，当 i < pad 时一个也没有：每个填充位置的 query 都失去整行，每个头 "
                 "0 + 3 + 5 + 9 = 17 行，共 136 行。这正是规则要处理的常见情形：左侧填充时，朴素的 softmax 会在这些行"
                 "得到 NaN，并传播到所有梯度。"),
        see=Ref("reference", "no_key = torch.isneginf(scores).all(dim=-1, keepdim=True)"),
        proof=lambda ref: _measured_empty_rows(ref, 8, 10, [0, 3, 5, 9]),
    ),
]


def _causal_keep(L):
    import torch

    return torch.ones(L, L, dtype=torch.bool).tril()


def _measured_kept(ref, H, L, lengths):
    """Finite entries of the reference's apply_masks on zero scores, right padding + causal mask."""
    import torch

    pad = torch.arange(L)[None, :] >= torch.tensor(lengths)[:, None]          # (B, L), True = padding
    scores = ref.apply_masks(torch.zeros(len(lengths), H, L, L), pad, _causal_keep(L))
    return int(torch.isfinite(scores).sum())


def _measured_empty_rows(ref, H, L, pads):
    """Rows of the reference's apply_masks that are -inf everywhere, left padding + causal mask."""
    import torch

    pad = torch.arange(L)[None, :] < torch.tensor(pads)[:, None]              # (B, L), the first keys padded
    scores = ref.apply_masks(torch.zeros(len(pads), H, L, L), pad, _causal_keep(L))
    return int(torch.isneginf(scores).all(dim=-1).sum())
