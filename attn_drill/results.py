"""Plain results the engine returns and the renderers read. No torch: they cross a process boundary as JSON."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any
from . import lazyre

PASS, FAIL, ERROR, SKIP = "pass", "fail", "error", "skip"

# control characters (but tab and newline), DEL, C1 controls, the bidi and zero-width format characters,
# lone surrogates, and U+FFFE/U+FFFF: none
# may reach a terminal (escape sequences), an XML file (invalid there) or a page from user code
_UNPRINTABLE = lazyre.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069"
                               "\ufeff\ud800-\udfff\ufffe\uffff]")


def printable(text: str) -> str:
    """Text from code under judgement (its output, its messages, its file names), made safe to show
    anywhere: each control character becomes its escape (`\\x1b`), the rest is kept."""
    if not isinstance(text, str):
        text = str(text)
    return _UNPRINTABLE.sub(lambda m: repr(m.group(0))[1:-1], text)


def one_line(text: str) -> str:
    """A name from code under judgement (a student's folder, a file) shown on one line: printable,
    and its line breaks and tabs as their escapes too."""
    return printable(text).replace("\n", "\\n").replace("\t", "\\t")


@dataclass
class Frame:
    file: str
    line: int
    func: str
    code: str = ""
    col: int = 0              # 1-based column in `code` the error points at (0: not known)


@dataclass
class UserProblem:
    """Why the code could not be graded, or crashed: syntax, import, interface, exception, timeout..."""
    kind: str                 # syntax | import | missing | interface | exception | timeout | crash | forbidden
    message: str
    frames: list[Frame] = field(default_factory=list)

    @classmethod
    def from_dict(cls, d):
        return cls(d["kind"], d["message"], [Frame(**f) for f in d.get("frames", [])])

    @property
    def unwritten(self) -> bool:
        """A part not written yet: NotImplementedError raised by the code's own `raise` line (the stub's),
        not by a library call on that line (torch's "not implemented for 'BFloat16'" is a real failure)."""
        if not self.message.startswith("NotImplementedError"):
            return False
        code = self.frames[-1].code if self.frames else ""
        return not code or (code.lstrip().startswith("raise") and "NotImplementedError" in code)


@dataclass
class Diagnosis:
    mistake: str
    en: str
    zh: str


@dataclass
class CaseResult:
    name: str
    status: str                         # pass | fail | error | skip
    shapes: str = ""
    dtype: str = ""
    note: str = ""
    forward: str = "-"                  # pass | fail | -
    gradient: str = "-"                 # pass | fail | -
    max_error: float | None = None      # of the worst-judged tensor
    allowed: float | None = None
    time_ms: float = 0.0
    message: str = ""                   # one line: why it failed / was skipped
    tensor: str = ""                    # the tensor the numbers and detail refer to ("out", "grad x", ...)
    compare: dict | None = None         # compare.compare() summary for that tensor
    detail: dict | None = None          # window + heatmap, for the first failing case
    problem: UserProblem | None = None  # an exception inside this case
    diagnosis: Diagnosis | None = None
    checks: list[str] = field(default_factory=list)  # messages of failed custom checks
    warning: str = ""                   # passed, with something to say (float32-level error in float64)
    float32_level_error: float | None = None  # float64 case: the relative error at float32 level found
    float64_bound: float | None = None  # ... and the bound it failed, where the case grades a float64 step

    @classmethod
    def from_dict(cls, d):
        d = dict(d)
        if d.get("problem"):
            d["problem"] = UserProblem.from_dict(d["problem"])
        for key in ("diagnosis", "symptom"):
            if d.get(key):
                d[key] = Diagnosis(**d[key])
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


@dataclass
class Report:
    problem: str
    file: str
    seed: int
    status: str = PASS                   # pass | fail | error
    message: str = ""
    cases: list[CaseResult] = field(default_factory=list)
    problem_error: UserProblem | None = None   # the file could not be graded at all
    findings: list[dict] = field(default_factory=list)  # forbidden / required API findings
    diagnosis: Diagnosis | None = None  # a known mistake (its mutant matched)
    symptom: Diagnosis | None = None    # when no known mistake matched: what the failures have in common
    replay: str = ""
    output: str = ""                     # what the user's code printed
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0
    full: bool = False
    where: str = ""                      # the file as commands name it: the path as typed, "" for ./<id>.py

    @property
    def passed(self) -> bool:
        return self.status == PASS

    def first_failure(self) -> CaseResult | None:
        return next((c for c in self.cases if c.status in (FAIL, ERROR)), None)

    def passed_key(self) -> str:
        """The message a pass is said with: with "(outputs and gradients)" only where a case compared a
        gradient (a cache, a sampler or a figure has outputs alone)."""
        return "report.all_passed" if any(c.gradient not in ("-", None, "") for c in self.cases) else \
            "report.all_passed_outputs"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d):
        d = dict(d)
        d["cases"] = [CaseResult.from_dict(c) for c in d.get("cases", [])]
        if d.get("problem_error"):
            d["problem_error"] = UserProblem.from_dict(d["problem_error"])
        for key in ("diagnosis", "symptom"):
            if d.get(key):
                d[key] = Diagnosis(**d[key])
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})
