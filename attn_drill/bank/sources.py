"""Source-level work on Python files, without torch: syntax check, API scan, stubs, mutants."""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..i18n import t
from ..results import Frame, UserProblem, printable
from .spec import Spec


@dataclass
class Finding:
    line: int
    name: str
    message: str


class MutantError(ValueError):
    pass


def syntax_error(source: str, filename: str) -> dict | None:
    """None if the source parses; else {line, col, message, text}."""
    try:
        compile(source, filename, "exec", dont_inherit=True)
    except SyntaxError as exc:
        return {"line": exc.lineno or 0, "col": exc.offset or 0, "message": printable(exc.msg),
                "text": printable((exc.text or "").rstrip("\n")[:500])}
    except (RecursionError, MemoryError, ValueError) as exc:
        return {"line": 0, "col": 0, "message": type(exc).__name__, "text": ""}
    return None


def _called_names(tree: ast.AST) -> list[tuple[int, str, bool]]:
    """(line, last name part, is_call) for every Name/Attribute and import alias."""
    from .policy import nodes as listed
    nodes = listed(tree)
    calls = {id(n.func) for n in nodes if isinstance(n, ast.Call)}
    out = []
    for node in nodes:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id in ("getattr", "setattr", "delattr", "hasattr") and len(node.args) > 1 and \
                isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
            out.append((node.lineno, node.args[1].value, False))     # an attribute named in a string
        elif isinstance(node, ast.MatchClass):
            out.extend((node.lineno, attr, False) for attr in node.kwd_attrs)   # case C(numpy=f)
        if isinstance(node, ast.Attribute):
            out.append((node.lineno, node.attr, id(node) in calls))
        elif isinstance(node, ast.Name):
            out.append((node.lineno, node.id, id(node) in calls))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                out.append((node.lineno, alias.name.rsplit(".", 1)[-1], False))
                if isinstance(node, ast.ImportFrom) and node.module:
                    out.append((node.lineno, node.module.rsplit(".", 1)[-1], False))
    return out


def scan(source: str, spec: Spec, tree: ast.Module | None = None) -> list[Finding]:
    """Forbidden names used anywhere, and required APIs called too few times."""
    tree = tree or ast.parse(source)
    names = _called_names(tree)
    findings = []
    forbidden = set(spec.all_forbidden)
    seen = set()
    for line, name, _ in sorted(names):
        if name in forbidden and (line, name) not in seen:
            seen.add((line, name))
            findings.append(Finding(line, name, f"uses `{name}`, which this problem forbids: write it by hand"))
    for req in spec.required:
        last = req.api.rsplit(".", 1)[-1]
        count = sum(1 for _, name, is_call in names if name == last and is_call)
        if count < req.min_count:
            times = "once" if req.min_count == 1 else f"{req.min_count} times"
            findings.append(Finding(0, req.api, f"must call `{req.api}` at least {times} "
                                                f"(found {count})"))
    return findings


def make_stub(spec: Spec, reference_source: str) -> str:
    """The user's starting file: the reference's interface with every body replaced."""
    tree = ast.parse(reference_source)
    keep = set(spec.interface)
    body: list[ast.stmt] = []
    found = set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            body.append(node)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in keep:
            found.add(node.name)
            body.append(_hollow(node))
    missing = keep - found
    if missing:
        raise MutantError(f"reference for '{spec.id}' does not define {', '.join(sorted(missing))} "
                          "listed in the spec's interface")
    module = ast.Module(body=body, type_ignores=[])
    code = ast.unparse(ast.fix_missing_locations(module))
    code = re.sub(r"\n+(?=(?:def |class |async def |@))", "\n\n\n", code)  # two blank lines before top-level defs
    header = (f'"""{spec.title.en} / {spec.title.zh}\n\n'
              f"Fill in the bodies below, then grade with:  attn-drill check {spec.id}\n"
              f"Read the statement with:  attn-drill show {spec.id}   (--lang zh)\n"
              f"Stuck?  attn-drill hint {spec.id}\n"
              '"""\n')
    return header + code.replace("    raise NotImplementedError('TODO')",
                                 "    raise NotImplementedError('TODO')  # your code here") + "\n"


def _todo() -> list[ast.stmt]:
    return [ast.Raise(exc=ast.Call(func=ast.Name("NotImplementedError", ast.Load()),
                                   args=[ast.Constant("TODO")], keywords=[]))]


def _docstring(node) -> list[ast.stmt]:
    if node.body and isinstance(node.body[0], ast.Expr) and isinstance(getattr(node.body[0], "value", None),
                                                                      ast.Constant) \
            and isinstance(node.body[0].value.value, str):
        return [node.body[0]]
    return []


def _hollow(node):
    if isinstance(node, ast.FunctionDef):
        node.body = _docstring(node) + _todo()
        return node
    members = []
    for item in node.body:
        if isinstance(item, ast.FunctionDef):
            members.append(_hollow(item))
    node.body = _docstring(node) + (members or [ast.Pass()])
    return node


def mutant_source(spec: Spec, reference_source: str, mistake_id: str) -> str:
    mistake = spec.mistake(mistake_id)
    if mistake is None:
        raise MutantError(f"{spec.id}: no mistake called '{mistake_id}'")
    src = reference_source
    for i, patch in enumerate(mistake.mutant):
        if patch.old not in src:
            raise MutantError(f"{spec.path.name}: mistakes '{mistake_id}' patch {i}: the text {patch.old!r} "
                              f"does not occur in reference/{spec.id}.py. Fix: copy it from the reference")
        src = src.replace(patch.old, patch.new)
    err = syntax_error(src, f"<mutant {mistake_id}>")
    if err:
        raise MutantError(f"{spec.path.name}: mistakes '{mistake_id}': the patched reference does not parse "
                          f"(line {err['line']}: {err['message']})")
    return src


def read(path: Path) -> str:
    return Path(path).read_text(encoding="utf-8-sig")     # a BOM (as some editors save) is no character


def read_regular(path, limit: int = 1 << 20) -> str | None:
    """A file a submission may have made, read without trusting it: None unless it is a regular
    file of at most `limit` bytes (a FIFO would block the reader, a device never end)."""
    import os
    import stat
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except (OSError, ValueError, TypeError):
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        return os.read(fd, limit + 1)[:limit].decode("utf-8", errors="replace")
    except OSError:
        return None
    finally:
        os.close(fd)


def defined_names(tree: ast.Module) -> set[str]:
    """Top-level names a module binds: defs, classes, assignments, imports."""
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
            names |= defined_names(ast.Module(body=[n for n in ast.iter_child_nodes(node)
                                                    if isinstance(n, ast.stmt)], type_ignores=[]))
    return names


@dataclass
class Vetting:
    """What can be told about a file without running it."""
    src: str
    problem: UserProblem | None       # why it may not run (None: it may)
    message: str
    tree: ast.Module | None = None
    helpers: dict = field(default_factory=dict)   # vetted helper files beside it: {module: (path, text)}
    findings: list | None = None      # scan()'s findings, once the file got that far


def vet(path: Path, spec: Spec | None = None) -> tuple[str, UserProblem | None, str]:
    v = vet_tree(path, spec)
    return v.src, v.problem, v.message


def vet_tree(path: Path, spec: Spec | None = None, load: bool = False) -> Vetting:
    """What can be told about a file without running it, in a fraction of a second: it cannot be
    read, does not parse, uses what graded code may not (attn_drill.bank.policy), or defines none of
    the names the problem asks for. Such a file never reaches a room; one that may run goes there
    as the text read here (with its vetted helper files), never read again from the disk."""
    from . import policy
    path = Path(path)
    try:
        src = read(path)
    except (UnicodeDecodeError, OSError) as exc:
        why = t("vet.not_utf8") if isinstance(exc, UnicodeDecodeError) else t("vet.unreadable", why=exc.strerror)
        return Vetting("", UserProblem("syntax", f"{path.name} {why}"), t("vet.your_file", why=why))
    try:
        tree = ast.parse(src, str(path))
    except (SyntaxError, ValueError) as exc:   # ValueError: a NUL byte in the source
        err = syntax_error(src, str(path)) or {"line": 0, "col": 0, "message": str(exc), "text": ""}
        text = err["text"].expandtabs(1)
        col = max(0, err["col"] - (len(text) - len(text.lstrip()))) if err["col"] else 0
        return Vetting(src, UserProblem("syntax", f"SyntaxError: {err['message']}",
                                        [Frame(path.name, err["line"], "<module>", text.strip(), col)]),
                       t("vet.no_parse", line=err["line"], message=err["message"]))
    except (RecursionError, MemoryError):
        return Vetting(src, UserProblem("syntax", t("policy.too_deep")), t("policy.too_deep"))
    if load:          # the judge: what the file's libraries hold under their attributes is judged too
        policy.load_libraries(tree)
    vetted = policy.vet(src, path, tree, spec.imports if spec is not None else ())
    if vetted.refusals:
        first = vetted.refusals[0]
        more = t("vet.and_more", n=len(vetted.refusals) - 1) if len(vetted.refusals) > 1 else ""
        return Vetting(src, UserProblem(first.kind, first.message + more,
                                        [Frame(first.file, first.line, "<module>", first.code)]),
                       t("report.line", line=first.line, message=first.message), tree)
    if spec is not None:
        have = defined_names(tree)
        missing = [n for n in spec.interface if n not in have]
        if len(missing) == len(spec.interface):
            listed = ", ".join(sorted(n for n in have if not n.startswith("_"))) or t("vet.nothing")
            msg = t("vet.missing", name=missing[0], listed=listed, id=spec.id)
            return Vetting(src, UserProblem("missing", msg), msg, tree)
        findings = scan(src, spec, tree)
        used = forbidden_use(src, spec, tree, findings)
        if used:      # a forbidden call: refused here, no case needs to run to say so
            first, code = used[0], _line(src, used[0].line)
            at = re.search(rf"\b{re.escape(first.name)}\b", code)
            msg = t("vet.forbidden", name=first.name)
            more = t("vet.and_more", n=len(used) - 1) if len(used) > 1 else ""
            return Vetting(src, UserProblem("forbidden", msg + more, [Frame(path.name, first.line, "<module>", code,
                                                                             at.start() + 1 if at else 0)]),
                           t("report.line", line=first.line, message=msg), tree)
        return Vetting(src, None, "", tree, vetted.helpers, findings)
    return Vetting(src, None, "", tree, vetted.helpers)


def forbidden_use(src: str, spec: Spec, tree: ast.Module, findings: list[Finding] | None = None) -> list[Finding]:
    """The forbidden names a file uses, where it uses them (found before it runs: refused at once)."""
    return [f for f in (scan(src, spec, tree) if findings is None else findings) if f.line]


def _line(src: str, n: int) -> str:
    lines = src.splitlines()
    return lines[n - 1].strip() if 0 < n <= len(lines) else ""
