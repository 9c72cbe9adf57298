"""Follow-up questions for `linear_attention` (see attn_drill/bank/quiz.py for the format)."""
from attn_drill.bank.quiz import Choice, Number, Ref


def state_bytes(B, H, D, Dv, bytes_per_element):
    """The recurrent state of every head: S (D x Dv) and z (D)."""
    return B * H * (D * Dv + D) * bytes_per_element


def crossover_length(D, Dv):
    """The smallest L whose softmax KV cache (a key of D and a value of Dv per token and head) holds more numbers
    than the linear-attention state (D * Dv + D per head)."""
    return (D * Dv + D) // (D + Dv) + 1


def chunked_flops(B, H, L, C, D, Dv):
    """Matmul FLOPs (2 per multiply-add) of the chunked form with L a multiple of C. Per chunk and head:
    qc @ S, qc @ kcᵀ, intra @ vc, qc @ z and the state update kcᵀ @ vc."""
    per_chunk = 2 * C * D * Dv + 2 * C * C * D + 2 * C * C * Dv + 2 * C * D + 2 * D * C * Dv
    return B * H * (L // C) * per_chunk


QUESTIONS = [
    Number(
        "state_bytes",
        en="While generating with the recurrent form, each head carries S (D x Dv) and z (D). How many bytes is the "
           "state of one layer with batch 1, 16 heads, D = Dv = 64, in float32, after 100 000 tokens?",
        zh="用递推形式生成时，每个头携带 S（D x Dv）和 z（D）。batch 为 1、16 个头、D = Dv = 64、float32 时，生成了 100 000 个 "
           "token 之后，一层的状态占多少字节？",
        answer=lambda: state_bytes(1, 16, 64, 64, 4),
        unit=("bytes", "字节"),
        explain=("16 · (64 · 64 + 64) · 4 = 266 240 bytes, whatever the number of tokens: the sum over the past is "
                 "folded into S and z. A softmax KV cache for the same layer would grow by 16 · 128 · 4 = 8 KiB per token.",
                 "16 · (64 · 64 + 64) · 4 = 266 240 字节，与 token 数无关：对过去的求和都折叠进了 S 和 z。同一层的 softmax KV "
                 "Cache 则每个 token 增长 16 · 128 · 4 = 8 KiB。"),
        see=Ref("reference", "running sum of phi(k_j) v_j^T"),
    ),
    Number(
        "crossover_length",
        en="Per head, a softmax KV cache stores a key (D) and a value (Dv) for every token; linear attention stores "
           "D · Dv + D numbers whatever the length. With D = Dv = 64, from which sequence length L on does the KV "
           "cache hold more numbers than the linear state?",
        zh="每个头上，softmax 的 KV Cache 为每个 token 存一个 key（D）和一个 value（Dv）；线性注意力无论序列多长都只存 "
           "D · Dv + D 个数。D = Dv = 64 时，序列长度 L 从多少开始，KV Cache 存的数比线性注意力的状态多？",
        answer=lambda: crossover_length(64, 64),
        unit=("tokens", "个 token"),
        explain=("128 · L > 64 · 64 + 64 = 4160 first holds at L = 33. The state is the size of about Dv / 2 tokens of "
                 "cache, which is also why it remembers less than a cache: the whole past is squeezed into D · Dv numbers.",
                 "128 · L > 64 · 64 + 64 = 4160 在 L = 33 时首次成立。状态大约相当于 Dv / 2 个 token 的缓存，这也是它记得比缓存少的"
                 "原因：整个过去被压缩进 D · Dv 个数里。"),
        see=Ref("statement", "so causal attention becomes an RNN"),
    ),
    Number(
        "chunked_flops",
        en="Count the matmul FLOPs (2 per multiply-add) of linear_attention_chunked with B = 1, H = 8, L = 4096, "
           "chunk_size = 64 and D = Dv = 64: per chunk φ(Q_I) S, φ(Q_I) φ(K_I)ᵀ, the masked block times V_I, "
           "φ(Q_I) z and the state update φ(K_I)ᵀ V_I (ignore the feature map, the masks, sums and divisions).",
        zh="统计 linear_attention_chunked 的矩阵乘法 FLOPs（每次乘加记 2 次），B = 1，H = 8，L = 4096，chunk_size = 64，"
           "D = Dv = 64：每个分块包括 φ(Q_I) S、φ(Q_I) φ(K_I)ᵀ、掩码后的块乘 V_I、φ(Q_I) z 以及状态更新 φ(K_I)ᵀ V_I"
           "（忽略特征映射、掩码、求和与除法）。",
        answer=lambda: chunked_flops(1, 8, 4096, 64, 64, 64),
        unit=("FLOPs", "次浮点运算"),
        rel_tol=0.01,
        explain=("Per token it is 4·D·Dv + 2·D + 2·C·(D + Dv), about 1.08e9 in all: linear in L. The parallel form "
                 "costs 2·L²·(D + Dv) per head, 3.4e10 here, about 32 times more, and the gap grows with L.",
                 "每个 token 的开销是 4·D·Dv + 2·D + 2·C·(D + Dv)，总共约 1.08e9：与 L 成线性。并行形式每个头的开销是 "
                 "2·L²·(D + Dv)，这里是 3.4e10，约多 32 倍，而且差距随 L 增大。"),
        see=Ref("reference", "intra = torch.matmul(qc, kc.transpose(-2, -1)).tril()"),
        proof=lambda ref: _measured_chunked_flops(ref, 1, 8, 4096, 64, 64, 64),
    ),
    Choice(
        "why_fixed_state",
        en="Why can causal linear attention run as an RNN with a state of fixed size, while softmax attention has to "
           "keep every past key and value?",
        zh="为什么因果线性注意力可以写成状态大小固定的 RNN，而 softmax 注意力必须保留过去所有的 key 和 value？",
        right=("φ(q_i)·φ(k_j) splits into a part of the query and a part of the key, so Σ_j (φ(q_i)·φ(k_j)) v_j = "
               "φ(q_i)ᵀ Σ_j φ(k_j) v_jᵀ and the sum over keys can be formed before any query arrives; exp(q_i·k_j) "
               "does not split into finitely many such features.",
               "φ(q_i)·φ(k_j) 可以拆成只含 query 的部分和只含 key 的部分，所以 Σ_j (φ(q_i)·φ(k_j)) v_j = "
               "φ(q_i)ᵀ Σ_j φ(k_j) v_jᵀ，对 key 的求和可以在 query 到来之前算好；exp(q_i·k_j) 无法拆成有限个这样的特征。"),
        wrong=[("Softmax needs the maximum over all keys for stability, while linear attention's normaliser is a "
                "running sum; an online softmax would give softmax attention a fixed state too.",
                "softmax 为了数值稳定需要所有 key 上的最大值，而线性注意力的归一化项是累加和；用在线 softmax 的话，softmax "
                "注意力也能有固定大小的状态。"),
               ("Linear attention has no 1/sqrt(D) scale, so its scores never have to be stored.",
                "线性注意力没有 1/sqrt(D) 缩放，所以分数永远不需要存下来。"),
               ("elu + 1 is linear, so the whole layer is a linear map of its input and can be precomputed.",
                "elu + 1 是线性的，所以整层是输入的线性映射，可以预先算好。")],
        explain=("The associativity (φ(Q) φ(K)ᵀ) V = φ(Q) (φ(K)ᵀ V) is what makes the state possible. An online "
                 "softmax streams the keys for one query it already has; a new query still needs all the keys again.",
                 "正是结合律 (φ(Q) φ(K)ᵀ) V = φ(Q) (φ(K)ᵀ V) 让状态成为可能。在线 softmax 是针对一个已知的 query 流式读 key；"
                 "来了新的 query，仍然要把所有 key 再读一遍。"),
        see=Ref("statement", "The weighted sum then factors through a small state"),
    ),
    Choice(
        "positive_features",
        en="Why φ(x) = elu(x) + 1 and not simply φ(x) = x?",
        zh="为什么用 φ(x) = elu(x) + 1，而不是直接用 φ(x) = x？",
        right=("Every feature of elu + 1 is positive, so every weight φ(q_i)·φ(k_j) is positive and the denominator "
               "is a sum of positive terms; with φ(x) = x weights can be negative and the denominator can pass "
               "through zero, blowing the output up or flipping its sign.",
               "elu + 1 的每个特征都是正的，所以每个权重 φ(q_i)·φ(k_j) 都为正，分母是正数之和；若 φ(x) = x，权重可能为负，"
               "分母可能经过零，输出会爆炸或变号。"),
        wrong=[("elu + 1 equals exp on every input, so the result is exactly softmax attention.",
                "elu + 1 在所有输入上都等于 exp，所以结果就是 softmax 注意力。"),
               ("With φ(x) = x the state S would grow with L, while elu + 1 keeps it at D x Dv.",
                "若 φ(x) = x，状态 S 会随 L 增长，而 elu + 1 让它保持 D x Dv。"),
               ("φ(x) = x would make the prefix exclusive, so a position could no longer see itself.",
                "φ(x) = x 会让前缀变成不含自身的，一个位置就看不到它自己了。")],
        explain=("The feature map only has to keep the weights positive, as exp does. elu + 1 equals exp for x ≤ 0 and "
                 "its tangent x + 1 above, so it is not softmax; the state's size D x Dv does not depend on φ at all.",
                 "特征映射只需像 exp 那样让权重保持为正。elu + 1 在 x ≤ 0 时等于 exp，在 x > 0 时是它的切线 x + 1，所以它不是 "
                 "softmax；状态的大小 D x Dv 与 φ 完全无关。"),
        see=Ref("reference", "return F.elu(x) + 1.0"),
    ),
]


def _measured_chunked_flops(ref, B, H, L, C, D, Dv):
    """The reference's chunked form on one chunk (meta tensors), counted by FlopCounterMode; every chunk of a length
    that is a multiple of C costs the same, so the count scales by the number of chunks exactly."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    with torch.device("meta"):
        q, k, v = torch.empty(B, H, C, D), torch.empty(B, H, C, D), torch.empty(B, H, C, Dv)
    with FlopCounterMode(display=False) as fc:
        ref.linear_attention_chunked(q, k, v, chunk_size=C)
    return fc.get_total_flops() * (L // C)
