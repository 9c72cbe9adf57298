"""Cases for `packed_sequences`: the packing metadata (cu_seqlens as int32 with its leading 0 and final
total, positions restarting in every document, max_seqlen as an int), then varlen attention over the
packed rows against per-document causal attention: documents of length 1, one document, many, a long
pack, large logits, a single head and three dtypes."""
import torch

from attn_drill.bank.api import Case, Ctx, traits


def _lengths(ctx: Ctx, n: int, longest: int) -> list[int]:
    """n document lengths in [1, longest], with at least one document of length 1 when n > 2."""
    lens = [ctx.int(1, longest) for _ in range(n)]
    if n > 2:
        lens[ctx.int(1, n - 1)] = 1
    return lens


def _document_ids(lens: list[int]) -> torch.Tensor:
    """(total,) the document of each packed row."""
    return torch.repeat_interleave(torch.arange(len(lens)), torch.tensor(lens))


def _cu(lens: list[int]) -> torch.Tensor:
    """(N + 1,) int32 offsets [0, l_0, l_0 + l_1, ..., total], as the grader hands them to varlen_attention."""
    out = [0]
    for n in lens:
        out.append(out[-1] + n)
    return torch.tensor(out, dtype=torch.int32)


def _meta_case(name, lens: list[int]) -> Case:
    return Case(name=name, target="packing_metadata", inputs={"seq_lens": torch.tensor(lens, dtype=torch.int64)},
                grad=False, output_names=("cu_seqlens", "position_ids", "max_seqlen"),
                note=f"lengths {lens}" if len(lens) <= 8 else f"{len(lens)} documents",
                traits=("l1",) if 1 in lens else ())


def _attn_case(ctx: Ctx, name, lens: list[int], H, D, Dv, dtype, scale=None, large=False,
               top: float | None = None) -> Case:
    total = sum(lens)
    q = ctx.randn(total, H, D, scale=25.0 if large else 1.0)
    k, v = ctx.randn(total, H, D), ctx.randn(total, H, Dv)
    if top is not None:
        # q scaled so that the largest score a query keeps is `top`: above 88.7, exp overflows float32
        keep = (_document_ids(lens)[:, None] == _document_ids(lens)[None, :]) & torch.ones(
            total, total, dtype=torch.bool).tril()
        s = (scale or D ** -0.5) * torch.einsum("ihd,jhd->hij", q, k)
        q = q * (top / float(s.masked_fill(~keep, float("-inf")).max()))
    rtol = None
    if large and dtype == torch.float32:
        # float32 rounds a score of size |s| by |s|·eps, which moves the softmax as much
        s = (scale or D ** -0.5) * torch.einsum("ihd,jhd->hij", q, k).abs().max()
        rtol = max(1.3e-6, 2 * torch.finfo(torch.float32).eps * float(s))
    words = f"lengths {lens}" if len(lens) <= 6 else f"{len(lens)} documents, total {total}"
    trait = set(traits(L=total, D=D, Dv=Dv, H=H, mask="causal", large_logits=large))
    if 1 in lens:
        trait.add("l1")
    if len(lens) == 1:
        trait.add("b1")
    return Case(name=name, target="varlen_attention",
                inputs={"q": q, "k": k, "v": v, "cu_seqlens": _cu(lens), "max_seqlen": max(lens)},
                kwargs={"scale": scale}, dtype=dtype, rtol=rtol,
                note=words + (", large logits" if large else ""), traits=tuple(sorted(trait)))


def cases(ctx: Ctx) -> list[Case]:
    f64, f32, bf16 = torch.float64, torch.float32, torch.bfloat16
    long_lens = _lengths(ctx, ctx.int(5, 9), 17)
    while sum(long_lens) < 64:
        long_lens.append(ctx.int(1, 17))
    out = [
        _meta_case("metadata_example", [5, 1, 9, 3]),
        _meta_case("metadata_random", _lengths(ctx, ctx.int(3, 8), 11)),
        _meta_case("metadata_one_document", [13]),
        _meta_case("metadata_all_length_one", [1, 1, 1, 1, 1, 1]),
        _attn_case(ctx, "varlen_example_fp64", [5, 1, 9, 3], 3, 4, 5, f64),
        _attn_case(ctx, "varlen_long_fp32", long_lens, 2, 6, 6, f32, scale=0.7),
        _attn_case(ctx, "varlen_one_document_fp64", [11], 2, 5, 3, f64),
        _attn_case(ctx, "varlen_all_length_one_fp64", [1, 1, 1, 1, 1], 2, 3, 4, f64),
        _attn_case(ctx, "varlen_single_head_fp64", [2, 7, 1, 4], 1, 4, 4, f64, scale=1.3),
        _attn_case(ctx, "varlen_large_logits_fp32", [6, 3, 8], 2, 5, 5, f32, large=True),
        _attn_case(ctx, "varlen_bf16", [4, 9, 1, 6], 3, 8, 8, bf16),
        _attn_case(ctx, "varlen_exp_overflow_fp32", [4, 7, 2], 2, 6, 5, f32, large=True, top=150.0),
    ]
    if ctx.full:
        for i in range(8):
            lens = _lengths(ctx, ctx.int(1, 7), ctx.choice([1, 4, 12]))
            if i % 4 == 0:
                out.append(_meta_case(f"random{i}_metadata", lens))
                continue
            dtype = ctx.choice([f64, f32, bf16])
            out.append(_attn_case(ctx, f"random{i}_varlen", lens, ctx.int(1, 4), ctx.int(1, 9), ctx.int(1, 9), dtype,
                                  scale=ctx.choice([None, 0.4, 1.2]), large=dtype == f32 and ctx.int(0, 2) == 0))
    return out
