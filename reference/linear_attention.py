"""Causal linear attention (Katharopoulos et al., 2020) in three forms that give the same answer:
parallel, recurrent and chunked (reference solution for `linear_attention`)."""
import torch
import torch.nn.functional as F


def feature_map(x: torch.Tensor) -> torch.Tensor:
    """phi(x) = elu(x) + 1, elementwise: x + 1 for x > 0 and exp(x) for x <= 0, so always positive.

    x: any shape; returns the same shape and dtype
    """
    return F.elu(x) + 1.0


def linear_attention_parallel(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Causal linear attention through the full (L, L) matrix of feature products.

    q, k: (B, H, L, D), v: (B, H, L, Dv); returns (B, H, L, Dv)
    out_i = sum_{j <= i} (phi(q_i) . phi(k_j)) v_j / (sum_{j <= i} phi(q_i) . phi(k_j) + eps)
    phi is applied to q and k only; no 1/sqrt(D) scale, no softmax; eps is added once to the denominator.
    """
    B, H, L, D = q.shape
    phi_q, phi_k = feature_map(q), feature_map(k)                      # (B, H, L, D), all > 0
    scores = torch.matmul(phi_q, phi_k.transpose(-2, -1))             # (B, H, L, L)
    causal = torch.ones(L, L, dtype=torch.bool, device=q.device).tril()
    A = scores.masked_fill(~causal, 0.0)                               # (B, H, L, L), zero for j > i
    num = torch.matmul(A, v)                                           # (B, H, L, Dv)
    den = A.sum(dim=-1, keepdim=True) + eps                            # (B, H, L, 1)
    return num / den


def linear_attention_recurrent(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """The same output as an RNN over positions, carrying one state.

    q, k: (B, H, L, D), v: (B, H, L, Dv); returns (B, H, L, Dv)
    State after position i: S_i = sum_{j <= i} phi(k_j) v_j^T (B, H, D, Dv) and z_i = sum_{j <= i} phi(k_j)
    (B, H, D). Position i is added to the state before out_i = phi(q_i)^T S_i / (phi(q_i) . z_i + eps) is read.
    Never builds an (L, L) tensor nor the L states at once.
    """
    B, H, L, D = q.shape
    Dv = v.shape[-1]
    phi_q, phi_k = feature_map(q), feature_map(k)                      # (B, H, L, D)
    S = torch.zeros(B, H, D, Dv, dtype=q.dtype, device=q.device)      # running sum of phi(k_j) v_j^T
    z = torch.zeros(B, H, D, dtype=q.dtype, device=q.device)          # running sum of phi(k_j)
    outs = []
    for i in range(L):
        q_i, k_i, v_i = phi_q[:, :, i], phi_k[:, :, i], v[:, :, i]     # (B, H, D), (B, H, D), (B, H, Dv)
        S = S + k_i.unsqueeze(-1) * v_i.unsqueeze(-2)                  # (B, H, D, Dv): outer product added
        z = z + k_i                                                    # (B, H, D)
        num = torch.einsum("bhd,bhde->bhe", q_i, S)                    # (B, H, Dv)
        den = (q_i * z).sum(dim=-1, keepdim=True) + eps                # (B, H, 1)
        outs.append(num / den)
    return torch.stack(outs, dim=2)                                    # (B, H, L, Dv)


def linear_attention_chunked(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, chunk_size: int = 16,
                             eps: float = 1e-6) -> torch.Tensor:
    """The same output, chunk by chunk: the parallel form inside a chunk, the carried state across chunks.

    q, k: (B, H, L, D), v: (B, H, L, Dv); returns (B, H, L, Dv)
    chunk_size: rows per chunk (the last chunk may be shorter; chunk_size may exceed L)
    For the rows I of one chunk, with S, z summed over all earlier chunks:
      out_I = (phi(Q_I) S + tril(phi(Q_I) phi(K_I)^T) V_I) / (phi(Q_I) z + rowsum(tril(...)) + eps)
    then S += phi(K_I)^T V_I and z += sum of phi(K_I) over the chunk's rows.
    """
    B, H, L, D = q.shape
    Dv = v.shape[-1]
    phi_q, phi_k = feature_map(q), feature_map(k)                      # (B, H, L, D)
    S = torch.zeros(B, H, D, Dv, dtype=q.dtype, device=q.device)      # earlier chunks: sum of phi(k_j) v_j^T
    z = torch.zeros(B, H, D, dtype=q.dtype, device=q.device)          # earlier chunks: sum of phi(k_j)
    outs = []
    for start in range(0, L, chunk_size):
        qc = phi_q[:, :, start:start + chunk_size]                     # (B, H, C, D)
        kc = phi_k[:, :, start:start + chunk_size]                     # (B, H, C, D)
        vc = v[:, :, start:start + chunk_size]                         # (B, H, C, Dv)
        intra = torch.matmul(qc, kc.transpose(-2, -1)).tril()          # (B, H, C, C): keys j <= i of the chunk
        num = torch.matmul(qc, S) + torch.matmul(intra, vc)            # (B, H, C, Dv)
        den = torch.matmul(qc, z.unsqueeze(-1)) + intra.sum(dim=-1, keepdim=True) + eps   # (B, H, C, 1)
        outs.append(num / den)
        S = S + torch.matmul(kc.transpose(-2, -1), vc)                 # (B, H, D, Dv)
        z = z + kc.sum(dim=2)                                          # (B, H, D)
    return torch.cat(outs, dim=2)                                      # (B, H, L, Dv)
