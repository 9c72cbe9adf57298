"""Follow-up questions for `packed_sequences` (see attn_drill/bank/quiz.py for the format)."""
from attn_drill.bank.quiz import Choice, Number, Ref


def kept_pairs(seq_lens):
    """(query, key) pairs a block-diagonal causal mask keeps: l (l + 1) / 2 inside each document."""
    return sum(n * (n + 1) // 2 for n in seq_lens)


def position_of_row(seq_lens, row):
    """A packed row's position inside its own document: the row minus the start of its document."""
    start = 0
    for n in seq_lens:
        if row < start + n:
            return row - start
        start += n
    raise ValueError("row past the end of the pack")


QUESTIONS = [
    Number(
        "position_of_row",
        en="Documents of lengths [7, 3, 12, 1, 5] are packed in that order. What is position_ids[21]?",
        zh="长度为 [7, 3, 12, 1, 5] 的文档按此顺序打包。position_ids[21] 是多少？",
        answer=lambda: position_of_row([7, 3, 12, 1, 5], 21),
        unit=("(position)", "（位置）"),
        explain=("cu_seqlens = [0, 7, 10, 22, 23, 28]; row 21 lies in document 2, rows 10 .. 21, so its position is "
                 "21 - 10 = 11, the document's last row. Counting row 22 in the same document (an off-by-one on the "
                 "boundary) would give 12.",
                 "cu_seqlens = [0, 7, 10, 22, 23, 28]；第 21 行属于文档 2（第 10 .. 21 行），位置是 21 - 10 = 11，是该文档的最后"
                 "一行。若在边界上差一位、把第 22 行也算进这个文档，就会得到 12。"),
        see=Ref("reference", "position_ids = torch.arange(total) - cu_seqlens[doc]"),
        proof=lambda ref: _position_measured(ref, [7, 3, 12, 1, 5], 21),
    ),
    Number(
        "kept_pairs",
        en="For the same pack, lengths [7, 3, 12, 1, 5], how many (query, key) pairs does the block-diagonal causal "
           "mask keep? (The dense mask over the pack has 28 · 28 = 784 entries.)",
        zh="同样的打包，长度 [7, 3, 12, 1, 5]，块对角因果掩码保留了多少个 (query, key) 对？（整个打包上的稠密掩码有 "
           "28 · 28 = 784 个元素。）",
        answer=lambda: kept_pairs([7, 3, 12, 1, 5]),
        unit=("pairs", "对"),
        explain=("Each document of length l keeps l (l + 1) / 2 pairs: 28 + 6 + 78 + 1 + 15 = 128, about a sixth of the "
                 "dense mask and less than a third of the 406 pairs of a plain causal mask over the pack. A varlen "
                 "kernel computes only these tiles; the dense mask used here wastes the rest.",
                 "长度为 l 的文档保留 l (l + 1) / 2 对：28 + 6 + 78 + 1 + 15 = 128，约为稠密掩码的六分之一，也不到整个打包上"
                 "普通因果掩码 406 对的三分之一。varlen kernel 只计算这些分块；这里用的稠密掩码把其余的都浪费了。"),
        see=Ref("reference", "keep = same_doc & causal"),
        proof=lambda ref: _kept_pairs_measured(ref, [7, 3, 12, 1, 5]),
    ),
    Choice(
        "plain_causal_leak",
        en="Why not run an ordinary causal mask over the whole packed row, as a decoder normally does?",
        zh="为什么不像普通解码器那样，在整个打包行上用普通的因果掩码？",
        right=("Every document would then attend to the documents packed before it: unrelated text enters its "
               "context, so each document's output depends on what it happened to be packed with, unlike running it "
               "alone.",
               "那样每个文档都会关注排在它前面的文档：无关的文本进入了它的上下文，文档的输出取决于它碰巧和谁打包在一起，"
               "和单独运行时不同。"),
        wrong=[("It is fine after a little training: the model learns to give the earlier documents almost no weight.",
                "训练一阵之后就没问题了：模型会学会几乎不给前面的文档分配权重。"),
               ("Only the first row of each document is affected; the later rows see their own document anyway.",
                "只有每个文档的第一行受影响；后面的行反正看到的都是自己的文档。"),
               ("The first row of every document would have no valid key, so its softmax would be NaN.",
                "每个文档的第一行将没有有效的 key，它的 softmax 会是 NaN。")],
        explain=("Under a plain causal mask every row of a later document can see all earlier documents, not only "
                 "its first row, and no row is empty: each still sees itself. The model would learn to depend on "
                 "neighbours it never has at inference.",
                 "在普通因果掩码下，后面文档的每一行都能看到所有更早的文档，而不只是第一行；也不会有空行：每行至少看得到"
                 "自己。模型会学会依赖推理时根本不存在的邻居。"),
        see=Ref("statement", "as if every document ran on its own"),
    ),
    Choice(
        "positions_and_rope",
        en="With RoPE, the mask is right but position_ids run 0 .. total - 1 across the pack instead of restarting "
           "in each document. What changes in the attention output?",
        zh="使用 RoPE 时，掩码是对的，但 position_ids 在整个打包上是 0 .. total - 1，没有在每个文档里从头开始。注意力的输出"
           "会有什么变化？",
        right=("Nothing: a RoPE score depends only on i - j, and the mask only pairs rows of the same document, whose "
               "distances are the same either way; absolute position embeddings, by contrast, would change.",
               "没有变化：RoPE 的分数只依赖 i - j，而掩码只让同一文档内的行配对，它们之间的距离无论怎样都不变；若用绝对位置"
               "编码，结果就会变。"),
        wrong=[("Every document after the first gets keys rotated by the wrong angles, so its scores change.",
                "第一个文档之后的每个文档，key 都被旋转了错误的角度，它们的分数会改变。"),
               ("The mask breaks, because the documents are found from position_ids.",
                "掩码会出错，因为文档是根据 position_ids 找出来的。"),
               ("Nothing, and the same holds for learned absolute position embeddings, because the softmax "
                "renormalises each row.",
                "没有变化，学习得到的绝对位置编码也一样，因为 softmax 会对每一行重新归一化。")],
        explain=("The query and the key are both shifted by the document's start, and the rotation of q·k depends only "
                 "on their difference. An absolute embedding is added to the input itself, so it changes what every "
                 "row computes; that is why the positions are graded on their own. (This implementation finds the "
                 "documents from cu_seqlens; Hugging Face infers them from position_ids, where a missing reset would "
                 "merge documents.)",
                 "query 和 key 都平移了文档的起点，而 q·k 的旋转只取决于两者之差。绝对位置编码直接加在输入上，会改变每一行的"
                 "计算；所以位置要单独评测。（本实现由 cu_seqlens 找文档；Hugging Face 则从 position_ids 推断，那里不重置位置"
                 "会把文档合并。）"),
        see=Ref("statement", "forgetting to restart the positions changes nothing"),
    ),
]


def _position_measured(ref, seq_lens, row):
    import torch

    _, position_ids, _ = ref.packing_metadata(torch.tensor(seq_lens, dtype=torch.int64))
    return int(position_ids[row])


def _kept_pairs_measured(ref, seq_lens):
    """Zero queries and keys make every kept key weigh 1 / count; one-hot values read each row's weights, so the
    weight on the row's own key (always kept) is 1 / (number of keys it keeps)."""
    import torch

    cu_seqlens, _, max_seqlen = ref.packing_metadata(torch.tensor(seq_lens, dtype=torch.int64))
    total = sum(seq_lens)
    q = torch.zeros(total, 1, 1, dtype=torch.float64)
    v = torch.eye(total, dtype=torch.float64).view(total, 1, total)
    out = ref.varlen_attention(q, q, v, cu_seqlens, max_seqlen)         # (total, 1, total)
    own = out[:, 0].diagonal()                                          # (total,) 1 / keys kept per row
    return int(torch.round(1.0 / own).sum())
