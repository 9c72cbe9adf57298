"""Decode attention over a paged KV pool, and writes into it (reference solution for `paged_attention`)."""
import math

import torch


def write_kv(
    key: torch.Tensor, value: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
) -> None:
    """Write the keys and values of new tokens into the paged pool, in place.

    key, value:             (T, Hkv, D), one row per new token
    key_cache, value_cache: (num_blocks, block_size, Hkv, D), the pool; modified in place
    slot_mapping:           (T,) int64; token t goes to slot s = slot_mapping[t], that is block
                            s // block_size, offset s % block_size; s = -1 marks padding: skip it
    """
    block_size = key_cache.shape[1]
    valid = slot_mapping >= 0                                          # (T,)
    slots = slot_mapping[valid]                                        # (T',)
    blocks = slots // block_size                                       # which block of the pool
    offsets = slots % block_size                                       # where inside it
    key_cache[blocks, offsets] = key[valid]                            # (T', Hkv, D)
    value_cache[blocks, offsets] = value[valid]


def paged_attention(
    query: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor, block_tables: torch.Tensor,
    context_lens: torch.Tensor, scale: float | None = None,
) -> torch.Tensor:
    """Decode attention (one new token per sequence) over keys and values kept in a paged pool.

    query:                  (S, Hq, D), the new token of each of S sequences
    key_cache, value_cache: (num_blocks, block_size, Hkv, D), the pool shared by all sequences
    block_tables:           (S, max_blocks) int32; token j of sequence i lives in block
                            block_tables[i, j // block_size] at offset j % block_size. Entries past
                            ceil(context_lens[i] / block_size) are unused and may hold any block id.
    context_lens:           (S,) int32, the number of tokens of sequence i in the pool, the new
                            token included (its key and value are written before attention)
    scale:                  multiplier of the scores; None means 1 / sqrt(D)
    returns                 (S, Hq, D); query head h reads KV head h // (Hq // Hkv) (GQA)
    Only the first context_lens[i] tokens of a sequence are read: the rest of the pool may hold
    anything, NaN and inf included.
    """
    S, Hq, D = query.shape
    block_size, Hkv = key_cache.shape[1], key_cache.shape[2]
    group = Hq // Hkv                                                  # query heads per KV head
    if scale is None:
        scale = 1.0 / math.sqrt(D)

    outs = []
    for i in range(S):
        n = int(context_lens[i])
        pos = torch.arange(n, device=query.device)                     # token positions 0 .. n-1
        blocks = block_tables[i, pos // block_size].long()             # (n,) pool block of each token
        offsets = pos % block_size                                     # (n,) offset inside it
        k = key_cache[blocks, offsets]                                 # (n, Hkv, D)
        v = value_cache[blocks, offsets]                               # (n, Hkv, D)
        k = k.repeat_interleave(group, dim=1)                          # (n, Hq, D): head h <- h // group
        v = v.repeat_interleave(group, dim=1)                          # (n, Hq, D)
        q = query[i] * scale                                           # (Hq, D)
        scores = torch.einsum("hd,nhd->hn", q, k)                      # (Hq, n)
        weights = torch.softmax(scores, dim=-1)                        # over the n tokens
        outs.append(torch.einsum("hn,nhd->hd", weights, v))            # (Hq, D)
    return torch.stack(outs)                                           # (S, Hq, D)
