"""Attention over documents packed into one row, located by cu_seqlens: causal inside each document,
blind across documents (reference solution for `packed_sequences`)."""
import math

import torch


def _document_ids(cu_seqlens: torch.Tensor, total: int) -> torch.Tensor:
    """(total,) int64: the document each packed row belongs to (rows cu_seqlens[i]:cu_seqlens[i + 1] are document i)."""
    rows = torch.arange(total, device=cu_seqlens.device)
    return torch.searchsorted(cu_seqlens[1:], rows, right=True)


def packing_metadata(seq_lens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int]:
    """What a varlen kernel needs to know about documents packed one after another.

    seq_lens: (N,) int64, the documents' lengths in packing order, each >= 1
    returns cu_seqlens (N + 1,) int32: [0, l_0, l_0 + l_1, ..., total]; document i is rows
    cu_seqlens[i]:cu_seqlens[i + 1]
            position_ids (total,) int64: each row's position inside its own document (0 at every document's first row)
            max_seqlen: a Python int, the longest document
    """
    ends = torch.cumsum(seq_lens, dim=0)                              # (N,) where each document ends
    cu_seqlens = torch.cat([ends.new_zeros(1), ends]).to(torch.int32)  # (N + 1,)
    total = int(ends[-1])
    doc = _document_ids(cu_seqlens, total)                            # (total,)
    position_ids = torch.arange(total) - cu_seqlens[doc]              # (total,) int64
    max_seqlen = int(seq_lens.max())
    return cu_seqlens, position_ids, max_seqlen


def varlen_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens: torch.Tensor,
                     max_seqlen: int, scale: float | None = None) -> torch.Tensor:
    """Causal self-attention inside each packed document; no row attends to another document.

    q, k: (total, H, D), v: (total, H, Dv): the rows of all documents one after another, no batch axis
    cu_seqlens: (N + 1,) int32 from packing_metadata; document i is rows cu_seqlens[i]:cu_seqlens[i + 1]
    max_seqlen: the longest document (a kernel sizes its work with it; it does not change the answer)
    scale: multiplier of the scores; None means 1 / sqrt(D)
    returns (total, H, Dv): per-document causal attention, concatenated
    """
    total, H, D = q.shape
    if scale is None:
        scale = 1.0 / math.sqrt(D)
    doc = _document_ids(cu_seqlens, total)                            # (total,)
    rows = torch.arange(total, device=q.device)
    same_doc = doc[:, None] == doc[None, :]                           # (total, total)
    causal = rows[None, :] <= rows[:, None]                           # key j <= query i
    keep = same_doc & causal                                          # block-diagonal causal mask
    qh, kh, vh = q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1)   # (H, total, D), (H, total, Dv)
    s = scale * torch.matmul(qh, kh.transpose(-2, -1))                # (H, total, total)
    s = s.masked_fill(~keep, float("-inf"))                           # every row keeps at least itself
    p = torch.softmax(s, dim=-1)                                      # (H, total, total)
    out = torch.matmul(p, vh)                                         # (H, total, Dv)
    return out.transpose(0, 1)                                        # (total, H, Dv)
