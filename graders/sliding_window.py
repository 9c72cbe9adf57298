"""Cases for `sliding_window`: the band mask (causal: W keys including the query; bidirectional:
|i - j| < W), and sliding-window attention with padding, W = 1, W >= L, large logits, dtypes."""
import torch

from attn_drill.bank.api import Case, Ctx, Failure, padding_mask, type_name, traits
from attn_drill.i18n import pick

TARGET = "SlidingWindowAttention"


def band(L: int, W: int, bidirectional: bool) -> torch.Tensor:
    """The stated window, built with loops (independent of the reference)."""
    keep = torch.zeros(L, L, dtype=torch.bool)
    for i in range(L):
        lo = max(0, i - W + 1)
        hi = min(L, i + W) if bidirectional else i + 1
        keep[i, lo:hi] = True
    return keep


def _variants(L: int, W: int, bidirectional: bool) -> list:
    wider = band(L, W + 1, bidirectional)
    out = [("window_off_by_one", wider,
            pick(f"each query sees {'2W+1' if bidirectional else 'W+1'} keys; the window holds "
                 f"{'2W-1' if bidirectional else 'W'} keys, the query's own position included (i - j < W)",
                 f"每个 query 看到了 {'2W+1' if bidirectional else 'W+1'} 个 key；窗口应包含 "
                 f"{'2W-1' if bidirectional else 'W'} 个 key，其中包括 query 自己的位置（i - j < W）"))]
    if not bidirectional:
        out.append(("missing_causal", band(L, W, True),
                    pick("the causal window must not include keys after the query (j > i)",
                         "因果窗口不能包含 query 之后的 key（j > i）")))
        out.append(("window_wrong_direction", band(L, W, False).T.contiguous(),
                    pick("the causal window looks at the future (j >= i); it must look back: i - W < j <= i",
                         "因果窗口看向了未来（j >= i）；它必须向后看：i - W < j <= i")))
    return out


MASKS = ((9, 3, False), (9, 3, True), (6, 1, False), (6, 1, True), (5, 8, False), (7, 7, True),
         (1, 2, False), (12, 5, False), (12, 4, True))


def check_mask(sub, ref, case) -> list:
    """sub: create_sliding_window_mask(L, W, cpu, bidirectional=...) for each entry of MASKS."""
    for (L, W, bidirectional), got in zip(MASKS, sub):
        call = f"create_sliding_window_mask({L}, {W}, 'cpu', bidirectional={bidirectional})"
        if not isinstance(got, torch.Tensor):
            return [pick(f"{call} returned {type_name(got)}; return a bool tensor",
                         f"{call} 返回了 {type_name(got)}；应返回 bool 张量")]
        if tuple(got.shape) != (L, L):
            return [pick(f"{call} has shape {tuple(got.shape)}; expected ({L}, {L})",
                         f"{call} 的形状是 {tuple(got.shape)}；应为 ({L}, {L})")]
        if got.dtype != torch.bool:
            return [pick(f"{call} has dtype {got.dtype}; return a bool tensor (True = may attend)",
                         f"{call} 的 dtype 是 {got.dtype}；应返回 bool 张量（True 表示可以关注）")]
        want = band(L, W, bidirectional)
        if torch.equal(got, want):
            continue
        rows = [i for i in range(L) if not torch.equal(got[i], want[i])]
        i = rows[0]
        seen = got[i].nonzero().flatten().tolist()
        expect = want[i].nonzero().flatten().tolist()
        msg = pick(f"{call}: query {i} sees keys {seen}, expected {expect}",
                   f"{call}：query {i} 看到的 key 是 {seen}，应为 {expect}")
        for mistake, mask, why in _variants(L, W, bidirectional):
            if torch.equal(got, mask):
                return [Failure(pick(f"{msg}; {why}", f"{msg}；{why}"), mistake=mistake)]
        if torch.equal(got, want.logical_not()):
            return [msg + pick("; the mask is inverted (True must mean 'may attend')",
                               "；掩码反了（True 必须表示“可以关注”）")]
        return [msg]
    return []


def _case(ctx: Ctx, name, B, L, H, D, W, dtype, bidirectional=False, pad=False, scale=1.0):
    E = H * D
    kwargs, notes = {}, [f"W={W}", "bidir" if bidirectional else "causal"]
    if pad:
        # every query keeps at least one key: the last query's window must reach a valid key
        kwargs["key_padding_mask"] = padding_mask(ctx.lengths(B, L, min_len=max(1, L - W + 1)), L)
        notes.append("pad")
    if scale > 1:
        notes.append("large logits")
    return Case(name=name, target=TARGET,
                init=dict(hidden_dim=E, num_heads=H, window_size=W, dropout=0.0, bidirectional=bidirectional),
                inputs={"x": ctx.randn(B, L, E, scale=scale)}, kwargs=kwargs, dtype=dtype,
                note=" ".join(notes), traits=traits(B=B, L=L, H=H, pad=pad, large_logits=scale > 1,
                                                    mask=None if bidirectional else "causal"))


def cases(ctx: Ctx) -> list[Case]:
    out = [
        Case(name="mask", target="create_sliding_window_mask", check=check_mask, grad=False, probe="calls",
             probe_args={"calls": [{"args": [L, W, torch.device("cpu")], "kwargs": {"bidirectional": b}}
                                   for L, W, b in MASKS]},
             note="band mask"),
        _case(ctx, "causal_w3_fp64", 2, 9, 3, 5, 3, torch.float64),
        _case(ctx, "bidir_w2_fp64", 2, 8, 2, 6, 2, torch.float64, bidirectional=True),
        _case(ctx, "b1_fp64", 1, 6, 2, 3, 4, torch.float64),
        _case(ctx, "l1_fp64", 3, 1, 2, 3, 4, torch.float64),
        _case(ctx, "random_fp64", ctx.int(2, 4), ctx.int(2, 15), ctx.int(1, 3), ctx.int(2, 6), ctx.int(1, 6),
              torch.float64, bidirectional=bool(ctx.int(0, 1)), pad=True),
        _case(ctx, "long_fp32", ctx.int(1, 2), ctx.int(64, 97), 2, ctx.int(3, 5), ctx.int(3, 17), torch.float32,
              pad=True),
        _case(ctx, "causal_w4_pad_fp64", 3, 10, 2, 7, 4, torch.float64, pad=True),
        _case(ctx, "causal_w1_fp32", 2, 6, 3, 4, 1, torch.float32),
        _case(ctx, "w_over_l_fp32", 2, 5, 4, 3, 9, torch.float32),
        _case(ctx, "large_logits_fp32", 2, 7, 2, 9, 3, torch.float32, scale=60.0),
        _case(ctx, "bidir_pad_bf16", 2, 13, 3, 8, 5, torch.bfloat16, bidirectional=True, pad=True),
    ]
    if ctx.full:
        for i in range(6):
            B, L, H, D = ctx.int(1, 4), ctx.int(1, 40), ctx.int(1, 5), ctx.int(2, 11)
            W = ctx.int(1, 12)
            dtype = ctx.choice([torch.float64, torch.float32, torch.bfloat16])
            out.append(_case(ctx, f"random{i}", B, L, H, D, W, dtype, bidirectional=bool(ctx.int(0, 1)),
                             pad=bool(ctx.int(0, 1))))
    return out
