"""Follow-up questions for `attention_heatmap` (see attn_drill/bank/quiz.py for the format)."""
import math

from attn_drill.bank.quiz import Choice, Number, Ref


def unused_cells(num_heads):
    """Cells turned off in a grid of ceil(sqrt(H)) columns and as many rows as the heads need."""
    ncols = math.ceil(math.sqrt(num_heads))
    nrows = math.ceil(num_heads / ncols)
    return nrows * ncols - num_heads


def first_query_token(num_tokens, num_queries):
    """The index of the token that labels the top row: the queries are the last num_queries tokens."""
    return num_tokens - num_queries


QUESTIONS = [
    Choice(
        "causal_picture",
        en="You plot one head of a causal self-attention (Lq = Lk) with this function. Where in the image are "
           "the non-zero weights?",
        zh="用这个函数画一个因果自注意力头（Lq = Lk）。图像中非零的权重在哪里？",
        right=("In the lower-left triangle, diagonal included: row i (counted from the top) is query i, and it "
               "only has weight on columns j ≤ i.",
               "在左下三角（含对角线）：第 i 行（从上往下数）是 query i，它只在 j ≤ i 的列上有权重。"),
        wrong=[("In the upper-right triangle, because imshow puts row 0 of the array at the bottom of the image.",
                "在右上三角，因为 imshow 把数组的第 0 行画在图像底部。"),
               ("In the upper-left triangle, because each query sees the keys before it and those are at the top.",
                "在左上三角，因为每个 query 看的是它之前的 key，而它们在上方。"),
               ("On the diagonal only: a causal head attends to the current token.",
                "只在对角线上：因果注意力头只关注当前 token。")],
        explain=("imshow's default origin is the upper left, so array row 0 is the top row, exactly as the matrix "
                 "is printed; query i's weights fill columns 0..i. Seeing the upper triangle lit up is the sign of "
                 "a transposed plot (or a triu mask).",
                 "imshow 默认原点在左上角，数组第 0 行就是图像最上面一行，与矩阵打印出来的样子一致；query i 的权重占据"
                 "第 0..i 列。如果亮的是上三角，说明图被转置了（或者掩码用了 triu）。"),
        see=Ref("reference", "image = ax.imshow(data, cmap="),
    ),
    Choice(
        "to_numpy",
        en="Why does the code call .detach(), convert to float32 and move to the CPU before .numpy()?",
        zh="为什么代码在 .numpy() 之前要先 .detach()、转成 float32 并移到 CPU？",
        right=(".numpy() refuses a tensor that requires grad, a tensor on a GPU and a bfloat16 tensor (numpy has "
               "no bfloat16); each of the three calls removes one of these.",
               ".numpy() 不接受需要梯度的张量、GPU 上的张量和 bfloat16 张量（numpy 没有 bfloat16）；这三个调用各自"
               "解决其中一个问题。"),
        wrong=[("imshow only draws values in [0, 1], and float32 guarantees that range.",
                "imshow 只能画 [0, 1] 之间的值，而 float32 能保证这个范围。"),
               ("detach() frees the autograd graph, without which the PNG cannot be written.",
                "detach() 释放计算图，不这样做就无法写出 PNG。"),
               ("They are needed only for GPU tensors; any tensor on the CPU can go straight to .numpy().",
                "只有 GPU 张量才需要它们；CPU 上的任何张量都可以直接 .numpy()。")],
        explain=("Attention weights straight out of a model are often bfloat16, on a GPU and part of a graph. "
                 "On the CPU, bfloat16 and requires_grad still make .numpy() fail; float32 does not limit the "
                 "range of values, and detach() only cuts the tensor from the graph.",
                 "直接从模型中取出的注意力权重常常是 bfloat16、在 GPU 上，并且处在计算图中。即使在 CPU 上，"
                 "bfloat16 和 requires_grad 也会让 .numpy() 报错；float32 并不限制数值范围，detach() 只是把张量从计算图中"
                 "分离出来。"),
        see=Ref("reference", "return weights.detach().to(device=\"cpu\", dtype=torch.float32).numpy()"),
    ),
    Choice(
        "shared_colour_scale",
        en="The grid of heads draws every head with vmin=0 and vmax=1. What would change if each subplot chose "
           "its own colour range instead?",
        zh="多头网格图中每个头都用 vmin=0、vmax=1 来画。如果每个子图各自选择颜色范围，会有什么不同？",
        right=("Colours would no longer be comparable across heads: a diffuse head whose largest weight is 0.05 "
               "would look as saturated as a head that puts 0.95 on one key.",
               "各头之间的颜色将不可比较：一个最大权重只有 0.05 的分散头，看起来会和一个把 0.95 放在某个 key 上的头"
               "一样饱和。"),
        wrong=[("Nothing: softmax weights always span exactly 0 to 1 in every head.",
                "没有变化：每个头的 softmax 权重都恰好覆盖 0 到 1。"),
               ("Negative weights would be clipped to 0 and vanish from the plot.",
                "负的权重会被截断为 0，从图中消失。"),
               ("imshow would fail on heads whose weights are all equal.",
                "对权重全部相等的头，imshow 会报错。")],
        explain=("Softmax weights lie in [0, 1] but a row rarely reaches either end, so autoscaling stretches each "
                 "head's own range over the whole colour map. Fixing the range makes the same colour mean the same "
                 "weight in every cell; softmax weights are never negative, and a constant image is drawn without "
                 "error.",
                 "softmax 权重落在 [0, 1] 内，但一行很少取到两端，所以自动缩放会把每个头自己的范围拉满整个色图。固定范围"
                 "后，每个格子里同一种颜色代表同一个权重；softmax 权重从不为负，常数图像也能正常绘制。"),
        see=Ref("reference", "ax.imshow(data[h], cmap=\"viridis\", aspect=\"auto\", vmin=0.0, vmax=1.0)"),
    ),
    Number(
        "unused_cells",
        en="plot_attention_heads lays out ceil(sqrt(H)) columns and as many rows as the heads need. For a layer "
           "with 10 heads, how many cells of the grid are turned off?",
        zh="plot_attention_heads 使用 ceil(sqrt(H)) 列，行数按头的数量取够。对一个有 10 个头的层，网格中有多少个格子"
           "被关闭？",
        answer=lambda: unused_cells(10),
        unit=("cells", "个格子"),
        explain=("ceil(sqrt(10)) = 4 columns and ceil(10 / 4) = 3 rows give 12 cells for 10 heads, so 2 are turned "
                 "off. Taking ceil(sqrt(H)) rows as well would give 4 × 4 = 16 cells and 6 empty ones.",
                 "ceil(sqrt(10)) = 4 列，ceil(10 / 4) = 3 行，共 12 个格子放 10 个头，所以关闭 2 个。若行数也取 "
                 "ceil(sqrt(H))，就成了 4 × 4 = 16 个格子、6 个空格。"),
        see=Ref("reference", "nrows = math.ceil(H / ncols)"),
        proof=lambda ref: _measured_unused_cells(ref, 10),
    ),
    Number(
        "decode_tick",
        en="During decoding you plot a (4, 9) weight map (the 4 newest queries against all 9 keys) with a list "
           "of 9 tokens. Which token index (counting from 0) labels the top row of the image?",
        zh="解码时画一张 (4, 9) 的权重图（最新的 4 个 query 对全部 9 个 key），并传入 9 个 token。图像最上面一行的标签"
           "是哪个 token 的下标（从 0 开始）？",
        answer=lambda: first_query_token(9, 4),
        unit=("token index", "token 下标"),
        explain=("The queries are the last Lq = 4 tokens, positions 5..8, so the top row is token 5. Labelling the "
                 "rows with tokens 0..3 would pin each newest query to an old token that it is not.",
                 "query 是最后 Lq = 4 个 token，即位置 5..8，所以最上面一行是 token 5。若用 token 0..3 标行，就会把最新的"
                 "query 错标成早先的 token。"),
        see=Ref("reference", "ax.set_yticklabels(tokens[n_keys - n_queries:n_keys])"),
        proof=lambda ref: _measured_top_label(ref, 4, 9),
    ),
]


def _measured_unused_cells(ref, num_heads):
    """Draw the grid with the reference and count the axes that are switched off."""
    import torch

    fig = ref.plot_attention_heads(torch.rand(num_heads, 3, 3), layer_idx=0)
    return sum(not ax.axison for ax in fig.axes)


def _measured_top_label(ref, num_queries, num_keys):
    """Draw a (num_queries, num_keys) map with tokens named by their index and read the top row's label."""
    import torch

    tokens = [str(i) for i in range(num_keys)]
    fig = ref.plot_attention_weights(torch.rand(num_queries, num_keys), 0, 0, tokens=tokens)
    ax = fig.axes[0]                                             # the heatmap (fig.axes[1] is the colorbar)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    return int(labels[0])                                        # tick 0 is row 0, the top of the image
