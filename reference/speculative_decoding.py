"""The verification step of speculative sampling (reference solution for `speculative_decoding`)."""
import torch


def speculative_verify(
    draft_tokens: torch.Tensor,
    draft_probs: torch.Tensor,
    target_probs: torch.Tensor,
    u_accept: torch.Tensor,
    u_sample: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Accept or reject G draft tokens so that what comes out is distributed as the target model.

    Notation as in Leviathan et al.: p is the TARGET model, q the DRAFT model.

    draft_tokens: (B, G) int64, x_0 .. x_{G-1}; x_i was drawn from q_i, so q_i(x_i) > 0
    draft_probs:  (B, G, V) q, the draft model's distribution at each draft position
    target_probs: (B, G + 1, V) p; p_i for i < G at the draft positions, p_G after the last draft
    u_accept:     (B, G) uniforms in [0, 1): draft i is accepted iff u_accept[:, i] < p_i(x_i) / q_i(x_i)
    u_sample:     (B,) uniforms in [0, 1) for the one token sampled at the end
    returns (tokens, num_accepted):
      num_accepted (B,) int64, n = the number of drafts accepted before the first rejection
      tokens (B, G + 1) int64: x_0 .. x_{n-1}, then one sampled token, then -1 (n + 1 tokens emitted)
    The sampled token comes from norm(max(0, p_n - q_n)) after a rejection at n, or from p_G when
    all G drafts were accepted (the bonus token). A row w is sampled by its inverse CDF: the
    smallest t with cumsum(w)[t] > u * sum(w).
    """
    B, G = draft_tokens.shape
    p, q = target_probs, draft_probs
    rows = torch.arange(B, device=draft_tokens.device)

    # how likely each draft token is under both models
    x = draft_tokens.unsqueeze(-1)                                      # (B, G, 1)
    p_x = p[:, :G].gather(-1, x).squeeze(-1)                            # (B, G)
    q_x = q.gather(-1, x).squeeze(-1)                                   # (B, G)
    accepted = u_accept < p_x / q_x                                     # (B, G): probability min(1, p/q)

    # n: the length of the accepted prefix (everything after the first rejection is thrown away)
    n = accepted.long().cumprod(dim=1).sum(dim=1)                       # (B,) in 0 .. G

    # the token sampled at position n
    all_accepted = n == G                                               # (B,)
    p_n = p[rows, n]                                                    # (B, V)
    q_n = q[rows, n.clamp(max=G - 1)]                                   # (B, V), unused when all accepted
    residual = (p_n - q_n).clamp(min=0)                                 # (B, V): max(0, p - q)
    weights = torch.where(all_accepted[:, None], p_n, residual)         # (B, V), not normalised
    last = _inverse_cdf(weights, u_sample)                              # (B,)

    # accepted drafts, the sampled token at position n, then -1
    positions = torch.arange(G + 1, device=draft_tokens.device)
    tokens = torch.full((B, G + 1), -1, dtype=torch.long, device=draft_tokens.device)
    tokens[:, :G] = torch.where(positions[:G] < n[:, None], draft_tokens, -1)
    tokens[rows, n] = last
    return tokens, n


def _inverse_cdf(weights: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """(B, V) non-negative weights, (B,) uniforms -> (B,) the smallest t with cdf[t] > u * total."""
    cdf = weights.cumsum(dim=-1)                                        # (B, V)
    threshold = u * cdf[:, -1]                                          # (B,)
    token = (cdf <= threshold[:, None]).sum(dim=-1)                     # entries at or below the threshold
    # rounding can leave the threshold at the total: fall back to the last token with weight
    last_with_weight = (weights > 0).long().cumsum(dim=-1).argmax(dim=-1)
    return torch.minimum(token, last_with_weight)
