"""Sampling with temperature, top-k, top-p and min-p in a KV-cache decode loop (reference solution for
`decode_sampling`)."""
import torch


def filter_probs(logits: torch.Tensor, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0,
                 min_p: float = 0.0) -> torch.Tensor:
    """The distribution to sample the next token from, after the filters, in this order:
    temperature -> top-k -> top-p -> min-p. Each filter sees the survivors of the one before,
    renormalised; every filter keeps or removes tied tokens together.

    logits:      (..., V)
    temperature: > 0 divides the logits; 0 means greedy: one-hot at the first index of the largest logit
    top_k:       0 = off; else keep every token whose score is >= the k-th largest (k = min(top_k, V))
    top_p:       1.0 = off; else (0 < top_p < 1) keep a token iff the total probability of the tokens
                 strictly more probable than it is < top_p (the token that crosses top_p is kept)
    min_p:       0.0 = off; else keep a token iff its probability >= min_p * the largest probability
    returns      (..., V) probabilities in logits' dtype, zero outside the survivors, summing to 1
    """
    V = logits.size(-1)
    if temperature == 0:
        greedy = logits.argmax(dim=-1)                                  # (...,), the first maximum
        return torch.nn.functional.one_hot(greedy, V).to(logits.dtype)
    scores = logits / temperature                                       # (..., V)

    if top_k > 0:
        k = min(top_k, V)
        kth = scores.topk(k, dim=-1).values[..., -1:]                   # (..., 1), the k-th largest
        scores = scores.masked_fill(scores < kth, float("-inf"))       # ties with the k-th stay

    if top_p < 1.0:
        probs = torch.softmax(scores, dim=-1)                           # (..., V), over the survivors
        sorted_probs = probs.sort(dim=-1, descending=True).values       # (..., V)
        mass_above = sorted_probs.cumsum(dim=-1) - sorted_probs         # (..., V), before each rank
        kept = mass_above < top_p                                       # a prefix of the ranks
        # the least probable survivor; every token at least as probable stays (ties stay together)
        smallest = sorted_probs.masked_fill(~kept, float("inf")).amin(dim=-1, keepdim=True)  # (..., 1)
        scores = scores.masked_fill(probs < smallest, float("-inf"))

    if min_p > 0.0:
        probs = torch.softmax(scores, dim=-1)                           # (..., V)
        threshold = min_p * probs.amax(dim=-1, keepdim=True)            # (..., 1), relative to the top
        scores = scores.masked_fill(probs < threshold, float("-inf"))

    return torch.softmax(scores, dim=-1)


def sample_inverse_cdf(probs: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """(B, V) probabilities, (B,) uniforms in [0, 1) -> (B,) int64: the smallest token id t with
    cumsum(probs)[t] > u, in token-id order (or the last token with probability > 0, if rounding
    leaves the total at or below u)."""
    cdf = probs.cumsum(dim=-1)                                          # (B, V)
    token = (cdf <= u[:, None]).sum(dim=-1)                             # entries at or below u
    last_positive = (probs > 0).long().cumsum(dim=-1).argmax(dim=-1)   # (B,)
    return torch.minimum(token, last_positive)


def generate(model, prompt: torch.Tensor, uniforms: torch.Tensor, temperature: float = 1.0, top_k: int = 0,
             top_p: float = 1.0, min_p: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample T new tokens after a prompt, with the model's KV cache.

    model:    model.init_cache(batch_size) starts an empty cache; model(input_ids, start_pos) takes
              (B, L) int64 tokens at positions start_pos .. start_pos + L - 1, appends their keys and
              values to the cache and returns logits (B, L, V)
    prompt:   (B, P) int64, P >= 1
    uniforms: (B, T) in [0, 1), one per new token: token t is sample_inverse_cdf(probs_t, uniforms[:, t])
    returns (tokens, probs)
      tokens  (B, T) int64, the new tokens
      probs   (B, T, V) in the logits' dtype: filter_probs of the logits that each token was drawn from
    One prefill call model(prompt, 0), then one call per new token but the last:
    model(tokens[:, t:t+1], P + t).
    """
    B, P = prompt.shape
    T = uniforms.shape[1]
    model.init_cache(B)
    logits = model(prompt, 0)[:, -1]                                    # (B, V): the next token after the prompt
    tokens, dists = [], []
    for t in range(T):
        probs = filter_probs(logits, temperature, top_k, top_p, min_p)  # (B, V)
        token = sample_inverse_cdf(probs, uniforms[:, t])               # (B,)
        tokens.append(token)
        dists.append(probs)
        if t + 1 < T:
            logits = model(token[:, None], P + t)[:, -1]                # (B, V), sees the new token's K/V
    return torch.stack(tokens, dim=1), torch.stack(dists, dim=1)        # (B, T), (B, T, V)
