"""The house's walls, read off the import graph of attn_drill (every import, deferred ones too):

  - no import circles;
  - the room (attn_drill/room/, what runs beside submitted code) imports nothing of the judge, the
    bank, the progress, the CLI, the verbs or the render layer;
  - rich is imported only by the render layer;
  - torch is never imported on the way of `--help`, `list`, `show` or any verb (the CLI side);
  - every relative import names a module that exists.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "attn_drill"


def _modules() -> dict[str, Path]:
    out = {}
    for p in PKG.rglob("*.py"):
        parts = p.relative_to(PKG.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = p
    return out


MODULES = _modules()


def _imports(name: str) -> list[tuple[str, int]]:
    """(imported module, line) for every import in the module, resolved to a module of the package
    where it is one (else the top-level name, e.g. 'torch')."""
    path = MODULES[name]
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base[: len(base) - node.level + (1 if path.name == "__init__.py" else 0)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            for a in node.names:
                full = f"{mod}.{a.name}"
                out.append((full if full in MODULES else mod, node.lineno))
    return out


def _graph() -> dict[str, set[str]]:
    g = {}
    for name in MODULES:
        deps = set()
        for mod, _ in _imports(name):
            while mod not in MODULES and "." in mod:
                mod = mod.rsplit(".", 1)[0]
            if mod in MODULES and mod != name:
                deps.add(mod)
        g[name] = deps
    return g


def test_no_import_circles():
    graph = _graph()
    index, low, stack, on, circles, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))
    for v in graph:
        if v not in index:
            visit(v)
    assert not circles, f"import circles: {circles}"


ROOM_MAY_IMPORT = {"attn_drill.i18n", "attn_drill.messages", "attn_drill.results"}


def test_the_room_imports_nothing_of_the_judge_side():
    wrong = [f"{name}: {mod}" for name in MODULES if name.startswith("attn_drill.room")
             for mod in _graph()[name] if not mod.startswith("attn_drill.room") and mod not in ROOM_MAY_IMPORT]
    assert not wrong, wrong


def test_rich_only_in_the_render_layer():
    wrong = [f"{MODULES[name].relative_to(PKG.parent)}:{line}" for name in MODULES
             if not name.startswith("attn_drill.render")
             for mod, line in _imports(name) if mod.split(".")[0] == "rich"]
    assert not wrong, wrong


CLI_SIDE = ("attn_drill.cli", "attn_drill.verbs", "attn_drill.render", "attn_drill.progress", "attn_drill.client",
            "attn_drill.protocol", "attn_drill.errors", "attn_drill.rules", "attn_drill.i18n", "attn_drill.results")


@pytest.mark.parametrize("prefix", CLI_SIDE)
def test_the_cli_side_never_imports_torch(prefix):
    wrong = [f"{name}:{line}" for name in MODULES if name == prefix or name.startswith(prefix + ".")
             for mod, line in _imports(name) if mod.split(".")[0] == "torch"]
    assert not wrong, wrong


def test_every_relative_import_names_a_module():
    wrong = []
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = name.split(".")
                base = base[: len(base) - node.level + (1 if path.name == "__init__.py" else 0)]
                mod = ".".join(base + ([node.module] if node.module else []))
                if mod not in MODULES:
                    wrong.append(f"{name}:{node.lineno}: {mod}")
    assert not wrong, wrong


@pytest.mark.xdist_group("layout")
def test_the_suites_process_groups_are_honoured(request):
    """The tests of one problem share a process (conftest.py: its judge keeps that problem's work), and
    the tests of the graded fixture class one grading: both rest on pytest-xdist seeing the groups."""
    if not hasattr(request.config, "workerinput") or not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not run under pytest-xdist --dist loadgroup")
    assert request.node.nodeid.endswith("@layout"), request.node.nodeid
