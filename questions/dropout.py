"""Follow-up questions for `dropout` (see attn_drill/bank/quiz.py for the format)."""
import math

from attn_drill.bank.quiz import Choice, Number, Ref


def row_sum_std(L, p):
    """Std of one row's sum after inverted dropout on uniform weights 1/L: each kept weight becomes
    w / (1 - p), so one weight has variance w² p / (1 - p) and the L of them add up."""
    w = 1.0 / L
    return math.sqrt(L * w * w * p / (1.0 - p))


def dropout_draws(B, H, L, E):
    """One random draw per element that may be zeroed: the (B, H, L, L) weights and the (B, L, E) merged heads."""
    return B * H * L * L + B * L * E


QUESTIONS = [
    Choice(
        "why_inverted",
        en="Why does inverted dropout divide the surviving weights by (1 − p) during training?",
        zh="为什么 inverted dropout 在训练时要把保留下来的权重除以 (1 − p)？",
        right=("So that every element keeps its expected value, E[w · keep / (1 − p)] = w; eval then needs no "
               "change at all.",
               "为了让每个元素保持期望不变，E[w · keep / (1 − p)] = w；这样 eval 时就完全不需要任何改动。"),
        wrong=[("So that each row of the attention weights still sums exactly to 1.",
                "为了让注意力权重的每一行之和仍然恰好为 1。"),
               ("So that the variance of each weight stays the same as without dropout.",
                "为了让每个权重的方差与不做 dropout 时相同。"),
               ("So that the weight of every dropped key is handed on to the kept keys of the same row.",
                "为了把被丢弃 key 的权重转交给同一行中被保留的 key。")],
        explain=("Only the mean is kept: a row sums to 1 on average, and the variance grows. All survivors are "
                 "scaled by the same factor, which is not a renormalisation of the row. Since everything after "
                 "the dropouts in this module is linear, the eval output is exactly the mean training output.",
                 "保持的只是均值：每行之和只在平均意义上为 1，方差反而变大。所有保留的元素都乘以同一个因子，这并不是对该行"
                 "的重新归一化。由于本模块中 dropout 之后的运算都是线性的，eval 的输出恰好等于训练输出的期望。"),
        see=Ref("statement", "Inverted dropout, as `nn.Dropout` does"),
    ),
    Choice(
        "dropout_on_scores",
        en="What would be wrong with applying the attention dropout to the scores, before the softmax?",
        zh="如果把注意力 dropout 作用在 softmax 之前的分数上，会有什么问题？",
        right=("Zeroing a score does not remove its key: exp(0) still gives it weight and the softmax "
               "renormalises, so the logits are only perturbed and no connection is cut.",
               "把分数置零并不会去掉对应的 key：exp(0) 仍给它权重，softmax 还会重新归一化，所以只是扰动了 logits，"
               "并没有切断任何连接。"),
        wrong=[("Nothing: the softmax maps a zero score to a zero weight, so the two are the same.",
                "没有问题：softmax 把为 0 的分数映射成为 0 的权重，所以两者一样。"),
               ("The zeroed scores would act as -inf, and fully dropped rows would turn into NaN.",
                "被置零的分数相当于 -inf，整行被丢弃时会变成 NaN。"),
               ("It would drop every key of a row at once, which regularises far too strongly.",
                "它会一次丢掉一行中所有的 key，正则化太强。")],
        explain=("A dropped weight must be exactly 0 so that the query ignores that key in this step. On the "
                 "scores a 0 can even raise a key's weight (when its score was negative), and the 1 / (1 − p) "
                 "factor on surviving logits sharpens the softmax instead of preserving an expected value.",
                 "被丢弃的权重必须恰好为 0，这一步中 query 才真正忽略这个 key。在分数上置 0 甚至可能提高某个 key 的权重"
                 "（当它原来的分数为负时），而保留的 logits 乘上 1 / (1 − p) 只会让 softmax 更尖锐，并不能保持期望。"),
        see=Ref("reference", "weights = self.attn_dropout(weights)"),
    ),
    Choice(
        "eval_mode",
        en="What does model.eval() change in this module?",
        zh="model.eval() 会改变这个模块的什么？",
        right=("Both nn.Dropout layers become the identity, so the output is deterministic and equals plain "
               "attention; nothing else changes, gradients included.",
               "两个 nn.Dropout 都变成恒等映射，输出是确定的，并且等于普通注意力；其他一切都不变，包括梯度。"),
        wrong=[("It also turns off gradient tracking, so no autograd graph is built.",
                "它还会关闭梯度记录，不再构建计算图。"),
               ("Dropout then multiplies every weight by (1 − p) to match the scale seen in training.",
                "此时 dropout 会把每个权重乘以 (1 − p)，以匹配训练时的尺度。"),
               ("It fixes the random seed, so the same dropout mask is reused for every input.",
                "它会固定随机种子，让每个输入都复用同一个 dropout 掩码。")],
        explain=("eval() only sets self.training = False, which nn.Dropout reads; the grader even compares "
                 "gradients in eval mode. Skipping the graph is torch.no_grad() or torch.inference_mode(), a "
                 "separate switch, and with inverted dropout the rescaling already happened in training.",
                 "eval() 只是把 self.training 设为 False，nn.Dropout 会读取它；评测甚至在 eval 模式下比较梯度。不构建计算图"
                 "要用 torch.no_grad() 或 torch.inference_mode()，那是另一个开关；而 inverted dropout 的缩放在训练时就已经"
                 "做过了。"),
        see=Ref("reference", "self.attn_dropout = nn.Dropout(attn_dropout)"),
    ),
    Number(
        "row_sum_std",
        en="A query attends uniformly to L = 100 keys (every weight 1/100) and the attention dropout has p = 0.1. "
           "In training, what is the standard deviation of that row's sum of weights after dropout?",
        zh="一个 query 均匀地关注 L = 100 个 key（每个权重为 1/100），注意力 dropout 的 p = 0.1。训练时，dropout 之后这一行"
           "权重之和的标准差是多少？",
        answer=lambda: row_sum_std(100, 0.1),
        unit=("(a pure number)", "（无量纲）"),
        rel_tol=0.05,
        explain=("Each weight becomes 0 or w / (1 − p), with variance w² p / (1 − p); 100 independent ones give "
                 "sqrt(p / ((1 − p) L)) = 1/30 ≈ 0.033. The mean stays 1, but a row no longer sums to exactly 1.",
                 "每个权重变成 0 或 w / (1 − p)，方差为 w² p / (1 − p)；100 个相互独立的权重相加得到 "
                 "sqrt(p / ((1 − p) L)) = 1/30 ≈ 0.033。均值仍是 1，但每行之和不再恰好为 1。"),
        see=Ref("reference", "weights = torch.softmax(scores, dim=-1)"),
        proof=lambda ref: _measured_row_sum_std(ref, 100, 0.1),
    ),
    Number(
        "random_draws",
        en="In one training forward with B = 4, L = 4096, hidden_dim = 4096 and 32 heads, both dropouts active: "
           "how many random numbers are drawn (one per element that dropout may zero)?",
        zh="一次训练前向，B = 4，L = 4096，hidden_dim = 4096，32 个头，两个 dropout 都生效：一共要抽取多少个随机数（每个"
           "可能被置零的元素一个）？",
        answer=lambda: dropout_draws(4, 32, 4096, 4096),
        unit=("random numbers", "个随机数"),
        explain=("The attention dropout needs one per weight, B · H · L² ≈ 2.15e9, the output dropout one per "
                 "merged feature, B · L · E ≈ 6.7e7: 2,214,592,512. Stored as a mask, that L² term alone is 2 GiB "
                 "even at one byte each, which is why fused kernels regenerate the mask from the RNG seed in the "
                 "backward pass instead of saving it.",
                 "注意力 dropout 每个权重一个，B · H · L² ≈ 2.15e9；输出 dropout 每个合并后的特征一个，B · L · E ≈ 6.7e7："
                 "共 2,214,592,512。若存成掩码，仅 L² 这一项按每个 1 字节也有 2 GiB，所以融合 kernel 在反向时用随机数种子"
                 "重新生成掩码，而不是保存它。"),
        see=Ref("reference", "out = self.output_dropout(out)"),
        proof=lambda ref: _measured_draws(ref, 4, 32, 4096, 4096),
    ),
]


def _measured_row_sum_std(ref, L, p, batch=200):
    """Read the dropped weights off the reference: W_q = W_k = 0 makes the weights uniform, W_v = I and
    out_proj = I with one-hot inputs put weight [i, j] at output [i, j]. 200 · 100 rows are sampled."""
    import torch

    m = ref.AttentionWithDropout(L, 1, attn_dropout=p, output_dropout=0.0).double().train()
    with torch.no_grad():
        w = torch.zeros(3 * L, L, dtype=torch.float64)
        w[2 * L:] = torch.eye(L, dtype=torch.float64)
        m.qkv_proj.weight.copy_(w)
        m.out_proj.weight.copy_(torch.eye(L, dtype=torch.float64))
        x = torch.eye(L, dtype=torch.float64).expand(batch, L, L)   # position j is the one-hot e_j
        with torch.random.fork_rng():
            torch.manual_seed(0)
            y = m(x)                                                # (batch, L, L): the dropped weights
    return float(y.sum(dim=-1).std())


def _measured_draws(ref, B, H, L, E):
    """Run the reference in training mode on the meta device and add up the elements dropout draws for."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class CountDraws(TorchDispatchMode):
        total = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            name = func.name()
            if "bernoulli" in name or "native_dropout" in name:
                first = out[0] if isinstance(out, (tuple, list)) else out
                CountDraws.total += first.numel()
            return out

    m = ref.AttentionWithDropout(E, H, attn_dropout=0.1, output_dropout=0.1).to("meta").train()
    with torch.device("meta"):
        x = torch.empty(B, L, E)
    with CountDraws():
        m(x)
    return CountDraws.total
