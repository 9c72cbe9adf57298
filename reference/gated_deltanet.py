"""Gated DeltaNet (Yang, Kautz and Hatamizadeh, 2024): the gated delta rule as a recurrence over tokens
and in the chunked form (a triangular solve inside each chunk, the state carried across chunks), with
the L2 normalisation of q and k and the gates of the flash-linear-attention layer (reference solution
for `gated_deltanet`)."""
import torch
import torch.nn.functional as F


def l2norm(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """x / sqrt(sum(x^2 over the last dim) + eps), eps inside the square root."""
    return x * torch.rsqrt(x.pow(2).sum(dim=-1, keepdim=True) + eps)


def gates(a: torch.Tensor, b: torch.Tensor, A_log: torch.Tensor, dt_bias: torch.Tensor):
    """The layer's gates from its projections.

    a, b: (B, T, H); A_log, dt_bias: (H,)
    returns g = -exp(A_log) * softplus(a + dt_bias), the log of the decay (<= 0), and
            beta = sigmoid(b), the write strength in (0, 1); both (B, T, H)
    """
    g = -torch.exp(A_log) * F.softplus(a + dt_bias)                   # (B, T, H)
    beta = torch.sigmoid(b)                                           # (B, T, H)
    return g, beta


def gated_delta_recurrent(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
                          initial_state: torch.Tensor | None = None, scale: float | None = None):
    """The gated delta rule, one token at a time.

    q, k: (B, T, H, K); v: (B, T, H, V); g, beta: (B, T, H) (g is the log of the decay, <= 0)
    initial_state: (B, H, K, V) or None (zeros)
    scale: multiplier of q after its L2 norm; None means K ** -0.5
    q and k are L2-normalised over K (l2norm). The state S (B, H, K, V) evolves per token t:
        S   = exp(g_t) * S                     decay
        u_t = beta_t * (v_t - S^T k_t)         what the decayed memory gets wrong about v_t at key k_t
        S   = S + k_t u_t^T                    write the correction
        o_t = S^T q_t                          read with the state after token t
    returns o (B, T, H, V) and the final state (B, H, K, V)
    """
    B, T, H, K = q.shape
    V = v.shape[-1]
    if scale is None:
        scale = K ** -0.5
    q, k = l2norm(q) * scale, l2norm(k)
    S = q.new_zeros(B, H, K, V) if initial_state is None else initial_state   # (B, H, K, V), whatever T
    outs = []
    for t in range(T):
        q_t, k_t, v_t = q[:, t], k[:, t], v[:, t]                       # (B, H, K), (B, H, K), (B, H, V)
        S = S * torch.exp(g[:, t])[..., None, None]                    # (B, H, K, V): decay
        pred = torch.einsum("bhkv,bhk->bhv", S, k_t)                   # (B, H, V): the memory's value at k_t
        u = beta[:, t, :, None] * (v_t - pred)                         # (B, H, V)
        S = S + k_t[..., :, None] * u[..., None, :]                    # (B, H, K, V): rank-1 write
        outs.append(torch.einsum("bhkv,bhk->bhv", S, q_t))             # (B, H, V)
    return torch.stack(outs, dim=1), S                                 # (B, T, H, V), (B, H, K, V)


def _unit_lower_inverse(A: torch.Tensor) -> torch.Tensor:
    """(I + A)^-1 for A strictly lower triangular (..., n, n), by forward substitution, row by row."""
    n = A.shape[-1]
    eye = torch.eye(n, dtype=A.dtype, device=A.device)
    inv = eye[:1].expand(*A.shape[:-2], 1, n)                          # row 0 of the inverse: e_0
    for i in range(1, n):
        row = eye[i] - torch.matmul(A[..., i:i + 1, :i], inv)          # (..., 1, n)
        inv = torch.cat([inv, row], dim=-2)                            # (..., i + 1, n)
    return inv


def gated_delta_chunked(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
                        initial_state: torch.Tensor | None = None, scale: float | None = None, chunk_size: int = 64):
    """The same outputs and final state, chunk by chunk.

    Arguments as in gated_delta_recurrent; chunk_size: tokens per chunk (the last chunk may be shorter,
    chunk_size may exceed T). For one chunk of n tokens with S the state before it (K, V per head):
        gam_i   = g_1 + ... + g_i (within the chunk), Gam_ij = exp(gam_i - gam_j) for j <= i, else 0
        A_ij    = beta_i (k_i . k_j) Gam_ij for j < i, else 0;  Tm = (I + A)^-1
        u       = Tm (beta * v),  w = Tm (beta * exp(gam) * k),  v_new = u - w S
        o       = (exp(gam) * q) S + ((q k^T) * Gam) v_new          (Gam includes the diagonal, 1)
        S       = exp(gam_n) S + (exp(gam_n - gam) * k)^T v_new
    returns o (B, T, H, V) and the final state (B, H, K, V)
    """
    B, T, H, K = q.shape
    V = v.shape[-1]
    if scale is None:
        scale = K ** -0.5
    q, k = l2norm(q) * scale, l2norm(k)
    q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # (B, H, T, K / V)
    g, beta = g.transpose(1, 2), beta.transpose(1, 2)                  # (B, H, T)
    S = q.new_zeros(B, H, K, V) if initial_state is None else initial_state
    outs = []
    for start in range(0, T, chunk_size):
        qc, kc, vc = (x[:, :, start:start + chunk_size] for x in (q, k, v))   # (B, H, n, K / V)
        gc, bc = g[:, :, start:start + chunk_size], beta[:, :, start:start + chunk_size]   # (B, H, n)
        n = qc.shape[2]
        gam = gc.cumsum(dim=-1)                                        # (B, H, n): log decay since the chunk start
        causal = torch.ones(n, n, dtype=torch.bool, device=q.device).tril()
        diff = gam[..., :, None] - gam[..., None, :]                   # (B, H, n, n)
        Gam = torch.exp(diff.masked_fill(~causal, float("-inf")))      # exp(gam_i - gam_j), 0 above the diagonal
        kk = torch.matmul(kc, kc.transpose(-2, -1))                    # (B, H, n, n)
        A = (bc[..., :, None] * kk * Gam).tril(diagonal=-1)            # strictly lower
        Tm = _unit_lower_inverse(A)                                    # (B, H, n, n)
        u = torch.matmul(Tm, bc[..., None] * vc)                       # (B, H, n, V)
        w = torch.matmul(Tm, (bc * torch.exp(gam))[..., None] * kc)    # (B, H, n, K)
        v_new = u - torch.matmul(w, S)                                 # (B, H, n, V)
        qk = torch.matmul(qc, kc.transpose(-2, -1)) * Gam              # (B, H, n, n)
        outs.append(torch.matmul(torch.exp(gam)[..., None] * qc, S) + torch.matmul(qk, v_new))   # (B, H, n, V)
        last = gam[..., -1:]                                           # (B, H, 1)
        S = torch.exp(last)[..., None] * S + torch.matmul((torch.exp(last - gam)[..., None] * kc).transpose(-2, -1),
                                                          v_new)       # (B, H, K, V)
    return torch.cat(outs, dim=2).transpose(1, 2), S                   # (B, T, H, V), (B, H, K, V)
