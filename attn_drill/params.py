"""Copy the reference's parameters into a submission by name and shape.

adapt() returns, for each of the submission's parameters, a function that builds it from a dict of
reference tensors. Besides exact names it understands the common layout difference between a merged
QKV projection and three separate ones (in either direction); anything else is an interface error
that lists the expected and found names and shapes. The same functions map gradients, which are
linear in the same way.
"""
from __future__ import annotations

from typing import Callable

MERGED = ("qkv_proj", "qkv", "in_proj", "c_attn", "Wqkv", "W_qkv", "to_qkv", "qkv_linear")
TRIOS = (("q_proj", "k_proj", "v_proj"), ("query", "key", "value"), ("W_q", "W_k", "W_v"),
         ("wq", "wk", "wv"), ("q", "k", "v"), ("q_linear", "k_linear", "v_linear"),
         ("to_q", "to_k", "to_v"), ("query_proj", "key_proj", "value_proj"))


class InterfaceError(ValueError):
    pass


def _split(name: str):
    """'attn.qkv_proj.weight' -> ('attn.', 'qkv_proj', 'weight'); 'in_proj_weight' -> ('', 'in_proj', 'weight')."""
    head, _, last = name.rpartition(".")
    if not head and last.startswith("in_proj_"):
        return "", "in_proj", last[len("in_proj_"):]
    prefix, _, module = head.rpartition(".")
    return (prefix + "." if prefix else ""), module, last


def _join(prefix, module, last):
    return f"{prefix}{module}_{last}" if module == "in_proj" and not prefix else f"{prefix}{module}.{last}"


def adapt(ref: dict, sub: dict) -> tuple[dict[str, Callable], str]:
    """ref: name -> tensor (or shape); sub: name -> shape. Returns (mapping, note)."""
    ref_shapes = {n: tuple(getattr(v, "shape", v)) for n, v in ref.items()}
    sub_shapes = {n: tuple(s) for n, s in sub.items()}
    mapping: dict[str, Callable] = {}
    notes = []
    left_ref = dict(ref_shapes)
    for n, s in sub_shapes.items():
        if left_ref.get(n) == s:
            mapping[n] = (lambda name: lambda src: src[name])(n)
            del left_ref[n]
    left_sub = {n: s for n, s in sub_shapes.items() if n not in mapping}
    # merged in the reference, separate in the submission
    for rn in list(left_ref):
        prefix, module, last = _split(rn)
        if module not in MERGED:
            continue
        for trio in TRIOS:
            names = [_join(prefix, m, last) for m in trio]
            if all(x in left_sub for x in names):
                rows = [left_sub[x][0] for x in names]
                if sum(rows) == left_ref[rn][0] and all(left_sub[x][1:] == left_ref[rn][1:] for x in names):
                    start = 0
                    for x, r in zip(names, rows):
                        mapping[x] = (lambda name, a, b: lambda src: src[name][a:b])(rn, start, start + r)
                        start += r
                        del left_sub[x]
                    del left_ref[rn]
                    notes.append(f"your separate {'/'.join(trio)} were filled from the reference's merged {module}")
                    break
    # separate in the reference, merged in the submission
    for sn in list(left_sub):
        prefix, module, last = _split(sn)
        if module not in MERGED:
            continue
        for trio in TRIOS:
            names = [_join(prefix, m, last) for m in trio]
            if all(x in left_ref for x in names):
                rows = sum(left_ref[x][0] for x in names)
                if rows == left_sub[sn][0] and all(left_ref[x][1:] == left_sub[sn][1:] for x in names):
                    import torch  # only when adapting, i.e. in the worker
                    mapping[sn] = (lambda ns: lambda src: torch.cat([src[x] for x in ns], dim=0))(names)
                    for x in names:
                        del left_ref[x]
                    del left_sub[sn]
                    notes.append(f"your merged {module} was filled from the reference's {'/'.join(trio)}")
                    break
    # same names in the same order but different module names (e.g. query/key/value for q/k/v)
    for t_ref in TRIOS:
        for t_sub in TRIOS:
            if t_ref == t_sub:
                continue
            for rn in list(left_ref):
                prefix, module, last = _split(rn)
                if module != t_ref[0]:
                    continue
                rnames = [_join(prefix, m, last) for m in t_ref]
                snames = [_join(prefix, m, last) for m in t_sub]
                if all(x in left_ref for x in rnames) and all(x in left_sub for x in snames) and \
                        all(left_ref[a] == left_sub[b] for a, b in zip(rnames, snames)):
                    for a, b in zip(rnames, snames):
                        mapping[b] = (lambda name: lambda src: src[name])(a)
                        del left_ref[a]
                        del left_sub[b]
                    notes.append(f"your {'/'.join(t_sub)} were matched to the reference's {'/'.join(t_ref)}")
    if left_ref or left_sub:
        lines = ["your module's parameters do not match the reference's (names and shapes):"]
        for n, s in ref_shapes.items():
            mark = "missing in yours" if n in left_ref else "ok"
            lines.append(f"  expected {n} {list(s)}  [{mark}]")
        for n, s in left_sub.items():
            want = ref_shapes.get(n)
            lines.append(f"  found    {n} {list(s)}  " + (f"[expected shape {list(want)}]" if want else "[not in the reference]"))
        lines.append("Keep the names, shapes and bias settings the statement gives (nn.Linear weight is (out, in)).")
        raise InterfaceError("\n".join(lines))
    return mapping, "; ".join(notes)
