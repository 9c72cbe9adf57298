"""Follow-up questions for `gqa` (see attn_drill/bank/quiz.py for the format)."""
from attn_drill.bank.quiz import Choice, Number, Ref


def kv_head_of(query_head, num_query_heads, num_kv_heads):
    """Consecutive query heads share a KV head: head h reads KV head h // n_rep."""
    n_rep = num_query_heads // num_kv_heads
    return query_head // n_rep


def gqa_params(hidden_dim, num_query_heads, num_kv_heads):
    """Weights of q_proj, k_proj, v_proj and out_proj (no bias)."""
    head_dim = hidden_dim // num_query_heads
    q = hidden_dim * num_query_heads * head_dim
    kv = 2 * hidden_dim * num_kv_heads * head_dim
    out = num_query_heads * head_dim * hidden_dim
    return q + kv + out


QUESTIONS = [
    Choice(
        "what_gqa_saves",
        en="Compared with multi-head attention of the same hidden size and number of query heads, what does GQA "
           "with n_rep query heads per KV head actually save?",
        zh="与隐藏维和 query 头数都相同的多头注意力相比，每个 KV 头服务 n_rep 个 query 头的 GQA 实际节省了什么？",
        right=("The K/V projections and, above all, the KV cache shrink by n_rep, and so do the bytes read per "
               "decode step; QKᵀ and weights @ V cost the same, since every query head still scores every key.",
               "K/V 投影、尤其是 KV cache 缩小为 1/n_rep，每个 decode 步读取的字节数也一样；QKᵀ 和 weights @ V 的开销不变，"
               "因为每个 query 头仍要与所有 key 计算分数。"),
        wrong=[("The FLOPs of QKᵀ drop by n_rep, because only num_kv_heads score matrices are computed.",
                "QKᵀ 的 FLOPs 降为 1/n_rep，因为只需计算 num_kv_heads 个分数矩阵。"),
               ("The (B, H, L, L) attention weights shrink by n_rep, since query heads of a group share them.",
                "(B, H, L, L) 的注意力权重缩小为 1/n_rep，因为同组的 query 头共享它们。"),
               ("Nothing at inference: the KV heads are repeated to num_query_heads before they are cached, so "
                "only training gets cheaper.",
                "推理时没有节省：KV 头在缓存之前就被复制到 num_query_heads 份，只有训练变便宜了。")],
        explain=("Each query head has its own queries, so its scores and weights differ from its neighbours' even "
                 "though the keys are shared: the L×L work is unchanged. What shrinks is what is stored per token, "
                 "which dominates the memory and the memory traffic of decoding.",
                 "每个 query 头都有自己的 query，即使 key 是共享的，它的分数和权重也与同组其他头不同：L×L 的计算量不变。"
                 "缩小的是每个 token 需要存储的内容，而它主导着解码时的显存占用和显存带宽。"),
        see=Ref("reference", "self.k_proj = nn.Linear(hidden_dim, num_kv_heads * self.head_dim, bias=False)"),
    ),
    Number(
        "kv_head_of_query_head",
        en="A layer has 32 query heads and 8 KV heads, grouped as in this problem. Which KV head (0-based) does "
           "query head 13 read?",
        zh="某层有 32 个 query 头和 8 个 KV 头，分组方式与本题相同。第 13 个 query 头（从 0 开始编号）读取哪个 KV 头？",
        answer=lambda: kv_head_of(13, 32, 8),
        unit=("KV head index", "KV 头编号"),
        explain=("n_rep = 4, so query heads 12–15 form group 3: 13 // 4 = 3. The tiled order of "
                 "k.repeat(1, 4, 1, 1) would give 13 % 8 = 5 instead.",
                 "n_rep = 4，所以 query 头 12–15 组成第 3 组：13 // 4 = 3。若用 k.repeat(1, 4, 1, 1) 平铺，"
                 "得到的是 13 % 8 = 5。"),
        see=Ref("reference", "# share each KV head with its G consecutive query heads"),
        proof=lambda ref: _measured_kv_head(ref, 13, 32, 8),
    ),
    Choice(
        "tiled_when_wrong",
        en="A colleague wrote k.repeat(1, n_rep, 1, 1) (query head h reads KV head h % num_kv_heads) and trained "
           "a model from scratch with it; it trains as well as the reference. When is the tiled order a real bug?",
        zh="一位同事写了 k.repeat(1, n_rep, 1, 1)（第 h 个 query 头读取 h % num_kv_heads 号 KV 头），并用它从零训练了"
           "一个模型，效果和参考实现一样好。平铺的顺序什么时候才是真正的 bug？",
        right=("When weights or kernels assume h // n_rep: a pretrained checkpoint, HF repeat_kv or SDPA with "
               "enable_gqa. The two orders only permute the query heads, so from scratch either learns equally well.",
               "当权重或 kernel 假定 h // n_rep 时：预训练 checkpoint、HF 的 repeat_kv 或 SDPA 的 enable_gqa。两种顺序"
               "只是把 query 头重新排列，所以从零训练时两者学得一样好。"),
        wrong=[("Never: repeat and repeat_interleave produce the same tensor, only in a different memory layout.",
                "永远不是：repeat 和 repeat_interleave 得到的是同一个张量，只是内存布局不同。"),
               ("Always: with tiled heads each KV head receives n_rep times too large a gradient, so training "
                "only looks fine at first.",
                "永远是：平铺时每个 KV 头得到的梯度大了 n_rep 倍，训练只是一开始看起来正常。"),
               ("Only when n_rep is odd; for even n_rep the two orders pair the same heads.",
                "只有 n_rep 为奇数时才是；n_rep 为偶数时两种顺序配对的头相同。")],
        explain=("Renumbering the query heads (and the matching columns of out_proj) maps one grouping onto the "
                 "other, so the model family is the same. But loaded weights were trained with a fixed grouping; "
                 "read with another, the heads meet the wrong keys and the outputs are garbage.",
                 "对 query 头（以及 out_proj 中对应的列）重新编号，就能把一种分组变成另一种，所以模型族是同一个。"
                 "但加载的权重是按固定的分组训练的；换一种分组读取，各个头遇到的是错误的 key，输出就是乱的。"),
        see=Ref("statement", "query head `h` uses KV head `h // n_rep`"),
    ),
    Choice(
        "expand_copies",
        en="The reference broadcasts K with k[:, :, None].expand(B, Hkv, G, L, D).reshape(B, Hq, L, D). Does this "
           "avoid storing n_rep copies of K?",
        zh="参考实现用 k[:, :, None].expand(B, Hkv, G, L, D).reshape(B, Hq, L, D) 来广播 K。这样能避免存储 n_rep 份"
           "K 吗？",
        right=("No: expand is a stride-0 view, but merging the group axis into the head axis cannot be expressed "
               "with strides, so reshape copies. Folding the group into the query axis, Q as (B, Hkv, G·L, D) "
               "against K as (B, Hkv, L, D), needs no copy of K.",
               "不能：expand 是步长为 0 的视图，但把组维并入头维无法用步长表示，所以 reshape 会复制。把组维并入 query "
               "的长度维，让 (B, Hkv, G·L, D) 的 Q 与 (B, Hkv, L, D) 的 K 相乘，就不需要复制 K。"),
        wrong=[("Yes: expand and reshape both return views, so no memory is allocated for the copies.",
                "能：expand 和 reshape 都返回视图，不会为副本分配显存。"),
               ("Yes in the forward; only the backward materialises the n_rep copies, to accumulate gradients.",
                "前向能；只有反向才会为累加梯度而生成 n_rep 份副本。"),
               ("No, and no layout can avoid it: a matmul needs one key tensor per query head.",
                "不能，而且任何排布都无法避免：矩阵乘法要求每个 query 头都有一份 key 张量。")],
        explain=("reshape returns a view only when the new shape fits the old strides; a stride-0 axis merged with "
                 "its neighbour does not, so it falls back to a copy. The copy is a temporary of the full query-head "
                 "size in every layer; fused GPU kernels with GQA support read the shared KV head in place.",
                 "只有新形状能用原来的步长表示时，reshape 才返回视图；步长为 0 的维与相邻维合并就不行，只能复制。"
                 "这份副本是每一层中与全部 query 头同样大小的临时张量；支持 GQA 的融合 GPU kernel 会直接读取共享的 KV 头。"),
        see=Ref("reference", "k = k[:, :, None].expand(B, Hkv, G, L, D).reshape(B, Hq, L, D)"),
    ),
    Number(
        "attention_params",
        en="How many parameters do q_proj, k_proj, v_proj and out_proj hold together for hidden_dim = 4096, 32 "
           "query heads and 8 KV heads (no bias)?",
        zh="当 hidden_dim = 4096、32 个 query 头、8 个 KV 头（无偏置）时，q_proj、k_proj、v_proj 和 out_proj 一共有"
           "多少个参数？",
        answer=lambda: gqa_params(4096, 32, 8),
        unit=("parameters", "个参数"),
        explain=("head_dim = 128: Q and out are 4096² each, K and V 4096·1024 each, 41 943 040 in all against "
                 "67 108 864 for multi-head attention. The projections shrink by less than the cache does: the "
                 "query and output sides stay full width.",
                 "head_dim = 128：Q 和 out 各为 4096²，K 和 V 各为 4096·1024，共 41 943 040，而多头注意力是 "
                 "67 108 864。投影缩小的比例不如缓存：query 和输出两侧仍是全宽。"),
        see=Ref("reference", "self.v_proj = nn.Linear(hidden_dim, num_kv_heads * self.head_dim, bias=False)"),
        proof=lambda ref: _measured_params(ref, 4096, 32, 8),
    ),
]


def _measured_params(ref, E, Hq, Hkv):
    """Parameters of the reference module, built on the meta device (no memory)."""
    import torch

    with torch.device("meta"):
        m = ref.GroupedQueryAttention(E, Hq, Hkv, dropout=0.0)
    return sum(p.numel() for p in m.parameters())


def _measured_kv_head(ref, h, Hq, Hkv):
    """Run the reference with head_dim 1 and one token: KV head g's value is set to g, out_proj to the
    identity, so output channel h is the index of the KV head that query head h read."""
    import torch

    E = Hq                                           # head_dim 1
    m = ref.GroupedQueryAttention(E, Hq, Hkv, dropout=0.0).double().eval()
    with torch.no_grad():
        m.v_proj.weight.copy_(torch.arange(Hkv, dtype=torch.float64)[:, None].expand(Hkv, E) / E)
        m.out_proj.weight.copy_(torch.eye(E, dtype=torch.float64))
        out = m(torch.ones(1, 1, E, dtype=torch.float64))   # one token: every weight is 1
    return round(out[0, 0, h].item())
