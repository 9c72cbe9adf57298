"""What the CLI and the judge process say to each other: one JSON object per line each way.

Requests are written only through the types below (each serialises itself), and read by the
judge's server loop (attn_drill.judge.server) with `from_wire`. Every reply is {"ok": true, ...}
or {"ok": false, "error": <text>, "kind": <one of ERROR_KINDS>, "traceback": <text, for a bug>}.
No torch: the client side imports this module.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields

ERROR_KINDS = ("usage", "bank", "cancelled", "user", "bug")


@dataclass
class Request:
    """A request of some operation; `op` names it (the server's table of operations)."""
    op = ""

    def to_wire(self) -> dict:
        return {"op": self.op, **asdict(self)}

    @classmethod
    def from_wire(cls, d: dict):
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


@dataclass
class Grade(Request):
    """Grade one file. `sandbox`: a scratch folder holding it, graded inside an OS sandbox; without
    one, `writable` limits where the code may write and `hide` adds folders it may not touch."""
    op = "grade"
    problem: str = ""
    path: str = ""
    seed: int = 0
    full: bool = False
    case: str | None = None
    fail_fast: bool = False
    diagnose: bool = True
    time_limit: float = 30.0
    sandbox: str | None = None
    shown: str | None = None              # the file as reports name it
    typed: str | None = None              # the file as the user typed it (replay commands)
    writable: list[str] | None = None
    hide: list[str] | None = None
    lang: str | None = None               # the language of the report (default: the client's)


@dataclass
class Bench(Request):
    """Time one file against the reference and torch's fused attention (attn_drill.judge.timing)."""
    op = "bench"
    problem: str = ""
    path: str = ""
    seed: int = 0
    device: str = "auto"
    max_seconds: float = 10.0
    time_limit: float = 120.0
    threads: int = 1


@dataclass
class Questions(Request):
    """What is wrong with a problem's follow-up questions, their proofs run with the reference."""
    op = "questions"
    problem: str = ""


@dataclass
class Sandbox(Request):
    """Start (`open`) or end (`close`; all of them: `scratch` None) the OS sandbox of a scratch folder,
    or end every process a student's code left running in it and copy its folder in again (`scrub`)."""
    op = "sandbox"
    action: str = "open"                  # open | scrub | close
    scratch: str | None = None


@dataclass
class Simple(Request):
    """ping (answered at once), cancel (the grading in progress stops; no answer), quit."""
    op: str = "ping"

    def to_wire(self) -> dict:
        return {"op": self.op}


REQUESTS = {"grade": Grade, "bench": Bench, "questions": Questions, "sandbox": Sandbox}


def parse(d) -> Request:
    """A request read by the server; ValueError for anything else."""
    if not isinstance(d, dict) or not isinstance(d.get("op"), str):
        raise ValueError("a request is a JSON object with an op")
    kind = REQUESTS.get(d["op"])
    return kind.from_wire(d) if kind else Simple(d["op"])


def failure(kind: str, error: str, traceback: str | None = None) -> dict:
    assert kind in ERROR_KINDS
    out = {"ok": False, "kind": kind, "error": error}
    if traceback:
        out["traceback"] = traceback
    return out

