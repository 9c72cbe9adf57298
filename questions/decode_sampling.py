"""Follow-up questions for `decode_sampling` (see attn_drill/quiz.py for the format)."""
import math

from attn_drill.bank.quiz import Choice, Number, Ref


def top_p_kept(probs, top_p):
    """How many tokens top-p keeps: a token stays iff the mass strictly more probable than it is < top_p."""
    return sum(1 for p in probs if sum(q for q in probs if q > p) < top_p)


def min_p_kept(logits, temperature, min_p):
    """How many tokens min-p keeps after temperature: exp((l - l_max) / T) >= min_p."""
    top = max(logits)
    return sum(1 for v in logits if math.exp((v - top) / temperature) >= min_p)


def _measured_top_p(ref, probs, top_p):
    import torch
    logits = torch.tensor(probs, dtype=torch.float64).log()[None]
    return int((ref.filter_probs(logits, top_p=top_p) > 0).sum())


def _measured_min_p(ref, logits, temperature, min_p):
    import torch
    x = torch.tensor(logits, dtype=torch.float64)[None]
    return int((ref.filter_probs(x, temperature=temperature, min_p=min_p) > 0).sum())


QUESTIONS = [
    Number(
        "top_p_count",
        en="A distribution over 6 tokens is [0.35, 0.25, 0.2, 0.1, 0.06, 0.04]. How many tokens does top-p = 0.75 keep "
           "(a token stays iff the mass strictly more probable than it is below 0.75)?",
        zh="6 个 token 上的分布为 [0.35, 0.25, 0.2, 0.1, 0.06, 0.04]。top-p = 0.75 保留多少个 token（当且仅当概率严格"
           "大于它的 token 的总质量小于 0.75 时保留）？",
        answer=lambda: top_p_kept([0.35, 0.25, 0.2, 0.1, 0.06, 0.04], 0.75),
        unit=("tokens", "个 token"),
        explain=("The masses above each token are 0, 0.35, 0.6, 0.8, 0.9, 0.96: the first three are below 0.75, so "
                 "three tokens stay. The third one brings the total to 0.8, past 0.75, and is still kept (it is the "
                 "token that crosses top-p); the fourth has 0.8 above it and goes.",
                 "各 token 之前的质量依次为 0、0.35、0.6、0.8、0.9、0.96：前三个小于 0.75，所以保留 3 个 token。第三个使总和达到 "
                 "0.8，超过了 0.75，但仍被保留（它就是跨过 top-p 的那个 token）；第四个之前的质量是 0.8，被去掉。"),
        see=Ref("reference", "kept = mass_above < top_p                                       # a prefix of the ranks"),
        proof=lambda ref: _measured_top_p(ref, [0.35, 0.25, 0.2, 0.1, 0.06, 0.04], 0.75),
    ),
    Number(
        "min_p_count",
        en="Logits [3.0, 2.5, 1.0, 0.0, -1.0], temperature 2, min-p 0.3. How many tokens survive min-p (which "
           "compares the probabilities after temperature)?",
        zh="logits 为 [3.0, 2.5, 1.0, 0.0, -1.0]，temperature 为 2，min-p 为 0.3。min-p（比较 temperature 之后的概率）"
           "之后还剩多少个 token？",
        answer=lambda: min_p_kept([3.0, 2.5, 1.0, 0.0, -1.0], 2.0, 0.3),
        unit=("tokens", "个 token"),
        explain=("The ratios to the top are exp((l - 3) / 2) = 1, 0.78, 0.37, 0.22, 0.14: three are >= 0.3. Before "
                 "temperature they would be 1, 0.61, 0.14, 0.05, 0.02, which keep only two: a high temperature widens "
                 "what min-p lets through, which is why it is applied after it.",
                 "与最大值的比值为 exp((l - 3) / 2) = 1、0.78、0.37、0.22、0.14：有三个 >= 0.3。若在 temperature 之前计算，比值为 "
                 "1、0.61、0.14、0.05、0.02，只保留两个：较高的 temperature 会放宽 min-p 的门槛，这正是它要在 temperature 之后"
                 "使用的原因。"),
        see=Ref("reference", "threshold = min_p * probs.amax(dim=-1, keepdim=True)            # (..., 1), relative to the top"),
        proof=lambda ref: _measured_min_p(ref, [3.0, 2.5, 1.0, 0.0, -1.0], 2.0, 0.3),
    ),
    Choice(
        "why_min_p",
        en="What does min-p do that top-p does not?",
        zh="min-p 能做到而 top-p 做不到的是什么？",
        right=("Its cut-off follows the model's confidence: when one token dominates, it removes almost everything "
               "else; when the distribution is flat, it keeps many tokens. Top-p keeps a fixed mass, so a flat "
               "distribution keeps a long tail of poor tokens at high temperature.",
               "它的截断随模型的自信程度变化：某个 token 占主导时，它几乎去掉其余所有 token；分布平坦时，它保留很多 token。"
               "top-p 保留固定的质量，所以在高 temperature 下平坦的分布会留下一长串质量很差的 token。"),
        wrong=[("It is cheaper because it needs no softmax.", "它更便宜，因为不需要 softmax。"),
               ("It guarantees that exactly k tokens are kept.", "它保证恰好保留 k 个 token。"),
               ("It removes the most probable token when it is too confident.", "当模型过于自信时，它会去掉概率最大的 token。")],
        explain=("min-p keeps p >= min_p · p_max: with p_max = 0.9 and min_p = 0.1 the cut-off is 0.09; with p_max = "
                 "0.1 it is 0.01. The most probable token always stays.",
                 "min-p 保留 p >= min_p · p_max 的 token：p_max = 0.9、min_p = 0.1 时截断值为 0.09；p_max = 0.1 时为 0.01。"
                 "概率最大的 token 总会保留。"),
        see=Ref("statement", "keep a token iff its probability is `>= min_p` times the largest"),
    ),
    Choice(
        "why_kv_cache_position",
        en="In the decode loop, why is token t fed at start_pos = P + t and not at 0 or at t?",
        zh="在解码循环中，为什么第 t 个 token 要以 start_pos = P + t 输入，而不是 0 或 t？",
        right=("The cache already holds positions 0 .. P + t - 1; the new token's key and value must go to the next "
               "slot and its position embedding must be P + t, or it overwrites the prompt and sees the wrong "
               "positions.",
               "缓存里已经有位置 0 .. P + t - 1；新 token 的 key 和 value 必须写到下一个位置，位置编码也必须是 P + t，否则它会"
               "覆盖 prompt，并看到错误的位置。"),
        wrong=[("Because the model only accepts even positions.", "因为模型只接受偶数位置。"),
               ("Any start_pos works, since attention is invariant to position.", "任何 start_pos 都行，因为注意力与位置无关。"),
               ("To skip the prefill of the prompt.", "为了跳过对 prompt 的 prefill。")],
        explain=("Incremental decoding must give the same logits as recomputing the whole prefix. That holds only "
                 "if every token keeps the position it would have in the full sequence.",
                 "增量解码必须与重新计算整个前缀得到相同的 logits。只有每个 token 都保持它在完整序列中的位置，这一点才成立。"),
        see=Ref("reference", "logits = model(token[:, None], P + t)[:, -1]                # (B, V), sees the new token's K/V"),
    ),
]
