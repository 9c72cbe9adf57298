"""Problem specs: one YAML file per problem, versioned, validated on load.

Every key is documented here, with its default; a bad spec raises SpecError naming the
file, the field and the fix. No torch here.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import SpecError
from .. import lazyre

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
    id: str                 # snake_case, unique in the problem; kept in JSON, replays and verify
    diagnosis: Text         # what the user did and what to do instead
    mutant: tuple[Patch, ...]  # the mistake as text patches on reference/<id>.py (verify runs it)
    title: Text | None = None  # a few words, shown as "looks like: <title>" (optional: the id made readable)

    @property
    def shown(self) -> Text:
        """The title reports show: the spec's, or the id made readable (softmax_query_axis → softmax query axis)."""
        if self.title is not None:
            return self.title
        words = self.id.replace("_", " ")
        return Text(words, words)


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
    # the statement asks float64 inputs to stay float64 all the way: float32-level error fails in every float64
    # case (a statement that asks it of one step marks the cases that grade it: Case.full_float64)
    full_float64: bool = False
    after: tuple[str, ...] = ()  # problems this one builds on: a study plan puts them first
    imports: tuple[str, ...] = ()  # modules graded code may import here beyond the usual (policy.EXTRA_MODULES)
    settings: dict[str, Any] = field(default_factory=dict)  # free-form, handed to the grader

    @property
    def all_forbidden(self) -> tuple[str, ...]:
        return tuple(n for n in dict.fromkeys(GLOBAL_FORBIDDEN + self.forbidden) if n not in self.allow)

    def mistake(self, mid: str) -> Mistake | None:
        return next((m for m in self.mistakes if m.id == mid), None)


_ID = re.compile(r"^[a-z][a-z0-9_]*$")
MAX_MINUTES = 600         # minutes: an estimate for one interview problem
MAX_TIME_LIMIT = 3600.0   # time_limit: seconds for one grading


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)   # YAML `yes` is a bool, not 1


def _seen(value: Any) -> str:
    s = repr(value)
    return s if len(s) <= 40 else s[:37] + "..."


def _type_name(value: Any) -> str:
    return {type(None): "nothing (null)", bool: "true/false", int: "a number", float: "a number", str: "a text",
            list: "a list", dict: "a mapping"}.get(type(value), type(value).__name__)


def _need(d: dict, key: str, path: Path, types, fix: str):
    if key not in d:
        raise SpecError(path, key, "is missing", fix)
    value = d[key]
    types = types if isinstance(types, tuple) else (types,)
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
        names = " or ".join({int: "a whole number", float: "a number", str: "a text", list: "a list",
                             dict: "a mapping", bool: "true or false"}.get(t, t.__name__) for t in types)
        raise SpecError(path, key, f"should be {names}, found {_type_name(value)} ({_seen(value)})", fix)
    return value


def _number(d: dict, key: str, path: Path, default, lo: float, hi: float, whole: bool, fix: str,
            where: str | None = None):
    """A number in (lo, hi] (a whole one if `whole`), or the default when the key is absent."""
    if key not in d:
        return default
    value, name = d[key], where or key
    ok = _is_int(value) if whole else (_is_int(value) or isinstance(value, float))
    if not ok:
        kind = "a whole number" if whole else "a number"
        raise SpecError(path, name, f"should be {kind}, found {_type_name(value)} ({_seen(value)})", fix)
    if not lo < value <= hi:   # NaN and inf fail this too
        raise SpecError(path, name, f"is {_seen(value)}, outside {lo:g} < {key} <= {hi:g}", fix)
    return value


MAX_TITLE = 64          # characters of a mistake's title: a few words, on the report's first screen


def _outside_code(text: str, fn) -> str:
    """fn applied to the text outside fenced blocks and `code` spans (a figure keeps its spaces)."""
    parts = re.split(r"(```.*?```|`[^`\n]*`)", text, flags=re.S)
    return "".join(p if i % 2 else fn(p) for i, p in enumerate(parts))


_CJK = "\u3000-\u303f\u4e00-\u9fff\uff00-\uffef"
# a space between two Chinese characters, also with Markdown's ** or * beside one of them (**key 维** 上)
_CJK_GAP = lazyre.compile(f"(?<=[{_CJK}])(\\*{{0,2}})[ \t]+(\\*{{0,2}})(?=[{_CJK}])")


def _text(value: Any, path: Path, where: str) -> Text:
    fix = f"write it as a mapping: {where}: {{en: ..., zh: ...}}"
    if not isinstance(value, dict):
        raise SpecError(path, where, f"needs non-empty 'en' and 'zh' texts, found {_type_name(value)} "
                                     f"({_seen(value)})", fix)
    for lang in LANGS:
        if lang not in value:
            raise SpecError(path, where, f"needs non-empty 'en' and 'zh' texts: '{lang}' is missing",
                            f"add {where}.{lang}: ...")
        if not isinstance(value[lang], str) or not value[lang].strip():
            raise SpecError(path, where, f"needs non-empty 'en' and 'zh' texts: '{lang}' is "
                                         f"{_type_name(value[lang])} ({_seen(value[lang])})",
                            f"write {where}.{lang} as a text (quote it if it starts with a YAML symbol)")
    # a folded YAML line leaves a space between two Chinese characters, which Chinese does not have
    zh = _outside_code(value["zh"].strip(), lambda part: _CJK_GAP.sub(r"\1\2", part))
    return Text(value["en"].strip(), zh)


def _names(data: dict, key: str, path: Path, fix: str) -> list:
    """An optional list (null or absent: empty)."""
    value = data.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise SpecError(path, key, f"should be a list, found {_type_name(value)} ({_seen(value)})", fix)
    return value


KNOWN = ("format_version", "id", "title", "statement", "difficulty", "tags", "minutes", "kind", "interface",
         "hints", "mistakes", "forbidden", "allow", "required", "seed_section", "cuda", "time_limit", "settings",
         "full_float64", "after", "imports")


def parse_spec(data: Any, path: Path) -> Spec:
    if not isinstance(data, dict):
        raise SpecError(path, "<file>", f"is not a YAML mapping (found {_type_name(data)})",
                        "start the file with 'format_version: 1'")
    version = data.get("format_version")
    if not _is_int(version) or version != FORMAT_VERSION:
        raise SpecError(path, "format_version", f"is {version!r}, this attn-drill reads {FORMAT_VERSION}",
                        f"set format_version: {FORMAT_VERSION}")
    extra = sorted((k for k in data if k not in KNOWN), key=str)
    if extra:
        raise SpecError(path, str(extra[0]), "is not a known field",
                        f"remove it or use one of: {', '.join(sorted(KNOWN))}")
    pid = _need(data, "id", path, str, "give the problem id, the same as the file name")
    if not _ID.match(pid) or pid != path.stem:
        raise SpecError(path, "id", f"'{pid}' must be snake_case and equal the file stem '{path.stem}'",
                        f"set id: {path.stem}")
    title = _text(data.get("title"), path, "title")
    statement = _text(data.get("statement"), path, "statement")
    difficulty = _need(data, "difficulty", path, str, f"one of {', '.join(DIFFICULTIES)}")
    if difficulty not in DIFFICULTIES:
        raise SpecError(path, "difficulty", f"'{difficulty}' is not known", f"use one of {', '.join(DIFFICULTIES)}")
    kind = data.get("kind", "module")
    if not isinstance(kind, str) or kind not in KINDS:
        raise SpecError(path, "kind", f"{_seen(kind)} is not known", f"use one of {', '.join(KINDS)}")
    tags = _need(data, "tags", path, list, "list a few tags, e.g. tags: [masks, module]")
    if not tags:
        raise SpecError(path, "tags", "needs at least one lower-case tag", "e.g. tags: [masks]")
    for i, t in enumerate(tags):
        if not isinstance(t, str) or not _ID.match(t.replace("-", "_")):
            raise SpecError(path, f"tags[{i}]", f"{_seen(t)} is not a lower-case tag",
                            "use lower-case words, e.g. tags: [masks]")
    minutes = _number(data, "minutes", path, None, 0, MAX_MINUTES, True,
                      f"estimated minutes to solve, a whole number from 1 to {MAX_MINUTES}, e.g. minutes: 15")
    if minutes is None:
        raise SpecError(path, "minutes", "is missing", "estimated minutes to solve, e.g. minutes: 15")
    interface = _need(data, "interface", path, list, "list the names the stub must define")
    if not interface or not all(isinstance(n, str) and n.isidentifier() for n in interface):
        raise SpecError(path, "interface", "needs at least one Python identifier",
                        "e.g. interface: [MultiHeadSelfAttention]")
    hints = _need(data, "hints", path, list, "add at least three hints, each {en: ..., zh: ...}")
    if len(hints) < 3:
        raise SpecError(path, "hints", f"needs at least 3 hints, found {len(hints)}",
                        "add hints, from a gentle nudge to nearly the answer")
    hint_texts = tuple(_text(h, path, f"hints[{i}]") for i, h in enumerate(hints))
    raw_mistakes = _need(data, "mistakes", path, list, "list known mistakes, each with id, diagnosis, mutant")
    if len(raw_mistakes) < 4:
        raise SpecError(path, "mistakes", f"needs at least 4 known mistakes, found {len(raw_mistakes)}",
                        "add mistakes that interviewees really make, each with a mutant patch")
    mistakes = []
    for i, m in enumerate(raw_mistakes):
        where = f"mistakes[{i}]"
        if not isinstance(m, dict):
            raise SpecError(path, where, f"should be a mapping, found {_type_name(m)} ({_seen(m)})",
                            "write it as {id: ..., diagnosis: {en: ..., zh: ...}, mutant: [{old: ..., new: ...}]}")
        if not isinstance(m.get("id"), str) or not _ID.match(m["id"]):
            raise SpecError(path, f"{where}.id", "needs a snake_case id", "e.g. id: softmax_query_axis")
        patches = m.get("mutant")
        if not isinstance(patches, list) or not patches or not all(
                isinstance(p, dict) and isinstance(p.get("old"), str) and isinstance(p.get("new"), str)
                and p["old"] and p["old"] != p["new"] for p in patches):
            raise SpecError(path, f"{where}.mutant", "needs a list of {old, new} text patches",
                            "write the mistake as patches on the reference, e.g. "
                            "mutant: [{old: 'dim=-1', new: 'dim=-2'}]")
        named = None
        if m.get("title") is not None:
            named = _text(m["title"], path, f"{where}.title")
            for lang in LANGS:
                words = named.get(lang)
                if len(words) > MAX_TITLE or "\n" in words:
                    raise SpecError(path, f"{where}.title.{lang}", f"has {len(words)} characters; a title is a few "
                                    f"words on one line (at most {MAX_TITLE})", "say what the mistake is in a few "
                                    "words; the diagnosis says the rest")
        mistakes.append(Mistake(m["id"], _text(m.get("diagnosis"), path, f"{where}.diagnosis"),
                                tuple(Patch(p["old"], p["new"]) for p in patches), named))
    if len({m.id for m in mistakes}) != len(mistakes):
        raise SpecError(path, "mistakes", "has two mistakes with the same id", "give each mistake its own id")
    required = []
    for i, r in enumerate(_names(data, "required", path, "e.g. required: [{api: torch.tril, min_count: 1}]")):
        if isinstance(r, str):
            r = {"api": r}
        if not isinstance(r, dict) or not isinstance(r.get("api"), str) or not r["api"]:
            raise SpecError(path, f"required[{i}]", "needs an api name", "e.g. required: [{api: torch.tril}]")
        count = _number(r, "min_count", path, 1, 0, 1000, True, "e.g. required: [{api: torch.einsum, min_count: 2}]",
                        f"required[{i}].min_count")
        required.append(Required(r["api"], count))
    forbidden = _names(data, "forbidden", path, "e.g. forbidden: [repeat_interleave]")
    if not all(isinstance(f, str) and f for f in forbidden):
        raise SpecError(path, "forbidden", "should be a list of names", "e.g. forbidden: [repeat_interleave]")
    allow = _names(data, "allow", path, f"use some of: {', '.join(GLOBAL_FORBIDDEN)}")
    if not all(isinstance(a, str) and a in GLOBAL_FORBIDDEN for a in allow):
        raise SpecError(path, "allow", "should list names from the global forbidden list",
                        f"use some of: {', '.join(GLOBAL_FORBIDDEN)}")
    cuda = data.get("cuda", "none")
    if not isinstance(cuda, str) or cuda not in ("none", "optional"):
        raise SpecError(path, "cuda", f"{_seen(cuda)} is not known", "use none or optional")
    settings = data.get("settings")
    settings = {} if settings is None else settings
    if not isinstance(settings, dict):
        raise SpecError(path, "settings", f"should be a mapping, found {_type_name(settings)}",
                        "e.g. settings: {heads: [2, 3]}")
    seed_section = data.get("seed_section")
    if seed_section is not None:
        seed_section = _number(data, "seed_section", path, None, -1, 10_000, True,
                               "the seed document's section number, e.g. seed_section: 3 (or remove it)")
    time_limit = float(_number(data, "time_limit", path, 30.0, 0, MAX_TIME_LIMIT, False,
                               f"seconds for one grading, more than 0 and at most {MAX_TIME_LIMIT:g}, "
                               "e.g. time_limit: 30"))
    full_float64 = data.get("full_float64", False)
    if not isinstance(full_float64, bool):
        raise SpecError(path, "full_float64", f"should be true or false, found {_seen(full_float64)}",
                        "write full_float64: true (or remove it)")
    after = _names(data, "after", path, "list the ids of the problems this one builds on, e.g. after: [mhsa, rope]")
    for i, a in enumerate(after):
        if not isinstance(a, str) or not re.fullmatch(r"[a-z][a-z0-9_]*", a):
            raise SpecError(path, f"after[{i}]", f"{_seen(a)} is not a problem id", "e.g. after: [mhsa]")
    imports = _names(data, "imports", path, "list modules graded code may import here, e.g. imports: [unittest]")
    if imports:
        from .policy import EXTRA_MODULES   # only specs that add a module pay for reading the policy
        for i, m in enumerate(imports):
            if m not in EXTRA_MODULES:
                raise SpecError(path, f"imports[{i}]", f"{_seen(m)} is not a module a problem may add",
                                f"use some of: {', '.join(sorted(EXTRA_MODULES))}")
    return Spec(
        path=path, id=pid, title=title, statement=statement,
        difficulty=difficulty, tags=tuple(tags), minutes=minutes, kind=kind,
        interface=tuple(interface), hints=hint_texts,
        mistakes=tuple(mistakes), forbidden=tuple(forbidden), allow=tuple(allow),
        required=tuple(required), seed_section=seed_section, cuda=cuda,
        time_limit=time_limit, settings=settings, full_float64=full_float64, after=tuple(after),
        imports=tuple(imports),
    )


def load_spec(path: Path) -> Spec:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise SpecError(path, "<file>", "is not UTF-8 text", "save it as UTF-8 YAML") from None
    except IsADirectoryError:
        raise SpecError(path, "<file>", "is a folder, not a file", "put the spec in a file of that name") from None
    except OSError as exc:
        raise SpecError(path, "<file>", f"cannot be read ({exc.strerror or exc})",
                        "check that the file exists and is readable") from None
    import yaml          # here, not at the top: a run whose specs are all cached never imports it
    try:  # the C loader is ~5x faster; `list` reads every spec
        from yaml import CSafeLoader as _Loader
    except ImportError:  # pragma: no cover
        from yaml import SafeLoader as _Loader
    try:
        data = yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else "<file>"
        raise SpecError(path, where, f"is not valid YAML ({getattr(exc, 'problem', None) or exc})",
                        "check indentation and quoting there") from None
    except (RecursionError, ValueError, TypeError) as exc:   # nested too deeply; odd scalars
        raise SpecError(path, "<file>", f"cannot be read as YAML ({type(exc).__name__}: {exc})",
                        "write it as plain mappings and lists, as in the other specs") from None
    return parse_spec(data, path)
