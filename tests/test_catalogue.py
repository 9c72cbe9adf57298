"""The catalogue of mistake kinds (attn_drill.bank.catalogue): what it makes of the references.

Whether a candidate names a failure is graded in test_naming (fixtures named kind.<id>) and
measured in benchmarks/catalogue.py; here, without a judge: the kinds' words, and the candidates
each reference gets (the part a kind edits is there: the edit is made; it is not: nothing)."""
import ast
import re
from collections import Counter

import pytest

from attn_drill import bank
from attn_drill.bank import catalogue, sources

from attn_drill.render.base import CJK

IDS = bank.ids()


def _kinds(pid: str) -> Counter:
    return Counter(c.id[len(catalogue.PREFIX):]
                   for c in catalogue.candidates(sources.read(bank.reference_path(pid))))


def test_every_kind_has_words_in_both_languages():
    for kind in catalogue.KINDS:
        for text in (kind.title, kind.diagnosis):
            assert text.en and re.search(f"[{CJK}]", text.zh) and not re.search(f"[{CJK}]", text.en), kind.id
        assert len(kind.title.en) <= 64 and len(kind.title.zh) <= 64, kind.id
        assert re.fullmatch(r"[a-z][a-z0-9_]*", kind.id)


@pytest.mark.parametrize("pid", IDS)
def test_candidates_are_one_edit_of_the_reference_each(pid):
    ref = sources.read(bank.reference_path(pid))
    cands = catalogue.candidates(ref)
    assert len({c.source for c in cands}) == len(cands), "two candidates with the same source"
    for c in cands:
        assert c.source != ref
        ast.parse(c.source)
        assert catalogue.kind_of(c.id) is not None
        # a single-place candidate changes the lines of one node; the rest of the file is as written
        if c.place.startswith("line ") and not any(name in c.source for name in catalogue.HELPERS):
            changed = [a for a, b in zip(ref.splitlines(), c.source.splitlines()) if a != b]
            assert len(ref.splitlines()) == len(c.source.splitlines()) and 1 <= len(changed) <= 3, c.place


def test_the_parts_a_kind_edits_are_found_where_they_are():
    gqa = _kinds("gqa")   # scale by sqrt(D), softmax(dim=-1), masked_fill, split/merge heads, expand to groups
    for kid in ("scale_sqrt_missing", "scale_missing", "scale_inverted", "scale_wrong_size", "softmax_axis",
                "mask_inverted", "reshape_without_transpose", "kv_tiled"):
        assert gqa[kid] >= 1, kid
    assert gqa["rope_layout"] == 0 and gqa["eps_outside"] == 0 and gqa["residual_missing"] == 0
    llama = _kinds("llama_block")
    for kid in ("eps_outside", "residual_missing", "activation_missing", "activation_moved", "norm_weight_offset",
                "rope_layout"):
        assert llama[kid] >= 1, kid
    assert _kinds("causal")["diagonal_off_by_one"] >= 1 and _kinds("causal")["triangle_swapped"] >= 1


def test_a_whole_kind_is_one_candidate_with_every_place_edited():
    src = ("import torch\n\n\ndef rotate_half(x):\n    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]\n"
           "    return torch.cat((-x2, x1), dim=-1)\n\n\ndef table(f):\n    return torch.cat((f, f), dim=-1)\n")
    cands = [c for c in catalogue.candidates(src) if c.id == "kind.rope_layout"]
    assert len(cands) == 1
    out = cands[0].source
    assert "x[..., ::2]" in out and "x[..., 1::2]" in out
    assert "torch.stack((-x2, x1), dim=-1).flatten(-2)" in out
    assert "torch.repeat_interleave(f, 2, dim=-1)" in out


def test_one_mistake_at_every_place_of_one_form_is_one_candidate_more():
    src = ("def f(x, y, z, B, L, H, D):\n    q = x.view(B, L, H, D).transpose(1, 2)\n"
           "    k = y.view(B, L, H, D).transpose(1, 2)\n    v = z.view(B, L, H, D).transpose(1, 2)\n"
           "    return (q @ k @ v).transpose(1, 2).reshape(B, L, H * D)\n")
    cands = [c for c in catalogue.candidates(src) if c.id == "kind.reshape_without_transpose"]
    assert sorted(c.place for c in cands) == ["line 2", "line 3", "line 4", "line 5", "lines 2, 3, 4"]
    every_split = next(c for c in cands if c.place == "lines 2, 3, 4").source
    assert every_split.count("view(B, H, L, D)") == 3 and ".transpose(1, 2).reshape" in every_split


def test_gqa_tiling_is_a_repeat_along_the_heads_never_along_the_last_dim():
    import torch
    src = ("import torch\n\n\ndef f(k, t):\n    a = k.repeat_interleave(2, dim=1)\n"
           "    return a, torch.repeat_interleave(t, 2, dim=-1)\n")
    cands = [c for c in catalogue.candidates(src) if c.id == "kind.kv_tiled"]
    assert len(cands) == 1
    ns = {}
    exec(cands[0].source, ns)
    k = torch.arange(3.0).view(1, 3, 1)
    assert ns["f"](k, k)[0].flatten().tolist() == [0, 1, 2, 0, 1, 2]


def test_no_kind_is_a_spec_mistake_id_and_titles_show_in_reports():
    from attn_drill.render.report import mistake_title
    for kind in catalogue.KINDS:
        assert mistake_title("mhsa", catalogue.PREFIX + kind.id) == kind.title.en


def test_a_boundary_is_off_by_one_either_way():
    """`r <= c` gives two candidates of one kind: `r < c` (one too few) and `r <= c + 1` (one too many)."""
    cands = [c for c in catalogue.candidates("def keep(r, c):\n    return r <= c\n")
             if c.id == "kind.boundary_off_by_one"]
    bodies = {c.source.strip().splitlines()[-1].strip() for c in cands}
    assert {"return (r < c)", "return (r <= c + 1)"} <= bodies, bodies


def test_a_given_scale_divided_by_is_the_scale_inverted():
    cands = [c for c in catalogue.candidates("def f(q, k, scale):\n    return scale * (q @ k)\n")
             if c.id == "kind.scale_inverted"]
    assert any("q @ k / scale" in c.source for c in cands), [c.source for c in cands]


def test_an_argument_ignored_is_its_default_at_every_use_never_at_one_of_several():
    src = ("def norm(x, eps=1e-5, causal=False, scale=None):\n    y = x / (x.abs() + eps)\n"
           "    return y if not causal else y.tril() + causal\n")
    cands = {c.place: c.source for c in catalogue.candidates(src) if c.id == "kind.argument_ignored"}
    assert set(cands) == {"line 2", "lines 3"}, cands           # eps (one use); both uses of causal at once
    assert "x.abs() + (1e-05)" in cands["line 2"]
    assert "if not False else y.tril() + False" in cands["lines 3"]
    assert not any("scale" in c.place for c in catalogue.candidates(src)
                   if c.id == "kind.argument_ignored")          # a scale has its own kind: given_scale_ignored


def test_sizes_swapped_pairs_neighbours_and_one_extra_shifts_every_read():
    src = ("def f(q, B, H, G, D, start_pos):\n    x = q.view(B, H, G, D)\n"
           "    return x[start_pos:] + start_pos\n")
    got = [c for c in catalogue.candidates(src)]
    swapped = {c.source.splitlines()[1].strip() for c in got if c.id == "kind.sizes_swapped"}
    assert swapped == {"x = (q.view(H, B, G, D))", "x = (q.view(B, G, H, D))", "x = (q.view(B, H, D, G))"}
    extra = [c.source for c in got if c.id == "kind.one_extra"]
    assert len(extra) == 2 and all(s.count("start_pos + 1") == 2 or s.count("start_pos - 1") == 2 for s in extra)


def _bodies(src: str, kind: str) -> set[str]:
    """The last line of each candidate of `kind` made of `src` (its edited return)."""
    return {c.source.strip().splitlines()[-1].strip() for c in catalogue.candidates(src)
            if c.id == catalogue.PREFIX + kind}


def test_an_order_written_as_unequal_and_one_of_two_conditions_dropped():
    assert "return (j != i)" in _bodies("def past(i, j):\n    return j < i\n", "order_as_unequal")
    both = _bodies("def window(d, w):\n    return (d >= 0) & (d < w)\n", "condition_dropped")
    assert {"return (d >= 0)", "return (d < w)"} <= both, both


def test_a_running_maximum_two_steps_and_a_branch_each_the_other_way():
    assert "return (s)" in _bodies("def f(m, s):\n    return torch.maximum(m, s)\n", "maximum_dropped")
    assert "return (self.b(self.a(x)))" in _bodies("def f(self, x):\n    return self.a(self.b(x))\n",
                                                   "steps_swapped")
    assert "return (b if c else a)" in _bodies("def f(a, b, c):\n    return a if c else b\n", "condition_inverted")


def test_a_fused_projection_read_per_head_uses_the_heads_in_scope():
    src = "def f(self, x):\n    H = self.num_heads\n    return self.qkv(x).chunk(3, dim=-1)\n"
    cands = [c for c in catalogue.candidates(src) if c.id == "kind.per_head"]
    assert cands and all(c.source.startswith(catalogue.HELPERS["_catalogue_per_head"]) for c in cands)
    assert any("_catalogue_per_head(self.qkv(x), H).chunk(3, dim=-1)" in c.source for c in cands)
    split_by_sizes = "def f(self, x, E, G):\n    H = self.num_heads\n    return x.split([E, G, G], dim=-1)\n"
    assert not [c for c in catalogue.candidates(split_by_sizes) if c.id == "kind.per_head"]   # GQA's unequal parts


def test_a_state_write_a_ragged_block_and_an_input_changed_in_place():
    src = ("class M:\n    def merge(self, w, n, c):\n        self.merged = True\n"
           "        for i in range(0, n, c):\n            w = w.add(i)\n        return w\n")
    cands = catalogue.candidates(src)
    assert any(c.id == "kind.write_missing" and "self.merged = True" not in c.source for c in cands)
    assert any(c.id == "kind.rounding_direction" and "range(0, n - n % c, c)" in c.source for c in cands)
    assert any(c.id == "kind.in_place" and "w.add_(i)" in c.source for c in cands)
    init = "class M:\n    def __init__(self):\n        self.merged = False\n"
    assert not [c for c in catalogue.candidates(init) if c.id == "kind.write_missing"]    # a constructor's own state


def test_the_off_by_one_kinds_are_one_family_with_words_of_their_own():
    fam = catalogue.FAMILIES["off_by_one"]
    assert set(catalogue.OFF_BY_ONE) <= {k.id for k in catalogue.KINDS}
    assert catalogue.kind_of("kind.off_by_one") is fam and fam.title.en and fam.title.zh
    assert all(catalogue.FAMILY_OF[k] == "off_by_one" for k in catalogue.OFF_BY_ONE)


def _changed(src: str, kind: str) -> set[str]:
    """The edited line of each candidate of `kind` made of `src`."""
    return {b.strip() for c in catalogue.candidates(src) if c.id == catalogue.PREFIX + kind
            for a, b in zip(src.splitlines(), c.source.splitlines()) if a != b}


def test_an_accumulation_a_rescale_and_a_twin_each_edited_where_they_are():
    src = ("def f(a_a, a_b, acc, alpha, p, k, v, out, j):\n    out[j] += p @ k\n"
           "    acc = alpha * acc + p @ v\n    return acc + a_a - a_b\n")
    assert "out[j] = p @ k" in _changed(src, "accumulate_as_assign")
    assert "acc = acc + p @ v" in _changed(src, "rescale_missing")
    twins = _changed(src, "twin_swapped")
    assert {"out[j] += p @ (v)", "return acc + (a_b) - a_b", "out[(i)] += p @ k"} <= twins, twins
    assert "acc = alpha * acc + p @ (k)" not in twins    # values read from the keys: values_from_keys' own
    # a product that is not the running value itself, and a name without a twin: nothing
    assert not _changed("def f(x, w, b):\n    y = w * x + b\n    return y\n", "rescale_missing")
    assert not _changed("def f(x, w):\n    return w * x\n", "twin_swapped")


def test_a_conditional_with_one_branch_always_and_its_family():
    src = "def f(x, a, b):\n    return a if x else b\n"
    assert {"return (b)", "return (a)"} <= _bodies(src, "branch_always")
    fam = catalogue.FAMILIES["wrong_branch"]
    assert catalogue.FAMILY_OF["condition_inverted"] == catalogue.FAMILY_OF["branch_always"] == "wrong_branch"
    assert catalogue.kind_of("kind.wrong_branch") is fam and fam.title.zh


def test_a_read_of_v_may_be_the_keys_read_for_the_values():
    assert "return p @ (k)" in _bodies("def f(p, k, v):\n    return p @ v\n", "values_from_keys")


def test_an_absolute_value_left_out_and_a_softmax_over_an_axis_from_the_front():
    assert "return (i - j) < w" in _changed("def f(i, j, w):\n    return (i - j).abs() < w\n", "abs_missing")
    assert "return (d) < w" in _changed("def f(d, w):\n    return torch.abs(d) < w\n", "abs_missing")
    axes = _changed("def f(s):\n    return torch.softmax(s, dim=-1)\n", "softmax_axis")
    assert {"return (torch.softmax(s, dim=-2))", "return (torch.softmax(s, dim=1))"} <= axes, axes


def test_two_indices_compared_the_wrong_way_round():
    """`j > r` of two plain names: `j < r`; positions laid along two axes stay triangle_swapped's."""
    assert "if causal and (j < r):" in _changed("def f(j, r, causal):\n    if causal and j > r:\n        return 0\n"
                                               "    return 1\n", "indices_reversed")
    assert not _changed("def f(q, k):\n    return q[:, None] >= k[None, :]\n", "indices_reversed")
    assert not _changed("def f(x, n):\n    return x > 0.5\n", "indices_reversed")


def test_the_query_length_read_for_the_keys_only_where_the_function_has_both():
    src = "def f(B, L, D, Lk=None):\n    Lk = L if Lk is None else Lk\n    return B * L * Lk * D\n"
    assert "return B * L * (L) * D" in _changed(src, "twin_swapped")
    assert not _changed("def f(B, L, D):\n    return B * L * L * D\n", "twin_swapped")


def test_sizes_unpacked_from_a_shape_in_the_wrong_order():
    changed = _changed("def f(x):\n    B, H, L, D = x.shape\n    return x.reshape(B, L, H * D)\n",
                       "shape_read_out_of_order")
    assert {"B, L, H, D = x.shape", "H, B, L, D = x.shape", "B, H, D, L = x.shape"} == changed, changed
    # a size never read (Lq here): the swap would only read it for D, which scale_wrong_size says
    assert not _changed("def f(q):\n    B, H, Lq, D = q.shape\n    return q * D\n", "shape_read_out_of_order")
    assert not _changed("def f(x):\n    a, b = x.chunk(2)\n    return a\n", "shape_read_out_of_order")
