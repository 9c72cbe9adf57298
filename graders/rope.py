"""Cases for `rope`: the rotation table, the rotation itself (Meta-Llama pairs), relative-position
property, RoPE on Q and K inside attention, padding, several head dims and thetas, dtypes."""
import torch

from attn_drill.bank.api import Case, Ctx, Failure, float64_bound, padding_mask, type_name, traits
from attn_drill.i18n import pick


def rope_table(dim: int, seq_len: int, theta: float) -> torch.Tensor:
    """(seq_len, dim/2) complex128: exp(1j * m * theta^(-2i/dim)), built with cos/sin in float64."""
    i = torch.arange(dim // 2, dtype=torch.float64)
    m = torch.arange(seq_len, dtype=torch.float64)[:, None]
    angle = m * theta ** (-2.0 * i / dim)
    return torch.complex(torch.cos(angle), torch.sin(angle))


def _table_variants(dim: int, seq_len: int, theta: float) -> dict:
    i = torch.arange(dim // 2, dtype=torch.float64)
    m = torch.arange(seq_len, dtype=torch.float64)[:, None]
    def polar(a):
        return torch.complex(torch.cos(a), torch.sin(a))
    return {
        "inv_freq_exponent": polar(m * theta ** (-i / dim)),
        "positions_start_at_one": polar((m + 1) * theta ** (-2.0 * i / dim)),
        "missing_reciprocal": polar(m * theta ** (2.0 * i / dim)),
    }


TABLES = ((8, 13, 10000.0), (6, 1, 10000.0), (16, 29, 500000.0), (10, 7, 100.0), (2, 5, 10000.0))


def check_table(sub, ref, case) -> list:
    """sub: precompute_rope_freqs(dim, seq_len, theta) for each entry of TABLES."""
    for (dim, seq_len, theta), got in zip(TABLES, sub):
        call = f"precompute_rope_freqs({dim}, {seq_len}, theta={theta:g})"
        if not isinstance(got, torch.Tensor) or not got.is_complex():
            kind = got.dtype if isinstance(got, torch.Tensor) else type_name(got)
            return [pick(f"{call} returned {kind}; "
                         f"return a complex tensor (torch.polar) of shape ({seq_len}, {dim // 2})",
                         f"{call} 返回了 {kind}；应返回形状为 ({seq_len}, {dim // 2}) 的复数张量（torch.polar）")]
        if tuple(got.shape) != (seq_len, dim // 2):
            return [pick(f"{call} has shape {tuple(got.shape)}; expected ({seq_len}, {dim // 2}) (positions on rows)",
                         f"{call} 的形状是 {tuple(got.shape)}；应为 ({seq_len}, {dim // 2})（每行对应一个位置）")]
        got = got.detach().to("cpu", torch.complex128)
        want = rope_table(dim, seq_len, theta)
        err = float((got - want).abs().max())
        if err <= 2e-5:
            continue
        msg = pick(f"{call} differs from exp(1j * m * theta^(-2i/dim)) by up to {err:.3g}",
                   f"{call} 与 exp(1j * m * theta^(-2i/dim)) 最多相差 {err:.3g}")
        for mistake, table in _table_variants(dim, seq_len, theta).items():
            if float((got - table).abs().max()) <= 2e-5:
                if mistake == "inv_freq_exponent":
                    return [Failure(msg + pick(" (the exponent is 2i/dim: arange(0, dim, 2) / dim)",
                                               "（指数应为 2i/dim：arange(0, dim, 2) / dim）"), mistake=mistake)]
                return [msg + pick(f" (it looks like {mistake.replace('_', ' ')})",
                                   f"（看起来是 {mistake.replace('_', ' ')}）")]
        return [msg]
    return []


RELATIVE = ((12, 17, 10000.0), (6, 9, 100.0))


def _relative_calls(ctx: Ctx) -> list:
    """apply_rotary_pos_emb on one query and one key repeated at every position."""
    calls = []
    for dim, seq_len, theta in RELATIVE:
        table = rope_table(dim, seq_len, theta)
        for _ in "qk":
            v = ctx.randn(dim)
            calls.append({"args": [v.expand(1, 1, seq_len, dim).clone(), table]})
    return calls


def check_relative(sub, ref, case) -> list:
    """Scores between one rotated query and one rotated key depend only on their distance."""
    failures = []
    calls = case.probe_args["calls"]
    for i, (dim, seq_len, theta) in enumerate(RELATIVE):
        rq, rk = sub[2 * i], sub[2 * i + 1]
        q = calls[2 * i]["args"][0][0, 0, 0]
        want = (1, 1, seq_len, dim)
        for got in (rq, rk):
            if not isinstance(got, torch.Tensor) or tuple(got.shape) != want:
                shape = list(got.shape) if isinstance(got, torch.Tensor) else type_name(got)
                return [pick(f"apply_rotary_pos_emb on a (1, 1, {seq_len}, {dim}) input returned {shape}",
                             f"apply_rotary_pos_emb 对 (1, 1, {seq_len}, {dim}) 的输入返回了 {shape}")]
        rq, rk = rq[0, 0], rk[0, 0]                                                      # (L, D)
        s = rq.double() @ rk.double().T                                                  # (L, L): s[m, n]
        shift = (s[1:, 1:] - s[:-1, :-1]).abs().max()
        if not float(shift) <= float64_bound(case) * max(1.0, float(s.abs().max())):
            failures.append(pick(f"head_dim={dim}: q.k after rotation changes when both positions move by one "
                                 f"(|s(m+1, n+1) - s(m, n)| up to {float(shift):.3g}); RoPE scores must depend "
                                 "only on m - n",
                                 f"head_dim={dim}：两个位置同时后移一位时，旋转后的 q.k 发生了变化"
                                 f"（|s(m+1, n+1) - s(m, n)| 最大为 {float(shift):.3g}）；RoPE 的分数必须只依赖于 "
                                 "m - n"))
        norms = (rq.double().norm(dim=-1) - q.norm()).abs().max()
        if not float(norms) <= float64_bound(case) * float(q.norm()):
            failures.append(pick(f"head_dim={dim}: the rotation changed the vector's length "
                                 f"by up to {float(norms):.3g}",
                                 f"head_dim={dim}：旋转改变了向量的长度，最多改变 {float(norms):.3g}"))
    return failures


def _apply_case(ctx: Ctx, name, shape, theta, dtype, table_len=None):
    *_, L, D = shape
    table = rope_table(D, L if table_len is None else table_len, theta)[:L]
    return Case(name=name, target="apply_rotary_pos_emb", init=None,
                inputs={"x": ctx.randn(*shape), "freqs_cis": table}, dtype=dtype, note=f"theta={theta:g} D={D}",
                full_float64=dtype == torch.float64)   # the statement: the rotation of a float64 x is float64


def _attn_case(ctx: Ctx, name, B, L, H, D, dtype, theta=10000.0, pad=False, extra=0, scale=1.0):
    E = H * D
    table = rope_table(D, L + extra, theta)
    kwargs, notes = {}, [f"theta={theta:g}", f"D={D}"]
    if pad:
        kwargs["key_padding_mask"] = padding_mask(ctx.lengths(B, L), L)
        notes.append("pad")
    if extra:
        notes.append(f"{L + extra}-row freqs")
    if scale > 1:
        notes.append("large logits")
    return Case(name=name, target="RoPESelfAttention", init=dict(hidden_dim=E, num_heads=H, dropout=0.0),
                inputs={"x": ctx.randn(B, L, E, scale=scale), "freqs_cis": table}, kwargs=kwargs, dtype=dtype,
                note=" ".join(notes), traits=traits(B=B, L=L, H=H, pad=pad, large_logits=scale > 1))


def cases(ctx: Ctx) -> list[Case]:
    out = [
        Case(name="freqs_table", target="precompute_rope_freqs", check=check_table, grad=False, probe="calls",
             probe_args={"calls": [{"args": [d, n, t]} for d, n, t in TABLES]},
             note="freqs_cis values"),
        _apply_case(ctx, "apply_d8_fp64", (2, 3, 7, 8), 10000.0, torch.float64),
        _apply_case(ctx, "apply_d6_l1_fp64", (1, 2, 1, 6), 10000.0, torch.float64),
        _apply_case(ctx, "apply_3d_d14_fp32", (5, 11, 14), 500.0, torch.float32),
        _apply_case(ctx, "apply_d10_bf16", (2, 2, 9, 10), 10000.0, torch.bfloat16),
        Case(name="relative_positions", target="apply_rotary_pos_emb", check=check_relative, grad=False,
             probe="calls", probe_args={"calls": _relative_calls(ctx)},
             note="s(m,n) = s(m+k,n+k)", full_float64=True),
        _attn_case(ctx, "attn_h3_d6_fp64", 2, 7, 3, 6, torch.float64),
        _attn_case(ctx, "attn_b1_fp64", 1, 6, 2, 4, torch.float64, extra=5),
        _attn_case(ctx, "attn_l1_fp64", 3, 1, 2, 4, torch.float64, extra=5),
        _attn_case(ctx, "attn_random_fp64", ctx.int(2, 4), ctx.int(2, 13), ctx.int(1, 4), 2 * ctx.int(1, 4),
                   torch.float64, pad=True, extra=ctx.int(0, 5)),
        _attn_case(ctx, "attn_long_fp32", ctx.int(1, 2), ctx.int(64, 97), 2, 2 * ctx.int(2, 4), torch.float32,
                   pad=True, extra=ctx.int(1, 9)),
        _attn_case(ctx, "attn_pad_d10_fp64", 3, 9, 2, 10, torch.float64, theta=100.0, pad=True, extra=4),
        _attn_case(ctx, "attn_h4_d4_fp32", 2, 13, 4, 4, torch.float32, theta=500000.0),
        _attn_case(ctx, "attn_large_logits_fp32", 2, 6, 2, 8, torch.float32, scale=60.0),
        _attn_case(ctx, "attn_bf16", 2, 11, 3, 8, torch.bfloat16, pad=True),
    ]
    if ctx.full:
        for i in range(6):
            B, L, H, D = ctx.int(1, 4), ctx.int(1, 23), ctx.int(1, 5), 2 * ctx.int(1, 7)
            dtype = ctx.choice([torch.float64, torch.float32, torch.bfloat16])
            theta = ctx.choice([100.0, 10000.0, 500000.0])
            out.append(_attn_case(ctx, f"random{i}", B, L, H, D, dtype, theta=theta,
                                  pad=bool(ctx.int(0, 1)), extra=ctx.int(0, 6)))
    return out
