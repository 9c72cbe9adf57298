"""Follow-up questions for `softcap_qknorm` (see attn_drill/quiz.py for the format)."""
import math

from attn_drill.bank.quiz import Choice, Number, Ref


def capped(x, cap):
    return cap * math.tanh(x / cap)


def qknorm_logit_bound(head_dim, scaling):
    """With unit norm weights every normalised row has norm sqrt(head_dim): |q . k| <= head_dim."""
    return head_dim * scaling


def masked_weight_if_capped_after_mask(cap):
    """Two keys, one allowed with logit 0 and one masked: capped, the masked -inf becomes -cap."""
    return math.exp(-cap) / (1 + math.exp(-cap))


QUESTIONS = [
    Number(
        "cap_of_100",
        en="Gemma 2 caps attention logits at 50. What does a scaled logit of 100 become?",
        zh="Gemma 2 把注意力 logit 的上限设为 50。一个缩放后为 100 的 logit 会变成多少？",
        answer=lambda: capped(100.0, 50.0),
        unit=("(logit)", "（logit）"),
        rel_tol=0.005,
        explain=("50 · tanh(2) ≈ 48.2: past the cap, doubling a logit barely moves it, so no key can take the whole "
                 "softmax by logit growth alone; a logit of 10 becomes 9.87, almost unchanged.",
                 "50 · tanh(2) ≈ 48.2：超过上限之后，logit 翻倍几乎不再变化，所以没有哪个 key 能仅靠 logit 增大就占据整个 "
                 "softmax；logit 为 10 时变成 9.87，几乎不变。"),
        see=Ref("reference", "return cap * torch.tanh(x / cap)"),
        proof=lambda ref: _cap_measured(ref, 100.0, 50.0),
    ),
    Number(
        "qknorm_bound",
        en="With QK-norm (unit norm weights, eps negligible), head_dim = 128 and the usual scaling 1/sqrt(128), "
           "what is the largest possible |logit|?",
        zh="使用 QK-norm（归一化权重为全 1，eps 可忽略），head_dim = 128，缩放为通常的 1/sqrt(128)，|logit| 最大可能是多少？",
        answer=lambda: qknorm_logit_bound(128, 128 ** -0.5),
        unit=("(logit)", "（logit）"),
        rel_tol=1e-4,
        explain=("Each normalised row has RMS 1, so its norm is sqrt(128); by Cauchy-Schwarz |q · k| <= 128, and "
                 "times 1/sqrt(128) the logit is at most sqrt(128) ≈ 11.3, reached when q and k point the same way. "
                 "Only the norm weights can raise it, which is why QK-norm keeps logits from drifting upward.",
                 "每个归一化后的行 RMS 为 1，所以范数为 sqrt(128)；由 Cauchy-Schwarz 不等式 |q · k| <= 128，乘以 1/sqrt(128) "
                 "后 logit 至多为 sqrt(128) ≈ 11.3，在 q 与 k 方向相同时取到。只有归一化权重能把它抬高，这就是 QK-norm 能防止 "
                 "logit 不断增大的原因。"),
        see=Ref("statement", "so that their dot products cannot grow with the weights"),
        proof=lambda ref: _bound_measured(ref, 128),
    ),
    Number(
        "masked_weight",
        en="A query may see one key, whose capped logit is 0; a second key is masked. If the mask were applied "
           "before a soft cap of 2, what weight would the masked key get?",
        zh="一个 query 只能看到一个 key，其软上限后的 logit 为 0；另一个 key 被屏蔽。如果在上限为 2 的软上限之前就应用掩码，"
           "被屏蔽的 key 会得到多少权重？",
        answer=lambda: masked_weight_if_capped_after_mask(2.0),
        unit=("(weight)", "（权重）"),
        rel_tol=0.01,
        explain=("soft_cap(-inf, 2) = -2, so the softmax over [0, -2] gives the masked key e^-2 / (1 + e^-2) ≈ 0.119. "
                 "With Gemma's cap of 50 the leak is e^-50, invisible; with small caps it is a real bug.",
                 "soft_cap(-inf, 2) = -2，于是在 [0, -2] 上做 softmax，被屏蔽的 key 得到 e^-2 / (1 + e^-2) ≈ 0.119。上限为 Gemma "
                 "的 50 时泄漏为 e^-50，看不出来；上限较小时这就是一个真正的 bug。"),
        see=Ref("statement", "capped, it would become `-softcap`"),
        proof=lambda ref: _masked_measured(ref, 2.0),
    ),
    Choice(
        "why_tanh",
        en="Why a tanh soft cap rather than clamping the logits to [-50, 50]?",
        zh="为什么用 tanh 软上限，而不是把 logit 截断到 [-50, 50]？",
        right=("A clamp has zero gradient past the bound, so a logit stuck there stops learning; tanh bends smoothly "
               "and its gradient shrinks but never vanishes.",
               "截断在边界之外梯度为零，卡在那里的 logit 就不再学习；tanh 平滑地弯曲，梯度虽然变小但从不消失。"),
        wrong=[("A clamp would change logits below the bound too, while tanh leaves them exactly unchanged.",
                "截断也会改变边界以内的 logit，而 tanh 让它们完全不变。"),
               ("Clamping cannot be done in bfloat16, while tanh can.",
                "截断无法在 bfloat16 下进行，而 tanh 可以。"),
               ("tanh makes the softmax weights sum to 1 even when logits are large.",
                "tanh 让 softmax 权重在 logit 很大时也能和为 1。")],
        explain=("tanh does change small logits a little (10 becomes 9.87), unlike a clamp; what it buys is a "
                 "gradient everywhere. Softmax weights sum to 1 either way.",
                 "tanh 确实会稍微改变较小的 logit（10 变成 9.87），这点不如截断；它换来的是处处都有梯度。无论哪种方式，softmax "
                 "权重都和为 1。"),
        see=Ref("statement", "Unlike a clamp, it is smooth."),
    ),
    Choice(
        "why_qknorm_in_gemma3",
        en="Gemma 3 replaced Gemma 2's attention soft cap by QK-norm. What does that gain in practice?",
        zh="Gemma 3 用 QK-norm 取代了 Gemma 2 的注意力软上限。这在实践中带来了什么？",
        right=("Standard fused attention kernels (SDPA, FlashAttention without a softcap option) can run again, "
               "since the bound comes from normalising q and k before the kernel rather than from editing its logits.",
               "标准的融合注意力 kernel（SDPA、不带 softcap 选项的 FlashAttention）又能用了，因为上限来自在 kernel 之前对 q、k "
               "做归一化，而不是修改 kernel 内部的 logit。"),
        wrong=[("QK-norm removes the need for the 1/sqrt(head_dim) scaling.",
                "QK-norm 使 1/sqrt(head_dim) 缩放不再需要。"),
               ("QK-norm makes the attention weights of each head sum to one over the heads.",
                "QK-norm 让每个头的注意力权重在所有头上的和为 1。"),
               ("QK-norm can be applied after the mask, which the soft cap could not.",
                "QK-norm 可以放在掩码之后，而软上限不行。")],
        explain=("A soft cap is an elementwise function of the logits inside the softmax, which a fused kernel must "
                 "support explicitly; QK-norm changes only its inputs. The scaling stays, and the weights still sum to "
                 "one per head over the keys.",
                 "软上限是 softmax 内部对 logit 的逐元素函数，融合 kernel 必须显式支持；QK-norm 只改变它的输入。缩放仍然保留，"
                 "权重仍是每个头在 key 上和为 1。"),
        see=Ref("statement", "Fused kernels cannot cap unless they take a `softcap` argument"),
    ),
]


def _cap_measured(ref, x, cap):
    import torch
    return float(ref.soft_cap(torch.tensor([x], dtype=torch.float64), cap))


def _bound_measured(ref, D):
    """q = k = the same normalised row, through the reference's rms_norm and capped_attention's logit."""
    import torch
    g = torch.Generator().manual_seed(0)
    x = torch.randn(D, generator=g, dtype=torch.float64)
    qn = ref.rms_norm(x, torch.ones(D, dtype=torch.float64), 1e-12)
    return float(qn @ qn) * D ** -0.5


def _masked_measured(ref, cap):
    """softmax over [0, soft_cap(-inf)] with the reference's soft_cap."""
    import torch
    logits = torch.tensor([0.0, float("-inf")], dtype=torch.float64)
    return float(torch.softmax(ref.soft_cap(logits, cap), dim=0)[1])
