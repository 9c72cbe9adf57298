"""Follow-up questions for `mqa` (see attn_drill/bank/quiz.py for the format)."""
from attn_drill.bank.quiz import Choice, Number, Ref


def kv_cache_bytes(num_layers, hidden_dim, num_heads, num_kv_heads, seq_len, batch_size, bytes_per_elem):
    """A key and a value vector of head_dim per layer, KV head, token and sequence."""
    head_dim = hidden_dim // num_heads
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_elem


def mqa_params(hidden_dim, num_heads):
    """q_proj and out_proj are (E, E); k_proj and v_proj are (head_dim, E), one head each. No bias."""
    head_dim = hidden_dim // num_heads
    return 2 * hidden_dim * hidden_dim + 2 * head_dim * hidden_dim


QUESTIONS = [
    Number(
        "falcon_cache",
        en="Falcon-7B has 32 layers, hidden size 4544, 71 query heads and one KV head. How many bytes does its KV "
           "cache hold for a batch of 16 sequences of 2048 tokens in bfloat16?",
        zh="Falcon-7B 有 32 层，隐藏维 4544，71 个 query 头和 1 个 KV 头。16 条长度为 2048 的序列、bfloat16 下，它的 KV "
           "cache 占多少字节？",
        answer=lambda: kv_cache_bytes(32, 4544, 71, 1, 2048, 16, 2),
        unit=("bytes", "字节"),
        explain=("head_dim = 4544 / 71 = 64, so each token of each layer stores 2 · 64 numbers: 256 MiB for the "
                 "whole batch. With 71 KV heads (multi-head attention) it would be 71 times that, about 17.8 GiB.",
                 "head_dim = 4544 / 71 = 64，每层每个 token 存 2 · 64 个数：整个 batch 共 256 MiB。若有 71 个 KV 头（多头"
                 "注意力），就是它的 71 倍，约 17.8 GiB。"),
        see=Ref("reference", "per_token_per_layer = 2 * num_kv_heads * head_dim"),
        proof=lambda ref: ref.kv_cache_bytes(32, 4544, 71, 1, 2048, 16, 2),
    ),
    Number(
        "mqa_params",
        en="How many parameters do q_proj, k_proj, v_proj and out_proj of MultiQueryAttention(4096, 32) hold "
           "together (no bias)?",
        zh="MultiQueryAttention(4096, 32) 的 q_proj、k_proj、v_proj 和 out_proj 一共有多少个参数（无偏置）？",
        answer=lambda: mqa_params(4096, 32),
        unit=("parameters", "个参数"),
        explain=("2 · 4096² for Q and out plus 2 · 128 · 4096 for the single K and V heads: 34 603 008, against "
                 "67 108 864 for multi-head attention. Almost half the attention weights go, but the big win is "
                 "still the cache, which shrinks 32 times.",
                 "Q 和 out 为 2 · 4096²，单个 K、V 头为 2 · 128 · 4096：共 34 603 008，而多头注意力是 67 108 864。注意力权重"
                 "几乎少了一半，但最大的收益仍是缓存，它缩小为 1/32。"),
        see=Ref("reference", "self.k_proj = nn.Linear(hidden_dim, self.head_dim, bias=False)   # one key head"),
        proof=lambda ref: _measured_params(ref, 4096, 32),
    ),
    Choice(
        "why_gqa_over_mqa",
        en="MQA gives the smallest cache possible, yet Llama 2 70B and Llama 3 chose GQA with 8 KV heads. Why?",
        zh="MQA 的缓存已经小到不能再小，为什么 Llama 2 70B 和 Llama 3 还是选择了 8 个 KV 头的 GQA？",
        right=("One KV head costs quality and can make training less stable, and under tensor parallelism it has "
               "to be replicated on every GPU; 8 KV heads get close to multi-head quality while keeping most of "
               "the saving, one KV head per GPU at 8-way parallelism.",
               "只有一个 KV 头会损失质量，也可能让训练不那么稳定；而且在张量并行下它必须在每张 GPU 上复制一份。8 个 KV 头"
               "的质量接近多头注意力，同时保留了大部分节省，8 路并行时每张 GPU 正好一个 KV 头。"),
        wrong=[("MQA is slower at decode: all query heads contend for one KV head, which serialises their reads.",
                "MQA 在 decode 时更慢：所有 query 头争抢同一个 KV 头，读取被串行化。"),
               ("MQA saves no cache in practice, because its single KV head is repeated to every query head before "
                "it is cached.",
                "MQA 实际上不省缓存，因为唯一的 KV 头在缓存之前就被复制给了每个 query 头。"),
               ("GQA does fewer FLOPs than MQA, since each KV head serves fewer query heads.",
                "GQA 的 FLOPs 比 MQA 少，因为每个 KV 头服务的 query 头更少。")],
        explain=("Sharing one key and value space among all heads limits what the heads can attend to differently; "
                 "a few KV groups restore most of that. The attention FLOPs are the same in MQA, GQA and MHA; "
                 "only the stored and read KV bytes differ.",
                 "所有头共享同一个 key/value 空间，限制了各个头关注不同内容的能力；少量 KV 分组就能恢复其中大部分。MQA、GQA 和"
                 "MHA 的注意力 FLOPs 相同，不同的只是存储和读取的 KV 字节数。"),
        see=Ref("statement", "all `num_heads` query heads share **one** key head and **one** value head"),
    ),
    Choice(
        "convert_checkpoint",
        en="You have a trained multi-head checkpoint and want an MQA model without pretraining from scratch. "
           "Which conversion works best in practice?",
        zh="你有一个训练好的多头注意力 checkpoint，想在不从头预训练的情况下得到 MQA 模型。实践中哪种转换方式效果最好？",
        right=("Average the key projections of all heads into one, and the value projections likewise, then "
               "continue training briefly (uptraining) so the model adapts to the shared head.",
               "把所有头的 key 投影平均成一个，value 投影也同样平均，然后再短暂地继续训练（uptraining），让模型适应共享的头。"),
        wrong=[("Keep the first head's key and value projections and drop the others; no further training is "
                "needed.",
                "保留第一个头的 key 和 value 投影，丢掉其余的；不需要再训练。"),
               ("Sum the key and value projections of all heads, so that the single head keeps the full signal.",
                "把所有头的 key 和 value 投影相加，让唯一的头保留全部信号。"),
               ("Concatenate the heads' key projections into one wide head of hidden_dim channels.",
                "把各个头的 key 投影拼接成一个 hidden_dim 通道的宽头。")],
        explain=("Mean pooling keeps information from every head at the right scale; picking one head discards "
                 "the rest, and summing scales the scores by the number of heads. A concatenated head is no "
                 "longer a head_dim vector and saves nothing. A short uptraining closes most of the remaining gap.",
                 "平均池化以正确的尺度保留了每个头的信息；只取一个头会丢掉其余的，相加会把分数放大头数倍。拼接出来的头不再是 "
                 "head_dim 维的向量，什么也省不下。短暂的 uptraining 能弥补剩下的大部分差距。"),
        see=Ref("reference", "self.v_proj = nn.Linear(hidden_dim, self.head_dim, bias=False)   # one value head"),
    ),
]


def _measured_params(ref, E, H):
    """Parameters of the reference module, built on the meta device (no memory)."""
    import torch

    with torch.device("meta"):
        m = ref.MultiQueryAttention(E, H, dropout=0.0)
    return sum(p.numel() for p in m.parameters())
