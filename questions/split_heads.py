"""Follow-up questions for `split_heads` (see attn_drill/bank/quiz.py for the format)."""
from attn_drill.bank.quiz import Choice, Number, Ref


def position_stride(num_heads, head_dim):
    """Elements between (b, h, l, d) and (b, h, l + 1, d) in the split view: one position of the
    (B, L, H * D) storage."""
    return num_heads * head_dim


def merge_copy_bytes(B, L, num_heads, head_dim, bytes_per_element):
    """merge_heads on a contiguous (B, H, L, D) tensor copies it once into (B, L, H * D) order."""
    return B * L * num_heads * head_dim * bytes_per_element


QUESTIONS = [
    Choice(
        "direct_view",
        en="With L > 1 and H > 1, what does x.view(B, H, L, head_dim)[:, 0] hold, compared with the correct "
           "split?",
        zh="当 L > 1 且 H > 1 时，x.view(B, H, L, head_dim)[:, 0] 里装的是什么？和正确的拆分相比如何？",
        right=("The first L·head_dim numbers of each sequence, which are all the features of its first L/H "
               "positions, cut into rows, instead of the first head_dim features of every position.",
               "每个序列最前面的 L·head_dim 个数，也就是前 L/H 个位置的全部特征被切成行，而不是每个位置的前 head_dim "
               "个特征。"),
        wrong=[("The first head_dim features of every position, the same as the correct split, only laid out "
                "differently in memory.",
                "每个位置的前 head_dim 个特征，与正确拆分相同，只是内存排布不同。"),
               ("Nothing: view raises an error because (B, L, H·D) cannot be viewed with a different axis order.",
                "什么都没有：view 会报错，因为 (B, L, H·D) 不能以不同的轴顺序 view。"),
               ("The correct heads, but with the positions of each head in reverse order.",
                "正确的头，只是每个头内的位置顺序颠倒了。")],
        explain=("view never moves data: it reads the row-major storage (position-major, then head, then dim) in "
                 "order and cuts it into the new shape, so the element counts match and no error is raised. "
                 "Viewing as (B, L, H, D) first keeps every position's features together; transpose then only "
                 "changes the strides.",
                 "view 从不移动数据：它按顺序读取行优先的存储（先位置，再头，再维度）并切成新形状，元素个数对得上，所以"
                 "不会报错。先 view 成 (B, L, H, D) 能让每个位置的特征保持在一起；之后的 transpose 只改变 stride。"),
        see=Ref("reference", "x = x.view(B, L, H, D)          # (B, L, H, D)"),
    ),
    Choice(
        "contiguous_merge",
        en="merge_heads gets the attention output, a contiguous (B, H, L, head_dim) tensor. Why does it call "
           ".contiguous() before .view(B, L, H * D)?",
        zh="merge_heads 接收的是注意力输出，一个连续的 (B, H, L, head_dim) 张量。为什么它在 .view(B, L, H * D) 之前"
           "要调用 .contiguous()？",
        right=("After transpose(1, 2) the head and dim axes are not adjacent in memory (the head stride is "
               "L·D, not D), so view cannot fuse them and raises an error; contiguous copies the data into "
               "(B, L, H, D) order first.",
               "transpose(1, 2) 之后，头维和 head_dim 维在内存中不相邻（头维的 stride 是 L·D 而不是 D），view 无法把它们"
               "合并，会报错；contiguous 先把数据复制成 (B, L, H, D) 的顺序。"),
        wrong=[("Without it, view silently returns the features in the wrong order.",
                "没有它，view 会悄悄地以错误的顺序返回特征。"),
               ("autograd cannot backpropagate through a view of a non-contiguous tensor.",
                "autograd 无法对非连续张量的 view 做反向传播。"),
               ("contiguous reorders the heads so that head 0 comes first in the merged features.",
                "contiguous 会重新排列各个头，使第 0 个头排在合并后特征的最前面。")],
        explain=("view only reinterprets strides and refuses shapes that the current strides cannot express; it "
                 "never gives wrong numbers silently. reshape does the same check and copies when it must, which "
                 "is why it is an equivalent spelling.",
                 "view 只是重新解释 stride，遇到当前 stride 无法表达的形状就拒绝执行；它不会悄悄给出错误的数值。reshape "
                 "做同样的检查，必要时复制数据，所以它是等价的写法。"),
        see=Ref("reference", "x = x.transpose(1, 2)                   # (B, L, H, D)"),
    ),
    Number(
        "position_stride",
        en="split_heads returns a non-contiguous view. For 32 heads of head_dim 128, how many elements apart in "
           "memory are out[b, h, l, d] and out[b, h, l + 1, d]?",
        zh="split_heads 返回的是一个非连续的 view。32 个头、head_dim 为 128 时，out[b, h, l, d] 与 out[b, h, l + 1, d] "
           "在内存中相隔多少个元素？",
        answer=lambda: position_stride(32, 128),
        unit=("elements", "个元素"),
        explain=("The view keeps the (B, L, H·D) storage, where one position is H·D = 4096 elements long; the head "
                 "axis has stride D = 128 even though it now comes first. A contiguous (B, H, L, D) tensor would "
                 "have a position stride of D.",
                 "这个 view 沿用 (B, L, H·D) 的存储，其中一个位置占 H·D = 4096 个元素；头维虽然排到了前面，stride 仍是 "
                 "D = 128。连续的 (B, H, L, D) 张量的位置 stride 才是 D。"),
        see=Ref("reference", "return x.transpose(1, 2)        # (B, H, L, D)"),
        proof=lambda ref: _measured_stride(ref, 32, 128),
    ),
    Number(
        "merge_bytes",
        en="weights @ V gives a contiguous (B, H, L, head_dim) tensor. In bfloat16 with B = 8, L = 4096, 32 heads "
           "and head_dim = 128, how many bytes of new storage does merge_heads allocate for it?",
        zh="weights @ V 得到一个连续的 (B, H, L, head_dim) 张量。bfloat16 下，B = 8、L = 4096、32 个头、"
           "head_dim = 128 时，merge_heads 为它新分配多少字节的存储？",
        answer=lambda: merge_copy_bytes(8, 4096, 32, 128, 2),
        unit=("bytes", "字节"),
        explain=("Its head axis sits before the positions, so (B, L, H·D) needs the data moved: one copy of "
                 "B·L·H·D·2 bytes = 256 MiB. split_heads, a view plus a transpose, allocates nothing; and "
                 "merge_heads(split_heads(x)) copies nothing either, since transposing back restores x's layout "
                 "and contiguous() returns the tensor as it is.",
                 "它的头维位于位置维之前，要得到 (B, L, H·D) 必须搬动数据：复制一次，B·L·H·D·2 字节 = 256 MiB。"
                 "split_heads 只是 view 加 transpose，不分配任何存储；而 merge_heads(split_heads(x)) 同样不复制，因为"
                 "再转置回来就恢复了 x 的布局，contiguous() 原样返回。"),
        see=Ref("reference", "return x.contiguous().view(B, L, H * D)"),
        proof=lambda ref: _measured_merge_bytes(ref, 8, 4096, 32, 128),
    ),
]


def _measured_stride(ref, H, D):
    import torch
    x = torch.empty(2, 3, H * D, device="meta")
    return ref.split_heads(x, H).stride(2)


def _measured_merge_bytes(ref, B, L, H, D):
    """Bytes of the storage behind merge_heads' result when it is not the input's (meta tensors: nothing is
    allocated for real, but a new storage still has its size)."""
    import torch
    x = torch.empty(B, H, L, D, device="meta", dtype=torch.bfloat16)
    merged = ref.merge_heads(x)
    shares_input = merged is x or merged._base is x
    return 0 if shares_input else merged.untyped_storage().nbytes()
