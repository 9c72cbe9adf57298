"""Cases for `gated_deltanet`: the L2 norm (rows whose squared norm is near eps), the gates, and the
gated delta rule in its recurrent and chunked forms against one float64 reference (so each form equals
the other): initial states, a given scale, one token, chunks that do not divide T, exceed it or hold one
token, decays strong enough that exp(gam_i - gam_j) above the diagonal overflows, long sequences, and
bounds on the largest tensor each form may build (no stack of every state, no T x T matrix); and one
input through both forms and several chunk sizes, which must agree to float64 precision."""
import math

import torch

from attn_drill.bank.api import Case, Ctx, Failure, MaxNumel, traits, type_name
from attn_drill.i18n import pick

REC, CHK = "gated_delta_recurrent", "gated_delta_chunked"
AGREE = 1e-9            # float64 all the way (the statement asks for it): relative to the result's scale

PROMISES = [
    ("l2norm: x / sqrt(sum(x^2) + eps), eps inside the square root", "l2norm_small_rows_fp64"),
    ("gates: g = -exp(A_log) * softplus(a + dt_bias), beta = sigmoid(b)", "gates_"),
    ("both forms L2-normalise q and k over K, then multiply q by scale (K ** -0.5 when None)", "recurrent_"),
    ("a given scale multiplies q", "recurrent_scale_fp32"),
    ("g is the log of the decay: the state is multiplied by exp(g_t)", "recurrent_"),
    ("the delta uses the decayed state; the output reads the state after token t", "recurrent_"),
    ("the state is (B, H, K, V) and is returned as the final state", "recurrent_kv_differ_fp64"),
    ("initial_state None means zeros; a given one is decayed and updated", "recurrent_initial_state_fp64"),
    ("T = 1", "recurrent_one_token_fp64"),
    ("chunked: the last chunk may be shorter; chunk_size may exceed T or be 1", "chunked_"),
    ("chunked: no overflow when exp(gam_i - gam_j) above the diagonal would overflow", "chunked_strong_decay"),
    ("the chunked form equals the recurrent form, outputs and final state, at any chunk size",
     "forms_agree_fp64"),
    ("a float64 input stays float64 (float32-level error fails)", "every float64 case (spec full_float64)"),
    ("recurrent: no op outputs more than B*H*max(T*K, T*V, K*V) elements", "recurrent_memory_fp64"),
    ("chunked: no op outputs more than B*H*n*max(C*C, C*K, C*V, K*V) elements", "chunked_memory_fp64"),
    ("gradients w.r.t. q, k, v, g, beta and the initial state", "recurrent_initial_state_fp64"),
    ("outputs in float64, float32 and bfloat16", "bf16"),
]


def _inputs(ctx: Ctx, B, T, H, K, V, decay=1.0, strong=0.0, initial=False, small=False):
    """q, k, v, g (log decay in [-decay, 0]; with strong, every other token's about -strong), beta in (0, 1),
    and an initial state. Tokens of ordinary decay between the strong ones keep the gradient w.r.t. g of
    ordinary size."""
    s = 1e-3 if small else 1.0
    out = {"q": ctx.randn(B, T, H, K, scale=s), "k": ctx.randn(B, T, H, K, scale=s), "v": ctx.randn(B, T, H, V)}
    out["g"] = -decay * ctx.rand(B, T, H)
    if strong:
        out["g"][:, ::2] = -strong * (1.0 + 0.3 * ctx.rand(B, (T + 1) // 2, H))
    out["beta"] = ctx.rand(B, T, H)
    if initial:
        out["initial_state"] = ctx.randn(B, H, K, V, scale=0.5)
    return out


def _limit(form, B, T, H, K, V, chunk=None):
    if form == REC:
        return B * H * max(T * K, T * V, K * V)
    c = min(chunk, T)
    n = math.ceil(T / c)
    return B * H * n * max(c * c, c * K, c * V, K * V)


def _case(ctx: Ctx, name, form, B, T, H, K, V, dtype, chunk=None, scale=None, decay=1.0, strong=0.0,
          initial=False, small=False, memory=False, grad=True) -> Case:
    inputs = _inputs(ctx, B, T, H, K, V, decay, strong, initial, small)
    kwargs = {} if scale is None else {"scale": scale}
    if chunk is not None:
        kwargs["chunk_size"] = chunk
    trace = ()
    if memory:
        limit = _limit(form, B, T, H, K, V, chunk)
        assert limit < B * H * T * K * V and limit < B * H * T * T, f"{name}: the rule cannot tell"
        what = (pick(f"stack of all {T} states (B, T, H, K, V): carry one state", f"全部 {T} 个状态的堆叠 "
                     f"(B, T, H, K, V)：只携带一个状态") if form == REC else
                pick(f"{T}x{T} matrix: one block of chunk_size x chunk_size per chunk",
                     f"{T}x{T} 矩阵：每个 chunk 只用一个 chunk_size x chunk_size 的块"))
        trace = (MaxNumel(limit, what=what),)
    notes = [form.replace("gated_delta_", "")] + ([f"chunk {chunk}"] if chunk is not None else []) + \
        ([f"scale {scale:g}"] if scale is not None else []) + (["initial state"] if initial else []) + \
        ([f"strong decay (g ~ -{strong:g})"] if strong else []) + (["small q, k"] if small else []) + \
        ([] if grad else ["forward only"])
    return Case(name=name, target=form, inputs=inputs, kwargs=kwargs, dtype=dtype, grad=grad, trace=trace,
                output_names=("o", "final_state"), note=", ".join(notes),
                traits=traits(B=B, L=T, H=H, D=K, Dv=V, mask="causal"))


def _agree(sub, ref, case: Case):
    """Every [output, state] the probe returned equals the float64 reference's recurrent form, and the
    chunked ones equal the submission's own recurrent form."""
    want = case.truth_obs[0]
    chunks = case.probe_args["chunks"]
    labels = [pick("recurrent form", "递推形式")] + [f"chunk_size={c}" for c in chunks]
    if not isinstance(sub, list) or len(sub) != len(labels):
        return [pick(f"the probe expected {len(labels)} results, got {type_name(sub)}",
                     f"探针期望得到 {len(labels)} 个结果，实际得到 {type_name(sub)}")]
    fails = []
    for label, got in zip(labels, sub):
        if not (isinstance(got, list) and len(got) == 2 and all(isinstance(x, torch.Tensor) for x in got)):
            fails.append(pick(f"{label}: expected (o, final_state) tensors, got {type_name(got)}",
                              f"{label}：期望得到 (o, final_state) 张量，实际得到 {type_name(got)}"))
            continue
        for what, g_, w in zip(("o", "final_state"), got, want):
            if g_.shape != w.shape:
                fails.append(pick(f"{label}: {what} has shape {list(g_.shape)}, expected {list(w.shape)}",
                                  f"{label}：{what} 的形状为 {list(g_.shape)}，期望 {list(w.shape)}"))
                continue
            err = float((g_.double() - w).abs().max()) if torch.isfinite(g_).all() else math.inf
            if not err <= AGREE * (1 + float(w.abs().max())):
                fails.append(Failure(pick(f"{label}: {what} is {err:.3g} away from the float64 reference; both forms "
                                          f"must give the same answer, to float64 precision",
                                          f"{label}：{what} 与 float64 参考实现相差 {err:.3g}；"
                                          f"两种形式必须给出相同的结果，精确到 float64 的精度")))
    return fails


def cases(ctx: Ctx) -> list[Case]:
    f64, f32, bf16 = torch.float64, torch.float32, torch.bfloat16
    T_long = ctx.int(64, 80)
    out = [
        Case(name="l2norm_fp64", target="l2norm", inputs={"x": ctx.randn(2, 5, 3, 6)}, note="eps 1e-6"),
        # squared norms near eps = 1e-6: eps inside the square root and a clamp of the norm differ here
        Case(name="l2norm_small_rows_fp64", target="l2norm", inputs={"x": ctx.randn(3, 4, 5, scale=4e-4)},
             note="|x|^2 ~ eps"),
        Case(name="l2norm_bf16", target="l2norm", inputs={"x": ctx.randn(2, 7, 8)}, dtype=bf16, kwargs={"eps": 1e-6}),
        Case(name="gates_fp64", target="gates",
             inputs={"a": ctx.randn(2, 9, 3), "b": ctx.randn(2, 9, 3, scale=2.0),
                     "A_log": torch.log(1.0 + 15.0 * ctx.rand(3)), "dt_bias": ctx.randn(3)},
             output_names=("g", "beta"), note="A = 1 .. 16"),
        Case(name="gates_bf16", target="gates",
             inputs={"a": ctx.randn(3, 6, 2), "b": ctx.randn(3, 6, 2), "A_log": torch.log(1.0 + 7.0 * ctx.rand(2)),
                     "dt_bias": ctx.randn(2)}, dtype=bf16, output_names=("g", "beta")),
        _case(ctx, "recurrent_fp64", REC, 2, 11, 2, 4, 3, f64),
        _case(ctx, "recurrent_initial_state_fp64", REC, 2, 9, 3, 5, 4, f64, initial=True, decay=0.5),
        _case(ctx, "recurrent_kv_differ_fp64", REC, 1, 8, 2, 3, 6, f64),
        _case(ctx, "recurrent_scale_fp32", REC, 2, 12, 2, 6, 6, f32, scale=0.3),
        _case(ctx, "recurrent_one_token_fp64", REC, 3, 1, 2, 4, 5, f64, initial=True),
        _case(ctx, "recurrent_small_qk_fp64", REC, 2, 7, 1, 4, 3, f64, small=True),
        _case(ctx, "recurrent_memory_fp64", REC, 2, 15, 2, 5, 4, f64, memory=True),
        _case(ctx, "recurrent_long_fp32", REC, 1, T_long, 2, 8, 6, f32, grad=False, decay=0.2),
        _case(ctx, "recurrent_bf16", REC, 2, 10, 2, 8, 8, bf16),
        _case(ctx, "chunked_ragged_fp64", CHK, 2, 19, 2, 4, 3, f64, chunk=4),
        _case(ctx, "chunked_chunk_gt_len_b1_fp64", CHK, 1, 13, 3, 5, 4, f64, chunk=32, initial=True),
        _case(ctx, "chunked_chunk1_fp64", CHK, 2, 6, 2, 3, 3, f64, chunk=1),
        # every other token decays by ~ exp(-120): over a chunk of 16, gam_i - gam_j above the diagonal
        # reaches 7 x 120 = 840 and its exp overflows float64 (7 x 15 = 105 overflows float32)
        _case(ctx, "chunked_strong_decay_fp64", CHK, 2, 33, 2, 4, 4, f64, chunk=16, strong=120.0),
        _case(ctx, "chunked_strong_decay_fp32", CHK, 2, 25, 2, 4, 3, f32, chunk=16, strong=15.0),
        _case(ctx, "chunked_initial_state_fp32", CHK, 2, 17, 2, 6, 5, f32, chunk=5, initial=True, scale=0.4),
        _case(ctx, "chunked_memory_fp64", CHK, 2, 17, 2, 3, 3, f64, chunk=6, memory=True),
        # long sequences: their backward is the same as on short ones, and costs thousands of ops
        _case(ctx, "chunked_long_fp32", CHK, 2, T_long + 5, 2, 6, 6, f32, chunk=ctx.int(7, 13), decay=0.2,
              grad=False),
        _case(ctx, "chunked_bf16", CHK, 2, 18, 2, 8, 8, bf16, chunk=5),
    ]
    B, T, H, K, V = ctx.int(1, 3), ctx.int(2, 30), ctx.int(1, 3), ctx.int(2, 8), ctx.int(2, 8)
    out.append(_case(ctx, "chunked_sizes_from_seed_fp64", CHK, B, T, H, K, V, f64, chunk=ctx.int(1, 12),
                     initial=bool(ctx.int(0, 1))))
    inputs = _inputs(ctx, 2, 14, 2, 4, 5, initial=True)
    out.append(Case(name="forms_agree_fp64", target=REC, inputs=inputs, probe="forms",
                    probe_args={"chunks": [1, 3, 13, 14, 20]}, check=_agree, grad=False,
                    note="recurrent, and chunked at chunk sizes 1, 3, T-1, T, T+6"))
    if ctx.full:
        for i in range(8):
            form = (REC, CHK)[i % 2]
            # K >= 2: with K = 1 the L2 norm is a sign, and its gradient (about eps / |x|^3) is a cancellation
            # of O(1) terms that no float64 order of operations computes to better than 1e-10 relative
            B, T, H, K, V = ctx.int(1, 3), ctx.int(1, 30), ctx.int(1, 3), ctx.int(2, 8), ctx.int(1, 8)
            dtype = ctx.choice([f64, f32, bf16])
            strong = ctx.choice([0.0, 0.0, 120.0 if dtype == f64 else 15.0]) if form == CHK and dtype != bf16 else 0.0
            out.append(_case(ctx, f"random{i}_{form.replace('gated_delta_', '')}", form, B, T, H, K, V, dtype,
                             chunk=ctx.int(1, 12) if form == CHK else None, scale=ctx.choice([None, 0.5]),
                             decay=ctx.choice([0.1, 1.0, 3.0]), strong=strong, initial=bool(ctx.int(0, 1))))
    return out
