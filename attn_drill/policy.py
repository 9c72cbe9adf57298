"""What graded code may use, checked on its source in the judge before it runs (no torch here).

Attention code needs torch, math, numpy and a few standard modules; it never needs to reach into
the interpreter or into torch's internals. Those are the ways code could reach the machinery that
grades it (the op tracer, the blocked kernels, the channel to the judge), so they are refused,
with the line and a plain reason:

  imports      only the modules below (and helper files next to the submission, checked the same
               way); `os` and `sys` only for their harmless attributes
  attributes   no private `_name` attributes except on `self`/`cls` and the file's own classes; no dunder attributes but
               __init__, __name__ and __doc__; none of the attribute names that lead to the
               interpreter or the operating system (frames, `ops`, `library`, `ctypes`, `load`...)
  names        no exec, eval, compile, __import__, globals, locals, vars, breakpoint; getattr,
               setattr and delattr only with a literal name (or on self)
  definitions  no __torch_dispatch__ / __torch_function__ (they intercept torch's own dispatch)

The room enforces the parts that matter for the system at run time too (attn_drill.room.guards).
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from .i18n import t

ALLOWED_MODULES = {
    "torch", "math", "cmath", "numpy", "typing", "typing_extensions", "dataclasses", "functools", "itertools",
    "collections", "einops", "matplotlib", "warnings", "abc", "enum", "__future__", "numbers", "copy", "random",
    "statistics", "string", "time", "os", "sys", "pathlib", "textwrap", "fractions", "decimal", "heapq",
    "bisect", "contextlib", "seaborn",
}
REFUSED_SUBMODULES = ("torch.library", "torch.utils.cpp_extension", "torch.hub", "torch.multiprocessing",
                      "torch.distributed", "torch.compiler", "torch.export", "torch.package", "torch.classes",
                      "torch.ops", "numpy.ctypeslib", "numpy.distutils", "numpy.f2py", "os.path.os")
# os and sys are allowed for these attributes only (and only as `os.<attr>` / `sys.<attr>`)
RESTRICTED = {
    "os": {"path", "makedirs", "getcwd", "sep", "environ", "getenv", "listdir", "cpu_count", "linesep",
           "remove", "mkdir", "exists"},
    "sys": {"maxsize", "float_info", "version_info", "version", "platform", "stdout", "stderr", "argv",
            "getrecursionlimit"},
}
DENIED_ATTRS = {
    "os", "sys", "subprocess", "ctypes", "ctypeslib", "_ctypes", "gc", "inspect", "importlib", "builtins",
    "socket", "pickle", "marshal", "multiprocessing", "threading", "signal", "resource", "cpp_extension",
    "library", "ops", "hub", "system", "popen", "fork", "forkpty", "execv", "execve", "execl", "execvp",
    "spawnv", "posix_spawn", "kill", "killpg", "load", "loads", "f_back", "f_globals", "f_locals",
    "f_builtins", "f_code", "f_trace", "tb_frame", "tb_next", "gi_frame", "gi_code", "cr_frame", "cr_code",
    "ag_frame", "ag_code", "co_code", "co_consts", "func_globals", "settrace", "setprofile",
    "dlopen", "cdll", "CDLL", "compile", "_getframe", "audit", "addaudithook", "fdopen", "dup2",
}
ALLOWED_DUNDERS = {"__init__", "__name__", "__doc__"}
DENIED_NAMES = {"exec", "eval", "compile", "__import__", "globals", "locals", "vars", "breakpoint", "__builtins__",
                "__loader__", "__spec__"}
REFLECTIVE = {"getattr", "setattr", "delattr"}
DENIED_DEFS = {"__torch_dispatch__", "__torch_function__", "__getattribute__", "__init_subclass__", "__del__",
               "__reduce__", "__reduce_ex__", "__class_getitem__"}
MAX_HELPERS = 20


@dataclass
class Refusal:
    file: str
    line: int
    message: str
    code: str = ""
    kind: str = "refused"        # "import" when the module does not exist at all


def check(source: str, path: Path, tree: ast.Module | None = None) -> list[Refusal]:
    """Refusals for a submission and the helper modules it imports from its own folder."""
    out: list[Refusal] = []
    seen: set[Path] = set()
    _check_file(source, Path(path), out, seen, tree)
    return out


def imported_modules(source: str, tree: ast.Module | None = None) -> list[str]:
    """The allowed modules a source imports (dotted names), to load before its room is forked."""
    try:
        tree = tree or ast.parse(source)
    except SyntaxError:
        return []
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
    return [n for n in dict.fromkeys(names) if n.split(".")[0] in ALLOWED_MODULES and
            not any(p.startswith("_") for p in n.split(".") if p != "__future__") and n != "__future__"]


def _check_file(source: str, path: Path, out: list, seen: set, tree: ast.Module | None = None) -> None:
    seen.add(path.resolve())
    try:
        tree = tree or ast.parse(source, str(path))
    except SyntaxError as exc:
        out.append(Refusal(path.name, exc.lineno or 0, f"SyntaxError: {exc.msg}"))
        return
    lines = source.splitlines()
    v = _Visitor(path, lines, out)
    v.own = {"self", "cls"} | {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    v.visit(tree)
    for name in v.local_imports:
        helper = (path.parent / f"{name}.py").resolve()
        if helper not in seen and len(seen) < MAX_HELPERS and helper.is_file():
            try:
                text = helper.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            _check_file(text, helper, out, seen)


class _Visitor(ast.NodeVisitor):
    def __init__(self, path: Path, lines: list[str], out: list):
        self.path, self.lines, self.out = path, lines, out
        self.restricted: dict[str, str] = {}     # local name -> "os" / "sys"
        self.local_imports: list[str] = []
        self.allowed_attr_nodes: set[int] = set()
        self.own: set[str] = {"self", "cls"}      # names whose private attributes the file may use

    def refuse(self, node, message: str, kind: str = "refused") -> None:
        line = getattr(node, "lineno", 0)
        code = self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""
        self.out.append(Refusal(self.path.name, line, message, code, kind))

    # -- imports
    def _module_ok(self, node, module: str) -> bool:
        top = module.split(".")[0]
        if (self.path.parent / f"{top}.py").is_file() or (self.path.parent / top / "__init__.py").is_file():
            if top not in ALLOWED_MODULES:
                self.local_imports.append(top)
                return True
        if top not in ALLOWED_MODULES:
            import importlib.util
            if importlib.util.find_spec(top) is None:
                self.refuse(node, f"ModuleNotFoundError: No module named '{top}'", kind="import")
            else:
                self.refuse(node, t("policy.import", module=module, top=top))
            return False
        if any(part.startswith("_") and part != "__future__" for part in module.split(".")):
            self.refuse(node, t("policy.private_module", module=module))
            return False
        if any(module == r or module.startswith(r + ".") for r in REFUSED_SUBMODULES):
            self.refuse(node, t("policy.outside", what=module))
            return False
        return True

    def visit_Import(self, node: ast.Import):
        for alias in node.names:
            if self._module_ok(node, alias.name):
                top = alias.name.split(".")[0]
                if top in RESTRICTED and alias.asname is None:
                    self.restricted[top] = top
                elif alias.name in RESTRICTED and alias.asname:
                    self.restricted[alias.asname] = alias.name
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom):
        module = node.module or ""
        if node.level:                        # a relative import of a helper next to the file
            self.local_imports.append(module.split(".")[0] if module else "")
            return
        if not self._module_ok(node, module):
            return
        for alias in node.names:
            if alias.name == "*":
                if module in RESTRICTED:
                    self.refuse(node, t("policy.star", module=module))
                continue
            if module in RESTRICTED and alias.name not in RESTRICTED[module]:
                self.refuse(node, t("policy.only", what=f"from {module} import {alias.name}",
                                    allowed=", ".join(sorted(RESTRICTED[module])), module=module))
            elif alias.name.startswith("_") and module != "__future__":
                self.refuse(node, t("policy.private_name", what=f"from {module} import {alias.name}"))
            elif alias.name in DENIED_ATTRS and module not in ("os.path",):
                self.refuse(node, t("policy.outside", what=f"from {module} import {alias.name}"))
            elif f"{module}.{alias.name}" in REFUSED_SUBMODULES:
                self.refuse(node, t("policy.outside", what=f"{module}.{alias.name}"))
        self.generic_visit(node)

    # -- attributes
    def visit_Attribute(self, node: ast.Attribute):
        attr = node.attr
        base = node.value
        on_self = isinstance(base, ast.Name) and base.id in self.own
        if isinstance(base, ast.Name) and base.id in self.restricted:
            module = self.restricted[base.id]
            if attr not in RESTRICTED[module]:
                self.refuse(node, t("policy.only", what=f"{base.id}.{attr}",
                                    allowed=", ".join(sorted(RESTRICTED[module])), module=module))
            self.allowed_attr_nodes.add(id(base))
        elif attr.startswith("__") and attr.endswith("__"):
            if attr not in ALLOWED_DUNDERS:
                self.refuse(node, t("policy.dunder", attr=attr))
        elif attr.startswith("_") and not on_self:
            self.refuse(node, t("policy.private_attr", attr=attr))
        elif attr in DENIED_ATTRS and not on_self:
            self.refuse(node, t("policy.outside", what="." + attr))
        self.generic_visit(node)

    # -- names
    def visit_Name(self, node: ast.Name):
        if node.id in DENIED_NAMES:
            self.refuse(node, t("policy.denied_name", name=node.id))
        elif node.id in self.restricted and isinstance(node.ctx, ast.Load) and id(node) not in self.allowed_attr_nodes:
            self.refuse(node, t("policy.only_attribute", name=node.id))
        elif node.id in REFLECTIVE and isinstance(node.ctx, ast.Load) and id(node) not in self.allowed_attr_nodes:
            self.refuse(node, t("policy.literal_attr", name=node.id))
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call):
        f = node.func
        if isinstance(f, ast.Name) and f.id in REFLECTIVE:
            self.allowed_attr_nodes.add(id(f))
            base = node.args[0] if node.args else None
            name = node.args[1] if len(node.args) > 1 else None
            on_self = isinstance(base, ast.Name) and base.id in ("self", "cls")
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                attr = name.value
                if (attr.startswith("_") and not on_self) or (attr.startswith("__") and attr not in ALLOWED_DUNDERS) \
                        or (attr in DENIED_ATTRS and not on_self):
                    self.refuse(node, t("policy.outside", what=f"{f.id}(..., {attr!r})"))
            elif not on_self:
                self.refuse(node, t("policy.computed_attr", name=f.id))
        self.generic_visit(node)

    # -- definitions
    def visit_FunctionDef(self, node):
        if node.name in DENIED_DEFS:
            self.refuse(node, t("policy.denied_def", name=node.name))
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef
