"""Build the target of a case and copy the reference's parameters into it by name and shape.

adapt() returns, for each of the submission's parameters, a plan that builds it from a dict of
reference tensors: ["copy", name], ["slice", name, start, stop] (rows) or ["cat", [names]]. Plans are
plain data, so the room can send them to the judge, which maps gradients with them. Besides exact
names it understands the common layout difference between a merged
QKV projection and three separate ones (in either direction); anything else is an interface error
that lists the expected and found names and shapes. The same functions map gradients, which are
linear in the same way.
"""
from __future__ import annotations

import contextlib

from ..i18n import t
from ..results import UserProblem
from .usercode import UserProblemError, seed_all

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


def adapt(ref: dict, sub: dict) -> tuple[dict[str, list], str]:
    """ref: name -> tensor (or shape); sub: name -> shape. Returns (mapping, note)."""
    ref_shapes = {n: tuple(getattr(v, "shape", v)) for n, v in ref.items()}
    sub_shapes = {n: tuple(s) for n, s in sub.items()}
    mapping: dict[str, list] = {}
    notes = []
    left_ref = dict(ref_shapes)
    for n, s in sub_shapes.items():
        if left_ref.get(n) == s:
            mapping[n] = ["copy", n]
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
                        mapping[x] = ["slice", rn, start, start + r]
                        start += r
                        del left_sub[x]
                    del left_ref[rn]
                    notes.append(t("params.from_merged", trio="/".join(trio), module=module))
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
                    mapping[sn] = ["cat", list(names)]
                    for x in names:
                        del left_ref[x]
                    del left_sub[sn]
                    notes.append(t("params.to_merged", trio="/".join(trio), module=module))
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
                        mapping[b] = ["copy", a]
                        del left_ref[a]
                        del left_sub[b]
                    notes.append(t("params.matched", sub="/".join(t_sub), ref="/".join(t_ref)))
    if left_ref or left_sub:
        lines = [t("params.mismatch")]
        for n, s in ref_shapes.items():
            mark = t("params.missing") if n in left_ref else "ok"
            lines.append(t("params.expected", name=n, shape=list(s), mark=mark))
        for n, s in left_sub.items():
            want = ref_shapes.get(n)
            lines.append(t("params.found", name=n, shape=list(s)) + (t("params.want_shape", shape=list(want)) if want
                                                                     else t("params.not_in_ref")))
        lines.append(t("params.keep"))
        raise InterfaceError("\n".join(lines))
    return mapping, "; ".join(notes)


def apply(plan, src: dict):
    """Build one tensor from reference tensors `src` (name -> tensor) by a plan from adapt().
    Raises KeyError when a name is missing, ValueError for a malformed plan (from an untrusted room)."""
    if not isinstance(plan, (list, tuple)) or not plan:
        raise ValueError("malformed parameter plan")
    kind = plan[0]
    if kind == "copy" and len(plan) == 2 and isinstance(plan[1], str):
        return src[plan[1]]
    if kind == "slice" and len(plan) == 4 and isinstance(plan[1], str) and all(isinstance(v, int) for v in plan[2:]):
        t = src[plan[1]]
        if not 0 <= plan[2] < plan[3] <= t.shape[0]:
            raise ValueError("parameter plan slices out of range")
        return t[plan[2]:plan[3]]
    if kind == "cat" and len(plan) == 2 and isinstance(plan[1], (list, tuple)) and \
            all(isinstance(n, str) for n in plan[1]):
        import torch
        return torch.cat([src[n] for n in plan[1]], dim=0)
    raise ValueError("malformed parameter plan")


def build(mod, data, session, side, target=None, init=None):
    """The target built with the case's init (`data`: a side.CaseData), the reference's parameters copied
    in by name and shape; `side.adapted` and `side.mapping` say how they were matched."""
    import torch
    user = session.user if session else contextlib.nullcontext
    target = target or getattr(mod, data.target)
    with user():
        seed_all(data.seed)
        impl = target(**(data.init if init is None else init))
    if not isinstance(impl, torch.nn.Module):
        raise UserProblemError(UserProblem(
            "interface", t("room.not_module", target=data.target, type=type(impl).__name__)))
    with user():
        impl.to(device=data.device, dtype=data.dtype)
    sub_params = dict(impl.named_parameters())
    if data.params or sub_params:
        try:
            mapping, side.adapted = adapt(data.params, {n: tuple(p.shape) for n, p in sub_params.items()})
        except InterfaceError as exc:
            raise UserProblemError(UserProblem("interface", str(exc))) from None
        src = {k: v.to(data.device) for k, v in data.params.items()}
        with user(), torch.no_grad():
            for name, plan in mapping.items():
                sub_params[name].copy_(apply(plan, src))
        side.mapping = mapping
    impl.train(data.train)
    return impl
