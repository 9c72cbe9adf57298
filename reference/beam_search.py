"""Beam search over a KV cache, as Hugging Face runs it with early_stopping=True (reference solution for
`beam_search`)."""
import torch


def beam_search(model, prompt: torch.Tensor, num_beams: int, max_new_tokens: int, eos_token_id: int,
                length_penalty: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """The num_beams best continuations of each prompt.

    model:  model.init_cache(n) starts an empty cache of n rows; model(input_ids, start_pos) takes
            (n, L) int64 tokens at positions start_pos .. start_pos + L - 1, appends their keys and
            values and returns logits (n, L, V); model.reorder_cache(beam_idx) makes row i of the
            cache a copy of old row beam_idx[i]
    prompt: (B, P) int64; row b * num_beams + j of the model holds beam j of prompt b
    returns (sequences, scores), best first
      sequences (B, num_beams, max_new_tokens) int64: the generated tokens of each finished
                hypothesis (its EOS included), then -1
      scores    (B, num_beams) in the logits' dtype: sum of the tokens' log-probabilities
                / (number of generated tokens, EOS included) ** length_penalty
    """
    B, P = prompt.shape
    nb, T = num_beams, max_new_tokens
    N = B * nb
    model.init_cache(N)
    logits = model(prompt.repeat_interleave(nb, dim=0), 0)[:, -1]      # (N, V): every beam holds its prompt
    V = logits.size(-1)
    device = prompt.device
    ranks = torch.arange(2 * nb, device=device)                         # (2nb,)

    running = logits.new_zeros(B, nb)                                   # (B, nb) sum of log-probs
    running[:, 1:] = float("-inf")                                      # step 0: only beam 0 (no duplicates)
    seqs = torch.full((B, nb, T), -1, dtype=torch.long, device=device)  # running beams' tokens
    done_seqs = torch.full((B, nb, T), -1, dtype=torch.long, device=device)
    done_scores = logits.new_full((B, nb), float("-inf"))               # finished hypotheses, best first

    for t in range(T):
        logp = torch.log_softmax(logits, dim=-1).view(B, nb, V) + running[..., None]   # (B, nb, V)
        cand, idx = logp.view(B, nb * V).topk(2 * nb, dim=-1)          # (B, 2nb), best first
        beam, token = idx // V, idx % V                                 # (B, 2nb) each
        cand_seqs = seqs.gather(1, beam[..., None].expand(B, 2 * nb, T)).clone()         # (B, 2nb, T)
        cand_seqs[:, :, t] = token

        # hypotheses end at EOS, or all at the last step; only the top nb ranks may join the pool,
        # and nothing joins a pool that is already full
        ends = (token == eos_token_id) | (t == T - 1)                   # (B, 2nb)
        joins = ends & (ranks < nb) & (done_scores[:, -1:] == float("-inf"))
        hyp = torch.where(joins, cand / (t + 1) ** length_penalty, torch.full_like(cand, float("-inf")))
        merged = torch.cat([done_scores, hyp], dim=1)                   # (B, 3nb)
        best = merged.topk(nb, dim=-1).indices                          # (B, nb)
        done_scores = merged.gather(1, best)
        done_seqs = torch.cat([done_seqs, cand_seqs], dim=1).gather(1, best[..., None].expand(B, nb, T))

        # the best nb candidates that did not end with EOS keep running
        alive = torch.where(token == eos_token_id, torch.full_like(cand, float("-inf")), cand)
        running, keep = alive.topk(nb, dim=-1)                          # (B, nb)
        seqs = cand_seqs.gather(1, keep[..., None].expand(B, nb, T))
        if bool((done_scores[:, -1] > float("-inf")).all()) or t + 1 == T:
            break
        # row b * nb + j of the cache must now hold the prefix of the beam it continues
        source = beam.gather(1, keep)                                   # (B, nb), beams 0..nb-1
        beam_idx = (torch.arange(B, device=device)[:, None] * nb + source).view(N)
        model.reorder_cache(beam_idx)
        next_token = token.gather(1, keep).view(N, 1)                   # (N, 1)
        logits = model(next_token, P + t)[:, -1]                        # (N, V)
    return done_seqs, done_scores
