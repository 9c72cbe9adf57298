"""Follow-up questions for `speculative_decoding` (see attn_drill/bank/quiz.py for the format)."""
from attn_drill.bank.quiz import Choice, Number, Ref


def acceptance_rate(p, q):
    """Probability that a draft x ~ q is accepted: Σ_x q(x) min(1, p(x)/q(x)) = Σ_x min(p(x), q(x))."""
    return sum(min(a, b) for a, b in zip(p, q))


def expected_tokens_per_call(alpha, G):
    """n + 1 tokens per call with P(n >= k) = alpha^k for k = 0 .. G: the sum is (1 - alpha^(G+1)) / (1 - alpha)."""
    return sum(alpha ** k for k in range(G + 1))


QUESTIONS = [
    Number(
        "acceptance_rate",
        en="Take the statement's rows p_0 = [0.5, 0.3, 0.2] (target) and q_0 = [0.2, 0.6, 0.2] (draft), with x_0 "
           "drawn from q_0. What is the probability that x_0 is accepted?",
        zh="取题目中的两行 p_0 = [0.5, 0.3, 0.2]（目标模型）和 q_0 = [0.2, 0.6, 0.2]（草稿模型），x_0 从 q_0 中抽取。"
           "x_0 被接受的概率是多少？",
        answer=lambda: acceptance_rate([0.5, 0.3, 0.2], [0.2, 0.6, 0.2]),
        unit=("probability", "概率"),
        rel_tol=1e-9,
        explain=("Σ_x q(x) · min(1, p(x)/q(x)) = Σ_x min(p(x), q(x)) = 0.2 + 0.3 + 0.2 = 0.7, that is one minus "
                 "the total variation distance between p and q. Token 1 is drafted too often (0.6 against 0.3), so "
                 "it is accepted only half of the time.",
                 "Σ_x q(x) · min(1, p(x)/q(x)) = Σ_x min(p(x), q(x)) = 0.2 + 0.3 + 0.2 = 0.7，即 1 减去 p 与 q 的总变差"
                 "距离。token 1 被草稿模型提得太多（0.6 对 0.3），所以只有一半的时候被接受。"),
        see=Ref("reference", "accepted = u_accept < p_x / q_x"),
        proof=lambda ref: _measured_acceptance(ref),
    ),
    Number(
        "tokens_per_call",
        en="Every draft is accepted with the same probability 0.8, independently, and G = 4 drafts are proposed per "
           "call. How many tokens does one verification call emit on average (accepted drafts plus the one "
           "sampled token)?",
        zh="每个草稿 token 都以相同的概率 0.8 被独立地接受，每次调用提出 G = 4 个草稿。一次验证调用平均产出多少个 token"
           "（被接受的草稿加上最后采样的那一个）？",
        answer=lambda: expected_tokens_per_call(0.8, 4),
        unit=("tokens", "个 token"),
        rel_tol=0.01,
        explain=("P(n >= k) = 0.8^k for k <= 4, so E[n + 1] = 1 + 0.8 + 0.64 + 0.512 + 0.4096 = (1 - 0.8^5) / 0.2 "
                 "≈ 3.36. Even with every draft rejected a call emits one token, so the target never does worse "
                 "than plain decoding in tokens per pass.",
                 "k <= 4 时 P(n >= k) = 0.8^k，所以 E[n + 1] = 1 + 0.8 + 0.64 + 0.512 + 0.4096 = (1 - 0.8^5) / 0.2 ≈ 3.36。"
                 "即使所有草稿都被拒绝，一次调用也会产出一个 token，所以按每次目标模型前向产出的 token 数，它永远不比普通"
                 "解码差。"),
        see=Ref("reference", "n = accepted.long().cumprod(dim=1).sum(dim=1)"),
        proof=lambda ref: _measured_tokens_per_call(ref, 4),
    ),
    Choice(
        "why_residual",
        en="After a rejection, why is the new token drawn from norm(max(0, p - q)) and not from p itself?",
        zh="被拒绝之后，为什么新 token 从 norm(max(0, p - q)) 中抽取，而不是直接从 p 中抽取？",
        right=("The accept path already hands each token t a mass of min(p(t), q(t)); what is missing to reach p(t) "
               "is max(0, p(t) - q(t)), so only the residual makes the total exactly p.",
               "接受这条路径已经给了每个 token t 大小为 min(p(t), q(t)) 的概率；要补足到 p(t)，缺的正是 max(0, p(t) - q(t))，"
               "所以只有从残差中抽取，总分布才恰好是 p。"),
        wrong=[("Sampling from p would also be exact; the residual is only there to avoid emitting the rejected "
                "token again.",
                "从 p 中抽取同样是精确的；用残差只是为了避免再次输出被拒绝的那个 token。"),
               ("The residual is cheaper, because it has fewer non-zero entries than p.",
                "残差更便宜，因为它的非零元素比 p 少。"),
               ("The residual corrects for the draft model's temperature, which p does not know about.",
                "残差修正的是草稿模型的温度，而 p 并不知道这个温度。")],
        explain=("P(t) = q(t) min(1, p(t)/q(t)) + (1 - a) · norm(max(0, p - q))(t) = min(p, q)(t) + max(0, p - q)(t) "
                 "= p(t). Drawing from p instead counts min(p, q) twice and biases the output toward tokens the draft "
                 "also likes.",
                 "P(t) = q(t) min(1, p(t)/q(t)) + (1 - a) · norm(max(0, p - q))(t) = min(p, q)(t) + max(0, p - q)(t) = p(t)。"
                 "若改为从 p 中抽取，min(p, q) 就被算了两次，输出会偏向草稿模型也喜欢的 token。"),
        see=Ref("reference", "residual = (p_n - q_n).clamp(min=0)"),
    ),
    Choice(
        "discard_after_rejection",
        en="Draft x_3 passes its own test, but x_1 was rejected. Why is x_3 thrown away?",
        zh="草稿 x_3 通过了它自己的检验，但 x_1 被拒绝了。为什么 x_3 也要丢掉？",
        right=("p_3 and q_3 were computed with x_1 in the context; once x_1 is replaced by a resampled token, those "
               "rows describe a prefix that no longer exists.",
               "p_3 和 q_3 是在上下文包含 x_1 的情况下算出来的；x_1 一旦被重新采样的 token 替换，这两行描述的就是一个已经"
               "不存在的前缀。"),
        wrong=[("It could be kept, since its test passed; it is dropped only to keep the output tensor rectangular.",
                "它其实可以保留，因为检验通过了；丢掉它只是为了让输出张量保持矩形。"),
               ("It is kept, and the resampled token is inserted before it.",
                "它会被保留，重新采样的 token 插在它前面。"),
               ("Because accepting it would make the bonus token come from the wrong row.",
                "因为接受它会让 bonus token 来自错误的行。")],
        explain=("Each test compares the two models' distributions given the drafts before it. After a rejection "
                 "the emitted prefix differs from the drafted one, so every later draft and its probabilities are "
                 "conditioned on the wrong history.",
                 "每一次检验比较的都是在前面草稿给定时两个模型的分布。一旦拒绝，输出的前缀就与草稿的前缀不同，之后所有的草稿"
                 "及其概率都以错误的历史为条件。"),
        see=Ref("reference", "# n: the length of the accepted prefix (everything after the first rejection is thrown away)"),
    ),
    Choice(
        "where_speed_comes_from",
        en="Where does the speed-up of speculative decoding come from?",
        zh="投机解码的加速来自哪里？",
        right=("The target scores all G drafts in one forward pass, which costs about as much wall time as a single "
               "decode step because decoding is limited by reading the weights, and that pass emits n + 1 tokens "
               "instead of one.",
               "目标模型用一次前向就给全部 G 个草稿打分，由于解码受限于读取权重，这一次前向的耗时与单步解码相近，却产出 "
               "n + 1 个 token 而不是一个。"),
        wrong=[("The target model does fewer FLOPs, because it only evaluates the tokens the draft proposes.",
                "目标模型做的浮点运算更少，因为它只评估草稿提出的 token。"),
               ("The target is skipped whenever the draft model is confident enough.",
                "只要草稿模型足够自信，就跳过目标模型。"),
               ("It samples from a slightly different distribution that is cheaper to compute, trading a small "
                "bias for speed.",
                "它从一个稍有不同、更容易计算的分布中采样，用一点偏差换取速度。")],
        explain=("The target still runs once per call and does at least as many FLOPs as before, plus the rejected "
                 "drafts' work; the gain is that one memory-bound pass verifies several positions at once. The "
                 "output distribution is exactly the target's.",
                 "每次调用目标模型仍要运行一次，浮点运算不少于原来，还要加上被拒草稿的那部分；收益在于一次受内存限制的前向能"
                 "同时验证多个位置。输出分布与目标模型完全相同。"),
        see=Ref("reference", "target_probs: (B, G + 1, V) p; p_i for i < G at the draft positions, p_G after the last draft"),
    ),
]


def _grid(N):
    """N midpoints of [0, 1): exactly round(r * N) of them lie below r when r * N is an integer."""
    return [(k + 0.5) / N for k in range(N)]


def _measured_acceptance(ref):
    """One block per (draft token, uniform): the share of accepted drafts, weighted by q(x)."""
    import torch
    p = torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64)
    q = torch.tensor([0.2, 0.6, 0.2], dtype=torch.float64)
    us = torch.tensor(_grid(1000), dtype=torch.float64)
    N, V = len(us), len(p)
    x = torch.arange(V).repeat_interleave(N)[:, None]                          # (V·N, 1)
    u = us.repeat(V)[:, None]                                                   # (V·N, 1)
    target = torch.stack([p, p])[None].expand(V * N, 2, V).contiguous()         # (V·N, 2, V)
    draft = q[None, None].expand(V * N, 1, V).contiguous()                      # (V·N, 1, V)
    _, n = ref.speculative_verify(x, draft, target, u, torch.zeros(V * N, dtype=torch.float64))
    accepted = n.to(torch.float64).view(V, N).mean(dim=1)                       # share accepted per token
    return float((q * accepted).sum())


def _measured_tokens_per_call(ref, G):
    """Target [0.8, 0.2] against a draft that always proposes token 0: every draft is accepted iff u < 0.8.
    The uniforms run over a full product grid of G positions, so the mean of n + 1 is exact."""
    import itertools

    import torch
    us = _grid(10)
    u = torch.tensor(list(itertools.product(us, repeat=G)), dtype=torch.float64)  # (10^G, G)
    B = u.shape[0]
    target = torch.tensor([0.8, 0.2], dtype=torch.float64).expand(B, G + 1, 2).contiguous()
    draft = torch.tensor([1.0, 0.0], dtype=torch.float64).expand(B, G, 2).contiguous()
    x = torch.zeros(B, G, dtype=torch.long)
    _, n = ref.speculative_verify(x, draft, target, u, torch.zeros(B, dtype=torch.float64))
    return float((n + 1).to(torch.float64).mean())
