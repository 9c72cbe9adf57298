"""Follow-up questions for `beam_search` (see attn_drill/quiz.py for the format)."""
from attn_drill.bank.quiz import Choice, Number, Ref


def hypothesis_score(sum_logprobs, generated_tokens, length_penalty):
    """sum of log-probs / (generated tokens, EOS included) ** length_penalty."""
    return sum_logprobs / generated_tokens ** length_penalty


def beam_idx(batch, beam, num_beams):
    """The cache row of beam `beam` of prompt `batch`."""
    return batch * num_beams + beam


def _measured_row(ref):
    """Runs the reference on a model that records the beam_idx of its first reorder."""
    import torch

    class Recorder:
        def __init__(self):
            self.seen = None
            self.V = 8

        def init_cache(self, n):
            pass

        def __call__(self, ids, start):
            n, L = ids.shape
            logits = torch.zeros(n, L, self.V, dtype=torch.float64)
            logits[..., 1] = 2.0                     # token 1 first, token 2 second, EOS (7) unlikely
            logits[..., 2] = 1.0
            return logits

        def reorder_cache(self, idx):
            if self.seen is None:
                self.seen = idx.tolist()

    m = Recorder()
    ref.beam_search(m, torch.zeros(3, 2, dtype=torch.long), 2, 3, 7)
    return m.seen[2 * 2 + 1]                         # prompt 2, new beam 1: it extends beam 0 of prompt 2


QUESTIONS = [
    Number(
        "score_with_penalty",
        en="A hypothesis generated 4 tokens, its EOS included, with log-probabilities summing to -2.4. What is its "
           "score with length_penalty = 2?",
        zh="某个假设生成了 4 个 token（包含 EOS），对数概率之和为 -2.4。length_penalty = 2 时它的分数是多少？",
        answer=lambda: hypothesis_score(-2.4, 4, 2.0),
        unit=("", ""),
        rel_tol=1e-9,
        explain=("-2.4 / 4² = -0.15. A larger length_penalty divides long hypotheses by more, so their (negative) "
                 "scores move toward 0 faster: length_penalty > 0 favours longer outputs, 0 ranks by the raw sum, "
                 "which favours short ones.",
                 "-2.4 / 4² = -0.15。length_penalty 越大，长假设被除得越多，其（负的）分数越快接近 0：length_penalty > 0 "
                 "偏向较长的输出，为 0 时按原始和排序，偏向短的输出。"),
        see=Ref("reference", "hyp = torch.where(joins, cand / (t + 1) ** length_penalty, torch.full_like(cand, float(\"-inf\")))"),
    ),
    Number(
        "cache_row",
        en="3 prompts, num_beams = 2. After a step, new beam 1 of prompt 2 (prompts and beams counted from 0) "
           "extends beam 0 of the same prompt. Which old cache row must the new row 2 * 2 + 1 = 5 copy?",
        zh="3 个 prompt，num_beams = 2。某一步之后，第 2 个 prompt 的新 beam 1（prompt 和 beam 都从 0 开始编号）延续的是"
           "同一 prompt 的 beam 0。新的第 2 * 2 + 1 = 5 行必须复制旧缓存的哪一行？",
        answer=lambda: beam_idx(2, 0, 2),
        unit=("row", "行"),
        explain=("beam_idx[b * nb + j] = b * nb + source = 2 · 2 + 0 = 4. Without the offset it would copy row 0, "
                 "which belongs to prompt 0: the search of every prompt but the first would read another prompt's "
                 "keys and values.",
                 "beam_idx[b * nb + j] = b * nb + source = 2 · 2 + 0 = 4。如果不加偏移就会复制第 0 行，而那一行属于 prompt 0："
                 "除第一个之外，每个 prompt 的搜索都会读到别的 prompt 的 key 和 value。"),
        see=Ref("reference", "beam_idx = (torch.arange(B, device=device)[:, None] * nb + source).view(N)"),
        proof=_measured_row,
    ),
    Choice(
        "why_two_nb",
        en="Why does each step keep the 2 · num_beams best candidates rather than num_beams?",
        zh="为什么每一步保留最好的 2 · num_beams 个候选，而不是 num_beams 个？",
        right=("Up to num_beams of them (one per beam) can end with EOS; keeping twice as many guarantees num_beams "
               "candidates that can keep running.",
               "其中最多有 num_beams 个（每个 beam 一个）会以 EOS 结束；保留两倍的数量，就能保证总有 num_beams 个候选可以"
               "继续运行。"),
        wrong=[("To make the search exhaustive over two steps.", "为了在两步内做穷举搜索。"),
               ("Because the finished pool needs 2 · num_beams hypotheses.", "因为已完成假设池需要 2 · num_beams 个假设。"),
               ("To average the scores of pairs of candidates.", "为了对候选两两求平均分数。")],
        explain=("Each beam contributes at most one EOS candidate, so at most num_beams of the 2 · num_beams are EOS. "
                 "Only the top num_beams may finish; the rest are backups.",
                 "每个 beam 最多贡献一个 EOS 候选，所以 2 · num_beams 个候选中至多 num_beams 个是 EOS。只有前 num_beams 名可以"
                 "结束；其余的是后备。"),
        see=Ref("reference", "cand, idx = logp.view(B, nb * V).topk(2 * nb, dim=-1)          # (B, 2nb), best first"),
    ),
    Choice(
        "why_minus_inf_start",
        en="Why do beams 1 .. num_beams - 1 start at -inf instead of 0?",
        zh="为什么 beam 1 .. num_beams - 1 的初始分数是 -inf 而不是 0？",
        right=("All beams hold the same prompt at first; with equal scores the first step would choose the same "
               "continuation once per beam, and the beams would stay copies of each other.",
               "一开始所有 beam 存的都是同一个 prompt；若分数相同，第一步会为每个 beam 选出同样的延续，这些 beam 就一直是彼此的"
               "拷贝。"),
        wrong=[("To make log_softmax numerically stable.", "为了让 log_softmax 数值稳定。"),
               ("Because only beam 0 has a KV cache.", "因为只有 beam 0 有 KV cache。"),
               ("So that the length penalty starts at zero.", "为了让长度惩罚从零开始。")],
        explain=("With beam 0 alone at step 0, the top 2 · num_beams candidates are distinct tokens after the prompt, "
                 "which is what V >= 2 · num_beams guarantees.",
                 "第 0 步只有 beam 0 时，最好的 2 · num_beams 个候选是 prompt 之后互不相同的 token，V >= 2 · num_beams 正好保证"
                 "了这一点。"),
        see=Ref("reference", "running[:, 1:] = float(\"-inf\")                                      # step 0: only beam 0 (no duplicates)"),
    ),
]
