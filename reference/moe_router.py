"""Token-choice top-k routing for a mixture of experts (reference solution for `moe_router`)."""
import torch


def topk_route(x: torch.Tensor, weight: torch.Tensor, top_k: int, score_func: str = "softmax",
               normalize: bool = True) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The gate of a mixture-of-experts layer: every token picks its top_k experts.

    x:          (B, S, D) tokens
    weight:     (E, D) the router's weight (an nn.Linear(D, E, bias=False) weight); logits = x @ weight.T
    score_func: "softmax" (over the E experts) or "sigmoid" (each expert on its own)
    normalize:  divide the chosen scores by their sum
    returns (weights, experts, aux_loss)
      experts  (B, S, top_k) int64: the experts of the top_k scores of each token, highest first
      weights  (B, S, top_k) in x's dtype: the chosen scores, divided by their sum when normalize
      aux_loss scalar in x's dtype: load_balancing_loss(probs, experts, E) over the B * S tokens, where
               probs are every token's scores divided by their sum over all E experts
    """
    B, S, D = x.shape
    E = weight.shape[0]
    k = top_k
    if score_func not in ("softmax", "sigmoid"):
        raise ValueError(f"score_func must be 'softmax' or 'sigmoid', got {score_func!r}")
    if not 1 <= k <= E:
        raise ValueError(f"top_k={k} must lie in 1..{E} (the number of experts)")
    logits = x @ weight.T                                               # (B, S, E)
    if score_func == "softmax":
        scores = torch.softmax(logits, dim=-1)                          # (B, S, E), sums to 1
    else:
        scores = torch.sigmoid(logits)                                  # (B, S, E), each in (0, 1)

    top_scores, experts = scores.topk(k, dim=-1)                        # (B, S, k), highest first
    if normalize:
        weights = top_scores / top_scores.sum(dim=-1, keepdim=True)     # (B, S, k), sums to 1
    else:
        weights = top_scores

    # the balancing loss sees every expert's share of the token, not only the chosen ones
    probs = scores / scores.sum(dim=-1, keepdim=True)                   # (B, S, E)
    aux_loss = load_balancing_loss(probs.reshape(B * S, E), experts.reshape(B * S, k), E)
    return weights, experts, aux_loss


def load_balancing_loss(probs: torch.Tensor, experts: torch.Tensor, num_experts: int) -> torch.Tensor:
    """The Switch / Mixtral auxiliary loss, num_experts * sum_e f_e * P_e.

    probs:   (N, E) every token's distribution over all E experts (each row sums to 1)
    experts: (N, k) int64, the experts each token was routed to
    f_e = (number of the N * k assignments that go to expert e) / N   (so sum_e f_e = k)
    P_e = the mean of probs[:, e] over the N tokens                    (so sum_e P_e = 1)
    A perfectly balanced router gives k; the loss is differentiable through probs only.
    """
    N, k = experts.shape
    E = num_experts
    assigned = torch.zeros(N, E, dtype=probs.dtype, device=probs.device)
    assigned.scatter_add_(1, experts, torch.ones(N, k, dtype=probs.dtype, device=probs.device))  # (N, E) counts
    f = assigned.sum(dim=0) / N                                         # (E,), sums to k
    P = probs.mean(dim=0)                                               # (E,), sums to 1
    return E * (f * P).sum()


def capacity_keep(experts: torch.Tensor, num_experts: int, capacity: int) -> torch.Tensor:
    """Which assignments an expert of limited capacity accepts.

    experts:  (B, S, k) int64, token s of row b routed to experts[b, s, 0] (first choice) .. [b, s, k-1]
    capacity: how many assignments one expert takes in one batch row (an absolute count >= 0)
    returns   keep (B, S, k) bool. In each batch row separately, each expert serves its assignments
              choice by choice: every first choice, in sequence order, then every second choice, in
              sequence order, and so on; it keeps the first `capacity` of them and drops the rest.
    """
    B, S, k = experts.shape
    E = num_experts
    order = experts.transpose(1, 2).reshape(B, k * S)                   # (B, k*S): choice-major
    one_hot = torch.nn.functional.one_hot(order, E)                     # (B, k*S, E)
    position = one_hot.cumsum(dim=1) * one_hot                          # (B, k*S, E): 1-based rank in its expert
    rank = position.sum(dim=-1)                                         # (B, k*S)
    keep = rank <= capacity                                             # (B, k*S)
    return keep.view(B, k, S).transpose(1, 2)                           # (B, S, k)
