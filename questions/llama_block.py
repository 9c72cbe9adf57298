"""Follow-up questions for `llama_block` (see attn_drill/bank/quiz.py for the format)."""
from attn_drill.bank.quiz import Choice, Number, Ref


def layer_parameters(E, H, Hkv, F):
    """q/o projections E x E, k/v projections E x (Hkv * D), the three SwiGLU matrices, two norm weights."""
    D = E // H
    attention = 2 * E * H * D + 2 * E * Hkv * D
    mlp = 3 * E * F
    norms = 2 * E
    return attention + mlp + norms


def kv_bytes_per_token(layers, Hkv, D, bytes_per_element):
    """One token's key and value in every layer."""
    return layers * 2 * Hkv * D * bytes_per_element


def layer_forward_flops(B, L, E, H, Hkv, F):
    """Matmul FLOPs (2 per multiply-add) of one layer: every projection, plus QKᵀ and weights @ V in full."""
    D = E // H
    linear_weights = 2 * E * H * D + 2 * E * Hkv * D + 3 * E * F
    projections = 2 * B * L * linear_weights
    core = 2 * (2 * B * H * L * L * D)
    return projections + core


QUESTIONS = [
    Number(
        "layer_parameters",
        en="How many parameters does LlamaDecoderLayer(hidden_dim=4096, num_heads=32, num_kv_heads=8, "
           "intermediate_dim=14336) have (the sizes of a Llama 3 8B layer)?",
        zh="LlamaDecoderLayer(hidden_dim=4096, num_heads=32, num_kv_heads=8, intermediate_dim=14336)（Llama 3 8B 一层的"
           "尺寸）有多少个参数？",
        answer=lambda: layer_parameters(4096, 32, 8, 14336),
        unit=("parameters", "个参数"),
        explain=("Attention: 2 · 4096² + 2 · 4096 · 1024 ≈ 41.9 M; SwiGLU: 3 · 4096 · 14336 ≈ 176.2 M; norms 8192; "
                 "218 112 000 in all. The MLP holds about 81 % of the layer; GQA shrinks k_proj and v_proj to a "
                 "quarter of q_proj.",
                 "注意力：2 · 4096² + 2 · 4096 · 1024 ≈ 41.9 M；SwiGLU：3 · 4096 · 14336 ≈ 176.2 M；norm 8192；总共 "
                 "218 112 000。MLP 约占这一层的 81 %；GQA 把 k_proj 和 v_proj 缩小到 q_proj 的四分之一。"),
        see=Ref("reference", "self.gate_proj = nn.Linear(hidden_dim, intermediate_dim, bias=False)"),
        proof=lambda ref: _parameters_measured(ref, 4096, 32, 8, 14336),
    ),
    Number(
        "kv_bytes_per_token",
        en="A stack of 32 such layers (hidden_dim 4096, 32 query heads, 8 KV heads) caches each token's keys (after "
           "RoPE) and values in bfloat16. How many bytes does one token add to the cache, all layers together?",
        zh="32 层这样的层（hidden_dim 4096，32 个 query 头，8 个 KV 头）以 bfloat16 缓存每个 token 的 key（RoPE 之后）和 "
           "value。一个 token 让缓存增加多少字节（所有层合计）？",
        answer=lambda: kv_bytes_per_token(32, 8, 128, 2),
        unit=("bytes", "字节"),
        explain=("32 layers · 2 · 8 heads · 128 dims · 2 bytes = 128 KiB per token, 1 GiB for an 8192-token context. "
                 "With 32 KV heads (plain MHA) it would be 4 times as much; GQA shares each KV head among 4 query heads.",
                 "32 层 · 2 · 8 个头 · 128 维 · 2 字节 = 每个 token 128 KiB，8192 个 token 的上下文就是 1 GiB。若有 32 个 KV 头"
                 "（普通 MHA）则是 4 倍；GQA 让每个 KV 头由 4 个 query 头共享。"),
        see=Ref("reference", "k = self.k_proj(x).view(B, L, Hkv, D).transpose(1, 2)"),
        proof=lambda ref: _kv_bytes_measured(ref, 32, 4096, 32, 8),
    ),
    Number(
        "forward_flops",
        en="Count the matmul FLOPs (2 per multiply-add) of one forward pass of that layer (hidden 4096, 32 heads, 8 KV "
           "heads, intermediate 14336) on B = 1, L = 4096: all seven projections, plus QKᵀ and weights @ V computed in "
           "full (the masked half included). Ignore norms, RoPE, the softmax and elementwise ops.",
        zh="统计该层（hidden 4096，32 个头，8 个 KV 头，intermediate 14336）在 B = 1、L = 4096 上一次前向传播的矩阵乘法 FLOPs"
           "（每次乘加记 2 次）：全部七个投影，加上完整计算的 QKᵀ 和 weights @ V（被掩码的一半也算）。忽略 norm、RoPE、"
           "softmax 和逐元素运算。",
        answer=lambda: layer_forward_flops(1, 4096, 4096, 32, 8, 14336),
        unit=("FLOPs", "次浮点运算"),
        rel_tol=0.01,
        explain=("The projections cost 2 · L · 218.1 M ≈ 1.79e12 and the attention core 4 · L² · 4096 ≈ 2.7e11, about "
                 "2.06e12 in all: at 4096 tokens the core is only about 13 %. Its ratio to the projections "
                 "grows linearly with L, and the two are equal only near L ≈ 26 600 tokens.",
                 "投影的开销是 2 · L · 218.1 M ≈ 1.79e12，注意力核心是 4 · L² · 4096 ≈ 2.7e11，合计约 2.06e12：4096 个 token "
                 "时核心只占约 13 %。它与投影之比随 L 线性增长，要到 L ≈ 26 600 左右两者才相等。"),
        see=Ref("reference", "scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(D)"),
        proof=lambda ref: _flops_measured(ref, 1, 4096, 4096, 32, 8, 14336),
    ),
    Choice(
        "why_pre_norm",
        en="Why does Llama normalise the input of each sublayer (pre-norm) instead of the sum after each residual "
           "addition (post-norm, as in the original Transformer)?",
        zh="为什么 Llama 对每个子层的输入做归一化（pre-norm），而不是像原始 Transformer 那样对残差相加之后的和做归一化"
           "（post-norm）？",
        right=("The residual stream stays an identity path from the first layer to the last, so gradients reach early "
               "layers undamped and deep stacks train stably without a long warm-up; post-norm puts a norm on that path "
               "in every layer.",
               "残差流从第一层到最后一层保持为恒等路径，梯度可以不衰减地传到靠前的层，深层网络无需很长的 warm-up 也能稳定训练；"
               "post-norm 则在每一层都往这条路径上放了一个 norm。"),
        wrong=[("Pre-norm keeps the layer's output normalised, so the next layer and the LM head need no norm of their "
                "own.",
                "pre-norm 让层的输出保持归一化，所以下一层和 LM head 都不需要自己的 norm。"),
               ("Pre-norm needs only one norm per layer instead of two, which saves parameters.",
                "pre-norm 每层只需要一个 norm 而不是两个，节省了参数。"),
               ("RoPE only gives relative positions if the queries and keys come from a normalised residual stream.",
                "只有当 query 和 key 来自归一化的残差流时，RoPE 才能给出相对位置。")],
        explain=("In pre-norm the stream itself is never normalised, so its scale grows with depth, which is why Llama "
                 "has a final norm before the LM head. Both designs have two norms per layer.",
                 "pre-norm 中残差流本身从不归一化，它的尺度随深度增长，所以 Llama 在 LM head 之前还有一个最终的 norm。两种设计"
                 "每层都有两个 norm。"),
        see=Ref("statement", "The residual stream itself is never normalised (pre-norm)."),
    ),
    Choice(
        "rope_layout_checkpoint",
        en="You map the parameter names of Meta's original Llama checkpoint (not the Hugging Face conversion) onto "
           "this layer and load it. What happens?",
        zh="你把 Meta 原始 Llama checkpoint（不是 Hugging Face 转换后的版本）的参数名映射到这一层并加载。会发生什么？",
        right=("It loads without complaint, since every shape matches, but the weights were trained with adjacent pairs "
               "(2i, 2i+1) rotating together while this layer pairs i with i + D/2, so queries and keys are rotated "
               "wrongly and the output is garbage unless the rows of q_proj and k_proj are permuted first.",
               "加载不会报错，因为形状都对得上；但这些权重是按相邻维度 (2i, 2i+1) 一起旋转训练的，而这一层把 i 和 i + D/2 配对，"
               "所以 query 和 key 都被转错了，除非先置换 q_proj 和 k_proj 的行，否则输出是乱的。"),
        wrong=[("Nothing changes: both layouts rotate by the same angles, and scores depend only on relative positions.",
                "没有变化：两种布局转的角度相同，而且分数只依赖相对位置。"),
               ("Only the values come out wrong, because the two layouts differ in how RoPE is applied to V.",
                "只有 value 会出错，因为两种布局对 V 施加 RoPE 的方式不同。"),
               ("The head dims of the attention output come out permuted, which o_proj absorbs, so the layer output "
                "is unchanged.",
                "注意力输出的头维度被置换了，o_proj 会吸收它，所以层的输出不变。")],
        explain=("Which dims form a rotating pair is baked into q_proj and k_proj; the same angles applied to other "
                 "pairs change q·k itself, not just the order of dims. V is never rotated, and Hugging Face's "
                 "conversion script permutes the q and k rows for exactly this reason.",
                 "哪些维度组成一对一起旋转，已经固化在 q_proj 和 k_proj 里；同样的角度作用在别的维度对上，改变的是 q·k 本身，"
                 "而不只是维度的顺序。V 从不旋转；Hugging Face 的转换脚本正是因此要置换 q 和 k 的行。"),
        see=Ref("reference", "q = q * cos + _rotate_half(q) * sin"),
    ),
]


def _parameters_measured(ref, E, H, Hkv, F):
    import torch

    with torch.device("meta"):
        layer = ref.LlamaDecoderLayer(E, H, Hkv, F)
    return sum(p.numel() for p in layer.parameters())


def _kv_bytes_measured(ref, layers, E, H, Hkv):
    """Run one bfloat16 token through the reference's k_proj and v_proj on meta and count the bytes they output."""
    import torch

    with torch.device("meta"):
        attn = ref.LlamaAttention(E, H, Hkv).to(torch.bfloat16)
        x = torch.empty(1, 1, E, dtype=torch.bfloat16)
    k, v = attn.k_proj(x), attn.v_proj(x)
    return layers * (k.numel() * k.element_size() + v.numel() * v.element_size())


def _flops_measured(ref, B, L, E, H, Hkv, F):
    """The reference layer's forward on meta tensors (nothing is computed), counted by FlopCounterMode."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    with torch.device("meta"):
        layer = ref.LlamaDecoderLayer(E, H, Hkv, F)
        x = torch.empty(B, L, E)
    with FlopCounterMode(display=False) as fc:
        layer(x)
    return fc.get_total_flops()
