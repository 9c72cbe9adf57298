"""`self` is a name, not a guarantee: the static policy lets a submission use private attributes (and
a few attribute names it refuses elsewhere) on `self`, `cls` and its own classes, but any object can
be passed as `self` (`A.f(torch)`, a function whose first parameter is called self). So the room
compiles the submission with each such access routed through one check, which lets it through only
for an object of a class the submission's own `class` statements built:

    self._cache        ->  __attn_drill_own__(self)._cache
    getattr(cls, '_n') ->  getattr(__attn_drill_own__(cls), '_n')

The classes are recorded by the module's own `__build_class__` (a copy of the builtins, in the module's
globals); neither the record nor the check is reachable from the submission's code (`__builtins__`,
dunder attributes and frames are refused by the policy and the audit hook). Line numbers stay the
user's.
"""
from __future__ import annotations

import ast
import builtins

from .guards import ForbiddenCall
from ..i18n import t

CHECK = "__attn_drill_own__"
OWN_NAMES = ("self", "cls")
REFLECTIVE = ("getattr", "setattr", "delattr", "hasattr")


def _private(attr: str, names) -> bool:
    return not (attr.startswith("__") and attr.endswith("__")) and (attr.startswith("_") or attr in names)


class _Route(ast.NodeTransformer):
    def __init__(self, own: set[str], names: frozenset[str]):
        self.own, self.names = own, names

    def _wrap(self, node: ast.expr) -> ast.expr:
        call = ast.Call(func=ast.Name(id=CHECK, ctx=ast.Load()), args=[node], keywords=[])
        return ast.copy_location(call, node)

    def visit_Attribute(self, node: ast.Attribute):
        self.generic_visit(node)
        if isinstance(node.value, ast.Name) and node.value.id in self.own and _private(node.attr, self.names):
            node.value = self._wrap(node.value)
        return node

    def visit_Call(self, node: ast.Call):
        self.generic_visit(node)
        f = node.func
        if isinstance(f, ast.Name) and f.id in REFLECTIVE and len(node.args) >= 2 \
                and isinstance(node.args[0], ast.Name) and node.args[0].id in self.own:
            name = node.args[1]
            if not (isinstance(name, ast.Constant) and isinstance(name.value, str)) \
                    or _private(name.value, self.names):
                node.args[0] = self._wrap(node.args[0])
        return node


def compile_user(src: str, filename: str, names=()) -> object:
    """The submission's code object, with its private accesses on own names routed through CHECK.
    Raises SyntaxError as compile() would."""
    tree = ast.parse(src, filename)
    own = set(OWN_NAMES) | {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    tree = ast.fix_missing_locations(_Route(own, frozenset(names)).visit(tree))
    return compile(tree, filename, "exec", dont_inherit=True)


class NotOwn(ForbiddenCall):
    """A private access on something that is not the submission's own (uncatchable, as every guard)."""

    def __init__(self, kind: str):
        BaseException.__init__(self, t("room.not_own", kind=kind))
        self.name = "self"


class Registry:
    """The classes the submission's `class` statements built, and the check that uses them."""

    def __init__(self):
        self._classes: list[type] = []       # kept alive, so their ids stay theirs
        self._ids: set[int] = set()          # compared by identity: a metaclass may define __eq__
        self._modules: set[str] = set()

    def globals_for(self, module_name: str) -> dict:
        """What a submission module's globals start with: builtins whose __build_class__ records the
        class it built (when it is a new class of that module), and the check."""
        classes, ids, modules = self._classes, self._ids, self._modules
        modules.add(module_name)
        real = builtins.__build_class__

        def build_class(func, name, *bases, **kwargs):
            cls = real(func, name, *bases, **kwargs)
            if isinstance(cls, type) and type.__getattribute__(cls, "__module__") in modules:
                classes.append(cls)
                ids.add(id(cls))
            return cls

        def own(obj):
            kind = obj if issubclass(type(obj), type) else type(obj)
            if any(id(c) in ids for c in type.__getattribute__(kind, "__mro__")):
                return obj
            raise NotOwn(type(obj).__name__)

        return {"__builtins__": {**builtins.__dict__, "__build_class__": build_class}, CHECK: own}
