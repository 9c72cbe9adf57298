"""Follow-up questions for `merged_qkv` (see attn_drill/bank/quiz.py for the format)."""
from attn_drill.bank.quiz import Choice, Number, Ref


def fused_row_of(block, row, E_out):
    """Row of the fused (3·E_out, E_in) weight that holds row `row` of block 0 (W_q), 1 (W_k) or 2 (W_v)."""
    return block * E_out + row


def fused_projection_flops(B, L, E):
    """2 per multiply-add: (B·L, E) @ (E, 3E)."""
    return 2 * B * L * E * (3 * E)


QUESTIONS = [
    Choice(
        "why_faster",
        en="The fused projection does the same FLOPs as the three separate ones. Where does its speed-up come "
           "from?",
        zh="融合后的投影与三个独立投影的 FLOPs 相同。它的加速从哪里来？",
        right=("One larger GEMM instead of three: fewer kernel launches, the input read from memory once instead "
               "of three times, and bigger tiles that keep the GPU's matrix units busier.",
               "一个更大的 GEMM 代替三个：kernel 启动更少，输入只从显存读一次而不是三次，更大的矩阵块让 GPU 的矩阵单元"
               "更充分地忙起来。"),
        wrong=[("It does a third of the multiply-adds, since x is multiplied by one matrix instead of three.",
                "它只做三分之一的乘加，因为 x 只乘一个矩阵而不是三个。"),
               ("It has fewer parameters: the stacked weight shares rows between Q, K and V.",
                "它的参数更少：堆叠后的权重在 Q、K、V 之间共享一些行。"),
               ("It is faster only in the backward, where one weight gradient replaces three; the forward costs "
                "the same.",
                "只有反向更快，一个权重梯度代替了三个；前向的开销一样。")],
        explain=("The stacked weight has exactly 3·E_out·E_in entries and every one is still used once per token. "
                 "The gain is in overheads and memory traffic, which is why it matters most for small batches "
                 "and in decoding, where each GEMM is small.",
                 "堆叠后的权重正好有 3·E_out·E_in 个元素，每个 token 仍要把每个元素用一次。收益来自开销和显存访问，"
                 "所以在 batch 小、以及每个 GEMM 都很小的解码阶段最明显。"),
        see=Ref("statement", "one larger GEMM instead of three small ones"),
    ),
    Number(
        "row_of_wk",
        en="fuse_qkv gets three nn.Linear(1024, 256) layers. Which row (0-based) of the fused weight holds row 10 "
           "of k_proj.weight?",
        zh="fuse_qkv 收到三个 nn.Linear(1024, 256)。k_proj.weight 的第 10 行（从 0 开始编号）在融合权重的第几行？",
        answer=lambda: fused_row_of(1, 10, 256),
        unit=("row index", "行号"),
        explain=("The weight is (out_features, in_features), so stacking the outputs stacks rows: W_q holds rows "
                 "0–255, W_k 256–511, W_v 512–767, and row 10 of W_k is row 266. Concatenating along dim=1 would "
                 "give a (256, 3072) weight that expects a 3072-wide input instead.",
                 "权重是 (out_features, in_features)，所以堆叠输出就是堆叠行：W_q 占第 0–255 行，W_k 占 256–511 行，"
                 "W_v 占 512–767 行，W_k 的第 10 行就是第 266 行。沿 dim=1 拼接会得到 (256, 3072) 的权重，它要求的是 "
                 "3072 维的输入。"),
        see=Ref("reference", "weight = torch.cat([q_proj.weight, k_proj.weight, v_proj.weight], dim=0)"),
        proof=lambda ref: _measured_row(ref, 1024, 256, 10),
    ),
    Choice(
        "split_per_head",
        en="A candidate splits the fused output with qkv.view(B, L, H, 3 * D).chunk(3, dim=-1) instead of "
           "chunking (B, L, 3E) first. With rows stacked [W_q; W_k; W_v], what happens?",
        zh="候选人用 qkv.view(B, L, H, 3 * D).chunk(3, dim=-1) 拆分融合输出，而不是先对 (B, L, 3E) 做 chunk。权重行按 "
           "[W_q; W_k; W_v] 堆叠时，会发生什么？",
        right=("It assumes a per-head [q_h, k_h, v_h] layout: head h takes the D-wide slices 3h, 3h + 1, 3h + 2 "
               "of the output, so Q, K and V get mixed (head 0 uses the queries of heads 1 and 2 as key and value). "
               "With one head both splits agree, so a single-head test cannot see it.",
               "它假定的是按头交错的 [q_h, k_h, v_h] 排布：头 h 取输出中宽为 D 的第 3h、3h + 1、3h + 2 段，于是 Q、K、V "
               "被混在一起（头 0 把头 1、头 2 的 query 当作 key 和 value）。只有一个头时两种拆法结果相同，所以单头测试"
               "发现不了。"),
        wrong=[("Nothing: view does not move data, so the same numbers reach Q, K and V.",
                "没有影响：view 不移动数据，所以 Q、K、V 拿到的数值相同。"),
               ("It raises a shape error, since 3E cannot be viewed as (H, 3·D).",
                "会报形状错误，因为 3E 无法 view 成 (H, 3·D)。"),
               ("Only the order of the heads changes, which the merge before out_proj undoes.",
                "只是头的顺序变了，在 out_proj 之前合并多头时会恢复。")],
        explain=("Both layouts exist in real checkpoints (some store the fused weight interleaved per head), so "
                 "the split must follow the layout the weight was built with. Here the first E features are all of "
                 "Q; viewing them as heads of width 3·D mixes the three.",
                 "两种排布在真实的 checkpoint 中都存在（有些按头交错存储融合权重），所以拆分方式必须与权重的排布一致。"
                 "这里前 E 个特征全部属于 Q；把它们按宽度 3·D 分头，就把三者混在了一起。"),
        see=Ref("reference", "q, k, v = qkv.chunk(3, dim=-1)"),
    ),
    Number(
        "fused_flops",
        en="How many FLOPs (2 per multiply-add) does one call of qkv_proj cost for B = 4, L = 1024, "
           "hidden_dim = 2048, without bias?",
        zh="当 B = 4、L = 1024、hidden_dim = 2048、无偏置时，调用一次 qkv_proj 需要多少次浮点运算（每次乘加记 2 次）？",
        answer=lambda: fused_projection_flops(4, 1024, 2048),
        unit=("FLOPs", "次浮点运算"),
        explain=("A (B·L, E) by (E, 3E) product: 2·B·L·E·3E, exactly the sum of the three separate projections. "
                 "Fusion changes how the work is scheduled, not how much there is.",
                 "(B·L, E) 乘 (E, 3E)：2·B·L·E·3E，正好等于三个独立投影之和。融合改变的是工作的调度方式，而不是工作量。"),
        see=Ref("reference", "qkv = self.qkv_proj(x)"),
        proof=lambda ref: _measured_projection_flops(ref, 4, 1024, 2048),
    ),
]


def _measured_row(ref, E_in, E_out, row):
    """Mark one row of k_proj and find it in the reference's fused weight."""
    import torch
    import torch.nn as nn

    layers = [nn.Linear(E_in, E_out, bias=False) for _ in range(3)]
    with torch.no_grad():
        for layer in layers:
            layer.weight.zero_()
        layers[1].weight[row].fill_(1.0)
    fused = ref.fuse_qkv(*layers)
    hits = (fused.weight == 1.0).all(dim=1).nonzero().flatten().tolist()
    return hits[0] if len(hits) == 1 else float("nan")


def _measured_projection_flops(ref, B, L, E):
    """The reference module's qkv_proj, counted by torch.utils.flop_counter on the meta device."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    with torch.device("meta"):
        m = ref.MergedQKVAttention(E, 8, dropout=0.0)
        x = torch.empty(B, L, E)
    with FlopCounterMode(display=False) as fc:
        m.qkv_proj(x)
    return fc.get_total_flops()
