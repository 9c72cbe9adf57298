"""What graded code may use, checked on its source before it runs (torch only where the judge has it
loaded: load_libraries). An allow-list:

  modules      only the modules of MODULES (and those a problem adds: the spec's `imports`), and helper
               files beside the submission, vetted the same way and handed to the room as text (a
               file beside the submission named like a module never stands in for it)
  names        from each module only the names its entry allows: every public name of the numeric
               libraries but the ones that load, save, map files or compile code (REFUSED), a
               listed few of the standard library (no `typing.get_type_hints`, no `string.Formatter`:
               they evaluate text or follow attributes by name)
  attributes   no private `_name` attributes except on `self`/`cls` and the file's own classes; no dunder
               attributes but __init__, __name__ and __doc__; none of the attribute names that lead to
               the interpreter, the operating system or files (DENIED_ATTRS); attribute names in
               `match` class patterns are checked the same way
  builtins     no exec, eval, compile, __import__, globals, locals, vars, breakpoint; getattr, setattr
               and delattr only with a literal name (or on self)
  definitions  no __torch_dispatch__ / __torch_function__ (they intercept torch's own dispatch), no
               __getattribute__, __init_subclass__, __del__, __reduce__...

The room holds the same lines at run time with an audit hook that cannot be removed (imports from
the submission's code, running text as code, frames): attn_drill.room.guards.
"""
from __future__ import annotations

import ast
import functools
import importlib.machinery
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..i18n import t
from ..results import printable

ALL = "*"          # every public name, but those REFUSED
TYPING = {"Any", "Callable", "ClassVar", "Dict", "Final", "FrozenSet", "Generic", "Iterable", "Iterator",
          "List", "Literal", "Mapping", "MutableMapping", "NamedTuple", "Optional", "Protocol", "Sequence",
          "Set", "Tuple", "Type", "TypeVar", "TypedDict", "Union", "cast", "overload", "TYPE_CHECKING",
          "Annotated", "Self", "Generator", "Hashable", "Sized", "Collection", "DefaultDict", "Deque",
          "NoReturn", "SupportsFloat", "SupportsInt", "AbstractSet", "OrderedDict", "Counter", "final"}
MODULES: dict[str, object] = {
    "torch": ALL, "numpy": ALL, "math": ALL, "cmath": ALL, "einops": ALL, "matplotlib": ALL, "seaborn": ALL,
    "itertools": ALL, "heapq": ALL, "bisect": ALL, "fractions": ALL, "decimal": ALL, "numbers": ALL,
    "statistics": ALL, "random": ALL, "textwrap": ALL, "abc": ALL, "enum": ALL, "__future__": ALL,
    "typing": TYPING, "typing_extensions": TYPING,
    "dataclasses": {"dataclass", "field", "fields", "asdict", "astuple", "replace", "is_dataclass", "InitVar",
                    "KW_ONLY", "MISSING", "FrozenInstanceError"},
    # (no update_wrapper: it reads and writes the attributes its `assigned` and `updated` name; wraps
    # only with its defaults, see _Visitor.visit_Call)
    "functools": {"partial", "reduce", "lru_cache", "cache", "cached_property", "wraps", "total_ordering",
                  "partialmethod", "singledispatch", "cmp_to_key"},
    "collections": {"namedtuple", "defaultdict", "OrderedDict", "Counter", "deque", "ChainMap", "abc"},
    "contextlib": {"contextmanager", "nullcontext", "suppress", "ExitStack", "closing"},
    "warnings": {"warn", "catch_warnings", "simplefilter", "filterwarnings"},
    "copy": {"copy", "deepcopy"},
    "string": {"ascii_letters", "ascii_lowercase", "ascii_uppercase", "digits", "hexdigits", "octdigits",
               "punctuation", "printable", "whitespace", "Template"},
    "time": {"time", "perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "sleep", "process_time",
             "time_ns"},
    "pathlib": {"Path", "PurePath", "PurePosixPath"},
    # os and sys only for these attributes (and only as `os.<attr>` / `sys.<attr>`)
    "os": {"path", "makedirs", "getcwd", "sep", "environ", "getenv", "listdir", "cpu_count", "linesep", "remove",
           "mkdir", "exists"},
    "sys": {"maxsize", "float_info", "version_info", "version", "platform", "stdout", "stderr", "argv",
            "getrecursionlimit"},
}
# modules a problem may add with the spec's `imports`, and what they allow then
EXTRA_MODULES: dict[str, object] = {
    "unittest": {"TestCase", "TestSuite", "TextTestRunner", "TestResult", "skip", "skipIf", "skipUnless",
                 "expectedFailure", "SkipTest", "FunctionTestCase"},
}
# dotted names (and everything under them) refused inside modules that allow ALL
REFUSED = ("torch.library", "torch.utils.cpp_extension", "torch.hub", "torch.multiprocessing", "torch.distributed",
           "torch.compiler", "torch.compile", "torch.export", "torch.package", "torch.classes", "torch.ops",
           "torch.jit", "torch.fx", "torch.overrides", "torch.serialization", "torch.load", "torch.save",
           "torch.from_file", "torch.utils.data", "torch.utils.dlpack", "torch.utils.benchmark",
           "torch.utils.tensorboard", "torch.utils.bottleneck", "torch.testing._internal", "torch.backends.cudnn.rnn",
           "numpy.ctypeslib", "numpy.distutils", "numpy.f2py", "numpy.load", "numpy.save", "numpy.savez",
           "numpy.savez_compressed", "numpy.savetxt", "numpy.loadtxt", "numpy.genfromtxt", "numpy.fromfile",
           "numpy.memmap", "numpy.lib.format", "numpy.testing", "numpy.lib.npyio", "matplotlib.pyplot.show",
           "os.path.os", "unittest.mock")
# Inside the modules above that allow ALL, a submodule (a package or file of the installed library,
# found on disk: no import here) is allowed only when listed: an allow-list, since a library's other
# corners hold helpers that follow attributes by a name in a string (torch.ao's getattr_from_fqn)
SUBMODULES: dict[str, set] = {
    "torch": {"nn", "linalg", "fft", "special", "autograd", "testing", "random", "func", "distributions",
              "cuda", "amp", "backends", "utils", "types", "masked", "nested", "sparse", "functional", "return_types",
              "version", "storage"},
    "torch.nn": {"functional", "init", "modules", "parameter", "attention", "common_types"},
    "torch.nn.attention": {"flex_attention", "bias"},
    "torch.utils": {"checkpoint", "flop_counter"},
    "torch.autograd": {"function", "functional", "grad_mode", "graph", "forward_ad"},
    "torch.testing": set(),
    "torch.backends": {"cuda", "cudnn", "mkl", "mps", "opt_einsum"},
    "torch.cuda": {"amp"},
    "torch.amp": {"autocast_mode", "grad_scaler"},
}
DENIED_ATTRS = {
    "os", "sys", "subprocess", "ctypes", "ctypeslib", "_ctypes", "gc", "inspect", "importlib", "builtins",
    "socket", "pickle", "marshal", "multiprocessing", "threading", "signal", "resource", "cpp_extension",
    "library", "ops", "hub", "system", "popen", "fork", "forkpty", "execv", "execve", "execl", "execvp",
    "spawnv", "posix_spawn", "kill", "killpg", "load", "loads", "f_back", "f_globals", "f_locals",
    "f_builtins", "f_code", "f_trace", "tb_frame", "tb_next", "gi_frame", "gi_code", "cr_frame", "cr_code",
    "ag_frame", "ag_code", "co_code", "co_consts", "func_globals", "settrace", "setprofile",
    "dlopen", "cdll", "CDLL", "compile", "_getframe", "audit", "addaudithook", "fdopen", "dup2",
    "from_file", "tofile", "fromfile", "memmap", "save", "get_type_hints", "get_field", "Formatter", "jit", "fx",
    "exc_info", "excepthook", "displayhook", "cell_contents", "ao", "quantization", "getattr_from_fqn",
    "attrgetter", "methodcaller",
    # the builtins that reach attributes by a computed name or run text, reached as an attribute of a
    # module that holds the builtins (enum.bltns.getattr); the builtins module under another name
    "getattr", "setattr", "delattr", "exec", "vars", "globals", "locals", "breakpoint", "bltns",
    # the last part of each REFUSED name, for the same module reached under another path
    # (torch.nn.functional.torch.serialization)
    "serialization", "overrides", "export", "package", "classes", "distributed", "compiler", "f2py",
    "distutils", "npyio", "dlpack", "tensorboard", "bottleneck", "mock",
}
# the standard library modules allowed whole: only the names they export (their __all__, or their
# public names that are not modules), so a module they hold under a plain name (enum.bltns, the
# builtins) is not reached through them
STDLIB_WHOLE = ("math", "cmath", "itertools", "heapq", "bisect", "fractions", "decimal", "numbers", "statistics",
                "random", "textwrap", "abc", "enum")
ALLOWED_DUNDERS = {"__init__", "__name__", "__doc__"}
DENIED_NAMES = {"exec", "eval", "compile", "__import__", "globals", "locals", "vars", "breakpoint", "__builtins__",
                "__loader__", "__spec__", "help"}
REFLECTIVE = {"getattr", "setattr", "delattr"}
DENIED_DEFS = {"__torch_dispatch__", "__torch_function__", "__getattribute__", "__init_subclass__", "__del__",
               "__reduce__", "__reduce_ex__", "__class_getitem__", "__set_name__", "__instancecheck__",
               "__subclasscheck__", "__subclasshook__"}
MAX_HELPERS = 20


@dataclass
class Refusal:
    file: str
    line: int
    message: str
    code: str = ""
    kind: str = "refused"        # "import" when the module does not exist at all


@dataclass
class Vetted:
    """The verdict on a submission's source: what is refused, and the helper files it imports from
    its own folder, vetted too ({module name: (path, text)}): the room gets them as text."""
    refusals: list[Refusal] = field(default_factory=list)
    helpers: dict[str, tuple[str, str]] = field(default_factory=dict)


def modules_for(extra=()) -> dict[str, object]:
    """The modules graded code may import, with a problem's own additions (spec `imports`)."""
    return {**MODULES, **{m: EXTRA_MODULES.get(m, ALL) for m in extra}}


def import_rules(extra=(), helpers=()) -> dict:
    """What the room holds the submission's code to, as data: what its audit hook lets it import, and
    the attribute names allowed only on its own objects (`own_only`, with every private name)."""
    return {"allowed": sorted(set(modules_for(extra)) | set(helpers)), "refused": list(REFUSED),
            "own_only": sorted(DENIED_ATTRS)}


def check(source: str, path: Path, tree: ast.Module | None = None, extra=()) -> list[Refusal]:
    """Refusals for a submission and the helper modules it imports from its own folder."""
    return vet(source, path, tree, extra).refusals


def vet(source: str, path: Path, tree: ast.Module | None = None, extra=()) -> Vetted:
    out = Vetted()
    seen: set[Path] = set()
    _check_file(source, Path(path), out, seen, tree, modules_for(extra), root=True)
    return out


def nodes(tree: ast.AST) -> list:
    """Every node of a tree in ast.walk's order, listed once per tree: vetting a file reads it whole
    several times (its imports, its module names, its values, its calls), never edits it."""
    listed = getattr(tree, "_attn_drill_nodes", None)
    if listed is None:
        listed = list(ast.walk(tree))
        tree._attn_drill_nodes = listed
    return listed


def _parents(tree: ast.AST) -> dict:
    """id(node) -> its parent, for every node of a tree (listed once per tree)."""
    parents = getattr(tree, "_attn_drill_parents", None)
    if parents is None:
        parents = {id(child): node for node in nodes(tree) for child in ast.iter_child_nodes(node)}
        tree._attn_drill_parents = parents
    return parents


@functools.lru_cache(maxsize=64)
def _parsed_imports(source: str) -> tuple[str, ...]:
    """The modules a trusted source (a probe file) imports, parsed once per text."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ()
    return tuple(_imports(tree))


def _imports(tree: ast.AST) -> list[str]:
    names = []
    for node in nodes(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
    return names


def imported_modules(source: str, tree: ast.Module | None = None, extra=()) -> list[str]:
    """The allowed modules a source imports (dotted names), to load before its room is forked."""
    names = list(_parsed_imports(source)) if tree is None else _imports(tree)
    allowed = modules_for(extra)
    return [n for n in dict.fromkeys(names) if n.split(".")[0] in allowed and _public(n) and n != "__future__"
            and not _refused(n)]


def installed(top: str, folder: Path | None = None) -> bool:
    """A module the interpreter would import from its installation (the submission's folder and the
    current directory are not looked in)."""
    if top in sys.builtin_module_names:
        return True
    here = {"", ".", str(Path.cwd())} | ({str(folder), str(folder.resolve())} if folder else set())
    paths = [p for p in sys.path if p not in here]
    try:
        return importlib.machinery.PathFinder.find_spec(top, paths) is not None
    except (ImportError, ValueError):
        return False


RESERVED = "__attn_drill"      # the room's own names in a submission's globals (attn_drill.room.own)


def reserved_names(tree: ast.AST):
    """(node, identifier) for every identifier of the room's (a name, parameter, import alias, global
    declaration, keyword...), whatever spelling the source used (Python normalises identifiers)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant):
            continue
        for _, value in ast.iter_fields(node):
            for item in (value if isinstance(value, list) else [value]):
                if isinstance(item, str) and item.startswith(RESERVED):
                    yield node, item


def _submodules_listed(dotted: str) -> bool:
    """Every submodule on the way to `dotted` is in SUBMODULES ("torch.ao.quantization.x" is not)."""
    parts = dotted.split(".")
    for i in range(1, len(parts)):
        parent, name = ".".join(parts[:i]), parts[i]
        listed = SUBMODULES.get(parent)
        if listed is None:
            return True                   # a parent without a list: its own entry decides
        if name not in listed and _is_submodule(parent, name):
            return False
    return True


@functools.cache
def _is_submodule(parent: str, name: str) -> bool:
    """`parent.name` is a package or module file of the installed library (read from the disk)."""
    try:
        spec = importlib.machinery.PathFinder.find_spec(parent.split(".")[0])
    except (ImportError, ValueError):
        return False
    if spec is None or not spec.submodule_search_locations:
        return False
    for base in spec.submodule_search_locations:
        folder = Path(base, *parent.split(".")[1:])
        if (folder / name / "__init__.py").is_file() or (folder / f"{name}.py").is_file() or \
                any(folder.glob(f"{name}.*.so")):
            return True
    return False


@functools.cache
def _exported(top: str) -> frozenset:
    """What a whole-allowed standard library module exports (imported here: these are small)."""
    import importlib
    import types
    try:
        mod = importlib.import_module(top)
    except ImportError:
        return frozenset()
    names = getattr(mod, "__all__", None)
    if names is None:
        names = [n for n in dir(mod) if not n.startswith("_")]
    return frozenset(n for n in names if isinstance(n, str) and not isinstance(getattr(mod, n, None), types.ModuleType))


LIBRARIES = ("torch", "numpy", "matplotlib", "einops", "seaborn")


def load_libraries(tree: ast.Module) -> None:
    """Import the allowed libraries a file imports, so that `canonical` sees what their attributes
    hold. Only the judge calls this (it has torch loaded anyway); the command line's quick vetting,
    without it, judges such paths by their names alone, and the judge vets every file again."""
    import importlib
    tops = {a.name.split(".")[0] for n in nodes(tree) if isinstance(n, ast.Import) for a in n.names} | \
        {n.module.split(".")[0] for n in nodes(tree) if isinstance(n, ast.ImportFrom) and n.module and not n.level}
    for top in sorted(tops & set(LIBRARIES)):
        if top not in sys.modules:
            try:
                importlib.import_module(top)
            except Exception:  # noqa: BLE001 - not installed, or broken: judged by names alone
                pass


def canonical(dotted: str) -> str:
    """The dotted name with its longest module prefix spelled by the module's own name, where the
    modules on the way are loaded already (nothing is imported here): `torch.nn.functional.torch`
    is `torch`, `torch.glob` is `glob`, `torch.storage.io.open` is `io.open`. A module that a
    library holds under a plain attribute is judged as itself."""
    parts = dotted.split(".")
    mod = sys.modules.get(parts[0])
    if mod is None:
        return dotted
    name, i = parts[0] if sys.modules.get(parts[0]) is mod else mod.__name__, 1
    while i < len(parts):
        nxt = vars(mod).get(parts[i]) if isinstance(vars(mod), dict) else None
        if nxt is None:
            nxt = sys.modules.get(f"{mod.__name__}.{parts[i]}")
        if not isinstance(nxt, type(sys)):
            break
        spelled = f"{name}.{parts[i]}"            # os.path is imported as os.path (its __name__: posixpath)
        mod, name, i = nxt, spelled if sys.modules.get(spelled) is nxt else nxt.__name__, i + 1
    return ".".join([name, *parts[i:]])


def _is_module_path(dotted: str) -> bool:
    """`dotted` names a module: an allowed top-level one, a package or file of an installed library,
    or a module a loaded library holds under that name."""
    parts = dotted.split(".")
    if len(parts) == 1:
        return parts[0] in MODULES or parts[0] in EXTRA_MODULES
    whole = canonical(dotted)
    return whole.split(".")[-1] != parts[-1] or whole in sys.modules or \
        _is_submodule(".".join(parts[:-1]), parts[-1])


def _public(dotted: str) -> bool:
    return not any(p.startswith("_") for p in dotted.split(".") if p != "__future__")


def _refused(dotted: str) -> bool:
    return any(dotted == r or dotted.startswith(r + ".") for r in REFUSED)


def _check_file(source: str, path: Path, out: Vetted, seen: set, tree, allowed: dict, root: bool = False) -> None:
    seen.add(path.resolve())
    try:
        tree = tree or ast.parse(source, str(path))
    except SyntaxError as exc:
        out.refusals.append(Refusal(path.name, exc.lineno or 0, f"SyntaxError: {exc.msg}"))
        return
    except (RecursionError, MemoryError, ValueError):
        out.refusals.append(Refusal(path.name, 0, t("policy.too_deep")))
        return
    lines = source.splitlines()
    v = _Visitor(path, lines, out.refusals, allowed)
    # an ASCII source spells identifiers as written: without the text, none of them is the room's
    if not source.isascii() or RESERVED in source:
        for node, name in reserved_names(tree):
            v.refuse(node, t("policy.reserved", name=name))
    v.own = {"self", "cls"} | {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    try:
        modules = _module_names(tree, v.aliases)
        v.visit(tree)
        _module_values(tree, v, modules)
    except (RecursionError, MemoryError):
        out.refusals.append(Refusal(path.name, 0, t("policy.too_deep")))
        return
    for name, node in v.local_imports:
        helper = path.parent / f"{name}.py"
        if (path.parent / name).is_dir() and not helper.is_file():
            v.refuse(node, t("policy.helper_package", name=name))
            continue
        if helper.resolve() in seen or len(seen) >= MAX_HELPERS or not helper.is_file():
            continue
        if helper.is_symlink():
            v.refuse(node, t("policy.helper_link", name=f"{name}.py"))
            continue
        try:
            text = helper.read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError):
            v.refuse(node, t("policy.helper_unreadable", name=f"{name}.py"))
            continue
        out.helpers[name] = (str(helper), text)
        _check_file(text, helper, out, seen, None, allowed)


def _module_names(tree: ast.Module, aliases: dict) -> set[str]:
    """The names a file binds to modules: its imports of modules, and plain names assigned one
    (`F = torch.nn.functional`, `T = torch`), wherever in the file (to a fixpoint). Fills `aliases`
    so that an attribute of such a name is judged as the module's own (`T.serialization`)."""
    modules: set[str] = set()
    for node in nodes(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                local = a.asname or a.name.split(".")[0]
                aliases[local] = a.name if a.asname else local
                modules.add(local)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            for a in node.names:
                if a.name != "*":
                    aliases[a.asname or a.name] = f"{node.module}.{a.name}"
                    if _is_module_path(f"{node.module}.{a.name}"):
                        modules.add(a.asname or a.name)
    binds = [n for n in nodes(tree) if isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None]
    changed = True
    while changed:
        changed = False
        for node in binds:
            dotted = _module_of(node.value, aliases, modules)
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if dotted is None or not all(isinstance(x, ast.Name) for x in targets):
                continue
            for x in targets:
                if x.id not in modules:
                    modules.add(x.id)
                    aliases[x.id] = dotted
                    changed = True
    return modules


def _module_of(node, aliases: dict, modules: set) -> str | None:
    """The dotted module an expression names (`torch`, `T`, `torch.nn`), else None."""
    if isinstance(node, ast.Name):
        return aliases.get(node.id, node.id) if node.id in modules else None
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if parts and isinstance(node, ast.Name) and node.id in modules:
        dotted = ".".join([aliases.get(node.id, node.id), *reversed(parts)])
        return dotted if _is_module_path(dotted) else None
    return None


def _module_values(tree: ast.Module, v: "_Visitor", modules: set) -> None:
    """A module is used by its name only: as `m.<attribute>`, as getattr(m, "literal"), or bound to a
    plain name (outside a class body). Passed, stored, returned or put in a container, it would be
    reached under a name the rules above do not follow."""
    parents = _parents(tree)
    for node in nodes(tree):
        if not isinstance(node, (ast.Name, ast.Attribute)) or not isinstance(getattr(node, "ctx", None), ast.Load):
            continue
        parent = parents.get(id(node))
        if isinstance(parent, ast.Attribute) and parent.value is node:
            continue                                  # m.<attribute>: the attribute is judged
        if _module_of(node, v.aliases, modules) is None:
            continue
        if isinstance(parent, ast.Call) and parent.func is node:
            continue
        if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and \
                parent.func.id in REFLECTIVE | {"hasattr"} and parent.args and parent.args[0] is node:
            continue                                  # getattr(m, "name"): judged in visit_Call
        if isinstance(parent, (ast.Assign, ast.AnnAssign)) and parent.value is node and \
                not isinstance(parents.get(id(parent)), ast.ClassDef) and \
                all(isinstance(x, ast.Name) for x in (parent.targets if isinstance(parent, ast.Assign)
                                                      else [parent.target])):
            continue                                  # T = torch: T is judged as torch
        v.refuse(node, t("policy.module_value", name=ast.unparse(node)))


class _Visitor(ast.NodeVisitor):
    def __init__(self, path: Path, lines: list[str], out: list, allowed: dict):
        self.path, self.lines, self.out, self.allowed = path, lines, out, allowed
        self.aliases: dict[str, str] = {}        # local name -> the dotted module (or name) it stands for
        self.local_imports: list[tuple[str, ast.AST]] = []
        self.allowed_attr_nodes: set[int] = set()
        self.own: set[str] = {"self", "cls"}      # names whose private attributes the file may use

    def refuse(self, node, message: str, kind: str = "refused") -> None:
        line = getattr(node, "lineno", 0)
        code = printable(self.lines[line - 1].strip()[:500]) if 0 < line <= len(self.lines) else ""
        self.out.append(Refusal(printable(self.path.name), line, message, code, kind))

    # -- what a dotted name may reach
    def _dotted_ok(self, node, dotted: str) -> bool:
        """A module or a name inside one (`torch.nn.functional`, `typing.get_type_hints`), judged
        also as what it is (`canonical`): a module reached under a library's attribute by its own name."""
        whole = canonical(dotted)
        if whole != dotted:
            if whole.split(".")[0] not in self.allowed:
                self.refuse(node, t("policy.outside", what=dotted))
                return False
            if not self._dotted_ok(node, whole):
                return False
        top, _, rest = dotted.partition(".")
        rule = self.allowed.get(top)
        if rule is None:
            return True                         # not a module: judged attribute by attribute
        if not _public(dotted):
            self.refuse(node, t("policy.private_module", module=dotted))
            return False
        if _refused(dotted):
            self.refuse(node, t("policy.outside", what=dotted))
            return False
        first = rest.split(".")[0] if rest else ""
        parts = dotted.split(".")
        # the same library reached again inside a path (torch.nn.functional.torch.utils.data): its rules too
        again = [".".join(parts[i:]) for i in range(1, len(parts)) if parts[i] in self.allowed]
        if rule is ALL and (not _submodules_listed(dotted) or any(_refused(a) or not _submodules_listed(a)
                                                                   for a in again)):
            self.refuse(node, t("policy.outside", what=dotted))
            return False
        if rule is ALL and first and top in STDLIB_WHOLE and first not in _exported(top):
            self.refuse(node, t("policy.outside", what=dotted))
            return False
        if first and rule is not ALL and first not in rule:
            self.refuse(node, t("policy.only", what=dotted, module=top, allowed=", ".join(sorted(rule))))
            return False
        return True

    # -- imports
    def _module_ok(self, node, module: str) -> bool:
        top = module.split(".")[0]
        folder = self.path.parent
        if top not in self.allowed:
            if (folder / f"{top}.py").is_file() or (folder / top).is_dir():
                self.local_imports.append((top, node))
                return True
            if installed(top, folder):
                self.refuse(node, t("policy.import", module=module, top=top))
            else:
                self.refuse(node, f"ModuleNotFoundError: No module named '{top}'", kind="import")
            return False
        return self._dotted_ok(node, module)

    def visit_Import(self, node: ast.Import):
        for alias in node.names:
            if self._module_ok(node, alias.name):
                if alias.asname:
                    self.aliases[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    self.aliases[top] = top
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom):
        module = node.module or ""
        if node.level:                        # a relative import of a helper next to the file
            self.local_imports.append((module.split(".")[0] if module else "", node))
            return
        if not self._module_ok(node, module):
            return
        for alias in node.names:
            if alias.name == "*":
                if self.allowed.get(module.split(".")[0]) is not ALL:
                    self.refuse(node, t("policy.star", module=module))
                continue
            if alias.name.startswith("_") and module != "__future__":
                self.refuse(node, t("policy.private_name", what=f"from {module} import {alias.name}"))
            elif alias.name in DENIED_ATTRS and module not in ("os.path",):
                self.refuse(node, t("policy.outside", what=f"from {module} import {alias.name}"))
            elif self._dotted_ok(node, f"{module}.{alias.name}"):
                self.aliases[alias.asname or alias.name] = f"{module}.{alias.name}"
        self.generic_visit(node)

    # -- attributes
    def _chain(self, node) -> str | None:
        """`torch.nn.functional.x` as a dotted name when its root is an imported name, else None."""
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name) and node.id in self.aliases:
            return ".".join([self.aliases[node.id], *reversed(parts)])
        return None

    def _attr_ok(self, node, attr: str, on_own: bool) -> bool:
        if attr.startswith("__") and attr.endswith("__"):
            if attr not in ALLOWED_DUNDERS:
                self.refuse(node, t("policy.dunder", attr=attr))
                return False
        elif attr.startswith("_") and not on_own:
            self.refuse(node, t("policy.private_attr", attr=attr))
            return False
        elif attr in DENIED_ATTRS and not on_own:
            self.refuse(node, t("policy.outside", what="." + attr))
            return False
        return True

    def visit_Attribute(self, node: ast.Attribute):
        base = node.value
        on_own = isinstance(base, ast.Name) and base.id in self.own
        if isinstance(base, ast.Name) and self.aliases.get(base.id) in ("os", "sys"):
            module = self.aliases[base.id]
            if node.attr not in MODULES[module]:
                self.refuse(node, t("policy.only", what=f"{base.id}.{node.attr}",
                                    allowed=", ".join(sorted(MODULES[module])), module=module))
            self.allowed_attr_nodes.add(id(base))
        elif self._attr_ok(node, node.attr, on_own):
            dotted = self._chain(node)
            if dotted is not None and isinstance(getattr(node, "ctx", None), (ast.Store, ast.Del)):
                # a library's attribute replaced: what the room's own checks call would be the submission's
                self.refuse(node, t("policy.library_store", what=dotted))
            elif dotted is not None:
                self._dotted_ok(node, dotted)
        self.generic_visit(node)

    def visit_MatchClass(self, node):
        for attr in node.kwd_attrs:             # `case C(__class__=x)` reads an attribute by name
            self._attr_ok(node, attr, False)
        if node.patterns:                       # `case C(x)` reads the attributes C.__match_args__ names
            self.refuse(node, t("policy.match_positional"))
        self.generic_visit(node)

    def visit_ClassDef(self, node):
        # a metaclass decides what isinstance() and class patterns believe
        if any(k.arg == "metaclass" for k in node.keywords) or \
                any(isinstance(b, ast.Name) and b.id == "type" for b in node.bases):
            self.refuse(node, t("policy.metaclass"))
        self.generic_visit(node)

    # -- names
    def visit_Name(self, node: ast.Name):
        if node.id in DENIED_NAMES:
            self.refuse(node, t("policy.denied_name", name=node.id))
        elif self.aliases.get(node.id) in ("os", "sys") and isinstance(node.ctx, ast.Load) and \
                id(node) not in self.allowed_attr_nodes:
            self.refuse(node, t("policy.only_attribute", name=node.id))
        elif node.id in REFLECTIVE and isinstance(node.ctx, ast.Load) and id(node) not in self.allowed_attr_nodes:
            self.refuse(node, t("policy.literal_attr", name=node.id))
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call):
        f = node.func
        called = self._chain(f) if isinstance(f, ast.Attribute) else self.aliases.get(f.id) \
            if isinstance(f, ast.Name) else None
        if called == "functools.wraps" and (len(node.args) > 1 or node.keywords):
            self.refuse(node, t("policy.wraps_names"))
        if isinstance(f, ast.Name) and f.id == "type" and len(node.args) > 1:
            self.refuse(node, t("policy.metaclass"))          # type(name, bases, namespace): a class made by strings
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
                elif isinstance(base, ast.Name) and base.id in self.aliases:
                    if f.id != "getattr":
                        self.refuse(node, t("policy.library_store", what=f"{self.aliases[base.id]}.{attr}"))
                    else:
                        self._dotted_ok(node, f"{self.aliases[base.id]}.{attr}")
            elif not on_self:
                self.refuse(node, t("policy.computed_attr", name=f.id))
        self.generic_visit(node)

    # -- definitions
    def visit_FunctionDef(self, node):
        if node.name in DENIED_DEFS:
            self.refuse(node, t("policy.denied_def", name=node.name))
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef
