"""Problem specs: one YAML file per problem, versioned, validated on load.

Every key is documented here, with its default; a bad spec raises SpecError naming the
file, the field and the fix. No torch here.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

try:  # the C loader is ~5x faster; `list` reads every spec
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover
    from yaml import SafeLoader as _Loader

FORMAT_VERSION = 1
DIFFICULTIES = ("easy", "medium", "hard")
KINDS = ("module", "function", "figure", "formula", "test")
LANGS = ("en", "zh")

# Always forbidden: the fused kernels and modules that would do the exercise for the user.
GLOBAL_FORBIDDEN = (
    "scaled_dot_product_attention",
    "MultiheadAttention",
    "multi_head_attention_forward",
    "flex_attention",
)


class SpecError(ValueError):
    def __init__(self, path: Path | str, field_name: str, problem: str, fix: str):
        self.path, self.field, self.problem, self.fix = str(path), field_name, problem, fix
        super().__init__(f"{path}: field '{field_name}': {problem}. Fix: {fix}")


@dataclass(frozen=True)
class Text:
    """A text in English and Chinese."""
    en: str
    zh: str

    def get(self, lang: str) -> str:
        return self.zh if lang == "zh" else self.en


@dataclass(frozen=True)
class Patch:
    old: str
    new: str


@dataclass(frozen=True)
class Mistake:
    id: str                 # snake_case, unique in the problem; shown in reports and JSON
    diagnosis: Text         # what the user did and what to do instead
    mutant: tuple[Patch, ...]  # the mistake as text patches on reference/<id>.py (verify runs it)


@dataclass(frozen=True)
class Required:
    api: str                # dotted name as written, e.g. "torch.tril"; matched on its last part
    min_count: int = 1      # how many call sites the submission must have


@dataclass(frozen=True)
class Spec:
    path: Path
    id: str
    title: Text
    statement: Text
    difficulty: str
    tags: tuple[str, ...]
    minutes: int            # estimated time to solve, used by the mock interview
    kind: str               # module | function | figure | formula | test (informative)
    interface: tuple[str, ...]  # top-level names the stub defines (generated from the reference)
    hints: tuple[Text, ...]
    mistakes: tuple[Mistake, ...]
    forbidden: tuple[str, ...] = ()   # per-problem names, on top of GLOBAL_FORBIDDEN
    allow: tuple[str, ...] = ()       # names of GLOBAL_FORBIDDEN this problem allows (e.g. a unit test of MHA)
    required: tuple[Required, ...] = ()
    seed_section: int | None = None
    cuda: str = "none"      # none | optional: whether the grader has CUDA-only cases
    time_limit: float = 30.0  # seconds for one grading of one file
    full_float64: bool = False  # the statement asks float64 inputs to stay float64: float32-level error fails
    settings: dict[str, Any] = field(default_factory=dict)  # free-form, handed to the grader

    @property
    def all_forbidden(self) -> tuple[str, ...]:
        return tuple(n for n in dict.fromkeys(GLOBAL_FORBIDDEN + self.forbidden) if n not in self.allow)

    def mistake(self, mid: str) -> Mistake | None:
        return next((m for m in self.mistakes if m.id == mid), None)


_ID = re.compile(r"^[a-z][a-z0-9_]*$")


def _need(d: dict, key: str, path: Path, types, fix: str):
    if key not in d:
        raise SpecError(path, key, "is missing", fix)
    value = d[key]
    if not isinstance(value, types):
        names = types.__name__ if isinstance(types, type) else " or ".join(t.__name__ for t in types)
        raise SpecError(path, key, f"should be {names}, found {type(value).__name__}", fix)
    return value


def _text(value: Any, path: Path, where: str) -> Text:
    if not isinstance(value, dict) or not all(isinstance(value.get(k), str) and value[k].strip() for k in LANGS):
        raise SpecError(path, where, "needs non-empty 'en' and 'zh' texts",
                        f"write it as a mapping: {where}: {{en: ..., zh: ...}}")
    return Text(value["en"].strip(), value["zh"].strip())


def parse_spec(data: Any, path: Path) -> Spec:
    if not isinstance(data, dict):
        raise SpecError(path, "<file>", "is not a YAML mapping", "start the file with 'format_version: 1'")
    version = data.get("format_version")
    if version != FORMAT_VERSION:
        raise SpecError(path, "format_version", f"is {version!r}, this attn-drill reads {FORMAT_VERSION}",
                        f"set format_version: {FORMAT_VERSION}")
    pid = _need(data, "id", path, str, "give the problem id, the same as the file name")
    if not _ID.match(pid) or pid != path.stem:
        raise SpecError(path, "id", f"'{pid}' must be snake_case and equal the file stem '{path.stem}'",
                        f"set id: {path.stem}")
    difficulty = _need(data, "difficulty", path, str, f"one of {', '.join(DIFFICULTIES)}")
    if difficulty not in DIFFICULTIES:
        raise SpecError(path, "difficulty", f"'{difficulty}' is not known", f"use one of {', '.join(DIFFICULTIES)}")
    kind = data.get("kind", "module")
    if kind not in KINDS:
        raise SpecError(path, "kind", f"'{kind}' is not known", f"use one of {', '.join(KINDS)}")
    tags = _need(data, "tags", path, list, "list a few tags, e.g. tags: [masks, module]")
    if not tags or not all(isinstance(t, str) and _ID.match(t.replace("-", "_")) for t in tags):
        raise SpecError(path, "tags", "needs at least one lower-case tag", "e.g. tags: [masks]")
    minutes = _need(data, "minutes", path, int, "estimated minutes to solve, e.g. minutes: 15")
    interface = _need(data, "interface", path, list, "list the names the stub must define")
    if not interface or not all(isinstance(n, str) and n.isidentifier() for n in interface):
        raise SpecError(path, "interface", "needs at least one Python identifier",
                        "e.g. interface: [MultiHeadSelfAttention]")
    hints = _need(data, "hints", path, list, "add at least three hints, each {en: ..., zh: ...}")
    if len(hints) < 3:
        raise SpecError(path, "hints", f"needs at least 3 hints, found {len(hints)}",
                        "add hints, from a gentle nudge to nearly the answer")
    raw_mistakes = _need(data, "mistakes", path, list, "list known mistakes, each with id, diagnosis, mutant")
    if len(raw_mistakes) < 4:
        raise SpecError(path, "mistakes", f"needs at least 4 known mistakes, found {len(raw_mistakes)}",
                        "add mistakes that interviewees really make, each with a mutant patch")
    mistakes = []
    for i, m in enumerate(raw_mistakes):
        where = f"mistakes[{i}]"
        if not isinstance(m, dict) or not isinstance(m.get("id"), str) or not _ID.match(m["id"]):
            raise SpecError(path, f"{where}.id", "needs a snake_case id", "e.g. id: softmax_query_axis")
        patches = m.get("mutant")
        if not isinstance(patches, list) or not patches or not all(
                isinstance(p, dict) and isinstance(p.get("old"), str) and isinstance(p.get("new"), str)
                and p["old"] and p["old"] != p["new"] for p in patches):
            raise SpecError(path, f"{where}.mutant", "needs a list of {old, new} text patches",
                            "write the mistake as patches on the reference, e.g. "
                            "mutant: [{old: 'dim=-1', new: 'dim=-2'}]")
        mistakes.append(Mistake(m["id"], _text(m.get("diagnosis"), path, f"{where}.diagnosis"),
                                tuple(Patch(p["old"], p["new"]) for p in patches)))
    if len({m.id for m in mistakes}) != len(mistakes):
        raise SpecError(path, "mistakes", "has two mistakes with the same id", "give each mistake its own id")
    required = []
    for i, r in enumerate(data.get("required") or []):
        if isinstance(r, str):
            r = {"api": r}
        if not isinstance(r, dict) or not isinstance(r.get("api"), str):
            raise SpecError(path, f"required[{i}]", "needs an api name", "e.g. required: [{api: torch.tril}]")
        required.append(Required(r["api"], int(r.get("min_count", 1))))
    forbidden = data.get("forbidden") or []
    if not isinstance(forbidden, list) or not all(isinstance(f, str) for f in forbidden):
        raise SpecError(path, "forbidden", "should be a list of names", "e.g. forbidden: [repeat_interleave]")
    allow = data.get("allow") or []
    if not isinstance(allow, list) or not all(a in GLOBAL_FORBIDDEN for a in allow):
        raise SpecError(path, "allow", "should list names from the global forbidden list",
                        f"use some of: {', '.join(GLOBAL_FORBIDDEN)}")
    cuda = data.get("cuda", "none")
    if cuda not in ("none", "optional"):
        raise SpecError(path, "cuda", f"'{cuda}' is not known", "use none or optional")
    settings = data.get("settings") or {}
    if not isinstance(settings, dict):
        raise SpecError(path, "settings", "should be a mapping", "e.g. settings: {heads: [2, 3]}")
    known = {"format_version", "id", "title", "statement", "difficulty", "tags", "minutes", "kind",
             "interface", "hints", "mistakes", "forbidden", "allow", "required", "seed_section", "cuda",
             "time_limit", "settings", "full_float64"}
    extra = sorted(set(data) - known)
    if extra:
        raise SpecError(path, extra[0], "is not a known field",
                        f"remove it or use one of: {', '.join(sorted(known))}")
    return Spec(
        path=path, id=pid,
        title=_text(data.get("title"), path, "title"),
        statement=_text(data.get("statement"), path, "statement"),
        difficulty=difficulty, tags=tuple(tags), minutes=minutes, kind=kind,
        interface=tuple(interface),
        hints=tuple(_text(h, path, f"hints[{i}]") for i, h in enumerate(hints)),
        mistakes=tuple(mistakes), forbidden=tuple(forbidden), allow=tuple(allow),
        required=tuple(required),
        seed_section=data.get("seed_section"), cuda=cuda,
        time_limit=float(data.get("time_limit", 30.0)), settings=settings,
        full_float64=bool(data.get("full_float64", False)),
    )


def load_spec(path: Path) -> Spec:
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else "<file>"
        raise SpecError(path, where, f"is not valid YAML ({getattr(exc, 'problem', exc)})",
                        "check indentation and quoting there") from None
    return parse_spec(data, path)
