"""The catalogue of mistake kinds: each kind written once, as an edit of a reference's syntax tree,
and applied at every place of every reference that has the part it edits (a scale, a softmax, a
mask, a comparison, a head split, a GQA repetition, a residual, a norm, an activation, a RoPE layout
...). Each place gives one candidate: the reference with that one mistake typed in, run and
matched against a failing submission exactly as a spec's hand-written mutants are
(attn_drill.judge.mistakes), after them. `verify` counts the candidates each reference has and how
many of them the cases catch.

No torch here: a candidate is source text. A kind names a mistake only through a candidate that
reproduces the submission's failing outputs and gradients, so a kind's words say what was done,
never more than the edit shows.
"""
from __future__ import annotations

import ast
import copy
from dataclasses import dataclass
from typing import Callable, Iterator

from .spec import Text

PREFIX = "kind."          # a candidate's mistake id: kind.<kind id> (its place is not shown to users)
MAX_LIKE_PLACES = 6       # the most places of one form edited together in one candidate

# The helpers a candidate may call (GQA tiling, a fused projection read per head): defined at the top
# of a candidate's source when it calls them.
_TILE = '''
def _catalogue_tile(x, repeats, dim=None, **kwargs):
    """x.repeat (the whole tensor tiled) where repeat_interleave (each slice repeated) was meant."""
    if not isinstance(repeats, int) or dim is None:
        return x.repeat_interleave(repeats, dim=dim, **kwargs)
    reps = [1] * x.dim()
    reps[dim % x.dim()] = repeats
    return x.repeat(*reps)
'''
_PER_HEAD = '''
def _catalogue_per_head(x, heads, parts=3):
    """[q | k | v] laid out as three blocks, read per head instead ([q_h k_h v_h] for each head h)."""
    *lead, n = x.shape
    return x.reshape(*lead, heads, parts, n // (parts * heads)).transpose(-3, -2).reshape(*lead, n)
'''


@dataclass(frozen=True)
class Kind:
    id: str
    title: Text
    diagnosis: Text
    edits: Callable[..., Iterator[Callable[[], ast.AST]]]   # (node, the sizes in scope) -> its mistaken versions
    whole: bool = False       # one candidate for the whole module (all matching places at once)


@dataclass(frozen=True)
class Candidate:
    id: str                   # kind.<kind id>
    place: str                # where in the reference: "line 42" (verify's words)
    source: str
    backward: bool = False    # every place edited lies in a hand-written backward (a function named *backward*)


# --------------------------------------------------------------------------- matching helpers

def _name(node) -> str | None:
    """The last part of a called or read name: torch.softmax -> softmax, x.softmax -> softmax."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _call(node, *names) -> bool:
    return isinstance(node, ast.Call) and _name(node.func) in names


def _num(node) -> float | None:
    """A number written in the source, with its sign: -0.5 -> -0.5."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _num(node.operand)
        return None if inner is None else -inner
    return None


def _const(v):
    return ast.Constant(v) if v >= 0 else ast.UnaryOp(ast.USub(), ast.Constant(-v))


def _is_method(call: ast.Call) -> bool:
    """x.f(...) on a tensor, not torch.f / F.f / math.f."""
    return isinstance(call.func, ast.Attribute) and not (
        isinstance(call.func.value, ast.Name) and call.func.value.id in {"torch", "F", "math", "np", "nn"})


def _arg(call: ast.Call, pos: int, kw: str):
    """(the argument node, a setter) for an argument given by position or keyword; (None, None) if absent."""
    for k in call.keywords:
        if k.arg == kw:
            return k.value, lambda v, k=k: setattr(k, "value", v)
    if len(call.args) > pos and not any(isinstance(a, ast.Starred) for a in call.args[:pos + 1]):
        return call.args[pos], lambda v: call.args.__setitem__(pos, v)
    return None, None


def _dimlike(node) -> str | None:
    """A name that reads like a size: D, E, head_dim, self.hidden_dim, d_model."""
    n = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
    if n is None:
        return None
    if (len(n) <= 2 and n[:1].isupper()) or "dim" in n or n.startswith("d_") or n in {"d", "dk", "dv", "dh"}:
        return ast.unparse(node)
    return None


_ACTS = {"silu", "gelu", "sigmoid", "relu", "softplus", "tanh", "mish", "elu"}
_SQRT = {"sqrt"}


# --------------------------------------------------------------------------- the kinds' edits
# Each takes one node and yields functions that return its replacement (a fresh node).

def _scale_sqrt_missing(node, sizes=()):
    if _call(node, *_SQRT) and len(node.args) == 1 and not _is_method(node):
        yield lambda: node.args[0]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow) and _num(node.right) in (0.5, -0.5):
        yield lambda: ast.BinOp(node.left, ast.Pow(), _const(2 * _num(node.right)))
    if _call(node, "rsqrt") and len(node.args) == 1 and not _is_method(node):
        yield lambda: ast.BinOp(ast.Constant(1.0), ast.Div(), node.args[0])


def _scale_missing(node, sizes=()):
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and _call(node.right, *_SQRT):
        yield lambda: node.left
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        for keep, other in ((node.left, node.right), (node.right, node.left)):
            if isinstance(other, ast.BinOp) and isinstance(other.op, ast.Pow) and _num(other.right) == -0.5:
                yield lambda keep=keep: keep
            elif isinstance(other, (ast.Name, ast.Attribute)) and "scale" in ast.unparse(other).lower():
                yield lambda keep=keep: keep


def _scale_inverted(node, sizes=()):
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and _call(node.right, *_SQRT):
        yield lambda: ast.BinOp(node.left, ast.Mult(), node.right)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow) and _num(node.right) == -0.5:
        yield lambda: ast.BinOp(node.left, ast.Pow(), ast.Constant(0.5))
    # a given multiplier (`scale * s`, `s * self.scaling`) divided by instead: a form of its own, so
    # every use of the multiplier (forward and backward) is also edited at once, the default left be
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        for mine, other in ((node.left, node.right), (node.right, node.left)):
            if _name(mine) in _SCALE_NAMES and isinstance(mine, (ast.Name, ast.Attribute)):
                def divided_by_given_scale(mine=mine, other=other):
                    return ast.BinOp(other, ast.Div(), mine)
                yield divided_by_given_scale
                break


_SCALE_NAMES = ("scale", "scaling", "softmax_scale", "sm_scale")


def _given_scale_ignored(node, sizes=()):
    """`scale is None` (the test before the default is put in) taken as always true."""
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Is) and \
            isinstance(node.left, ast.Name) and node.left.id in _SCALE_NAMES and \
            isinstance(node.comparators[0], ast.Constant) and node.comparators[0].value is None:
        yield lambda: ast.Constant(True)


def _argument_ignored(node, sizes=()):
    """A parameter with a default (eps=1e-6, temperature=1.0, causal=False, a mask=None) read as its
    default wherever the function uses it: the caller's value is ignored. (A scale has its own kind.)
    The places of one parameter form one group (the edit's name), so all its uses are also edited at once."""
    default = getattr(node, "_attn_drill_default", None)
    if default is None or not isinstance(node, ast.Name) or not isinstance(node.ctx, ast.Load):
        return

    def edit():
        return copy.deepcopy(default)
    edit.__name__ = f"ignored_{node.id}"
    edit.together_only = getattr(node, "_attn_drill_uses", 1) > 1   # one use of several: not a mistake one makes
    yield edit


def _heads_of(fn) -> list[str]:
    """The head counts a function reads: H, Hq, num_heads, self.n_heads (the query heads first)."""
    out = []
    for n in ast.walk(fn):
        text = n.id if isinstance(n, ast.Name) else ast.unparse(n) if isinstance(n, ast.Attribute) else None
        last = text.split(".")[-1] if text else ""
        if text and text not in out and (last in ("H", "Hq", "nh") or ("head" in last and "dim" not in last
                                                                        and "kv" not in last and "size" not in last)):
            out.append(text)
    return out


def _mark_defaults(tree: ast.Module) -> None:
    """Marks each read of a parameter that has a default with that default (for _argument_ignored),
    each read of a name with how many reads of it its function has (_one_extra), and each node of a
    function with the head counts it reads (_per_head)."""
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if fn.name != "__init__":
            for n in ast.walk(fn):
                target = n.targets[0] if isinstance(n, ast.Assign) and len(n.targets) == 1 else \
                    n.target if isinstance(n, ast.AugAssign) else None
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and \
                        target.value.id == "self":
                    n._attn_drill_state = True
        heads = _heads_of(fn)
        params = {x.arg for x in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs} - {"self"}
        for n in ast.walk(fn):
            n._attn_drill_heads = heads
            if isinstance(n, ast.Name) and n.id in params:
                n._attn_drill_param = True
        loads = [n for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]
        for n in loads:
            n._attn_drill_reads = sum(r.id == n.id for r in loads)
        loaded = {n.id for n in loads}
        for n in ast.walk(fn):
            if isinstance(n, ast.Assign):
                n._attn_drill_loaded = loaded      # the names its function reads (_shape_read_out_of_order)
        a = fn.args
        pos = a.posonlyargs + a.args
        defaults = dict(zip([x.arg for x in pos[len(pos) - len(a.defaults):]], a.defaults))
        defaults.update({x.arg: d for x, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None})
        defaults = {k: v for k, v in defaults.items() if k not in _SCALE_NAMES and k != "self"
                    and isinstance(v, (ast.Constant, ast.UnaryOp))}
        reads = [n for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
                 and n.id in defaults]
        for n in reads:
            n._attn_drill_default = defaults[n.id]
            n._attn_drill_uses = sum(r.id == n.id for r in reads)


def _scale_wrong_size(node, sizes=()):
    inner = None
    if _call(node, *_SQRT) and len(node.args) == 1:
        inner, put = node.args[0], lambda v: ast.Call(node.func, [v], [])
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow) and _num(node.right) in (0.5, -0.5):
        inner, put = node.left, lambda v: ast.BinOp(v, ast.Pow(), node.right)
    if inner is None or _dimlike(inner) is None:
        return
    for other in sizes:
        if other != ast.unparse(inner):
            yield lambda other=other: put(ast.parse(other, mode="eval").body)


def _softmax_axis(node, sizes=()):
    if _call(node, "softmax", "log_softmax", "logsumexp"):
        pos = 0 if _is_method(node) else 1
        value, put = _arg(node, pos, "dim")
        if value is not None and _num(value) == -1:
            for other in (-2, -3, 1):             # a neighbour, or an axis counted from the front (the heads')
                def edit(other=other):
                    put(_const(other))
                    return node
                yield edit


def _abs_missing(node, sizes=()):
    """(i - j).abs() < w -> (i - j) < w: an absolute value left out, so a distance keeps its sign (a
    two-sided window becomes one-sided, every later key counts as near)."""
    if _call(node, "abs") and not node.keywords:
        if _is_method(node) and not node.args:
            yield lambda: node.func.value
        elif not _is_method(node) and len(node.args) == 1:
            yield lambda: node.args[0]


def _mask_inverted(node, sizes=()):
    if _call(node, "masked_fill", "masked_fill_") and node.args:
        pos = 0 if _is_method(node) else 1
        if len(node.args) > pos:
            m = node.args[pos]
            if isinstance(m, ast.UnaryOp) and isinstance(m.op, (ast.Invert, ast.Not)):
                flipped = m.operand
            elif _call(m, "logical_not") and _is_method(m) and not m.args:
                flipped = m.func.value
            else:
                flipped = ast.UnaryOp(ast.Invert(), m)

            def edit(flipped=flipped):
                node.args[pos] = flipped
                return node
            yield edit


def _condition_inverted(node, sizes=()):
    if _call(node, "where") and not _is_method(node) and len(node.args) == 3 and not node.keywords:
        yield lambda: ast.Call(node.func, [node.args[0], node.args[2], node.args[1]], [])
    if isinstance(node, ast.IfExp):      # a if c else b -> b if c else a (rsLoRA's alpha/sqrt(r) when off)
        yield lambda: ast.IfExp(node.test, node.orelse, node.body)


def _branch_always(node, sizes=()):
    """a if c else b -> b (or a): a conditional whose condition is left out, one branch taken always
    (the float64 branch of a dtype choice dropped, a special case not handled)."""
    if isinstance(node, ast.IfExp):
        yield lambda: node.orelse
        yield lambda: node.body


def _diagonal_off_by_one(node, sizes=()):
    if _call(node, "tril", "triu", "tril_", "triu_"):
        pos = 0 if _is_method(node) else 1
        value, put = _arg(node, pos, "diagonal")
        for step in (1, -1):
            def edit(step=step, value=value, put=put):
                shifted = ast.BinOp(value, ast.Add(), ast.Constant(step)) if value is not None else _const(step)
                if put is None:
                    node.keywords.append(ast.keyword("diagonal", shifted))
                else:
                    put(shifted)
                return node
            yield edit


_REVERSED = {ast.Lt: ast.Gt, ast.Gt: ast.Lt, ast.LtE: ast.GtE, ast.GtE: ast.LtE}


def _broadcast_index(node) -> bool:
    """pos[None, :] or pos[:, None]: a vector of positions laid along one axis of a square."""
    return isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Tuple) and \
        any(isinstance(e, ast.Constant) and e.value is None for e in node.slice.elts)


def _triangle_swapped(node, sizes=()):
    """tril -> triu, and key_pos <= query_pos -> key_pos >= query_pos (positions laid along the two
    axes): the mask keeps the other triangle."""
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _REVERSED and \
            _broadcast_index(node.left) and _broadcast_index(node.comparators[0]):
        yield lambda: ast.Compare(node.left, [_REVERSED[type(node.ops[0])]()], node.comparators)
    if _call(node, "tril", "triu", "tril_", "triu_") and isinstance(node.func, (ast.Name, ast.Attribute)):
        swap = {"tril": "triu", "triu": "tril", "tril_": "triu_", "triu_": "tril_"}

        def edit():
            if isinstance(node.func, ast.Name):
                node.func = ast.Name(swap[node.func.id], ast.Load())
            else:
                node.func = ast.Attribute(node.func.value, swap[node.func.attr], ast.Load())
            return node
        yield edit


def _indices_reversed(node, sizes=()):
    """j > r -> j < r: two indices (plain names: a block, a step, a device, a position) compared the
    other way round, so what the comparison guards takes the other side (earlier for later)."""
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _REVERSED and \
            isinstance(node.left, ast.Name) and isinstance(node.comparators[0], ast.Name):
        yield lambda: ast.Compare(node.left, [_REVERSED[type(node.ops[0])]()], node.comparators)


def _boundary_off_by_one(node, sizes=()):
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and \
            isinstance(node.ops[0], (ast.Lt, ast.LtE, ast.Gt, ast.GtE)) and \
            not any(isinstance(s, ast.Constant) and isinstance(s.value, str) for s in [node.left, *node.comparators]):
        op = type(node.ops[0])
        swap = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt}
        yield lambda: ast.Compare(node.left, [swap[op]()], node.comparators)
        # the bound one step the other way from the swap: `<=` one too many (b + 1), `<` one too few (b - 1)
        step = ast.Add() if op in (ast.LtE, ast.Gt) else ast.Sub()
        yield lambda: ast.Compare(node.left, [op()], [ast.BinOp(node.comparators[0], step, ast.Constant(1))])


def _one_missing(node, sizes=()):
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)) and _num(node.right) == 1 \
            and _num(node.left) is None:
        yield lambda: node.left


_OFFSETS = ("pos", "start", "offset", "past", "cache_len", "prefix", "shift", "seen")


_COUNTS = _OFFSETS + ("len", "length", "count", "step", "ctx", "n_past", "idx")


def _one_extra(node, sizes=()):
    """pos -> pos + 1 (or - 1) at every read of a position or a length in a function: an index or a
    count off by one where the reference has no ± 1 to drop; torch.arange(n) -> arange(1, n + 1)."""
    if _call(node, "arange") and not _is_method(node) and len(node.args) == 1 and not \
            any(k.arg in ("start", "end") for k in node.keywords):
        yield lambda: ast.Call(node.func, [ast.Constant(1), ast.BinOp(node.args[0], ast.Add(), ast.Constant(1))],
                               node.keywords)
    if not (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)) or \
            not any(w in node.id.lower() for w in _COUNTS) or node.id.isupper():
        return
    for op, sign in ((ast.Add(), "plus"), (ast.Sub(), "minus")):
        def edit(op=op):
            return ast.BinOp(ast.Name(node.id, ast.Load()), op, ast.Constant(1))
        edit.__name__ = f"{sign}_one_{node.id}"
        edit.together_only = getattr(node, "_attn_drill_reads", 1) > 1
        yield edit


def _offset_missing(node, sizes=()):
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        for keep, other in ((node.left, node.right), (node.right, node.left)):
            text = ast.unparse(other) if isinstance(other, (ast.Name, ast.Attribute)) else ""
            if text and any(w in text.lower() for w in _OFFSETS):
                yield lambda keep=keep: keep


def _sign_flipped(node, sizes=()):
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and _num(node.operand) is None \
            and not (isinstance(node.operand, ast.Call) and _name(node.operand.func) == "float"):
        yield lambda: node.operand
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub) and _num(node.left) is None \
            and _num(node.right) is None:
        yield lambda: ast.BinOp(node.left, ast.Add(), node.right)
        yield lambda: ast.BinOp(node.right, ast.Sub(), node.left)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and all(
            isinstance(x, ast.BinOp) and isinstance(x.op, (ast.Mult, ast.MatMult)) for x in (node.left, node.right)):
        yield lambda: ast.BinOp(node.left, ast.Sub(), node.right)   # x·cos + r·sin -> x·cos - r·sin
    if _call(node, "cat", "stack") and node.args and isinstance(node.args[0], (ast.Tuple, ast.List)) and \
            len(node.args[0].elts) == 2:
        a, b = node.args[0].elts
        neg = [isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub) for e in (a, b)]
        if sum(neg) == 1:       # cat((-x2, x1)) -> cat((x2, -x1)): the negation on the other half
            def moved(a=a, b=b, first=neg[0]):
                pair = [a.operand, ast.UnaryOp(ast.USub(), b)] if first else [ast.UnaryOp(ast.USub(), a), b.operand]
                return ast.Call(node.func, [type(node.args[0])(pair, ast.Load()), *node.args[1:]], node.keywords)
            yield moved


def _heads_without_transpose(node, sizes=()):
    """x.view(B, L, H, D).transpose(1, 2) -> x.view(B, H, L, D); out.transpose(1, 2)...view(...) -> no
    transpose (heads, or any two axes regrouped: the kind's words say so)."""
    if _call(node, "transpose") and _is_method(node) and len(node.args) == 2:
        a, b = _num(node.args[0]), _num(node.args[1])
        src = node.func.value
        if _call(src, "view", "reshape") and _is_method(src) and a is not None and b is not None and \
                len(src.args) > max(a, b) >= 0 and not any(isinstance(x, ast.Starred) for x in src.args):
            def split(a=int(a), b=int(b), src=src):
                args = list(src.args)
                args[a], args[b] = args[b], args[a]
                return ast.Call(ast.Attribute(src.func.value, src.func.attr, ast.Load()), args, [])
            yield split
    if _call(node, "view", "reshape", "flatten") and _is_method(node):
        inner = node.func.value
        while _call(inner, "contiguous") and _is_method(inner):
            inner = inner.func.value
        if _call(inner, "transpose", "permute") and _is_method(inner):
            def merge(inner=inner):
                return ast.Call(ast.Attribute(inner.func.value, node.func.attr, ast.Load()), node.args, node.keywords)
            yield merge


def _kv_tiled(node, sizes=()):
    """repeat_interleave(n, dim) -> repeat (tiles);
    k[:, :, None].expand(B, Hkv, G, ...) -> k[:, None].expand(B, G, Hkv, ...)."""
    if _call(node, "repeat_interleave"):
        dim, _ = _arg(node, 1 if _is_method(node) else 2, "dim")
        if dim is None or _num(dim) == -1:
            return      # the heads are never the last dim: a repeat along it is something else (a RoPE table)
        if _is_method(node):
            yield lambda: ast.Call(ast.Name("_catalogue_tile", ast.Load()), [node.func.value, *node.args],
                                   node.keywords)
        else:
            yield lambda: ast.Call(ast.Name("_catalogue_tile", ast.Load()), node.args, node.keywords)
    if _call(node, "expand") and _is_method(node) and isinstance(node.func.value, ast.Subscript):
        sub = node.func.value
        dims = sub.slice.elts if isinstance(sub.slice, ast.Tuple) else None
        if dims:
            at = next((i for i, e in enumerate(dims) if isinstance(e, ast.Constant) and e.value is None), None)
            if at and at < len(node.args) and not any(isinstance(x, ast.Starred) for x in node.args[:at + 1]):
                def edit(at=at):
                    new_dims = list(dims)
                    new_dims[at - 1], new_dims[at] = new_dims[at], new_dims[at - 1]
                    args = list(node.args)
                    args[at - 1], args[at] = args[at], args[at - 1]
                    return ast.Call(ast.Attribute(ast.Subscript(sub.value, ast.Tuple(new_dims, ast.Load()), ast.Load()),
                                                  "expand", ast.Load()), args, node.keywords)
                yield edit


def _activation_missing(node, sizes=()):
    if _call(node, *_ACTS) and len(node.args) == 1 and not _is_method(node) and not node.keywords:
        yield lambda: node.args[0]
    if _call(node, *_ACTS) and _is_method(node) and not node.args:
        yield lambda: node.func.value


def _activation_moved(node, sizes=()):
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        for act, other, left in ((node.left, node.right, True), (node.right, node.left, False)):
            if _call(act, *_ACTS) and len(act.args) == 1 and not _is_method(act) and not _call(other, *_ACTS):
                def edit(act=act, other=other, left=left):
                    moved = ast.Call(act.func, [other], [])
                    plain = act.args[0]
                    return ast.BinOp(plain, ast.Mult(), moved) if left else ast.BinOp(moved, ast.Mult(), plain)
                yield edit


_RESIDUALS = {"x", "h", "hidden", "hidden_states", "residual", "resid", "skip", "inp", "inputs", "y"}


def _residual_missing(node, sizes=()):
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        for res, branch in ((node.left, node.right), (node.right, node.left)):
            if isinstance(res, ast.Name) and res.id in _RESIDUALS and isinstance(branch, (ast.Call, ast.BinOp)) \
                    and _num(branch) is None:
                yield lambda branch=branch: branch


def _eps_outside(node, sizes=()):
    if _call(node, "sqrt", "rsqrt") and len(node.args) == 1 and isinstance(node.args[0], ast.BinOp) and \
            isinstance(node.args[0].op, ast.Add):
        inner = node.args[0]
        for keep, eps in ((inner.left, inner.right), (inner.right, inner.left)):
            if "eps" in ast.unparse(eps).lower() or (_num(eps) is not None and 0 < _num(eps) < 1e-2):
                if _name(node.func) == "sqrt":
                    yield lambda keep=keep, eps=eps: ast.BinOp(ast.Call(node.func, [keep], []), ast.Add(), eps)
                else:
                    sqrt = ast.Attribute(ast.Name("torch", ast.Load()), "sqrt", ast.Load())
                    yield lambda keep=keep, eps=eps: ast.BinOp(
                        ast.Constant(1.0), ast.Div(), ast.BinOp(ast.Call(sqrt, [keep], []), ast.Add(), eps))


def _norm_weight_offset(node, sizes=()):
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        for w, x, left in ((node.left, node.right, True), (node.right, node.left, False)):
            if isinstance(w, ast.Attribute) and w.attr.endswith("weight") and not isinstance(x, ast.Constant):
                def edit(w=w, x=x, left=left):
                    one_plus = ast.BinOp(ast.Constant(1), ast.Add(), w)
                    return ast.BinOp(one_plus, ast.Mult(), x) if left else ast.BinOp(x, ast.Mult(), one_plus)
                yield edit


def _scale_part_of_size(node, sizes=()):
    """(a + b) ** -0.5 or sqrt(a + b) -> one of the parts: the scale over a part of the head's width."""
    inner, put = None, None
    if _call(node, *_SQRT) and len(node.args) == 1:
        inner, put = node.args[0], lambda v: ast.Call(node.func, [v], [])
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow) and _num(node.right) in (0.5, -0.5):
        inner, put = node.left, lambda v: ast.BinOp(v, ast.Pow(), node.right)
    if isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.Add) and _dimlike(inner.left) \
            and _dimlike(inner.right):
        yield lambda: put(inner.left)
        yield lambda: put(inner.right)


def _norm_missing(node, sizes=()):
    """self.norm(x) / self.q_norm(x) / rms_norm(x, ...) -> x."""
    if isinstance(node, ast.Call) and node.args and not isinstance(node.args[0], ast.Starred):
        name = _name(node.func) or ""
        if "norm" in name.lower() and name not in {"norm", "vector_norm", "linalg_norm", "normalize"}:
            yield lambda: node.args[0]


def _rounding_direction(node, sizes=()):
    """ceil <-> floor, and (a + b - 1) // b -> a // b: a count of blocks rounded the other way."""
    if _call(node, "ceil", "floor") and (len(node.args) == 1 or (_is_method(node) and not node.args)):
        for other in ("floor" if _name(node.func) == "ceil" else "ceil", "round"):
            func = ast.Attribute(node.func.value, other, ast.Load()) if isinstance(node.func, ast.Attribute) else \
                ast.Name(other, ast.Load())
            yield lambda func=func: ast.Call(func, node.args, node.keywords)
    if _call(node, "long", "int") and _is_method(node) and not node.args and isinstance(node.func.value, ast.BinOp) \
            and isinstance(node.func.value.op, (ast.Mult, ast.Div)):   # (x * n).long() truncates: rounded instead
        rounded = ast.Call(ast.Attribute(node.func.value, "round", ast.Load()), [], [])
        yield lambda: ast.Call(ast.Attribute(rounded, node.func.attr, ast.Load()), [], [])
    if _call(node, "range") and len(node.args) == 3 and _num(node.args[0]) == 0 and _num(node.args[2]) != 1:
        n, c = node.args[1], node.args[2]         # range(0, n, c) -> range(0, n - n % c, c): whole blocks only
        yield lambda: ast.Call(node.func, [node.args[0], ast.BinOp(n, ast.Sub(), ast.BinOp(n, ast.Mod(), c)), c], [])
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.FloorDiv) and isinstance(node.left, ast.BinOp) and \
            isinstance(node.left.op, ast.Sub) and _num(node.left.right) == 1 and \
            isinstance(node.left.left, ast.BinOp) and isinstance(node.left.left.op, ast.Add) and \
            ast.unparse(node.left.left.right) == ast.unparse(node.right):
        yield lambda: ast.BinOp(node.left.left.left, ast.FloorDiv(), node.right)


def _rotation_reversed(node, sizes=()):
    """x_complex * freqs -> x_complex * freqs.conj(): every pair rotated by -angle."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        for x, f, left in ((node.left, node.right, True), (node.right, node.left, False)):
            if _call(x, "view_as_complex") or "freqs" in ast.unparse(f) or "cis" in ast.unparse(f):
                if not _call(f, "conj"):
                    def edit(x=x, f=f, left=left):
                        conj = ast.Call(ast.Attribute(f, "conj", ast.Load()), [], [])
                        return ast.BinOp(x, ast.Mult(), conj) if left else ast.BinOp(conj, ast.Mult(), x)
                    yield edit
                    return


def _rope_on_values(node, sizes=()):
    """k = rope(k, ...) -> k = rope(k, ...); v = rope(v, ...): the values rotated too."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and \
            isinstance(node.value, ast.Call) and node.value.args and isinstance(node.value.args[0], ast.Name) and \
            node.value.args[0].id == node.targets[0].id and node.targets[0].id in {"k", "key", "keys", "k_rot"}:
        name = (_name(node.value.func) or "").lower()
        if "rot" in name or "rope" in name:
            def edit():
                v_call = ast.Call(node.value.func, [ast.Name("v", ast.Load()), *node.value.args[1:]],
                                  node.value.keywords)
                return [node, ast.Assign([ast.Name("v", ast.Store())], v_call)]
            yield edit


_TO_KEYS = {"v": "k", "V": "K", "value": "key", "values": "keys", "wv": "wk", "Wv": "Wk", "xv": "xk"}


def _keys_twin(name: str) -> str | None:
    """v_proj -> k_proj, value_cache -> key_cache, W_v -> W_k, wv -> wk, a read of v -> k; None for a
    name with no value part."""
    parts = name.split("_")
    if not any(p in _TO_KEYS for p in parts):
        return None
    if len(parts) == 1 and name not in ("v", "V", "value", "values", "wv", "Wv", "xv"):
        return None
    return "_".join(_TO_KEYS.get(p, p) for p in parts)


def _values_from_keys(node, sizes=()):
    """self.v_proj(x) -> self.k_proj(x), v_cache[...] -> k_cache[...]: the values taken from what
    holds the keys (a projection, a cache, a pool)."""
    if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
        twin = _keys_twin(node.attr)
        if twin:
            yield lambda: ast.Attribute(node.value, twin, ast.Load())
    elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
        twin = _keys_twin(node.id)
        if twin:
            yield lambda: ast.Name(twin, ast.Load())


def _is_log(node) -> bool:
    """torch.log(x) or x.log()."""
    return _call(node, "log") and (len(node.args) == 1 or (_is_method(node) and not node.args))


def _lse_max_missing(node, sizes=()):
    """m + log(l) -> log(l): a log-sum-exp of sums taken after subtracting the running max m."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        if _is_log(node.right) and _num(node.left) is None:
            yield lambda: node.right
        elif _is_log(node.left) and _num(node.right) is None:
            yield lambda: node.left


def _is_last_dim_slice(node) -> ast.Slice | None:
    """x[..., a:b] (the last dim sliced after an Ellipsis)."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Tuple) and len(node.slice.elts) == 2 and \
            isinstance(node.slice.elts[0], ast.Constant) and node.slice.elts[0].value is Ellipsis and \
            isinstance(node.slice.elts[1], ast.Slice):
        return node.slice.elts[1]
    return None


def _rope_layout(node, sizes=()):
    """Rotate-half <-> interleaved, everywhere in the module at once (the halves, the cat, the tables)."""
    s = _is_last_dim_slice(node)
    if s is not None and s.step is None and (s.lower is None) != (s.upper is None):
        def to_pairs(lower=s.lower is not None):
            return ast.Subscript(node.value, ast.Tuple([ast.Constant(Ellipsis), ast.Slice(
                ast.Constant(1) if lower else None, None, ast.Constant(2))], ast.Load()), ast.Load())
        yield to_pairs
    if s is not None and _num(s.step) == 2 and s.upper is None and _num(s.lower) in (None, 0, 1):
        second = _num(s.lower) == 1

        def to_halves(second=second):
            half = ast.parse(f"({ast.unparse(node.value)}).shape[-1] // 2", mode="eval").body
            return ast.Subscript(node.value, ast.Tuple([ast.Constant(Ellipsis), ast.Slice(
                half if second else None, None if second else half, None)], ast.Load()), ast.Load())
        yield to_halves
    if _call(node, "cat") and not _is_method(node) and node.args and isinstance(node.args[0], (ast.Tuple, ast.List)) \
            and len(node.args[0].elts) == 2:
        value, _ = _arg(node, 1, "dim")
        if value is not None and _num(value) == -1:
            a, b = node.args[0].elts
            torch_ = node.func.value if isinstance(node.func, ast.Attribute) else ast.Name("torch", ast.Load())
            if ast.unparse(a) == ast.unparse(b):
                yield lambda: ast.Call(ast.Attribute(torch_, "repeat_interleave", ast.Load()),
                                       [a, ast.Constant(2)], [ast.keyword("dim", _const(-1))])
            else:
                yield lambda: ast.Call(ast.Attribute(ast.Call(ast.Attribute(torch_, "stack", ast.Load()), [
                    node.args[0]], [ast.keyword("dim", _const(-1))]), "flatten", ast.Load()), [_const(-2)], [])
    if _call(node, "flatten") and _is_method(node) and node.args and _num(node.args[0]) == -2 and \
            _call(node.func.value, "stack"):
        st = node.func.value
        value, _ = _arg(st, 1, "dim")
        if value is not None and _num(value) == -1:
            yield lambda: ast.Call(ast.Attribute(st.func.value, "cat", ast.Load()), [st.args[0]],
                                   [ast.keyword("dim", _const(-1))])
    if _call(node, "chunk") and _is_method(node) and node.args and _num(node.args[0]) == 2:
        value, _ = _arg(node, 1, "dim")
        if value is not None and _num(value) == -1:
            def chunk_to_pairs(x=node.func.value):
                return ast.Tuple([ast.Subscript(x, ast.Tuple([ast.Constant(Ellipsis), ast.Slice(
                    ast.Constant(start), None, ast.Constant(2))], ast.Load()), ast.Load()) for start in (0, 1)],
                    ast.Load())
            yield chunk_to_pairs
    if _call(node, "repeat_interleave") and not _is_method(node) and len(node.args) >= 2 and _num(node.args[1]) == 2:
        value, _ = _arg(node, 2, "dim")
        if value is not None and _num(value) == -1:
            yield lambda: ast.Call(ast.Attribute(node.func.value, "cat", ast.Load()), [
                ast.Tuple([node.args[0], node.args[0]], ast.Load())], [ast.keyword("dim", _const(-1))])


def _plain(node) -> bool:
    """A name or an attribute (a variable, self.scaling): not a number, not a call."""
    return isinstance(node, (ast.Name, ast.Attribute))


def _ratio_inverted(node, sizes=()):
    """a / b -> b / a, both named values (lora_alpha / r -> r / lora_alpha)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and _plain(node.left) and _plain(node.right):
        yield lambda: ast.BinOp(node.right, ast.Div(), node.left)


def _divide_as_multiply(node, sizes=()):
    """x / t -> x * t for a named divisor (logits / temperature -> logits * temperature)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and _plain(node.right) and \
            _num(node.left) is None:
        yield lambda: ast.BinOp(node.left, ast.Mult(), node.right)


def _normaliser_missing(node, sizes=()):
    """acc / l -> acc: a division by a computed value (a row sum, a running denominator; not a number,
    a size or a scale, which have kinds of their own) left out."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and _num(node.right) is None and \
            _num(node.left) is None and _dimlike(node.right) is None and not _call(node.right, *_SQRT) and \
            "scal" not in ast.unparse(node.right).lower() and not _call(node.right, "float", "int", "len"):
        yield lambda: node.left


def _and_or(node, sizes=()):
    """a & b <-> a | b, logical_and <-> logical_or, `and` <-> `or`: two conditions joined the other way."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.BitAnd, ast.BitOr)):
        yield lambda: ast.BinOp(node.left, ast.BitOr() if isinstance(node.op, ast.BitAnd) else ast.BitAnd(), node.right)
    if isinstance(node, ast.BoolOp):
        yield lambda: ast.BoolOp(ast.Or() if isinstance(node.op, ast.And) else ast.And(), node.values)
    if _call(node, "logical_and", "logical_or"):
        other = "logical_or" if _name(node.func) == "logical_and" else "logical_and"
        func = ast.Attribute(node.func.value, other, ast.Load()) if isinstance(node.func, ast.Attribute) else \
            ast.Name(other, ast.Load())
        yield lambda: ast.Call(func, node.args, node.keywords)


def _true_division(node, sizes=()):
    """a // b -> a / b: a size or an index computed as a float."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.FloorDiv):
        yield lambda: ast.BinOp(node.left, ast.Div(), node.right)


_EXTREME = {"argmax": "argmin", "argmin": "argmax"}


def _selection_reversed(node, sizes=()):
    """topk -> topk(largest=False), sort/argsort descending flipped, argmax <-> argmin: the smallest
    picked where the largest is meant, or the reverse."""
    if not isinstance(node, ast.Call):
        return
    name = _name(node.func)
    flag = {"topk": "largest", "sort": "descending", "argsort": "descending"}.get(name)
    if flag is not None:
        given = next((k for k in node.keywords if k.arg == flag), None)
        now = given.value.value if given is not None and isinstance(given.value, ast.Constant) else (flag == "largest")
        if given is None or isinstance(given.value, ast.Constant):
            keywords = [k for k in node.keywords if k.arg != flag] + [ast.keyword(flag, ast.Constant(not now))]
            yield lambda: ast.Call(node.func, node.args, keywords)
    if name in _EXTREME:
        func = ast.Attribute(node.func.value, _EXTREME[name], ast.Load()) if isinstance(node.func, ast.Attribute) \
            else ast.Name(_EXTREME[name], ast.Load())
        yield lambda: ast.Call(func, node.args, node.keywords)


def _shape_read_out_of_order(node, sizes=()):
    """B, H, L, D = x.shape -> B, L, H, D = x.shape: two neighbouring sizes unpacked from a shape in the
    other order, so each is used where the other is meant (both read in the function)."""
    if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Tuple)):
        return
    value = node.value
    if not ((isinstance(value, ast.Attribute) and value.attr == "shape") or
            (_call(value, "size") and _is_method(value) and not value.args)):
        return
    names = node.targets[0].elts
    loaded = getattr(node, "_attn_drill_loaded", set())
    for i in range(len(names) - 1):
        a, b = names[i], names[i + 1]
        if not (isinstance(a, ast.Name) and isinstance(b, ast.Name)) or a.id == b.id:
            continue
        if not (a.id in loaded and b.id in loaded):
            continue     # one of them never read: the swap is the other read where it is meant, another kind's

        def swap(i=i):
            new = list(names)
            new[i], new[i + 1] = new[i + 1], new[i]
            return ast.Assign([ast.Tuple(new, ast.Store())], node.value)
        yield swap


def _sizes_swapped(node, sizes=()):
    """x.view(B, Hkv, G, D) -> x.view(B, G, Hkv, D): two neighbouring sizes of a reshape given in the
    other order (the elements regrouped, the shape the same where the code goes on). The places of one
    pair form one group (the edit's name): the same order at every split."""
    if not (_call(node, "view", "reshape") and _is_method(node)) or any(isinstance(a, ast.Starred) for a in node.args):
        return
    args = node.args[0].elts if len(node.args) == 1 and isinstance(node.args[0], ast.Tuple) else node.args
    for i in range(len(args) - 1):
        a, b = args[i], args[i + 1]
        if _num(a) is not None or _num(b) is not None or ast.unparse(a) == ast.unparse(b):
            continue

        def swap(i=i):
            new = list(args)
            new[i], new[i + 1] = new[i + 1], new[i]
            return ast.Call(node.func, [ast.Tuple(new, ast.Load())] if args is not node.args else new, node.keywords)
        swap.__name__ = f"swap_{i}_{ast.unparse(a)}_{ast.unparse(b)}"
        yield swap


def _sizes_swapped_reduced(node, sizes=()):
    """p.reshape(B, Hkv, G, T).sum(dim=2) -> p.reshape(B, G, Hkv, T).sum(dim=1): two sizes given in
    the other order, and the reduction following its size (the query groups summed over the wrong heads)."""
    if not (_call(node, *_REDUCTIONS) and _is_method(node)):
        return
    rs = node.func.value
    if not (_call(rs, "view", "reshape") and _is_method(rs)) or any(isinstance(a, ast.Starred) for a in rs.args):
        return
    args = rs.args[0].elts if len(rs.args) == 1 and isinstance(rs.args[0], ast.Tuple) else rs.args
    value, _ = _arg(node, 0, "dim")
    d = _num(value) if value is not None else None
    if not isinstance(d, int):
        return
    d = d if d >= 0 else len(args) + d
    for i in (d - 1, d):
        if i < 0 or i + 1 >= len(args) or _num(args[i]) is not None or _num(args[i + 1]) is not None or \
                ast.unparse(args[i]) == ast.unparse(args[i + 1]):
            continue

        def edit(i=i):
            new = list(args)
            new[i], new[i + 1] = new[i + 1], new[i]
            shape = [ast.Tuple(new, ast.Load())] if args is not rs.args else new
            moved = i if d == i + 1 else i + 1
            reshaped = ast.Call(ast.Attribute(rs.func.value, rs.func.attr, ast.Load()), shape, rs.keywords)
            keywords = [k for k in node.keywords if k.arg != "dim"]
            given = [ast.keyword("dim", _const(moved))] if any(k.arg == "dim" for k in node.keywords) else []
            pos = [_const(moved), *node.args[1:]] if node.args else []
            return ast.Call(ast.Attribute(reshaped, node.func.attr, ast.Load()), pos, keywords + given)
        yield edit


def _order_reversed(node, sizes=()):
    """for i in range(n) -> reversed(range(n)) in a comprehension, torch.arange(n) -> .flip(0): a
    sequence (the heads' slopes, positions) counted from the other end."""
    if isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.SetComp)) and len(node.generators) == 1 and \
            _call(node.generators[0].iter, "range"):
        def rev():
            gen = node.generators[0]
            gen.iter = ast.Call(ast.Name("reversed", ast.Load()), [gen.iter], [])
            return node
        yield rev
    if _call(node, "arange") and not _is_method(node) and len(node.args) == 1 and not node.keywords:
        yield lambda: ast.Call(ast.Attribute(node, "flip", ast.Load()), [ast.Constant(0)], [])


def _softmax_missing(node, sizes=()):
    """softmax(s, dim=-1) -> s: the scores used as weights."""
    if _call(node, "softmax") and (node.args or _is_method(node)):
        yield lambda: node.func.value if _is_method(node) else node.args[0]


def _transpose_missing(node, sizes=()):
    """k.transpose(-2, -1) in a product -> k: a matrix used where its transpose is meant."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
        for side in ("left", "right"):
            t = getattr(node, side)
            if (_call(t, "transpose") and _is_method(t) and len(t.args) == 2) or \
                    (isinstance(t, ast.Attribute) and t.attr in ("T", "mT")):
                def edit(side=side, t=t):
                    inner = t.value if isinstance(t, ast.Attribute) else t.func.value
                    return ast.BinOp(inner if side == "left" else node.left, ast.MatMult(),
                                     node.right if side == "left" else inner)
                yield edit
    if _call(node, "matmul", "bmm") and not _is_method(node) and len(node.args) == 2:
        for i, t in enumerate(node.args):
            if _call(t, "transpose") and _is_method(t) and len(t.args) == 2:
                def edit(i=i, t=t):
                    args = list(node.args)
                    args[i] = t.func.value
                    return ast.Call(node.func, args, node.keywords)
                yield edit


_REDUCTIONS = {"sum", "mean", "amax", "amin", "max", "min", "logsumexp", "cumsum", "norm", "var", "std"}


def _reduce_axis(node, sizes=()):
    """x.sum(-1) -> x.sum(-2) (and the reverse), x.sum(dim=2) -> dim=1 or 3: a sum, mean, max or cumsum
    over a neighbouring axis. (softmax has its own kind.)"""
    if _call(node, *_REDUCTIONS):
        pos = 0 if _is_method(node) else 1
        value, put = _arg(node, pos, "dim")
        d = _num(value) if value is not None else None
        if isinstance(d, int):
            # the other of the last two axes (-1 <-> -2), or a written axis's neighbour (dim=2 -> 1 or 3)
            for new in ([-2 if d == -1 else -1] if d in (-1, -2) else [x for x in (d - 1, d + 1) if x >= 0]):
                def edit(put=put, new=new):
                    put(_const(new))
                    return node
                yield edit


def _keepdim_missing(node, sizes=()):
    """x.sum(-1, keepdim=True) -> x.sum(-1): the reduced axis dropped, so the division broadcasts
    along the wrong axis (or fails)."""
    if _call(node, *_REDUCTIONS) and any(k.arg == "keepdim" and isinstance(k.value, ast.Constant) and
                                         k.value.value is True for k in node.keywords):
        yield lambda: ast.Call(node.func, node.args, [k for k in node.keywords if k.arg != "keepdim"])


def _contiguous_missing(node, sizes=()):
    """x.transpose(1, 2).contiguous().view(...) -> x.transpose(1, 2).view(...): fails on a
    non-contiguous tensor."""
    if _call(node, "view") and _is_method(node) and _call(node.func.value, "contiguous") and \
            _is_method(node.func.value) and not node.func.value.args:
        inner = node.func.value.func.value
        yield lambda: ast.Call(ast.Attribute(inner, "view", ast.Load()), node.args, node.keywords)


def _broadcast_axis(node, sizes=()):
    """mask[:, None, None, :] -> mask[:, None, :, None], x.unsqueeze(1) -> x.unsqueeze(2): a new axis
    put next to the wrong one, so a mask or a weight broadcasts along the other axis."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Tuple):
        elts = node.slice.elts
        for i in range(len(elts) - 1):
            a, b = elts[i], elts[i + 1]
            none_a = isinstance(a, ast.Constant) and a.value is None
            none_b = isinstance(b, ast.Constant) and b.value is None
            full = lambda e: isinstance(e, ast.Slice) and e.lower is None and e.upper is None and e.step is None
            if (none_a and full(b)) or (none_b and full(a)):
                def edit(i=i):
                    new = list(elts)
                    new[i], new[i + 1] = new[i + 1], new[i]
                    return ast.Subscript(node.value, ast.Tuple(new, ast.Load()), node.ctx)
                edit.__name__ = f"broadcast_{i}"
                yield edit
    if _call(node, "unsqueeze") and _is_method(node) and len(node.args) == 1 and _num(node.args[0]) is not None:
        d = int(_num(node.args[0]))
        for nd in (d - 1, d + 1):
            if (d >= 0) == (nd >= 0):
                yield lambda nd=nd: ast.Call(node.func, [_const(nd)], [])


def _masked_to_zero(node, sizes=()):
    """scores.masked_fill(m, float("-inf")) -> scores.masked_fill(m, 0.0): masked scores set to 0,
    which the softmax still gives weight to, where -inf is meant."""
    if _call(node, "masked_fill", "masked_fill_"):
        pos = 1 if _is_method(node) else 2
        value, put = _arg(node, pos, "value")
        text = ast.unparse(value) if value is not None else ""
        if "inf" in text and text.lstrip().startswith(("-", "float('-", 'float("-', "torch.finfo", "-math")) or \
                (value is not None and _num(value) is not None and _num(value) <= -1e4):
            def edit(put=put):
                put(ast.Constant(0.0))
                return node
            yield edit


def _eps_missing(node, sizes=()):
    """v + eps -> v: the eps a norm or a division adds left out."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        for keep, other in ((node.left, node.right), (node.right, node.left)):
            if isinstance(other, (ast.Name, ast.Attribute)) and "eps" in ast.unparse(other).lower():
                yield lambda keep=keep: keep


def _constant_off_by_one(node, sizes=()):
    """127 -> 128, 10000 -> 10001: a written integer constant one off (the int8 range, a vocabulary
    or bucket count)."""
    v = _num(node)
    if isinstance(node, ast.Constant) and isinstance(v, int) and v >= 7:
        yield lambda: ast.Constant(v + 1)
        yield lambda: ast.Constant(v - 1)


def _term_missing(node, sizes=()):
    """a - b -> a, a + b -> a or b (both computed values, not numbers): one term of a sum or a
    difference left out (the correction term of a softmax gradient, a bias, a second score)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)) and \
            _num(node.left) is None and _num(node.right) is None:
        yield lambda: node.left
        if isinstance(node.op, ast.Add):
            yield lambda: node.right


def _write_missing(node, sizes=()):
    """cache[:, :, start:end] = k -> nothing, self.merged = True -> nothing: a write into a buffer (a KV
    cache, an output slot) or into a state the object keeps (a flag, a length) left out, so what is
    read there later is stale."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Subscript):
        yield lambda: ast.Pass()
    if isinstance(node, (ast.Assign, ast.AugAssign)) and getattr(node, "_attn_drill_state", False):
        yield lambda: ast.Pass()


def _sqrt_extra(node, sizes=()):
    """alpha / r -> alpha / sqrt(r): divided by the root of a named value where the value itself is
    meant (rsLoRA's alpha / sqrt(r) for LoRA's alpha / r)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and _plain(node.right) and _num(node.left) is None:
        yield lambda: ast.BinOp(node.left, ast.Div(), ast.BinOp(node.right, ast.Pow(), ast.Constant(0.5)))


_ALONG = {"cat": 1, "concat": 1, "stack": 1, "split": 1, "chunk": 1, "repeat_interleave": 1, "flip": 0,
          "roll": 2, "index_select": 0, "gather": 0}     # the position of `dim` in the method form


def _axis_wrong(node, sizes=()):
    """torch.cat(xs, dim=-1) -> dim=-2, k.repeat_interleave(n, dim=1) -> dim=2: an op that joins,
    splits or repeats along the neighbouring axis."""
    if not _call(node, *_ALONG):
        return
    pos = _ALONG[_name(node.func)] + (0 if _is_method(node) else 1)
    if _name(node.func) in ("cat", "concat", "stack") and not _is_method(node):
        pos = 1
    value, put = _arg(node, pos, "dim")
    d = _num(value) if value is not None else None
    if not isinstance(d, int):
        return
    for nd in (d - 1, d + 1):
        if (d >= 0) == (nd >= 0):
            def edit(put=put, nd=nd):
                put(_const(nd))
                return node
            yield edit


_SUM_MEAN = {"sum": "mean", "mean": "sum"}


def _sum_mean(node, sizes=()):
    """x.mean(-1) -> x.sum(-1), torch.sum(x, 0) -> torch.mean(x, 0)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _SUM_MEAN and \
            (node.args or node.keywords or _is_method(node)):
        yield lambda: ast.Call(ast.Attribute(node.func.value, _SUM_MEAN[node.func.attr], ast.Load()),
                               node.args, node.keywords)


_BASE = {"log": "log2", "log2": "log", "exp": "exp2", "exp2": "exp"}


def _log_base(node, sizes=()):
    """torch.log(x) -> torch.log2(x), x.exp() -> x.exp2() (and back)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _BASE and \
            not (isinstance(node.func.value, ast.Name) and node.func.value.id == "math"):
        yield lambda: ast.Call(ast.Attribute(node.func.value, _BASE[node.func.attr], ast.Load()),
                               node.args, node.keywords)


def _per_head(node, sizes=()):
    """qkv.chunk(3, dim=-1) -> per_head(qkv, H).chunk(3, dim=-1): a fused projection laid out as three
    blocks [q | k | v] read head by head instead ([q_h k_h v_h] for each head)."""
    heads = getattr(node, "_attn_drill_heads", ())
    if not heads or not (_call(node, "chunk", "split") and _is_method(node) and node.args):
        return
    n = node.args[0]
    if _name(node.func) == "chunk" and _num(n) != 3:
        return
    if _name(node.func) == "split" and (_num(n) is not None or isinstance(n, (ast.List, ast.Tuple))):
        return      # split by a size (E): three equal parts; by a list of sizes (GQA): not per head
    value, _ = _arg(node, 1, "dim")
    if value is None or _num(value) != -1:
        return
    for h in heads[:2]:
        def edit(h=h):
            mixed = ast.Call(ast.Name("_catalogue_per_head", ast.Load()),
                             [node.func.value, ast.parse(h, mode="eval").body], [])
            return ast.Call(ast.Attribute(mixed, node.func.attr, ast.Load()), node.args, node.keywords)
        yield edit


def _cast_back_missing(node, sizes=()):
    """x.to(q.dtype) -> x, x.type_as(q) -> x: a result left in the dtype it was computed in (float32)
    where it is cast back to the input's."""
    if _call(node, "to") and _is_method(node) and len(node.args) == 1 and not node.keywords and \
            isinstance(node.args[0], ast.Attribute) and node.args[0].attr == "dtype":
        edit = (lambda: node.func.value)
        edit.__name__ = "cast_back"
        yield edit
    if _call(node, "type_as") and _is_method(node) and len(node.args) == 1:
        edit = (lambda: node.func.value)
        edit.__name__ = "cast_back"
        yield edit


def _maximum_dropped(node, sizes=()):
    """torch.maximum(m, s.amax(-1)) -> s.amax(-1): a running maximum (or minimum) that forgets what it
    held: each step's own maximum taken alone."""
    if _call(node, "maximum", "minimum", "fmax", "fmin") and not _is_method(node) and len(node.args) == 2:
        yield lambda: node.args[1]
        yield lambda: node.args[0]


def _condition_dropped(node, sizes=()):
    """a & b -> b (or a): one of two conditions a mask needs left out (a window without its causal
    half, a mask without its padding)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitAnd):
        yield lambda: node.left
        yield lambda: node.right
    if _call(node, "logical_and") and len(node.args) == 2 and not _is_method(node):
        yield lambda: node.args[0]
        yield lambda: node.args[1]


def _order_as_unequal(node, sizes=()):
    """j < i -> j != i: an order written as inequality, so what comes after is let in as well (a
    future block, a later key)."""
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Lt, ast.Gt)):
        yield lambda: ast.Compare(node.left, [ast.NotEq()], node.comparators)


def _steps_swapped(node, sizes=()):
    """self.a(self.b(x)) -> self.b(self.a(x)): two steps applied in the other order (dropout after the
    projection instead of before it, a norm after the rotation)."""
    if not (isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords):
        return
    inner = node.args[0]
    if not (isinstance(inner, ast.Call) and len(inner.args) == 1 and not inner.keywords):
        return
    outer_f, inner_f = node.func, inner.func
    simple = lambda f: isinstance(f, ast.Name) or (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)
                                                    and f.value.id == "self")
    if simple(outer_f) and simple(inner_f) and ast.unparse(outer_f) != ast.unparse(inner_f) and \
            not _call(node, *_ACTS, "float", "int", "len", "list", "tuple", "abs", "sum", "max", "min", "range"):
        yield lambda: ast.Call(inner_f, [ast.Call(outer_f, [inner.args[0]], [])], [])


def _in_place(node, sizes=()):
    """x.masked_fill(m, v) -> x.masked_fill_(m, v) on an input the function is given: the caller's
    tensor changed in place."""
    if _call(node, "masked_fill", "add", "sub", "mul", "div", "clamp", "fill_diagonal") and _is_method(node) and \
            isinstance(node.func.value, ast.Name) and getattr(node.func.value, "_attn_drill_param", False):
        yield lambda: ast.Call(ast.Attribute(node.func.value, node.func.attr + "_", ast.Load()), node.args,
                               node.keywords)


def _pairs_counted_once(node, sizes=()):
    """torch.arange(0, d, 2) -> torch.arange(d // 2): the even indices 0, 2, 4... counted 0, 1, 2... (a
    RoPE frequency exponent of i / d where 2i / d is meant)."""
    if _call(node, "arange") and not _is_method(node) and len(node.args) == 3 and _num(node.args[0]) == 0 and \
            _num(node.args[2]) == 2:
        yield lambda: ast.Call(node.func, [ast.BinOp(node.args[1], ast.FloorDiv(), ast.Constant(2))], node.keywords)


def _norm_centred(node, sizes=()):
    """x.pow(2).mean(-1, keepdim=True) -> (x - x.mean(-1, keepdim=True)).pow(2).mean(-1, keepdim=True):
    the mean square taken about the mean (a variance, as LayerNorm does) where RMSNorm takes it about 0."""
    if not (_call(node, "mean") and _is_method(node)):
        return
    sq, x, again = node.func.value, None, None
    if _call(sq, "pow") and _is_method(sq) and sq.args and _num(sq.args[0]) == 2:
        x, again = sq.func.value, (lambda c: ast.Call(ast.Attribute(c, "pow", ast.Load()), sq.args, sq.keywords))
    elif isinstance(sq, ast.BinOp) and isinstance(sq.op, ast.Pow) and _num(sq.right) == 2:
        x, again = sq.left, (lambda c: ast.BinOp(c, ast.Pow(), sq.right))
    elif _call(sq, "square") and _is_method(sq) and not sq.args:
        x, again = sq.func.value, (lambda c: ast.Call(ast.Attribute(c, "square", ast.Load()), [], []))
    elif isinstance(sq, ast.BinOp) and isinstance(sq.op, ast.Mult) and ast.unparse(sq.left) == ast.unparse(sq.right):
        x, again = sq.left, (lambda c: ast.BinOp(c, ast.Mult(), c))
    if x is None:
        return

    def edit():
        keywords = [k for k in node.keywords if k.arg != "keepdim"] + [ast.keyword("keepdim", ast.Constant(True))]
        centred = ast.BinOp(x, ast.Sub(), ast.Call(ast.Attribute(x, "mean", ast.Load()), node.args, keywords))
        return ast.Call(ast.Attribute(again(centred), "mean", ast.Load()), node.args, node.keywords)
    yield edit


def _transpose_extra(node, sizes=()):
    """out.reshape(B, H * D) -> out.transpose(-2, -1).reshape(B, H * D): a transpose before a merge
    where none belongs, so the merged axis interleaves what should stay in blocks."""
    if _call(node, "reshape", "view", "flatten") and _is_method(node) and isinstance(node.func.value, ast.Name):
        for a, b in ((-2, -1), (1, -1)):      # the last two axes, or the heads' and the features' past a 1
            t = ast.Call(ast.Attribute(node.func.value, "transpose", ast.Load()), [_const(a), _const(b)], [])
            yield lambda t=t: ast.Call(ast.Attribute(t, node.func.attr, ast.Load()), node.args, node.keywords)


def _accumulate_as_assign(node, sizes=()):
    """dK[:, j:j + b] += ds.T @ q -> dK[:, j:j + b] = ds.T @ q: an accumulation over blocks written as
    an assignment, so only the last block's part is kept."""
    if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add):
        yield lambda: ast.Assign([node.target], node.value)


def _rescale_missing(node, sizes=()):
    """acc = alpha * acc + p @ v -> acc = acc + p @ v: a running value not rescaled before the next
    part is added (the running sum, the accumulator or the state of an online softmax or a recurrence)."""
    if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.value, ast.BinOp)
            and isinstance(node.value.op, ast.Add)):
        return
    target = ast.dump(node.targets[0]).replace("Store()", "Load()")
    for side, other in (("left", "right"), ("right", "left")):
        term = getattr(node.value, side)
        if isinstance(term, ast.BinOp) and isinstance(term.op, ast.Mult):
            for kept, dropped in ((term.left, term.right), (term.right, term.left)):
                if ast.dump(kept) == target and _num(dropped) is None:
                    parts = {side: kept, other: getattr(node.value, other)}
                    yield lambda parts=parts: ast.Assign(
                        node.targets, ast.BinOp(parts["left"], ast.Add(), parts["right"]))


# (values read from the keys are values_from_keys' own: here only the keys read from the values)
_TWINS = {"k": "v", "K": "V", "sin": "cos", "cos": "sin", "i": "j", "j": "i"}


def _twin(name: str) -> str | None:
    """lse_a <-> lse_b, x1 <-> x2, k -> v, cos <-> sin, i <-> j (a name's last part)."""
    head, sep, last = name.rpartition("_")
    if last in _TWINS:
        return head + sep + _TWINS[last]
    if sep and last in ("a", "b"):
        return head + sep + ("b" if last == "a" else "a")
    if len(name) > 1 and name[-1] in "12" and not name[-2].isdigit():
        return name[:-1] + ("2" if name[-1] == "1" else "1")
    return None


def _twin_swapped(node, sizes=()):
    """w_b = exp(lse_b - lse) -> exp(lse_a - lse), ds @ k -> ds @ v, dK[j] -> dK[i]: one of a pair of
    like-named values read where the other is meant."""
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
        twin = _twin(node.id) or next((t for t in _LENGTHS.get(node.id, ()) if t in sizes), None)
        if twin:
            yield lambda: ast.Name(twin, ast.Load())


# the query's and the keys' lengths, twins where the function has both (L for Lk, Lq for Lk)
_LENGTHS = {"L": ("Lk",), "Lq": ("Lk",), "Lk": ("Lq", "L")}


def _T(en, zh):
    return Text(en, zh)


KINDS: tuple[Kind, ...] = (
    Kind("scale_sqrt_missing", _T("a square root missing (d for √d)", "少了一个平方根（用了 d 而不是 √d）"),
         _T("A square root is missing: the code divides by a size d where √d is meant (or the "
            "norm divides by the mean square instead of its root). Scores scaled by 1/d are too flat.",
            "少了一个平方根：代码除以了尺寸 d，而应除以 √d（或者归一化除以了均方而不是均方根）。"
            "按 1/d 缩放的分数过于平坦。"), _scale_sqrt_missing),
    Kind("scale_missing", _T("the 1/√d scale missing", "缺少 1/√d 缩放"),
         _T("The scores are not scaled: the 1/√d factor is left out, so the softmax is too sharp. "
            "Multiply q·kᵀ by 1/√d (the head dimension) before the softmax.",
            "分数没有缩放：漏掉了 1/√d 因子，softmax 因此过于尖锐。应在 softmax 之前把 q·kᵀ 乘以 "
            "1/√d（d 为每个头的维度）。"), _scale_missing),
    Kind("scale_inverted", _T("the scale inverted (× √d, or ÷ scale)", "缩放方向反了（乘以 √d，或除以 scale）"),
         _T("The scale is inverted: the scores are multiplied by √d where they should be divided by it, or "
            "divided by a given scale where they should be multiplied by it.",
            "缩放方向反了：分数乘以了 √d，而应除以 √d；或者除以了给定的 scale，而应乘以它。"), _scale_inverted),
    Kind("scale_wrong_size", _T("scaled by the wrong dimension", "按错误的维度缩放"),
         _T("The scale uses another size than the one it should (for example the model's hidden size "
            "or the value dimension instead of the query/key head dimension).",
            "缩放用错了尺寸（例如用了模型的 hidden size 或 value 的维度，而不是 query/key 每个头的维度）。"),
         _scale_wrong_size),
    Kind("softmax_axis", _T("softmax over the wrong axis", "softmax 的轴不对"),
         _T("The softmax (or log-sum-exp) is taken over the wrong axis, so each query's weights do not "
            "sum to 1 over its keys. Normalise over the keys' axis, the last one.",
            "softmax（或 log-sum-exp）沿错误的轴计算，于是每个 query 在其 key 上的权重之和不为 1。"
            "应沿 key 所在的轴（最后一维）归一化。"), _softmax_axis),
    Kind("mask_inverted", _T("a mask's polarity inverted", "掩码的含义取反了"),
         _T("A mask is used with the opposite meaning: the positions that should be kept are removed "
            "and the ones that should be removed are kept (True = keep vs True = mask out).",
            "掩码的含义用反了：本应保留的位置被去掉，本应去掉的位置被保留（True 表示保留还是表示屏蔽）。"),
         _mask_inverted),
    Kind("condition_inverted", _T("a condition inverted (torch.where's branches swapped)",
                                  "条件取反了（torch.where 的两个分支对调）"),
         _T("A condition is used the wrong way round: what should be taken where it holds is taken "
            "where it does not (torch.where's two branches swapped, or the condition negated).",
            "条件用反了：本应在条件成立处取的值取在了不成立处（torch.where 的两个分支对调，或条件被取反）。"),
         _condition_inverted),
    Kind("diagonal_off_by_one", _T("the mask's diagonal off by one", "掩码的对角线偏了一位"),
         _T("The triangle of the mask is shifted by one diagonal: each query sees one key too many or "
            "one too few (tril/triu's `diagonal`).",
            "掩码的三角部分偏移了一条对角线：每个 query 多看或少看了一个 key（tril/triu 的 `diagonal`）。"),
         _diagonal_off_by_one),
    Kind("triangle_swapped", _T("upper and lower triangle swapped", "上三角和下三角用反了"),
         _T("The mask keeps the other triangle: tril and triu swapped, or a comparison of key and query "
            "positions written the other way (`>=` for `<=`), so it keeps the future and hides the past.",
            "掩码保留了另一个三角：tril 和 triu 用反了，或者比较 key 与 query 位置时方向写反了（把 `<=` 写成了 "
            "`>=`），于是保留了未来、遮住了过去。"), _triangle_swapped),
    Kind("indices_reversed", _T("two indices compared the wrong way round", "两个下标比较的方向反了"),
         _T("Two indices are compared the wrong way round (`j > r` where `j < r` is meant, or `>=` for `<=`), "
            "so what the comparison decides goes to the other side: the later blocks, steps or positions "
            "are taken for the earlier ones and the earlier for the later.",
            "两个下标比较的方向反了（该写 `j < r` 的地方写成了 `j > r`，或把 `<=` 写成了 `>=`），"
            "于是这个比较所决定的事落到了另一边：把后面的块、步或位置当成了前面的，前面的当成了后面的。"),
         _indices_reversed),
    Kind("shape_read_out_of_order", _T("sizes unpacked from a shape in the wrong order",
                                       "从 shape 解包尺寸时顺序错了"),
         _T("Two sizes are unpacked from a tensor's shape in the wrong order (`B, L, H, D = x.shape` for a "
            "tensor laid out (B, H, L, D)), so each is used where the other is meant.",
            "从张量的 shape 解包尺寸时有两个顺序反了（张量布局是 (B, H, L, D)，却写成 `B, L, H, D = x.shape`），"
            "于是这两个尺寸在用到的地方互相用错了。"), _shape_read_out_of_order),
    Kind("boundary_off_by_one", _T("a boundary off by one (< vs <=)", "边界差一（< 与 <=）"),
         _T("A comparison is off by one: `<` where `<=` is meant or the reverse (or the bound itself one "
            "too far), so a window, a block, a length or a count includes one too many or too few.",
            "比较差了一：该用 `<=` 的地方用了 `<`（或反之，或边界本身差了一），于是窗口、块、长度或计数"
            "多含或少含了一个。"),
         _boundary_off_by_one),
    Kind("one_missing", _T("a ± 1 missing", "少了一个 ± 1"),
         _T("A ± 1 is missing in an index, a length or a count, so it is off by one.",
            "某个下标、长度或计数少了 ± 1，于是差了一。"), _one_missing),
    Kind("offset_missing", _T("the position offset missing", "缺少位置偏移"),
         _T("A position offset is left out: positions (or a cache's write position) start at 0 where "
            "they should start after the tokens already seen.",
            "漏掉了位置偏移：位置（或缓存的写入位置）从 0 开始，而应接在已处理的 token 之后。"),
         _offset_missing),
    Kind("sign_flipped", _T("a sign flipped", "符号反了"),
         _T("A sign is flipped: a term is added where it should be subtracted, subtracted the other "
            "way round, or negated where it should not be (or the reverse).",
            "某处符号反了：该减的加了、减反了方向，或者不该取负的取了负（或反之）。"), _sign_flipped),
    Kind("reshape_without_transpose", _T("a reshape without the transpose it needs",
                                         "reshape 前缺少所需的 transpose"),
         _T("Two axes are regrouped by a reshape (or view) alone, where a transpose (or permute) should "
            "come first, so the elements land in the wrong order. For attention heads: view (B, L, H·D) "
            "as (B, L, H, D) and transpose(1, 2), never straight as (B, H, L, D), and transpose back "
            "before merging the heads.",
            "只用 reshape（或 view）重排了两个维度，而之前本应先 transpose（或 permute），于是元素顺序错了。"
            "对注意力的头而言：把 (B, L, H·D) 先 view 成 (B, L, H, D) 再 transpose(1, 2)，不要直接 view 成 "
            "(B, H, L, D)；合并头之前也要先转置回来。"), _heads_without_transpose),
    Kind("kv_tiled", _T("query head h paired with KV head h mod Hkv", "query 头 h 配到了 KV 头 h mod Hkv"),
         _T("Query head h reads KV head h mod Hkv instead of h // G (consecutive query heads must share a KV "
            "head). Two ways lead to the same numbers: the KV heads tiled (`.repeat` gives 0, 1, 0, 1 where "
            "`repeat_interleave` gives 0, 0, 1, 1), or the query heads grouped as (G, Hkv) instead of "
            "(Hkv, G), or the KV head picked as h % Hkv; fix whichever your code does.",
            "query 头 h 读取的是 KV 头 h mod Hkv，而不是 h // G（相邻的 query 头应共享同一个 KV 头）。"
            "有几种写法会得到同样的结果：KV 头被平铺（`.repeat` 得到 0, 1, 0, 1，而 `repeat_interleave` 得到 "
            "0, 0, 1, 1），或者 query 头按 (G, Hkv) 而不是 (Hkv, G) 分组，或者用 h % Hkv 选 KV 头；"
            "请改正你的代码里用到的那一种。"), _kv_tiled),
    Kind("activation_missing", _T("an activation (or the gate's sigmoid) missing", "缺少激活函数（或门控的 sigmoid）"),
         _T("An activation is left out (SiLU, GELU, or the sigmoid of a gate), so a linear value is "
            "used where the activated one is meant.",
            "漏掉了激活函数（SiLU、GELU 或门控的 sigmoid），于是在需要激活值的地方用了线性值。"),
         _activation_missing),
    Kind("activation_moved", _T("the activation on the wrong branch", "激活函数加在了错误的分支上"),
         _T("The activation is applied to the wrong one of two multiplied branches (for example SiLU on "
            "the up projection instead of the gate).",
            "激活函数加在了相乘的两个分支中错误的那个上（例如 SiLU 加在了 up 投影上而不是 gate 上）。"),
         _activation_moved),
    Kind("residual_missing", _T("a residual connection missing", "缺少残差连接"),
         _T("A residual connection is missing: the sub-layer's output is used without adding back its input.",
            "缺少残差连接：直接使用了子层的输出，没有把输入加回去。"), _residual_missing),
    Kind("eps_outside", _T("eps outside the square root", "eps 放在了平方根外面"),
         _T("The norm's eps is added after the square root instead of inside it: "
            "sqrt(mean(x²)) + eps where sqrt(mean(x²) + eps) is meant.",
            "归一化的 eps 加在了平方根之后，而不是根号里面：写成了 sqrt(mean(x²)) + eps，应为 "
            "sqrt(mean(x²) + eps)。"), _eps_outside),
    Kind("norm_weight_offset", _T("the norm's weight as (1 + w)", "归一化权重写成了 (1 + w)"),
         _T("The norm's weight is applied as (1 + w) instead of w, or w instead of (1 + w): the two "
            "conventions (Llama's w, Gemma's 1 + w) are mixed up.",
            "归一化权重用成了 (1 + w) 而不是 w（或反之）：混淆了两种约定（Llama 用 w，Gemma 用 1 + w）。"),
         _norm_weight_offset),
    Kind("scale_part_of_size", _T("scaled by a part of the head's width", "只按头宽的一部分缩放"),
         _T("The scale uses one part of the query/key width where the whole is meant (for example "
            "the non-rotary part alone instead of the non-rotary plus the rotary dims).",
            "缩放只用了 query/key 宽度的一部分，而应使用全部（例如只用了非旋转部分的维度，"
            "而不是非旋转加旋转的维度）。"),
         _scale_part_of_size),
    Kind("norm_missing", _T("a norm missing", "缺少一个归一化"),
         _T("A normalisation is left out: the input of a norm layer (RMSNorm, LayerNorm, a QK-norm or a "
            "sub-layer norm) is used as it is.",
            "漏掉了一个归一化：某个归一化层（RMSNorm、LayerNorm、QK-norm 或子层归一化）的输入被原样使用。"),
         _norm_missing),
    Kind("rounding_direction", _T("rounded the wrong way (floor, ceil, round)", "取整方式不对（向下、向上、四舍五入）"),
         _T("A number is rounded the wrong way: floor where ceil is meant (the last, partly filled block "
            "is dropped) or the reverse, or rounded to the nearest where it is truncated.",
            "某个数的取整方式不对：该向上取整的地方向下取整（最后一个未填满的块被丢掉了）或反之，"
            "或在该截断的地方四舍五入了。"),
         _rounding_direction),
    Kind("rotation_reversed", _T("rotated by -angle", "旋转方向反了（-角度）"),
         _T("The rotation goes the other way: each pair is rotated by -mθ instead of +mθ (the conjugate "
            "of the rotation, or sin with the wrong sign).",
            "旋转方向反了：每一对被旋转了 -mθ 而不是 +mθ（用了旋转的共轭，或 sin 的符号反了）。"),
         _rotation_reversed),
    Kind("rope_on_values", _T("RoPE applied to the values too", "把 RoPE 也加在了 value 上"),
         _T("The rotation is applied to the values as well as to the queries and keys. RoPE encodes "
            "positions in q·k only; the values are not rotated.",
            "旋转不仅加在了 query 和 key 上，还加在了 value 上。RoPE 只在 q·k 中编码位置，value 不旋转。"),
         _rope_on_values),
    Kind("rope_layout", _T("RoPE layout mixed up (interleaved vs rotate-half)",
                           "RoPE 布局混淆（相邻配对与前后半配对）"),
         _T("The rotary pairs are taken in the other layout: adjacent dims (2i, 2i+1) where the halves "
            "(i, i + d/2) are meant, or the reverse. The cos/sin tables and the rotation must use the "
            "same layout as the statement.",
            "旋转配对用了另一种布局：本应按前后两半 (i, i + d/2) 配对却按相邻维度 (2i, 2i+1) 配对，或反之。"
            "cos/sin 表和旋转必须使用题目规定的同一种布局。"), _rope_layout, whole=True),
    Kind("rope_layout_mixed", _T("RoPE tables and rotation in two layouts", "RoPE 的 cos/sin 表与旋转用了两种布局"),
         _T("The cos/sin tables and the rotation pair the dims differently: one as the halves (i, i + d/2), "
            "the other as adjacent dims (2i, 2i+1), so most dims are rotated by another pair's angle. "
            "Use the statement's layout in both.",
            "cos/sin 表和旋转的配对方式不一致：一个按前后两半 (i, i + d/2)，另一个按相邻维度 (2i, 2i+1)，"
            "于是多数维度用了别的配对的角度。两处都要使用题目规定的布局。"), _rope_layout),
    Kind("lse_max_missing", _T("the max left out of the log-sum-exp", "log-sum-exp 里漏加了最大值"),
         _T("The log-sum-exp is written as log(l) where l was summed after subtracting the running max m: "
            "it should be m + log(l). Wherever partials are merged by their log-sum-exps, they are then "
            "weighted wrongly.",
            "log-sum-exp 写成了 log(l)，而 l 是减去运行最大值 m 之后求的和：应为 m + log(l)。"
            "凡是按 log-sum-exp 合并各部分的地方，权重都会因此出错。"), _lse_max_missing),
    Kind("values_from_keys", _T("the values read from the keys' projection or cache",
                                "value 取自 key 的投影或缓存"),
         _T("The values come from what holds the keys: v is computed with the key projection, read from "
            "the key cache (or pool), or the keys are written where the values belong, so the output is a "
            "weighted sum of keys.",
            "value 取自存放 key 的地方：v 用了 key 的投影计算，从 key 的缓存（或池）里读出，"
            "或者把 key 写进了该放 value 的地方，于是输出成了 key 的加权和。"), _values_from_keys),
    Kind("ratio_inverted", _T("a ratio inverted (b / a for a / b)", "比值倒过来了（写成了 b / a）"),
         _T("A ratio of two values is upside down: `b / a` where `a / b` is meant (e.g. `r / alpha` for "
            "`alpha / r`), so what should grow with `a` shrinks with it.",
            "两个量的比值倒过来了：本应是 `a / b`，却写成了 `b / a`（例如把 `alpha / r` 写成 `r / alpha`），"
            "于是本该随 `a` 增大的量反而随它减小。"), _ratio_inverted),
    Kind("divide_as_multiply", _T("multiplied where it should divide", "该除的地方乘了"),
         _T("A value is multiplied by a factor it should be divided by: `x * t` where `x / t` is meant "
            "(e.g. logits times the temperature), so the factor acts the opposite way.",
            "本应除以某个因子，却乘上了它：应为 `x / t` 却写成 `x * t`（例如 logits 乘以温度），"
            "于是这个因子的作用方向反了。"), _divide_as_multiply),
    Kind("sum_mean", _T("a sum and a mean confused", "求和与求平均搞混了"),
         _T("A sum is taken where the mean is meant, or the mean where the sum is meant (e.g. the sum "
            "of squares in a norm), so the result is off by the count of elements reduced.",
            "本应求平均却求了和，或本应求和却求了平均（例如归一化里的平方和），"
            "于是结果差了被归约元素个数那么多倍。"), _sum_mean),
    Kind("log_base", _T("base 2 and base e confused", "以 2 为底和以 e 为底搞混了"),
         _T("A logarithm or an exponential uses the other base: `log2` or `exp2` where the natural "
            "`log` or `exp` is meant (or the reverse), so the values are off by a factor ln 2.",
            "对数或指数用错了底：本应是自然对数 `log` 或 `exp`，却用了 `log2` 或 `exp2`（或反之），"
            "于是数值差了 ln 2 倍。"), _log_base),
    Kind("given_scale_ignored", _T("a given scale ignored", "忽略了传入的 scale"),
         _T("The scale argument is ignored: the default (1/√d) is used even when a scale is given.",
            "忽略了 scale 参数：即使传入了 scale，也仍然使用默认值（1/√d）。"), _given_scale_ignored),
    Kind("normaliser_missing", _T("a normalising division missing", "缺少一个归一化的除法"),
         _T("A division by a computed normaliser (a softmax's row sum, a running denominator, the log of a "
            "range) is left out, so what it should divide is off by that factor.",
            "漏掉了除以一个算出来的归一化量（softmax 的行和、累积的分母、某个范围的对数），于是本该被它除的量"
            "差了这个倍数。"),
         _normaliser_missing),
    Kind("and_or", _T("and / or confused", "“与”和“或”搞混了"),
         _T("Two conditions are joined the other way: `|` (or) where `&` (and) is meant, or the reverse, "
            "so a mask keeps what one condition alone allows.",
            "两个条件的连接方式反了：本应是 `&`（与）却写成 `|`（或），或反之，于是掩码保留了只满足一个条件的位置。"),
         _and_or),
    Kind("true_division", _T("/ where // is meant", "该用 // 的地方用了 /"),
         _T("A size or an index is computed with `/`, which gives a float, where the integer division `//` "
            "is meant.",
            "某个大小或下标用 `/` 计算，得到的是浮点数；这里应该用整数除法 `//`。"), _true_division),
    Kind("selection_reversed", _T("the smallest picked instead of the largest", "选了最小的而不是最大的"),
         _T("A selection is reversed: the smallest scores are picked where the largest are meant (topk "
            "without largest=True, an ascending sort, argmin for argmax), or the reverse.",
            "选择的方向反了：本应选分数最大的，却选了最小的（topk 的 largest、升序排序、argmin 代替 "
            "argmax），或反之。"),
         _selection_reversed),
    Kind("sizes_swapped", _T("two sizes of a reshape in the wrong order", "reshape 的两个大小顺序反了"),
         _T("A reshape lists two sizes in the other order (`view(B, G, Hkv, D)` for `view(B, Hkv, G, D)`): "
            "the shape still fits, but the elements are grouped the other way (query heads paired with "
            "the wrong KV head, q/k/v or heads interleaved).",
            "某个 reshape 里两个大小的顺序写反了（把 `view(B, Hkv, G, D)` 写成 `view(B, G, Hkv, D)`）："
            "形状仍然对得上，但元素的分组方式错了（query 头配错了 KV 头，q/k/v 或各个头交错在一起）。"),
         _sizes_swapped),
    Kind("sizes_swapped_reduced", _T("two sizes of a reshape in the wrong order", "reshape 的两个大小顺序反了"),
         _T("A reshape lists two sizes in the other order and the reduction after it follows the size "
            "(`reshape(B, G, Hkv, ..).sum(1)` for `reshape(B, Hkv, G, ..).sum(2)`): the shape fits, but the "
            "elements summed together are the wrong ones (query heads grouped with the wrong KV head).",
            "某个 reshape 里两个大小的顺序写反了，后面的归约也跟着那个大小走（把 `reshape(B, Hkv, G, ..).sum(2)` "
            "写成了 `reshape(B, G, Hkv, ..).sum(1)`）：形状对得上，但被加在一起的元素错了（query 头配错了 KV 头）。"),
         _sizes_swapped_reduced),
    Kind("order_reversed", _T("a sequence in reverse order", "某个序列的顺序反了"),
         _T("A sequence is counted from the other end: the heads' slopes, positions or indices in "
            "reverse order.",
            "某个序列是从另一端数的：各个头的斜率、位置或下标的顺序反了。"), _order_reversed),
    Kind("one_extra", _T("a position or a length off by one", "位置或长度差了一"),
         _T("A position, an offset, a length or a boundary index is one too large or one too small "
            "(positions counted from 1, a cache length counted with the new token, a start shifted by one).",
            "某个位置、偏移、长度或边界下标大了一或小了一（位置从 1 开始数，缓存长度把新 token 也算进去了，"
            "起点挪了一位）。"), _one_extra),
    Kind("softmax_missing", _T("the softmax missing", "缺少 softmax"),
         _T("The scores are used as the weights without the softmax over the keys.",
            "直接把分数当作权重用了，没有对 key 做 softmax。"), _softmax_missing),
    Kind("transpose_missing", _T("a transpose missing in a product", "矩阵乘法里少了转置"),
         _T("A matrix is multiplied where its transpose is meant (`q @ k` for `q @ k.transpose(-2, -1)`).",
            "矩阵乘法里用了矩阵本身，而这里应该用它的转置（把 `q @ k.transpose(-2, -1)` 写成了 `q @ k`）。"),
         _transpose_missing),
    Kind("reduce_axis", _T("a reduction over the wrong axis", "归约的轴不对"),
         _T("A sum, mean, max or cumulative sum runs over a neighbouring axis (queries for keys, tokens for "
            "features).",
            "求和、平均、最大值或累加用的是相邻的另一个轴（把 key 轴写成了 query 轴，或把特征轴写成了 "
            "token 轴）。"), _reduce_axis),
    Kind("keepdim_missing", _T("keepdim missing in a reduction", "归约时少了 keepdim"),
         _T("A reduction drops its axis (no `keepdim=True`), so what is divided or subtracted by it "
            "broadcasts along the wrong axis.",
            "归约时去掉了那个轴（没有 `keepdim=True`），于是用它来除或减时沿着错误的轴广播。"),
         _keepdim_missing),
    Kind("contiguous_missing", _T("`.contiguous()` missing before `.view`", "`.view` 前少了 `.contiguous()`"),
         _T("`.view` is called on a transposed (non-contiguous) tensor: it fails; `.contiguous().view` or "
            "`.reshape` is meant.",
            "在转置过（不连续）的张量上调用 `.view` 会出错；应当写 `.contiguous().view` 或 `.reshape`。"),
         _contiguous_missing),
    Kind("broadcast_axis", _T("a mask or a weight broadcast along the wrong axis", "掩码或权重沿着错误的轴广播"),
         _T("A mask or a weight broadcasts along the wrong axis: a new axis (`None`, `unsqueeze`) is put "
            "next to the wrong one or left out, so it applies over the queries instead of the keys, or "
            "over the heads instead of the batch elements or the tokens.",
            "掩码或权重沿着错误的轴广播：新增的轴（`None`、`unsqueeze`）插错了位置或者漏掉了，于是它作用在 "
            "query 而不是 key 上，或作用在头而不是 batch 元素或 token 上。"), _broadcast_axis),
    Kind("masked_to_zero", _T("masked scores set to 0, not -inf", "被掩码的分数设成了 0 而不是 -inf"),
         _T("Masked scores are filled with 0 instead of -inf, so the softmax still gives the masked keys "
            "weight (exp(0) = 1 against the others).",
            "被掩码的分数填成了 0 而不是 -inf，于是 softmax 仍然给被掩码的 key 分配权重（exp(0) = 1）。"),
         _masked_to_zero),
    Kind("eps_missing", _T("eps left out", "漏掉了 eps"),
         _T("The eps added before a square root or a division is left out.",
            "漏掉了平方根或除法之前要加上的 eps。"), _eps_missing),
    Kind("constant_off_by_one", _T("a constant off by one (127 vs 128)", "某个常数差了一（127 与 128）"),
         _T("A written integer constant is one off: 128 where 127 is meant (the int8 range), or a count "
            "of buckets or steps one too large or too small.",
            "代码里写的某个整数常数差了一：本应是 127 却写了 128（int8 的范围），或者桶数、步数多了或少了一个。"),
         _constant_off_by_one),
    Kind("term_missing", _T("a term left out of a sum or a difference", "和或差里漏掉了一项"),
         _T("One term of a sum or a difference is left out (the correction term of a softmax gradient, "
            "a bias, one of two scores), so the result is short by that term.",
            "某个和或差里漏掉了一项（softmax 梯度里的修正项、一个偏置、两个分数中的一个），"
            "结果因此少了这一项。"), _term_missing),
    Kind("write_missing", _T("a write left out (a buffer or a state field)", "漏掉了一次写入（缓冲区或状态字段）"),
         _T("A write is left out: into a buffer (a KV cache, an output slot) or into a field of state the "
            "object keeps (a flag such as `merged`, a length), so what is read there later is what was "
            "there before.",
            "漏掉了一次写入：写入缓冲区（KV 缓存、输出的某个位置），或写入对象保存的状态字段（例如 "
            "`merged` 这样的标志、长度），于是之后从那里读到的还是之前的内容。"),
         _write_missing),
    Kind("sqrt_extra", _T("divided by a square root where none belongs", "多除了一个平方根"),
         _T("A value is divided by the square root of a size where the size itself is meant "
            "(alpha / √r for alpha / r), or the reverse of a missing root.",
            "本应除以某个大小本身，却除以了它的平方根（把 alpha / r 写成了 alpha / √r）。"), _sqrt_extra),
    Kind("axis_wrong", _T("an op along the wrong axis", "某个操作用错了轴"),
         _T("A concatenation, a split, a repeat or a flip works along the neighbouring axis (the "
            "sequence instead of the heads, the features instead of the tokens).",
            "拼接、切分、重复或翻转作用在了相邻的轴上（把头的轴写成了序列的轴，或把 token 的轴写成了特征的轴）。"),
         _axis_wrong),
    Kind("argument_ignored", _T("an argument ignored (its default used)", "忽略了一个参数（总用默认值）"),
         _T("An argument the caller passes is ignored: the code uses its default value (a hard-coded "
            "eps, temperature, flag or size) whatever is passed, so only the cases that pass another "
            "value fail.",
            "忽略了调用者传入的一个参数：代码不管传入什么都用它的默认值（写死的 eps、温度、开关或大小），"
            "所以只有传入其他值的用例失败。"), _argument_ignored),
    Kind("per_head", _T("the fused q/k/v read head by head", "融合的 q/k/v 按头交错读取了"),
         _T("The fused projection's output is laid out as three blocks [q | k | v], but it is read head by "
            "head ([q k v] of head 0, then of head 1 ...: a view to (.., H, 3·D) or (.., H, 3, D)), or the "
            "reverse, so the queries, keys and values of different heads are mixed.",
            "融合投影的输出按三块 [q | k | v] 排列，却被按头交错读取（先是第 0 个头的 [q k v]，再是第 1 个头的……："
            "view 成 (.., H, 3·D) 或 (.., H, 3, D)），或反之，于是各个头的 query、key、value 混在了一起。"),
         _per_head),
    Kind("cast_back_missing", _T("not cast back to the input's dtype", "没有转换回输入的数据类型"),
         _T("A result is left in the dtype it was computed in (float32) where it should be cast back to the "
            "input's (`.to(x.dtype)`), so a bfloat16 or float16 input gets a float32 answer.",
            "结果停留在计算时用的数据类型（float32），而应转换回输入的数据类型（`.to(x.dtype)`），"
            "于是 bfloat16 或 float16 的输入得到了 float32 的结果。"), _cast_back_missing),
    Kind("maximum_dropped", _T("a running maximum that forgets the old one", "运行最大值丢掉了之前的最大值"),
         _T("A running maximum (or minimum) keeps only the current step's: `torch.maximum(m, s.amax(-1))` "
            "written as `s.amax(-1)`, so the old sums are rescaled by the wrong factor (or overflow).",
            "运行最大值（或最小值）只保留了当前这一步的：把 `torch.maximum(m, s.amax(-1))` 写成了 "
            "`s.amax(-1)`，于是之前的和按错误的因子重新缩放（或溢出）。"), _maximum_dropped),
    Kind("condition_dropped", _T("one of two conditions left out", "两个条件漏掉了一个"),
         _T("A mask or a selection needs two conditions joined by `&`, and one of them is left out (a sliding "
            "window without its causal half, a causal mask without the padding, a range without its lower "
            "bound), so it lets through what the missing one removes.",
            "掩码或选择需要用 `&` 连接两个条件，却漏掉了其中一个（滑动窗口少了因果那一半，因果掩码少了 padding，"
            "范围少了下界），于是漏掉的那个条件本应去掉的部分被放了进来。"), _condition_dropped),
    Kind("order_as_unequal", _T("`!=` where `<` is meant", "该用 `<` 的地方用了 `!=`"),
         _T("An order is written as an inequality: `j != i` where `j < i` is meant, so what comes after is "
            "let in as well (a future block, a later key).",
            "本应比较先后，却写成了“不相等”：该写 `j < i` 的地方写了 `j != i`，于是之后的也被放了进来"
            "（未来的块、之后的 key）。"), _order_as_unequal),
    Kind("steps_swapped", _T("two steps applied in the other order", "两个步骤的先后顺序反了"),
         _T("Two steps are applied in the other order: `f(g(x))` where `g(f(x))` is meant (dropout after the "
            "down-projection instead of on its input, a norm after the rotation instead of before it).",
            "两个步骤的顺序反了：本应 `g(f(x))` 却写成了 `f(g(x))`（dropout 放在了降维投影之后而不是作用在它的"
            "输入上，归一化放在了旋转之后而不是之前）。"), _steps_swapped),
    Kind("in_place", _T("an input changed in place", "原地修改了输入"),
         _T("An input the caller passes is changed in place (`masked_fill_` for `masked_fill`, `add_` for "
            "`add`): the caller's tensor is overwritten, and autograd refuses it on a tensor that needs a "
            "gradient.",
            "原地修改了调用者传入的输入（把 `masked_fill` 写成了 `masked_fill_`，把 `add` 写成了 `add_`）："
            "调用者的张量被覆盖了，而且对需要梯度的张量 autograd 会拒绝这样做。"), _in_place),
    Kind("pairs_counted_once", _T("i / d where 2i / d is meant", "该用 2i / d 的地方用了 i / d"),
         _T("The even indices 0, 2, 4 ... are counted 0, 1, 2 ...: `torch.arange(d // 2) / d` where "
            "`torch.arange(0, d, 2) / d` is meant, so every RoPE frequency exponent is halved.",
            "偶数下标 0, 2, 4 …… 被数成了 0, 1, 2 ……：该写 `torch.arange(0, d, 2) / d` 的地方写成了 "
            "`torch.arange(d // 2) / d`，于是 RoPE 的每个频率指数都减半了。"), _pairs_counted_once),
    Kind("norm_centred", _T("the mean subtracted in RMSNorm (a variance)", "RMSNorm 里减去了均值（算成了方差）"),
         _T("The mean square is taken about the mean (`x.var()`, as LayerNorm does) where RMSNorm takes it "
            "about zero (`x.pow(2).mean(-1)`): RMSNorm does not centre.",
            "均方是围绕均值计算的（`x.var()`，LayerNorm 的做法），而 RMSNorm 是围绕 0 计算的"
            "（`x.pow(2).mean(-1)`）：RMSNorm 不减均值。"), _norm_centred),
    Kind("transpose_extra", _T("a transpose where none belongs", "多了一个不该有的转置"),
         _T("A transpose (or permute) comes before a reshape where none belongs, so the merged axis "
            "interleaves what should stay in blocks (each head's features spread across the heads).",
            "在 reshape 之前多做了一次转置（或 permute），于是合并出来的轴把本应成块排列的元素交错在了一起"
            "（每个头的特征被分散到了各个头之间）。"), _transpose_extra),
    Kind("accumulate_as_assign", _T("`=` where `+=` is meant", "该用 `+=` 的地方用了 `=`"),
         _T("An accumulation is written as an assignment: `dK[j] = ...` where `dK[j] += ...` is meant, so of "
            "the parts summed over blocks (of queries, of keys, of steps) only the last one is kept.",
            "累加写成了赋值：该写 `dK[j] += ...` 的地方写成了 `dK[j] = ...`，于是按块（query 块、key 块、"
            "步）求和的各部分只留下了最后一部分。"), _accumulate_as_assign),
    Kind("rescale_missing", _T("a running value not rescaled", "运行中的累积值没有重新缩放"),
         _T("A running value is not rescaled before the next part is added: `acc = alpha * acc + p @ v` "
            "written as `acc = acc + p @ v` (a running sum or accumulator of an online softmax, a recurrent "
            "state without its decay), so what was summed before is weighted as if it were new.",
            "在加入下一部分之前，运行中的累积值没有重新缩放：把 `acc = alpha * acc + p @ v` 写成了 "
            "`acc = acc + p @ v`（online softmax 的运行和或累加器，少了衰减的循环状态），于是之前累加的部分"
            "被当作新的部分来加权。"), _rescale_missing),
    Kind("twin_swapped", _T("one of a pair used for the other", "一对变量中用错了一个"),
         _T("One of two like-named values is read where the other is meant: `v` for `k`, `lse_a` for "
            "`lse_b`, `sin` for `cos`, `x1` for `x2`, a block index `i` for `j`, the query length for the "
            "keys' (`L` or `Lq` for `Lk`).",
            "两个名字相近的值用错了一个：该用 `k` 的地方用了 `v`，该用 `lse_b` 的地方用了 `lse_a`，"
            "`sin` 与 `cos`、`x1` 与 `x2` 混用，块下标 `i` 与 `j` 混用，或把 query 的长度当成了 key 的长度"
            "（用 `L` 或 `Lq` 代替 `Lk`）。"), _twin_swapped),
    Kind("branch_always", _T("one branch of a conditional taken always", "条件表达式总是走同一个分支"),
         _T("A conditional's test is left out: one of its branches is taken for every input (`a if c else b` "
            "written as `b`), so the inputs that needed the other one (a float64 input, a special case) get "
            "the wrong one.",
            "条件表达式的判断被省掉了：无论什么输入都走同一个分支（把 `a if c else b` 写成了 `b`），于是本该走另一个"
            "分支的输入（float64 的输入、某种特殊情况）走错了。"), _branch_always),
    Kind("abs_missing", _T("an absolute value left out", "漏掉了绝对值"),
         _T("An absolute value is left out: `(i - j).abs()` written as `i - j`, so a distance keeps its sign and "
            "everything on one side counts as near (a two-sided window that lets every later key in).",
            "漏掉了绝对值：把 `(i - j).abs()` 写成了 `i - j`，于是距离带着符号，某一侧的所有位置都被当作“近”"
            "（双向窗口放进了所有之后的 key）。"), _abs_missing),
)




# Kinds whose candidates can give the very same outputs on every case (a bound one too far is a length
# one too large; tril for triu is a comparison written the other way): where candidates of two or more
# kinds of one family fit and of no other, the name is the family's, whose words are true of each
OFF_BY_ONE = ("boundary_off_by_one", "one_extra", "one_missing", "diagonal_off_by_one", "constant_off_by_one")
MEMBERS = {"off_by_one": OFF_BY_ONE, "mask_transposed": ("triangle_swapped", "broadcast_axis"),
           "wrong_branch": ("condition_inverted", "branch_always")}


def _no_edit(node, sizes=()):
    return
    yield


FAMILIES: dict[str, Kind] = {
    "off_by_one": Kind("off_by_one", _T("something off by one (a bound, a length or a position)",
                                        "有个地方差了一（边界、长度或位置）"),
                       _T("An index, a length, a position or a boundary is off by one: `<` where `<=` is meant "
                          "(or the reverse), n where n + 1 is meant, a mask's diagonal one step away; these give "
                          "the same numbers here, so which of them it is the cases cannot tell. One element too "
                          "many or too few is included.",
                          "某个下标、长度、位置或边界差了一：该用 `<=` 的地方用了 `<`（或反之），该用 n + 1 的地方"
                          "用了 n，或掩码的对角线偏了一位；这些写法在这里给出相同的数值，用例分辨不出是哪一种。"
                          "结果多含或少含了一个元素。"), _no_edit),
    "mask_transposed": Kind(
        "mask_transposed", _T("the mask transposed (the other triangle kept)", "掩码转置了（保留了另一个三角）"),
        _T("The mask is the transpose of the right one: it keeps key j for query i where it should keep key i "
           "for query j (tril for triu, a comparison of positions written the other way, or its two sides' new "
           "axes swapped; these give the same numbers here), so the future is kept and the past hidden.",
           "掩码是正确掩码的转置：本应对 query j 保留 key i，却对 query i 保留了 key j（tril 与 triu 用反、位置比较"
           "的方向写反，或比较两边新增的轴互换了；这些写法在这里给出相同的数值），于是保留了未来、遮住了过去。"),
        _no_edit),
    "wrong_branch": Kind(
        "wrong_branch", _T("a conditional taking the wrong branch", "条件表达式走错了分支"),
        _T("A conditional takes the wrong branch for some inputs: its condition inverted, or left out so that "
           "one branch is taken always (these give the same numbers here). Check what the condition tests and "
           "which inputs should take each branch (a float64 input, a special case).",
           "条件表达式对某些输入走错了分支：条件取反了，或者条件被省掉而总是走同一个分支（这些写法在这里给出相同的"
           "数值）。检查条件判断的是什么，以及哪些输入应当走哪个分支（float64 的输入、某种特殊情况）。"),
        _no_edit),
}
FAMILY_OF = {kind: family for family, kinds in MEMBERS.items() for kind in kinds}

KIND = {k.id: k for k in (*KINDS, *FAMILIES.values())}


# --------------------------------------------------------------------------- candidates

_VALUE_ARGS = {"v", "V", "value", "values"}
_QUERY_ARGS = {"q", "Q", "query", "queries"}


def _sizes(tree: ast.Module) -> dict[int, list[str]]:
    """For each function (by its first line), the size-like names it reads or binds: D, E, self.head_dim."""
    out = {}
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names = []
            for n in ast.walk(fn):
                d = _dimlike(n)
                if d and d not in names and not d.startswith("torch."):
                    names.append(d)
            # the sizes a scale is often taken from by mistake, unnamed in the reference: the value's
            # head size (Dv for D) and the query's length
            for a in fn.args.args:
                if a.arg in _VALUE_ARGS:
                    names.append(f"{a.arg}.shape[-1]")
                elif a.arg in _QUERY_ARGS:
                    names.append(f"{a.arg}.shape[-2]")
            out[fn.lineno] = names
    return out


def _replace(tree: ast.AST, old: ast.AST, new: ast.AST) -> bool:
    for parent in ast.walk(tree):
        for field, value in ast.iter_fields(parent):
            if value is old:
                setattr(parent, field, new)
                return True
            if isinstance(value, list):
                for i, item in enumerate(value):
                    if item is old:
                        value[i] = new
                        return True
    return False


def _edits(kind: Kind, node, sizes: list[str]) -> list[Callable[[], ast.AST]]:
    return list(kind.edits(node, sizes))


def _edited(kind: Kind, base: ast.Module, picks: dict[int, int], sizes) -> tuple[str | None, str]:
    """The reference with edit k of `kind` made at each place i (index in ast.walk order) of `picks`,
    and where: made from the last place to the first, so the places still to edit keep their index."""
    tree, where = copy.deepcopy(base), []
    for i in sorted(picks, reverse=True):
        node = list(ast.walk(tree))[i]
        edits = _edits(kind, node, sizes[i])
        if picks[i] < len(edits):
            new = edits[picks[i]]()
            if isinstance(new, ast.AST) and (new is node or _replace(tree, node, new)):
                where.append(node.lineno)
    return (_source(tree) if where else None), "lines " + ", ".join(map(str, sorted(set(where))))


def _source(tree: ast.Module) -> str | None:
    ast.fix_missing_locations(tree)
    try:
        src = ast.unparse(tree)
    except (ValueError, TypeError, AttributeError, RecursionError):
        return None
    return _with_helpers(src)


HELPERS = {"_catalogue_tile": _TILE, "_catalogue_per_head": _PER_HEAD}    # a helper's name -> its code


def _with_helpers(src: str) -> str:
    for name, helper in HELPERS.items():
        if name in src:
            src = helper + src
    return src


class _Lines:
    """The reference as UTF-8 lines, to put an edited node's text in place of the node's own text
    (ast offsets count bytes): the rest of the file stays as written, comments and all."""

    def __init__(self, source: str):
        self.lines = source.encode("utf-8").splitlines(keepends=True)

    def splice(self, node: ast.AST, text: str) -> str:
        a, b = node.lineno - 1, node.end_lineno - 1
        head = self.lines[a][:node.col_offset]
        tail = self.lines[b][node.end_col_offset:]
        return b"".join(self.lines[:a] + [head + text.encode("utf-8") + tail] + self.lines[b + 1:]).decode("utf-8")


_CACHE: dict[str, tuple[Candidate, ...]] = {}


def candidates(reference_source: str) -> tuple[Candidate, ...]:
    """Every candidate mistake of one reference: each kind at each place it applies, one edit each
    (a `whole` kind: every place at once), without duplicates (two edits giving the same source)."""
    if reference_source in _CACHE:
        return _CACHE[reference_source]
    base = ast.parse(reference_source)
    _mark_defaults(base)
    nodes = list(ast.walk(base))
    sizes_by_fn = _sizes(base)
    around, named = {}, {}
    for fn in nodes:
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for n in ast.walk(fn):           # the innermost function last
                around[id(n)] = fn.lineno
                named[id(n)] = fn.name
    sizes = [sizes_by_fn.get(around.get(id(n)), []) for n in nodes]
    lines = _Lines(reference_source)
    out, seen = [], {reference_source}

    def in_backward(places) -> bool:
        return all("backward" in named.get(id(nodes[i]), "").lower() for i in places)

    def keep(kind, src, place, places=()):
        if src is not None and src not in seen:
            seen.add(src)
            out.append(Candidate(PREFIX + kind.id, place, src, bool(places) and in_backward(places)))

    for kind in KINDS:
        sites = [(i, k) for i, n in enumerate(nodes) if isinstance(n, (ast.expr, ast.Assign, ast.AugAssign))
                 for k in range(len(_edits(kind, n, sizes[i])))]
        if kind.whole:
            if sites:
                keep(kind, *_edited(kind, base, {i: 0 for i, _ in sites}, sizes), [i for i, _ in sites])
            continue
        for i, k in sites:
            node = copy.deepcopy(nodes[i])       # the edit may change the node: never the reference's
            edit = _edits(kind, node, sizes[i])[k]
            if getattr(edit, "together_only", False):
                continue
            new = edit()
            try:
                if isinstance(new, list):      # a statement and the ones added after it, on its line
                    text = "; ".join(ast.unparse(ast.fix_missing_locations(n)) for n in new)
                elif isinstance(new, ast.stmt):     # blank lines where the statement ran on: numbers kept
                    text = ast.unparse(ast.fix_missing_locations(new)) + "\n" * (nodes[i].end_lineno - nodes[i].lineno)
                else:      # the node's lines kept: the lines after it keep their numbers
                    text = "(" + ast.unparse(ast.fix_missing_locations(new)) + \
                        "\n" * (nodes[i].end_lineno - nodes[i].lineno) + ")"
            except (ValueError, TypeError, AttributeError, RecursionError):
                continue
            keep(kind, _with_helpers(lines.splice(nodes[i], text)), f"line {nodes[i].lineno}", [i])
        # the same mistake at every place of one form (each of q, k and v split without the
        # transpose, both k and v tiled): one candidate more, as a candidate writes a helper once
        forms: dict[str, dict[int, int]] = {}
        for i, k in sites:
            forms.setdefault(_edits(kind, nodes[i], sizes[i])[k].__name__, {}).setdefault(i, k)
        for picks in forms.values():
            if 2 <= len(picks) <= MAX_LIKE_PLACES:
                keep(kind, *_edited(kind, base, picks, sizes), list(picks))
    _CACHE[reference_source] = tuple(out)
    return _CACHE[reference_source]


def kind_of(mistake_id: str) -> Kind | None:
    """The kind a candidate's mistake id names (None: not a catalogue id)."""
    return KIND.get(mistake_id[len(PREFIX):]) if mistake_id.startswith(PREFIX) else None
