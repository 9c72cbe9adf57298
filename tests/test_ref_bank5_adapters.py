"""Cross-checks of the two adapter and routing references of bank 5 against implementations written
another way:

lora_attention  the facts file's peft oracle rebuilt from its recipe (seed order as written there, both
                alpha / r and rsLoRA), a functional version with F.scaled_dot_product_attention and
                explicit weights W + scaling * B A, merge and unmerge (equal outputs at 1e-12, not bit
                for bit), the init (B = 0, A within 1/sqrt(in), the output bit-equal to the base), the
                gradients (none on the base weights), and the grader's checks on the reference and on
                the mutants they must name
moe_router      the facts file's Mixtral oracle (experts [6, 1], 0.8036 / 0.1964, aux loss
                2.69996638547707, 1.3499... with f normalised to 1) and the Switch router's capacity
                example; per-token Python loops; a softmax over the chosen logits equals renormalising
                (softmax scores); the balanced loss equals k; capacity against a queue simulation
"""
from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from loading import failures, load

from attn_drill import bank
from attn_drill.bank import sources
from attn_drill.bank.api import Ctx, case_seed
from attn_drill.room.usercode import load_source


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(saved)


@pytest.fixture(scope="module")
def lora():
    return load("lora_attention")


@pytest.fixture(scope="module")
def moe():
    return load("moe_router")


def _mutant(pid: str, mid: str):
    spec = bank.get(pid)
    return load_source(sources.mutant_source(spec, sources.read(bank.reference_path(pid)), mid), f"test_mutant_{mid}")


# =============================================================================== lora_attention
def _oracle_module(lora, use_rslora):
    """Facts file section 3: seed 0 -> four Linear(8, 8) (q, k, v, o) -> double -> normal_(0, 0.5) each
    -> x = randn(2, 5, 8); seed 2 -> normal_(0, 0.5) for q.A, q.B, v.A, v.B (peft's named_parameters
    order). The seed-1 draws of peft's own init are overwritten, so they are not needed here."""
    torch.manual_seed(0)
    lins = [nn.Linear(8, 8, bias=False).double() for _ in range(4)]
    with torch.no_grad():
        for layer in lins:
            layer.weight.normal_(0, 0.5)
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    torch.manual_seed(2)
    ab = [torch.empty(*s, dtype=torch.float64).normal_(0, 0.5) for s in ((4, 8), (8, 4), (4, 8), (8, 4))]
    m = lora.LoRAAttention(8, 2, 4, 8.0, use_rslora=use_rslora).double()
    with torch.no_grad():
        m.q_proj.base_layer.weight.copy_(lins[0].weight)
        m.k_proj.weight.copy_(lins[1].weight)
        m.v_proj.base_layer.weight.copy_(lins[2].weight)
        m.o_proj.weight.copy_(lins[3].weight)
        for t, w in zip((m.q_proj.lora_A, m.q_proj.lora_B, m.v_proj.lora_A, m.v_proj.lora_B), ab):
            t.weight.copy_(w)
    return m, x


@pytest.mark.parametrize("use_rslora,first,last", [
    (False, [5.074066716737, 0.065369417641, -2.863611168432, 3.529671363311],
     [2.023173776848, -0.467682892037, -1.874658822101, 3.20261418315]),
    (True, [7.040484190724, 1.997354487552, -2.17025676308, 6.078702366782],
     [2.731866953325, -1.330922511668, -3.158694883808, 3.92664339711]),
])
def test_lora_peft_oracle(lora, use_rslora, first, last):
    m, x = _oracle_module(lora, use_rslora)
    assert m.q_proj.scaling == (4.0 if use_rslora else 2.0)
    y = m(x)
    assert torch.allclose(y[0, 0, :4], torch.tensor(first, dtype=torch.float64), atol=1e-11)
    assert torch.allclose(y[1, -1, :4], torch.tensor(last, dtype=torch.float64), atol=1e-11)


def _functional(m, x):
    """The same attention from explicit weights W + scaling * B A and SDPA with is_causal."""
    B, L, E = x.shape
    H = m.num_heads
    wq = m.q_proj.base_layer.weight + m.q_proj.scaling * m.q_proj.lora_B.weight @ m.q_proj.lora_A.weight
    wv = m.v_proj.base_layer.weight + m.v_proj.scaling * m.v_proj.lora_B.weight @ m.v_proj.lora_A.weight
    q, k, v = (t.view(B, L, H, E // H).transpose(1, 2) for t in (x @ wq.T, x @ m.k_proj.weight.T, x @ wv.T))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, L, E)
    return out @ m.o_proj.weight.T


@pytest.mark.parametrize("rs", [False, True])
def test_lora_matches_sdpa_over_merged_weights_and_grads_only_reach_adapters(lora, rs):
    torch.manual_seed(5)
    m = lora.LoRAAttention(12, 3, 3, 6.0, use_rslora=rs, init_lora_weights=False).double()
    x = torch.randn(2, 7, 12, dtype=torch.float64, requires_grad=True)
    y = m(x)
    assert (y - _functional(m, x)).abs().max() < 1e-12
    g = torch.randn_like(y)
    (y * g).sum().backward()
    names = {n: p for n, p in m.named_parameters()}
    for n in ("q_proj.base_layer.weight", "v_proj.base_layer.weight", "k_proj.weight", "o_proj.weight"):
        assert not names[n].requires_grad and names[n].grad is None, n
    params = [names[n] for n in ("q_proj.lora_A.weight", "q_proj.lora_B.weight", "v_proj.lora_A.weight",
                                 "v_proj.lora_B.weight")]
    x2 = x.detach().clone().requires_grad_(True)
    want = torch.autograd.grad((_functional(m, x2) * g).sum(), [x2] + params)
    for got, w in zip([x.grad] + [p.grad for p in params], want):
        assert torch.allclose(got, w, atol=1e-11)


def test_lora_linear_is_the_explicit_formula(lora):
    torch.manual_seed(8)
    layer = lora.LoRALinear(9, 5, 2, 3.0, init_lora_weights=False).double()
    x = torch.randn(4, 3, 9, dtype=torch.float64)
    W, A, Bm = layer.base_layer.weight, layer.lora_A.weight, layer.lora_B.weight
    assert A.shape == (2, 9) and Bm.shape == (5, 2) and W.shape == (5, 9)
    want = x @ W.T + 1.5 * (x @ A.T) @ Bm.T
    assert (layer(x) - want).abs().max() < 1e-13


def test_lora_merge_unmerge(lora):
    torch.manual_seed(3)
    m = lora.LoRAAttention(10, 2, 4, 8.0, init_lora_weights=False).double()
    x = torch.randn(2, 6, 10, dtype=torch.float64)
    W0 = m.q_proj.base_layer.weight.detach().clone()
    y0 = m(x)
    m.merge()
    assert torch.equal(m.q_proj.base_layer.weight,
                       W0 + (m.q_proj.lora_B.weight @ m.q_proj.lora_A.weight) * m.q_proj.scaling)
    y1 = m(x)
    m.merge()                                                        # a second merge does nothing
    assert (m(x) - y1).abs().max() == 0
    m.unmerge()
    y2 = m(x)
    assert (y1 - y0).abs().max() < 1e-12 and (y2 - y0).abs().max() < 1e-12
    assert (m.q_proj.base_layer.weight - W0).abs().max() < 1e-14    # back, up to rounding
    m.unmerge()                                                      # a second unmerge does nothing
    assert (m(x) - y2).abs().max() == 0


def test_lora_init_is_peft_s(lora):
    torch.manual_seed(0)
    m = lora.LoRAAttention(8, 2, 4, 8.0).double()
    bound = 1 / math.sqrt(8)
    for proj in (m.q_proj, m.v_proj):
        assert torch.equal(proj.lora_B.weight, torch.zeros(8, 4, dtype=torch.float64))
        assert 0.5 * bound < float(proj.lora_A.weight.detach().abs().max()) <= bound
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    base = copy.deepcopy(m)
    with torch.no_grad():
        for proj in (base.q_proj, base.v_proj):
            proj.lora_A.weight.zero_()
    assert torch.equal(m(x), base(x))                                # B = 0: the base model, bit for bit


def _check(pid, name, mod, seed=0):
    grader = load(pid, "graders")
    case = next(c for c in grader.cases(Ctx(seed)) if c.name == name)
    case.seed = case_seed(seed, case.name)
    return failures(pid, case, mod)


@pytest.mark.parametrize("name,mistakes", [
    ("own_init", ["b_random_init"]),
    ("trainable", ["base_not_frozen", "k_o_not_frozen"]),
    ("dropout_branch_only", ["dropout_on_base", "dropout_on_output"]),
])
def test_lora_grader_checks_pass_the_reference_and_name_the_mutants(lora, name, mistakes):
    assert _check("lora_attention", name, lora) == []
    for mid in mistakes:
        got = _check("lora_attention", name, _mutant("lora_attention", mid))
        assert [f.mistake for f in got if getattr(f, "mistake", None)][:1] == [mid], (mid, got)


# =============================================================================== moe_router
def test_moe_mixtral_oracle(moe):
    """Facts file section 11: seed 0; x = randn(6, 8), Wr = randn(8, 8) * 0.5; E = 8, k = 2."""
    torch.manual_seed(0)
    x = torch.randn(6, 8, dtype=torch.float64)
    wr = torch.randn(8, 8, dtype=torch.float64) * 0.5
    weights, experts, aux = moe.topk_route(x[None], wr, 2)
    assert experts[0, 0].tolist() == [6, 1]
    assert torch.allclose(weights[0, 0], torch.tensor([0.803596320861, 0.196403679139], dtype=torch.float64),
                          atol=1e-12)
    raw, _, _ = moe.topk_route(x[None], wr, 2, normalize=False)
    assert torch.allclose(raw[0, 0], torch.tensor([0.578285466251, 0.141336377751], dtype=torch.float64), atol=1e-12)
    assert abs(float(aux) - 2.69996638547707) < 1e-13
    probs = torch.softmax(x @ wr.T, -1)
    f = torch.bincount(experts.reshape(-1), minlength=8).double() / (6 * 2)    # normalised to 1: half
    assert abs(8 * float((f * probs.mean(0)).sum()) - 1.349983192738535) < 1e-13


def test_moe_switch_capacity_example(moe):
    """SwitchTransformersTop1Router with expert_capacity 1 on the facts file's argmax: first come, first
    served in sequence order, per batch row. The argmax is rebuilt from its recipe too."""
    torch.manual_seed(1)
    xs = torch.randn(2, 6, 8)
    w = torch.empty(4, 8).normal_(0, 1)
    argmax = (xs @ w.T).argmax(-1)
    assert argmax.tolist() == [[1, 3, 0, 1, 3, 0], [0, 0, 2, 1, 1, 3]]
    keep = moe.capacity_keep(argmax[..., None], 4, 1)[..., 0]
    assert keep.int().tolist() == [[1, 1, 1, 0, 0, 0], [1, 0, 1, 1, 0, 1]]


def _loop_route(x, w, k, score_func, normalize):
    B, S, _ = x.shape
    E = w.shape[0]
    weights = torch.empty(B, S, k, dtype=x.dtype)
    experts = torch.empty(B, S, k, dtype=torch.long)
    counts, psum = [0] * E, [0.0] * E
    for b in range(B):
        for s in range(S):
            logits = [float(x[b, s] @ w[e]) for e in range(E)]
            if score_func == "softmax":
                m = max(logits)
                z = sum(math.exp(v - m) for v in logits)
                sc = [math.exp(v - m) / z for v in logits]
            else:
                sc = [1 / (1 + math.exp(-v)) for v in logits]
            top = sorted(range(E), key=lambda e: -sc[e])[:k]
            tot = sum(sc[e] for e in top)
            for j, e in enumerate(top):
                experts[b, s, j] = e
                weights[b, s, j] = sc[e] / tot if normalize else sc[e]
                counts[e] += 1
            for e in range(E):
                psum[e] += sc[e] / sum(sc)
    N = B * S
    aux = E * sum(counts[e] / N * psum[e] / N for e in range(E))
    return weights, experts, aux


@pytest.mark.parametrize("score_func,normalize,k", [("softmax", True, 2), ("softmax", False, 3), ("sigmoid", True, 2),
                                                    ("sigmoid", False, 4), ("softmax", True, 1)])
def test_moe_route_matches_per_token_loops(moe, score_func, normalize, k):
    gen = torch.Generator().manual_seed(k * 10 + normalize)
    x = torch.randn(3, 5, 7, generator=gen, dtype=torch.float64)
    w = torch.randn(9, 7, generator=gen, dtype=torch.float64) * 0.6
    weights, experts, aux = moe.topk_route(x, w, k, score_func, normalize)
    want_w, want_e, want_aux = _loop_route(x, w, k, score_func, normalize)
    assert experts.dtype == torch.int64 and torch.equal(experts, want_e)
    assert torch.allclose(weights, want_w, atol=1e-13)
    assert abs(float(aux) - want_aux) < 1e-12


def test_moe_softmax_over_chosen_logits_equals_renormalising(moe):
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(2, 6, 8, generator=gen, dtype=torch.float64)
    w = torch.randn(10, 8, generator=gen, dtype=torch.float64)
    weights, experts, _ = moe.topk_route(x, w, 3)
    assert torch.allclose(weights, torch.softmax((x @ w.T).gather(-1, experts), -1), atol=1e-14)


def test_moe_gradients_flow_through_weights_and_loss(moe):
    """Directional derivatives of sum(weights * g) + 3 aux against central differences (the chosen
    experts do not change within the step)."""
    gen = torch.Generator().manual_seed(4)
    x = torch.randn(2, 4, 5, generator=gen, dtype=torch.float64, requires_grad=True)
    w = torch.randn(6, 5, generator=gen, dtype=torch.float64, requires_grad=True)
    g = torch.randn(2, 4, 2, generator=gen, dtype=torch.float64)

    def f(a, b):
        weights, _, aux = moe.topk_route(a, b, 2)
        return (weights * g).sum() + 3 * aux

    gx, gw = torch.autograd.grad(f(x, w), (x, w))
    assert gx.abs().max() > 0 and gw.abs().max() > 0
    dx, dw = torch.randn_like(x), torch.randn_like(w)
    h = 1e-6
    with torch.no_grad():
        fd = (f(x + h * dx, w + h * dw) - f(x - h * dx, w - h * dw)) / (2 * h)
    assert abs(float(fd) - float((gx * dx).sum() + (gw * dw).sum())) < 1e-7


def test_moe_balanced_loss_is_k_and_collapsed_is_e(moe):
    N, E, k = 12, 6, 2
    probs = torch.full((N, E), 1 / E, dtype=torch.float64)
    experts = torch.tensor([[(2 * n) % E, (2 * n + 1) % E] for n in range(N)])
    assert abs(float(moe.load_balancing_loss(probs, experts, E)) - k) < 1e-14
    one_hot = torch.zeros(N, E, dtype=torch.float64)
    one_hot[:, :2] = 0.5
    assert abs(float(moe.load_balancing_loss(one_hot, torch.tensor([[0, 1]] * N), E)) - E) < 1e-14


def _queue(experts, E, capacity):
    B, S, k = experts.shape
    keep = torch.zeros(B, S, k, dtype=torch.bool)
    for b in range(B):
        load_ = [0] * E
        for j in range(k):
            for s in range(S):
                e = int(experts[b, s, j])
                load_[e] += 1
                keep[b, s, j] = load_[e] <= capacity
    return keep


@pytest.mark.parametrize("seed", range(4))
def test_moe_capacity_matches_a_queue(moe, seed):
    gen = torch.Generator().manual_seed(seed)
    B, S, k, E = 3, 11, 1 + seed % 3, 5
    experts = torch.stack([torch.randperm(E, generator=gen)[:k] for _ in range(B * S)]).view(B, S, k)
    for capacity in (0, 1, 3, 100):
        assert torch.equal(moe.capacity_keep(experts, E, capacity), _queue(experts, E, capacity))
