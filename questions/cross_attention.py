"""Follow-up questions for `cross_attention` (see attn_drill/bank/quiz.py for the format)."""
from attn_drill.bank.quiz import Choice, Number, Ref


def cross_params(decoder_dim, encoder_dim):
    """q_proj and out_proj (decoder_dim² each), k_proj and v_proj (encoder_dim → decoder_dim); no biases."""
    return 2 * decoder_dim * decoder_dim + 2 * encoder_dim * decoder_dim


def cross_kv_bytes(B, Lk, decoder_dim, bytes_per_elem):
    """Projected keys and values of the encoder output, (B, Lk, decoder_dim) each."""
    return 2 * B * Lk * decoder_dim * bytes_per_elem


QUESTIONS = [
    Choice(
        "no_causal",
        en="Why does cross-attention use no causal mask, although it sits inside a decoder that generates left to "
           "right?",
        zh="交叉注意力位于从左到右生成的 decoder 中，为什么却不使用因果掩码？",
        right=("Causality concerns the target tokens, and the decoder's self-attention enforces it; the source is "
               "fully known before decoding starts, so seeing all of it leaks nothing about the future.",
               "因果性针对的是目标端的 token，由 decoder 的自注意力来保证；源序列在解码开始前就已完全已知，看到它的全部"
               "不会泄露任何关于未来的信息。"),
        wrong=[("A triangular mask cannot be defined when Lq ≠ Lk, so cross-attention has to do without one.",
                "Lq ≠ Lk 时无法定义三角掩码，所以交叉注意力只能不用。"),
               ("The causal mask is folded into key_padding_mask, which hides the later encoder positions.",
                "因果掩码已经并入 key_padding_mask，由它屏蔽靠后的 encoder 位置。"),
               ("It would be correct to add one, but it is left out because it costs too much memory.",
                "加上因果掩码才是对的，只是因为太占显存而省略了。")],
        explain=("Target position i must not see target tokens after i, and nothing in the encoder output comes "
                 "from the target. A rectangular mask is easy to build (tril(ones(Lq, Lk))), but it would wrongly "
                 "hide the end of the source sentence from the first target words.",
                 "目标位置 i 不能看到 i 之后的目标 token，而 encoder 的输出里没有任何来自目标端的信息。矩形的掩码很容易构造"
                 "（tril(ones(Lq, Lk))），但它会错误地让前面的目标词看不到源句子的后半部分。"),
        see=Ref("statement", "here the whole source sentence is already known"),
    ),
    Choice(
        "kv_reuse",
        en="During autoregressive decoding, what can a cross-attention layer compute once and reuse at every "
           "step?",
        zh="自回归解码时，交叉注意力层可以一次算好、在每一步重复使用的是什么？",
        right=("The projected keys and values of the encoder output: they do not depend on the target, so only "
               "the new query has to be projected at each step.",
               "encoder 输出投影后的 key 和 value：它们与目标端无关，所以每一步只需投影新的 query。"),
        wrong=[("Nothing: the keys and values change at every step because the decoder's hidden state changes.",
                "什么都不能：每一步 decoder 的隐藏状态都变，key 和 value 也随之改变。"),
               ("The attention weights, because the source sentence does not change between steps.",
                "注意力权重，因为源句子在各步之间不变。"),
               ("The keys and values, which grow by one row per generated token, as in self-attention.",
                "key 和 value，它们和自注意力一样，每生成一个 token 就增加一行。")],
        explain=("K and V come only from encoder_hidden, so a cross-attention cache is filled once, with Lk rows, "
                 "and never grows. The weights depend on the new query, so they must be recomputed at every step.",
                 "K 和 V 只来自 encoder_hidden，所以交叉注意力的缓存只需填一次，共 Lk 行，之后不再增长。注意力权重依赖于"
                 "新的 query，每一步都必须重算。"),
        see=Ref("reference", "k = self.k_proj(encoder_hidden).view(B, Lk, H, D).transpose(1, 2)"),
    ),
    Choice(
        "query_side",
        en="Why do the queries come from the decoder and the keys and values from the encoder, and not the other "
           "way around?",
        zh="为什么 query 来自 decoder，而 key 和 value 来自 encoder，不能反过来？",
        right=("The output has one row per query: each target position must gather what it needs from the source, "
               "giving (B, Lq, decoder_dim) that is added to the decoder's residual stream.",
               "输出对每个 query 有一行：每个目标位置都要从源序列中取得所需的信息，得到 (B, Lq, decoder_dim)，再加到 "
               "decoder 的残差流上。"),
        wrong=[("Attention is symmetric in queries and keys, so both choices give the same output.",
                "注意力对 query 和 key 是对称的，两种选法输出相同。"),
               ("The keys must come from the longer sequence, and the source is usually the longer one.",
                "key 必须来自更长的序列，而源序列通常更长。"),
               ("The encoder is wider, and the keys must carry the larger width.",
                "encoder 更宽，而 key 必须承载更大的宽度。")],
        explain=("Swapping the roles would give one row per source position, a (B, Lk, ·) result the decoder "
                 "cannot use. The softmax normalises over keys, so queries and keys are not interchangeable, and "
                 "either length may be the longer one.",
                 "交换角色会得到每个源位置一行、形状为 (B, Lk, ·) 的结果，decoder 无法使用。softmax 是在 key 上归一化的，"
                 "所以 query 和 key 不能互换，而且两个长度谁长都有可能。"),
        see=Ref("reference", "q = self.q_proj(decoder_hidden).view(B, Lq, H, D).transpose(1, 2)"),
    ),
    Number(
        "param_count",
        en="How many parameters does CrossAttention(decoder_dim=512, encoder_dim=768, num_heads=8) have?",
        zh="CrossAttention(decoder_dim=512, encoder_dim=768, num_heads=8) 有多少个参数？",
        answer=lambda: cross_params(512, 768),
        unit=("parameters", "个参数"),
        explain=("q_proj and out_proj are 512 × 512 each, k_proj and v_proj 768 → 512 each: 2 · 512² + 2 · 768 · "
                 "512 = 1,310,720. The encoder width only enters the key and value projections; num_heads does "
                 "not change the count.",
                 "q_proj 和 out_proj 各为 512 × 512，k_proj 和 v_proj 各为 768 → 512：2 · 512² + 2 · 768 · 512 = "
                 "1,310,720。encoder 的宽度只出现在 key 和 value 投影中；num_heads 不影响参数量。"),
        see=Ref("reference", "self.k_proj = nn.Linear(encoder_dim, decoder_dim, bias=False)"),
        proof=lambda ref: sum(p.numel() for p in ref.CrossAttention(512, 768, 8).parameters()),
    ),
    Number(
        "cross_kv_cache",
        en="For generation you cache one cross-attention layer's projected K and V of the encoder output. B = 8, "
           "1000 source tokens, decoder_dim = 512, encoder_dim = 1024, float16. How many bytes is that cache?",
        zh="生成时，你为一个交叉注意力层缓存 encoder 输出投影后的 K 和 V。B = 8，1000 个源 token，decoder_dim = 512，"
           "encoder_dim = 1024，float16。这个缓存占多少字节？",
        answer=lambda: cross_kv_bytes(8, 1000, 512, 2),
        unit=("bytes", "字节"),
        explain=("K and V are each (B, Lk, decoder_dim) after k_proj and v_proj: 2 · 8 · 1000 · 512 · 2 bytes = "
                 "16,384,000. The projections map the encoder's 1024 features to 512, so using encoder_dim would "
                 "double the answer; the size does not grow during decoding.",
                 "经过 k_proj 和 v_proj 后，K 和 V 各为 (B, Lk, decoder_dim)：2 · 8 · 1000 · 512 · 2 字节 = 16,384,000。"
                 "投影把 encoder 的 1024 个特征映射到 512，若用 encoder_dim 答案会翻倍；解码过程中它的大小也不会增长。"),
        see=Ref("reference", "self.v_proj = nn.Linear(encoder_dim, decoder_dim, bias=False)"),
        proof=lambda ref: _measured_kv_bytes(ref, 8, 1000, 512, 1024, 8),
    ),
]


def _measured_kv_bytes(ref, B, Lk, decoder_dim, encoder_dim, num_heads):
    """Run the reference in float16 on the meta device and add up the bytes k_proj and v_proj return."""
    import torch

    m = ref.CrossAttention(decoder_dim, encoder_dim, num_heads, dropout=0.0).to("meta", torch.float16).eval()
    seen = []
    hooks = [proj.register_forward_hook(lambda mod, inp, out: seen.append(out.numel() * out.element_size()))
             for proj in (m.k_proj, m.v_proj)]
    with torch.device("meta"):
        decoder_hidden = torch.empty(B, 3, decoder_dim, dtype=torch.float16)
        encoder_hidden = torch.empty(B, Lk, encoder_dim, dtype=torch.float16)
    m(decoder_hidden, encoder_hidden)
    for h in hooks:
        h.remove()
    return sum(seen)
