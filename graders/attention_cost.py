"""Cases for `attention_cost`: the formulas against what torch really counts and allocates.

FLOPs are compared with torch.utils.flop_counter.FlopCounterMode run over a plain matmul attention
of the same sizes; memory with the bytes of the (B, H, Lq, Lk) tensors that attention allocates
(its score matrix and its probability matrix) in the case's dtype.
"""
import math

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from attn_drill.bank.api import Case, Ctx, Failure, type_name
from attn_drill.i18n import pick

TARGET = "estimate_attention_cost"


class _ScoreBytes(TorchDispatchMode):
    """Bytes of the new storages that ops allocate for a tensor of the score shape (B, H, Lq, Lk).

    Views of the inputs (e.g. K transposed, when D == Lq) allocate nothing and are skipped."""

    def __init__(self, shape, inputs):
        super().__init__()
        self.shape = tuple(shape)
        self.storages = {}
        self.old = {t.untyped_storage().data_ptr() for t in inputs}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if isinstance(out, torch.Tensor) and tuple(out.shape) == self.shape:
            storage = out.untyped_storage()
            if storage.data_ptr() not in self.old:
                self.storages[storage.data_ptr()] = storage.nbytes()
        return out


def _attention(B, H, Lq, Lk, D, dtype, mode):
    gen = torch.Generator().manual_seed(B * 1000 + Lq * 10 + Lk)
    Q = torch.randn(B, H, Lq, D, generator=gen).to(dtype)
    K = torch.randn(B, H, Lk, D, generator=gen).to(dtype)
    V = torch.randn(B, H, Lk, D, generator=gen).to(dtype)
    with mode(Q, K, V) as counter:
        S = torch.matmul(Q * (1.0 / math.sqrt(D)), K.transpose(-2, -1))   # (B, H, Lq, Lk) scores
        P = torch.softmax(S, dim=-1)                                        # (B, H, Lq, Lk) probabilities
        torch.matmul(P, V)                                                  # (B, H, Lq, D)
    return counter


def _measure(B, H, Lq, Lk, D, dtype):
    """(FLOPs, bytes of scores + probabilities) of one plain attention forward in `dtype`."""
    flops = _attention(B, H, Lq, Lk, D, dtype, lambda *qkv: FlopCounterMode(display=False))
    # memory does not depend on D; a head dim other than Lk leaves S and P the only score-shaped tensors
    sizes = _attention(B, H, Lq, Lk, Lk + 1, dtype, lambda *qkv: _ScoreBytes((B, H, Lq, Lk), qkv))
    return flops.get_total_flops(), sum(sizes.storages.values())


def _call(sizes: dict) -> tuple[list, dict]:
    args = [sizes["B"], sizes["H"], sizes["L"], sizes["D"]]
    kwargs = {k: sizes[k] for k in ("bytes_per_elem", "Lk") if k in sizes}
    return args, kwargs


_SIBLING_BYTES = {1: 4, 2: 4, 4: 1, 8: 2}    # a second call with another element size tells the mistakes apart


def _sibling(sizes: dict) -> dict:
    nb = sizes.get("bytes_per_elem", 2)
    return dict(sizes, bytes_per_elem=_SIBLING_BYTES[nb])


def _check(sub, ref, case: Case):
    """sub: the pair returned for the case's sizes, then for the same sizes at another bytes_per_elem."""
    k = case.probe_args["sizes"]
    B, H, L, D = k["B"], k["H"], k["L"], k["D"]
    Lk = k.get("Lk") or L
    nbytes = k.get("bytes_per_elem", 2)
    want_flops, want_mem = _measure(B, H, L, Lk, D, case.dtype)
    sibling = _sibling(k)
    want_mem2 = want_mem // nbytes * sibling["bytes_per_elem"]
    args, kwargs = _call(k)
    call = f"estimate_attention_cost({', '.join(map(str, args))}" + "".join(
        f", {n}={v}" for n, v in kwargs.items()) + ")"
    pairs = []
    for got in sub[:2]:
        if not isinstance(got, (tuple, list)) or len(got) != 2:
            shown = repr(got) if not isinstance(got, dict) else type_name(got)
            return [pick(f"{call} returned {shown}; it must return a pair (flops, memory_bytes)",
                         f"{call} 返回了 {shown}；应返回一个二元组 (flops, memory_bytes)")]
        pairs.append(got)
    (flops, mem), (_, mem2) = pairs
    for name, v in (("flops", flops), ("memory_bytes", mem)):
        if not isinstance(v, int) or isinstance(v, bool):
            return [pick(f"{call}: {name} is {type_name(v)} {v!r}; return two integers (FLOPs and bytes are counts)",
                         f"{call}：{name} 是 {type_name(v)} {v!r}；应返回两个整数（FLOPs 和字节数都是计数）")]
    fails = []
    what = f"B={B}, H={H}, Lq={L}, Lk={Lk}, D={D}"
    if flops != want_flops:
        msg = pick(f"{call}: flops = {flops}, but FlopCounterMode counts {want_flops} for the two matmuls "
                   f"of attention with {what} (2 FLOPs per multiply-add)",
                   f"{call}：flops = {flops}，但对 {what} 的注意力，FlopCounterMode 统计其两次矩阵乘法共 "
                   f"{want_flops} FLOPs（每次乘加算 2 FLOPs）")
        mistake = None
        if flops * 2 == want_flops:
            mistake = "multiply_add_once"
        elif flops == want_flops + B * H * L * Lk:
            mistake = "softmax_flops_counted"
        elif Lk != L and flops == 4 * B * H * L * L * D:
            mistake = "square_length"
        fails.append(Failure(msg, mistake=mistake))
    if mem != want_mem:
        msg = pick(f"{call}: memory_bytes = {mem}, but the score and probability matrices "
                   f"(2 x {B}x{H}x{L}x{Lk}) take {want_mem} bytes at {nbytes} bytes per element",
                   f"{call}：memory_bytes = {mem}，但每个元素 {nbytes} 字节时，分数矩阵和概率矩阵"
                   f"（2 x {B}x{H}x{L}x{Lk}）共占 {want_mem} 字节")
        mistake = None
        # each name only where both element sizes agree with it (a hard-coded 2 bytes halves one, not both)
        if mem * 2 == want_mem and isinstance(mem2, int) and mem2 * 2 == want_mem2:
            mistake = "memory_one_matrix"
        elif mem * nbytes == want_mem and mem2 == mem:
            mistake = "memory_in_elements"
        elif Lk != L and mem == 2 * B * H * L * L * nbytes:
            mistake = "square_length"
        elif mem2 == mem and want_mem2 != want_mem:
            msg += pick(f"; it gave the same for {sibling['bytes_per_elem']} bytes per element: bytes_per_elem is "
                        f"ignored or hard-coded",
                        f"；每个元素 {sibling['bytes_per_elem']} 字节时结果也一样：bytes_per_elem 被忽略了或被写死了")
        fails.append(Failure(msg, mistake=mistake))
    return fails


def _case(name, dtype, note="", **sizes):
    calls = [{"args": a, "kwargs": kw} for a, kw in (_call(sizes), _call(_sibling(sizes)))]
    return Case(name=name, target=TARGET, probe="calls", probe_args={"calls": calls, "sizes": sizes},
                dtype=dtype, grad=False, check=_check, note=note)


def cases(ctx: Ctx) -> list[Case]:
    out = [
        _case("cross_fp32", torch.float32, B=2, H=3, L=7, D=5, Lk=11, bytes_per_elem=4, note="Lq != Lk"),
        _case("self_fp64", torch.float64, B=3, H=2, L=9, D=6, bytes_per_elem=8, note="Lk defaults to L"),
        _case("defaults_bf16", torch.bfloat16, B=1, H=5, L=13, D=7, note="bytes_per_elem defaults to 2"),
        _case("one_query_fp32", torch.float32, B=1, H=1, L=1, D=3, Lk=17, bytes_per_elem=4, note="Lq = 1"),
        _case("random_long_fp32", torch.float32, B=ctx.int(1, 3), H=ctx.int(1, 5), L=ctx.int(64, 97),
              D=ctx.int(2, 9), Lk=ctx.int(64, 129), bytes_per_elem=4, note="sizes from the seed"),
    ]
    if ctx.full:
        for i in range(6):
            dtype = ctx.choice([torch.float64, torch.float32, torch.bfloat16])
            out.append(_case(f"random{i}", dtype, B=ctx.int(1, 4), H=ctx.int(1, 6), L=ctx.int(1, 23),
                             D=ctx.int(2, 11), Lk=ctx.int(1, 29),
                             bytes_per_elem=torch.empty((), dtype=dtype).element_size()))
    return out
