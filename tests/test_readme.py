"""Every command example in the docs runs, so none can go stale.

The test reads README.md, AUTHORING.md and every docs/*.md itself. An example is a line of a
fenced block (bash, sh, console, text or untagged) that runs `attn-drill` (or `pip`, `python`), or
an inline code span of the prose that starts with `attn-drill `, `pip install ` or `python `.

- `attn-drill ...` examples run one by one, each in a fresh workspace (a temporary folder holding
  what RULES says it needs), through `python -m attn_drill`, with NO_COLOR=1, COLUMNS=100, a timeout
  and stdin that is not a terminal. The exit code must be the one RULES gives, and no output may
  hold a Traceback. A command the same after placeholders (`<id>`, `FILE`, CI expressions) runs once.
- The ```bash blocks of a doc (the Quickstart) run in order in one shell, as if pasted one after the
  other, from a stand-in for the root of a clone. `pip`, `python3 -m venv` and `python -m pytest` are
  replaced there by stand-ins that check statically what they would use (the constraints file, the
  project and its extras, the test extra) instead of installing or running the suite.
- `pip install` and `python benchmarks/...` spans are checked statically; `python -c` spans run.

An example that no rule matches fails: add a rule to RULES when you add an example to the docs.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ("README.md", "AUTHORING.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")))
BLOCK_LANGS = {"", "bash", "sh", "shell", "console", "text"}
TIMEOUT_S = 180          # one command; generous, so a busy machine does not fail the test
PARALLEL = 2             # commands run at the same time (each grading spawns a worker importing torch)

# Placeholders the docs use in place of a real value.
PLACEHOLDERS = {"<id>": "mhsa", "FILE": "mhsa.py", "${{ matrix.shard }}": "1", "${{ github.run_number }}": "7"}
# Package indexes the docs may name.
KNOWN_INDEXES = {"https://download.pytorch.org/whl/cpu"}


# ---------------------------------------------------------------- reading the docs
@dataclass(frozen=True)
class Example:
    doc: str
    line: int
    text: str           # as written, comments stripped, continuation lines joined
    where: str          # "block", "inline" or "bash"

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}:{self.text[:60]}"


def _strip_comment(line: str) -> str:
    """Drop a trailing `# comment` that is outside quotes."""
    quote = None
    for i, c in enumerate(line):
        if quote:
            quote = None if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or line[i - 1].isspace()) and not line[i:].startswith("#!"):
            return line[:i].rstrip()
    return line.rstrip()


def _is_command(text: str) -> bool:
    return bool(re.match(r"(\$ )?(attn-drill( |$)|pip |python3? |docker )", text)) or " attn-drill " in text


def collect(doc: str) -> list[Example]:
    lines = (ROOT / doc).read_text(encoding="utf-8").splitlines()
    out: list[Example] = []
    prose: list[tuple[int, str]] = []
    i = 0
    while i < len(lines):
        m = re.match(r"\s*```(\S*)", lines[i])
        if not m:
            prose.append((i + 1, lines[i]))
            i += 1
            continue
        lang, i = m.group(1).lower(), i + 1
        while i < len(lines) and not re.match(r"\s*```", lines[i]):
            start, text = i + 1, lines[i]
            while text.endswith("\\") and i + 1 < len(lines):
                i += 1
                text = text[:-1].rstrip() + " " + lines[i].strip()
            text = _strip_comment(text.strip())
            if text.startswith("$ "):
                text = text[2:]
            if lang in ("bash", "sh", "shell") and text:  # pasted as a whole: every line counts
                out.append(Example(doc, start, text, "bash"))
            elif lang in BLOCK_LANGS and text and _is_command(text):
                out.append(Example(doc, start, text, "block"))
            i += 1
        i += 1
    # inline spans, paragraph by paragraph (a span may wrap onto the next line)
    para: list[tuple[int, str]] = []
    for n, line in prose + [(0, "")]:
        if line.strip():
            para.append((n, line))
            continue
        text = "\n".join(t for _, t in para)
        for m in re.finditer(r"`([^`]+)`", text):
            span = " ".join(m.group(1).split())
            if re.match(r"(attn-drill( |$)|pip install |python3? )", span):
                out.append(Example(doc, para[0][0] + text[:m.start()].count("\n"), span, "inline"))
        para = []
    return sorted(out, key=lambda e: e.line)


EXAMPLES = [e for doc in DOCS for e in collect(doc)]
RUNNABLE = [e for e in EXAMPLES if e.where != "bash"]
BASH_DOCS = sorted({e.doc for e in EXAMPLES if e.where == "bash"})


def _argv(text: str) -> list[str]:
    for key, value in PLACEHOLDERS.items():
        text = re.sub(rf"(?<!\w){re.escape(key)}(?!\w)", value, text)
    return shlex.split(text)


def _split_shell(line: str) -> list[str]:
    """The simple commands of a shell line: split on && ; ( ) outside quotes."""
    parts, cur, quote, i = [], "", None, 0
    while i < len(line):
        c = line[i]
        if quote:
            quote = None if c == quote else quote
            cur += c
        elif c in "'\"":
            quote = c
            cur += c
        elif line.startswith("&&", i) or c in ";()":
            parts.append(cur.strip())
            cur = ""
            i += 1 if c != "&" else 2
            continue
        else:
            cur += c
        i += 1
    parts.append(cur.strip())
    return [p for p in parts if p]


# ---------------------------------------------------------------- static checks (pip, pytest, scripts)
def _pyproject(folder: Path) -> dict:
    text = (folder / "pyproject.toml").read_text(encoding="utf-8")
    try:
        import tomllib
        return tomllib.loads(text)
    except ModuleNotFoundError:  # Python 3.10: enough of the file for these checks
        extras = re.search(r"\[project\.optional-dependencies\]\n(.*?)(\n\[|\Z)", text, re.S)
        names = re.findall(r"^(\w[\w-]*)\s*=", extras.group(1), re.M) if extras else []
        deps = re.search(r"^dependencies\s*=\s*\[(.*?)\]", text, re.S | re.M)
        return {"project": {"optional-dependencies": {n: [] for n in names},
                            "dependencies": re.findall(r'"([^"]+)"', deps.group(1)) if deps else []},
                "tool": {"pytest": {"ini_options": {"testpaths": ["tests"]}}}}


def pip_problems(args: list[str], cwd: Path) -> list[str]:
    """What would make `pip <args>` fail or do something else than the docs say, checked from files."""
    if not args or args[0] != "install":
        return [f"only `pip install` is expected in the docs, not `pip {' '.join(args)}`"]
    problems, targets, it = [], [], iter(args[1:])
    for a in it:
        if a in ("-c", "--constraint"):
            f = next(it, "")
            if not (cwd / f).is_file():
                problems.append(f"constraints file {f} not found in {cwd}")
        elif a in ("-i", "--index-url", "--extra-index-url"):
            url = next(it, "")
            if url not in KNOWN_INDEXES:
                problems.append(f"unknown package index {url}")
        elif a in ("-e", "--editable"):
            targets.append(next(it, ""))
        elif a in ("-q", "-U", "--upgrade"):
            pass
        elif a.startswith("-"):
            problems.append(f"unexpected pip option {a}")
        else:
            targets.append(a)
    if not targets:
        problems.append("nothing to install")
    for t in targets:
        m = re.fullmatch(r"(\.[^\[]*)(?:\[([^\]]*)\])?", t)
        if m:  # the project itself, with extras
            folder = (cwd / m.group(1)).resolve()
            if not (folder / "pyproject.toml").is_file():
                problems.append(f"{t}: no pyproject.toml in {folder}")
                continue
            project = _pyproject(folder)["project"]
            for extra in filter(None, (m.group(2) or "").split(",")):
                if extra.strip() not in project.get("optional-dependencies", {}):
                    problems.append(f"{t}: pyproject.toml defines no extra {extra!r}")
        else:  # a package: one the project depends on
            deps = {re.split(r"[<>=!~\[; ]", d, maxsplit=1)[0] for d in _pyproject(ROOT)["project"]["dependencies"]}
            if t not in deps:
                problems.append(f"{t} is not a dependency of attn-drill")
    return problems


def pytest_problems(cwd: Path) -> list[str]:
    """`python -m pytest` from cwd: pytest and the test extra installed, the test folder there."""
    problems = []
    extras = _pyproject(cwd)["project"].get("optional-dependencies", {}).get("test", [])
    for req in extras or ["pytest"]:
        name = re.split(r"[<>=!~\[; ]", req, maxsplit=1)[0]
        probe = f"import importlib.metadata as m; m.version({name!r})"   # a distribution, not a module name
        if subprocess.run([sys.executable, "-c", probe], capture_output=True).returncode:
            problems.append(f"the test extra's {name} is not installed")
    for p in _pyproject(cwd).get("tool", {}).get("pytest", {}).get("ini_options", {}).get("testpaths", []):
        if not (cwd / p).is_dir():
            problems.append(f"testpath {p} not found in {cwd}")
    return problems


# ---------------------------------------------------------------- running commands
@dataclass
class Result:
    argv: list[str]
    rc: int | None
    out: str            # stdout and stderr
    stdout: str = ""
    ws: Path | None = None
    note: str = ""
    seconds: float = 0.0

    @property
    def flat(self) -> str:  # whitespace-normalised: rich wraps lines at COLUMNS
        return " ".join(self.out.split())


# the examples run in threads while pytest sets and unsets PYTEST_CURRENT_TEST in os.environ: read once,
# here, in the main thread (iterating os.environ while another thread changes it raises KeyError)
_BASE_ENV = {k: v for k, v in os.environ.items()
             if k not in ("ATTN_DRILL_LANG", "ATTN_DRILL_BANK", "FORCE_COLOR", "CLICOLOR_FORCE", "PYTEST_ADDOPTS",
                          "PYTEST_CURRENT_TEST")}


def _env(home: Path) -> dict:
    env = dict(_BASE_ENV)
    env.update(NO_COLOR="1", COLUMNS="100", LINES="40", TERM="dumb", PYTHONUNBUFFERED="1",
               XDG_CONFIG_HOME=str(home / "config"), ATTN_DRILL_HOME=str(home / "progress"),
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), _BASE_ENV.get("PYTHONPATH")])))
    return env


def _cli(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "attn_drill", *args]


def run_plain(args: list[str], ws: Path, home: Path) -> Result:
    t0 = time.perf_counter()
    try:
        p = subprocess.run(_cli(args), cwd=ws, env=_env(home), stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        return Result(args, None, f"timed out after {TIMEOUT_S} s\n{exc.stdout or ''}{exc.stderr or ''}", ws=ws)
    return Result(args, p.returncode, p.stdout + p.stderr, p.stdout, ws, seconds=time.perf_counter() - t0)


def run_until(args: list[str], ws: Path, home: Path, pattern: str) -> Result:
    """Start it, wait until the output matches `pattern`, then press Ctrl-C (SIGINT to its group)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(_cli(args), cwd=ws, env=_env(home), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, start_new_session=True)
    chunks: list[str] = []
    reader = threading.Thread(target=lambda: chunks.extend(iter(lambda: p.stdout.read(1) or "", "")), daemon=True)
    reader.start()
    seen = False
    while time.perf_counter() - t0 < TIMEOUT_S and p.poll() is None:
        if re.search(pattern, " ".join("".join(chunks).split())):
            seen = True
            break
        time.sleep(0.1)
    if p.poll() is None:
        os.killpg(p.pid, signal.SIGINT)
    try:
        rc = p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        rc = None
    reader.join(timeout=5)
    note = "" if seen else f"never printed /{pattern}/ before Ctrl-C"
    return Result(args, rc, "".join(chunks), ws=ws, note=note, seconds=time.perf_counter() - t0)


# ---------------------------------------------------------------- workspaces
def _ids() -> list[str]:
    return sorted(p.stem for p in (ROOT / "problems").glob("*.yaml"))


def _problem(args: list[str]) -> tuple[str, str | None]:
    """The problem id a command names (default mhsa) and the file path it names, if any."""
    ids = set(_ids())
    pos = [a for a in args[1:] if not a.startswith("-")]
    pid = next((a for a in pos if a in ids), "mhsa")
    path = next((a for a in pos if a.endswith(".py")), None)
    return pid, path


def _stub(pid: str) -> str:
    from attn_drill.verbs.scaffold import stub_text
    return stub_text(pid)


def ws_empty(args, ws, home):
    pass


def ws_stub(args, ws, home):
    """The untouched stub at the path the command names (./<id>.py by default)."""
    pid, path = _problem(args)
    target = ws / (path or f"{pid}.py")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(_stub(pid), encoding="utf-8")


def ws_ref(args, ws, home):
    """A passing solution (a copy of the reference) at the path the command names."""
    pid, path = _problem(args)
    target = ws / (path or f"{pid}.py")
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "reference" / f"{pid}.py", target)


def ws_class(args, ws, home):
    """submissions/: alice passes mhsa, bob hands in the stub (and a helper), carol nothing."""
    sub = ws / "submissions"
    for who in ("alice", "bob", "carol"):
        (sub / who).mkdir(parents=True)
    shutil.copy(ROOT / "reference" / "mhsa.py", sub / "alice" / "mhsa.py")
    (sub / "bob" / "mhsa.py").write_text(_stub("mhsa"), encoding="utf-8")
    (sub / "bob" / "helpers.py").write_text("SCALE = 1.0\n", encoding="utf-8")


def ws_interrupted_class(args, ws, home):
    """The class of ws_class, its grading stopped by Ctrl-C after the first grade."""
    ws_class(args, ws, home)
    r = run_until(["grade", "submissions/", "--workers", "1"], ws, home, r"\b(PASS|FAIL|missing)\b \S+/mhsa")
    assert r.rc == 130 and "--resume" in r.flat, f"could not interrupt a grading to resume:\n{r.out}"


def ws_paused_mock(args, ws, home):
    """A mock interview started here and paused with Ctrl-C."""
    r = run_until(["mock", "--count", "1", "-p", "mhsa"], ws, home, r"with your editor")
    assert r.rc == 0 and "paused" in r.flat, f"could not pause a mock to resume:\n{r.out}"


# ---------------------------------------------------------------- the rules
@dataclass
class Rule:
    pattern: str                      # re.fullmatch on the arguments after `attn-drill`, joined by spaces
    workspace: object                 # ws_* above
    rc: object                        # the expected exit code, or a function of the result
    why: str                          # why that code (and how the command is run, when not as written)
    until: str | None = None          # long-running: Ctrl-C once the output matches this
    extra: list[str] = field(default_factory=list)  # arguments appended (kept short: bench, verify)
    help_only: bool = False           # a verb named in passing: its --help
    expect: list[str] = field(default_factory=list)  # regexes the (normalised) output must match
    check: object = None              # fn(result) -> None, asserts more


def _cuda() -> bool:
    out = subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda.is_available())"],
                         capture_output=True, text=True)
    return out.stdout.strip() == "True"


def _sandbox() -> bool:
    from attn_drill.judge import sandbox
    return sandbox.available()[0]


def _sandbox_or_said_why(r: Result):
    assert r.rc == 0 or "--sandbox:" in r.flat, "exit 2 without saying why no sandbox"


def _json_stdout(key: str, value):
    def check(r: Result):
        data = json.loads(r.stdout)
        assert data.get(key) == value, f"{key} is {data.get(key)!r}, expected {value!r}"
    return check


def _file_kept(r: Result):
    pid, path = _problem(r.argv)
    target = r.ws / (path or f"{pid}.py")
    assert target.read_text(encoding="utf-8") == (ROOT / "reference" / f"{pid}.py").read_text(encoding="utf-8")


def _stub_written(r: Result):
    assert (r.ws / f"{_problem(r.argv)[0]}.py").is_file(), "no stub written"


def _json_out(r: Result):
    json.loads(r.stdout)


def _html_written(r: Result):
    """The page --html names: one self-contained HTML document."""
    page = r.ws / r.argv[r.argv.index("--html") + 1]
    text = page.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and "<script" not in text.lower(), f"{page} is not the report"


def _only_findings(r: Result):
    """--format lines / github of a passing solution: no finding, so nothing on stdout."""
    assert r.stdout.strip() == "", f"a passing solution printed findings:\n{r.stdout}"


def _cuda_or_said_why(r: Result):
    assert r.rc == 0 or "no CUDA device" in r.flat, "exit 1 without saying CUDA is missing"


def _grades_written(r: Result):
    """results.csv and junit.xml in --out (results-shard2of4.csv ... with --shard 2/4)."""
    out = Path(r.argv[r.argv.index("--out") + 1]) if "--out" in r.argv else Path("grades")
    shard = r.argv[r.argv.index("--shard") + 1].replace("/", "of") if "--shard" in r.argv else None
    for stem, ext in (("results", "csv"), ("junit", "xml")):
        name = f"{stem}-shard{shard}.{ext}" if shard else f"{stem}.{ext}"
        assert (r.ws / out / name).is_file(), f"{out / name} not written"


# Expected exit codes, per command pattern (first match wins):
#
# | command                            | workspace                        | exit | why                             |
# |------------------------------------|----------------------------------|------|---------------------------------|
# | list, show, hint, progress, new    | empty                            | 0    |                                 |
# | solution ID                        | the untouched stub               | 1    | not passed, no terminal to ask  |
# | reset ID                           | a changed file (the reference)   | 1    | no terminal to confirm; kept    |
# | check --sandbox FILE               | the reference                    | 0/2  | 2 where no OS sandbox can be    |
# |                                    |                                  |      | made (classroom.md says so)     |
# | check ... (any other form)         | the reference at the named path  | 0    | a passing solution              |
# | watch ID                           | the untouched stub               | 0    | Ctrl-C after the first verdict  |
# | mock (a new one)                   | empty                            | 0    | Ctrl-C pauses it                |
# | mock --resume                      | a paused mock                    | 0    | Ctrl-C pauses it again          |
# | grade ... --resume                 | that class, Ctrl-C after 1 grade | 0    | grading completed               |
# | grade ... --fail-under 80          | class of 3, 1 passes             | 1    | 33% < 80%                       |
# | grade ...                          | class of 3, 1 passes             | 0    | grading completed               |
# | bench ... --device cuda            | the reference                    | 0/1  | 1 on a machine without CUDA     |
# | bench ...                          | the reference                    | 0    | run with --max-seconds 1        |
# | verify (whole bank)                | empty                            | 0    | run on mhsa: test_bank.py does  |
# |                                    |                                  |      | the whole bank                  |
# | grade, bench named in passing      |                                  | 0    | their --help                    |
# | (Quickstart) check of the stub     | what the lines before it made    | 1    | the untouched stub fails        |
# No example exits 2 except where the docs say so. The Quickstart: test_bash_blocks_pasted_in_order.
RULES = [
    Rule(r"list( .*)?", ws_empty, 0, "the bank", expect=[r"mhsa"]),
    Rule(r"show \S+( .*)?", ws_empty, 0, "a statement"),
    Rule(r"new \S+", ws_empty, 0, "writes the stub", check=_stub_written),
    Rule(r"hint \S+( .*)?", ws_empty, 0, "the first hint", expect=[r"hint 1 of"]),
    Rule(r"progress( .*)?", ws_empty, 0, "an empty record"),
    Rule(r"solution \S+", ws_stub, 1, "not passed yet and no terminal to ask on: declined",
         expect=[r"needs confirmation", r"--yes"]),
    Rule(r"reset \S+( \S+\.py)?", ws_ref, 1, "a changed file and no terminal to confirm: declined, file kept",
         expect=[r"needs confirmation"], check=_file_kept),
    Rule(r"check( .*)? --sandbox( .*)?", ws_ref, lambda r: 0 if _sandbox() else 2,
         "0 where an OS sandbox can be made, else 2 (a usage error that says why)", check=_sandbox_or_said_why),
    Rule(r"check( .*)? --format (lines|github)( .*)?", ws_ref, 0, "a passing solution: no finding, nothing printed",
         check=_only_findings),
    Rule(r"check( .*)? --html \S+( .*)?", ws_ref, 0, "a passing solution; the page written", expect=[r"\bPASS\b"],
         check=_html_written),
    Rule(r"check( .*)? --json( .*)?", ws_ref, 0, "a passing solution", check=_json_stdout("status", "pass")),
    Rule(r"check( .*)?", ws_ref, 0, "a passing solution", expect=[r"\bPASS\b"]),
    Rule(r"watch \S+ --format lines", ws_stub, 0, "Ctrl-C after the first check's end line ends it",
         until=r"attn-drill watch: checked \S+ FAIL", expect=[r"stopped watching after 1 check"]),
    Rule(r"watch \S+( .*)?", ws_stub, 0, "Ctrl-C after the first verdict ends it",
         until=r"check #1 .*\b(FAIL|PASS)\b", expect=[r"stopped watching after 1 check"]),
    Rule(r"mock --history( .*)?", ws_empty, 0, "no mocks yet"),
    Rule(r"mock --resume( .*)?", ws_paused_mock, 0, "Ctrl-C pauses it again",
         until=r"with your editor", expect=[r"paused .* left", r"attn-drill mock --resume"]),
    Rule(r"mock( .*)?", ws_empty, 0, "Ctrl-C pauses it", until=r"with your editor",
         expect=[r"paused .* left", r"attn-drill mock --resume"]),
    Rule(r"grade", ws_empty, 0, "named in passing: its --help", help_only=True),
    Rule(r"grade \S+ --resume", ws_interrupted_class, 0, "the interrupted grading finished", check=_grades_written,
         expect=[r"resuming: \d of 3 grades were finished before"]),
    Rule(r"grade \S+ .*--fail-under 80( .*)?", ws_class, 1, "1 of 3 students pass, under 80%",
         expect=[r"1 of 3 pass"]),
    Rule(r"grade \S+( .*)? --html \S+( .*)?", ws_class, 0, "grading completed; the page written",
         check=_html_written),
    Rule(r"grade \S+( .*)? --json( .*)?", ws_class, 0, "grading completed; JSON on stdout", check=_json_out),
    Rule(r"grade \S+( .*)?", ws_class, 0, "grading completed", check=_grades_written),
    Rule(r"bench", ws_empty, 0, "named in passing: its --help", help_only=True),
    Rule(r"bench \S+( .*)? --device cuda( .*)?", ws_ref, lambda r: 0 if _cuda() else 1,
         "0 on a machine with CUDA, 1 without (and it says so)", extra=["--max-seconds", "1"],
         check=_cuda_or_said_why),
    Rule(r"bench \S+( .*)?", ws_ref, 0, "a real run, cut to --max-seconds 1", extra=["--max-seconds", "1"]),
    Rule(r"today( .*)?", ws_empty, 0, "what to do today", expect=[r"today"]),
    Rule(r"drill \S+", ws_empty, 0, "writes a fresh stub in drills/", expect=[r"drills/"]),
    Rule(r"plan( .*)?", ws_empty, 0, "a plan", expect=[r"(study plan|#)"]),
    Rule(r"quiz \S+ .*--answers .*", ws_empty, lambda r: r.rc if r.rc in (0, 1) else 0,
         "answers from the command line: 0 when all are right, 1 otherwise", expect=[r"of \d+ right"]),
    Rule(r"quiz( .*)?", ws_empty, 2, "needs a terminal (or --answers) and says so", expect=[r"--answers"]),
    Rule(r"config( .*)?", ws_empty, 0, "a setting saved or shown"),
    Rule(r"--install-completion", ws_empty, 0, "named in passing: --show-completion bash instead",
         help_only=True),
    Rule(r"verify", ws_empty, 0, "the whole bank is tests/test_bank.py's job: here one problem",
         extra=["mhsa"], expect=[r"1 of 1 problems verified"]),
    Rule(r"verify( \S+)+", ws_empty, 0, "these problems verified"),
]


def _docker_inner(argv: list[str]) -> list[str]:
    """`docker run ... -v SRC:DST ... image attn-drill ARGS`: ARGS with each DST read as SRC."""
    mounts, it = {}, iter(argv)
    for a in it:
        if a in ("-v", "--volume"):
            src, dst = next(it).split(":")[:2]
            mounts[dst] = src.replace("$PWD/", "")
    inner = argv[argv.index("attn-drill") + 1:]
    out = []
    for a in inner:
        for dst, src in sorted(mounts.items(), key=lambda kv: -len(kv[0])):
            if a == dst or a.startswith(dst + "/"):
                a = src + a[len(dst):]
        out.append(a)
    return out


@dataclass
class Plan:
    key: tuple                 # examples with the same key run once
    how: str                   # "cli", "python", "static"
    args: list[str]
    rule: Rule | None = None
    problem: str = ""          # why it cannot run (no rule)


def plan(e: Example) -> Plan:
    argv = _argv(e.text)
    if argv[0] == "docker":
        argv = ["attn-drill", *_docker_inner(argv)]
    if argv[0] == "pip":
        return Plan(("pip", *argv), "static", argv[1:])
    if argv[0] in ("python", "python3"):
        if argv[1:3] == ["-m", "attn_drill"]:
            argv = ["attn-drill", *argv[3:]]
        elif argv[1:3] == ["-m", "attn_drill.bank.quiz"]:  # the question checker: run for real
            return Plan(("python", *argv), "python", argv[1:])
        elif argv[1:2] == ["-m"]:
            return Plan(("module", *argv), "static", argv[2:])
        elif argv[1:2] == ["-c"]:
            return Plan(("python", *argv), "python", argv[1:])
        else:
            return Plan(("script", *argv), "static", argv[1:])
    if argv[0] != "attn-drill":
        return Plan(("?", *argv), "static", argv, problem=f"no rule for `{e.text}`")
    args = argv[1:]
    joined = " ".join(args)
    for rule in RULES:
        if re.fullmatch(rule.pattern, joined):
            args = [args[0], "--help"] if rule.help_only else args + rule.extra
            return Plan(("cli", *args), "cli", args, rule)
    return Plan(("?", *args), "cli", args, problem=f"no rule in RULES runs `{e.text}`: add one")


def execute(p: Plan, tmp: Path) -> Result:
    ws, home = tmp / "ws", tmp / "home"
    ws.mkdir(parents=True)
    home.mkdir()
    if p.how == "python":
        r = subprocess.run([sys.executable, *p.args], cwd=ws, env=_env(home), stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=TIMEOUT_S)
        return Result(p.args, r.returncode, r.stdout + r.stderr, r.stdout, ws)
    p.rule.workspace(p.args, ws, home)
    if p.rule.until:
        return run_until(p.args, ws, home, p.rule.until)
    return run_plain(p.args, ws, home)


# ---------------------------------------------------------------- the tests
def test_the_docs_have_examples_to_run():
    docs = {e.doc for e in EXAMPLES}
    assert {"README.md", "docs/classroom.md"} <= docs
    assert len([e for e in EXAMPLES if e.doc == "README.md"]) >= 20
    assert "README.md" in BASH_DOCS, "the Quickstart is the README's bash blocks"


@pytest.fixture(scope="module")
def results(request, tmp_path_factory):
    """Run every example this session selected, PARALLEL at a time; {plan key: Future[Result]}. Under
    xdist every test process sees the whole selection, so the examples are one xdist group: run once."""
    selected = [item.callspec.params["example"] for item in request.session.items
                if item.module is sys.modules[__name__] and hasattr(item, "callspec")
                and "example" in item.callspec.params]
    plans = {}
    for e in selected:
        p = plan(e)
        if p.how in ("cli", "python") and not p.problem:
            plans.setdefault(p.key, p)
    pool = ThreadPoolExecutor(max_workers=PARALLEL)
    futures: dict[tuple, Future] = {}
    for n, (key, p) in enumerate(plans.items()):
        futures[key] = pool.submit(execute, p, tmp_path_factory.mktemp(f"cmd{n}"))
    yield futures
    pool.shutdown(wait=True, cancel_futures=True)


@pytest.mark.slow
@pytest.mark.xdist_group("readme")     # one test process runs them all: `results` starts every selected example
@pytest.mark.parametrize("example", RUNNABLE, ids=lambda e: e.id)
def test_example(example: Example, results):
    p = plan(example)
    if p.problem:
        pytest.fail(f"{example.doc}:{example.line}: {p.problem}")
    if p.how == "static":
        if p.key[0] == "pip":
            problems = pip_problems(p.args, ROOT)
        elif p.key[0] == "module":  # python -m pytest / venv: checked, not run
            problems = pytest_problems(ROOT) if p.args[0] == "pytest" else \
                [] if p.args[0] == "venv" else [f"no rule for `python -m {p.args[0]}`: add one"]
        else:  # python benchmarks/x.py [--options]: the script exists and has those options
            script = ROOT / p.args[0]
            problems = [] if script.is_file() else [f"{p.args[0]} not found"]
            text = script.read_text(encoding="utf-8") if script.is_file() else ""
            problems += [f"{p.args[0]} has no option {o}" for o in p.args[1:] if o.startswith("-") and o not in text]
        assert not problems, f"{example.doc}:{example.line} `{example.text}`: " + "; ".join(problems)
        return
    r: Result = results[p.key].result(timeout=3 * TIMEOUT_S)
    ran = "python" if p.how == "python" else "attn-drill"
    where = f"{example.doc}:{example.line} `{example.text}` ran as `{ran} {' '.join(p.args)}`"
    assert "Traceback" not in r.out, f"{where}: a traceback\n{r.out}"
    assert not r.note, f"{where}: {r.note}\n{r.out}"
    if p.how == "python":
        assert r.rc == 0, f"{where}: exit {r.rc}\n{r.out}"
        return
    rule = p.rule
    expected = rule.rc(r) if callable(rule.rc) else rule.rc
    assert r.rc == expected, f"{where}: exit {r.rc}, expected {expected} ({rule.why})\n{r.out}"
    for pattern in rule.expect:
        assert re.search(pattern, r.flat), f"{where}: no /{pattern}/ in the output\n{r.out}"
    if rule.check:
        rule.check(r)


# ---------------------------------------------------------------- the Quickstart: one shell, in order
SHIMS = {
    "attn-drill": '#!/bin/sh\n"{py}" -m attn_drill "$@"\nrc=$?\n'
                  'printf "attn-drill\\t%s\\t%s\\t%s\\n" "$rc" "$PWD" "$*" >> "{log}"\nexit $rc\n',
    "pip": '#!/bin/sh\nexec "{py}" "{me}" pip "$@"\n',
    "python3": '#!/bin/sh\nif [ "$1" = -m ] && [ "$2" = venv ]; then exec "{py}" "{me}" venv "$3"; fi\n'
               'if [ "$1" = -m ] && [ "$2" = pytest ]; then exec "{py}" "{me}" pytest; fi\nexec "{py}" "$@"\n',
}
SHIMS["python"] = SHIMS["python3"]


def _shim_main(argv: list[str]) -> int:
    """The stand-ins' side: `pip ARGS`, `venv DIR`, `pytest`, run from the shell's folder."""
    log, cwd = Path(os.environ["README_TEST_LOG"]), Path.cwd()
    what, args = argv[0], argv[1:]
    if what == "pip":
        problems = pip_problems(args, cwd)
    elif what == "venv":
        (cwd / args[0] / "bin").mkdir(parents=True, exist_ok=True)
        (cwd / args[0] / "bin" / "activate").write_text("# a stand-in for the virtual environment\n")
        problems = []
    else:
        problems = pytest_problems(cwd)
    for p in problems:
        print(f"{what}: {p}", file=sys.stderr)
    rc = 3 if problems else 0
    with log.open("a") as f:
        f.write(f"{what}\t{rc}\t{cwd}\t{' '.join(args)}\t{'; '.join(problems)}\n")
    return rc


@pytest.mark.slow
@pytest.mark.parametrize("doc", BASH_DOCS)
def test_bash_blocks_pasted_in_order(doc, tmp_path):
    """Paste every ```bash line of the doc, in order, into one shell started at a clone's root."""
    lines = [e for e in EXAMPLES if e.doc == doc and e.where == "bash"]
    clone, bin_, home = tmp_path / "clone", tmp_path / "bin", tmp_path / "home"
    for d in (clone, bin_, home):
        d.mkdir()
    for name in ("pyproject.toml", "constraints-ci.txt"):
        shutil.copy(ROOT / name, clone / name)
    (clone / "tests").symlink_to(ROOT / "tests")
    log = tmp_path / "log.tsv"
    for name, text in SHIMS.items():
        (bin_ / name).write_text(text.format(py=sys.executable, me=__file__, log=log))
        (bin_ / name).chmod(0o755)
    script = [f"cd {shlex.quote(str(clone))}"]
    for n, e in enumerate(lines):
        script += [e.text, f'rc=$?; printf "line\\t%s\\t%s\\t{n}\\n" "$rc" "$PWD" >> {shlex.quote(str(log))}']
    env = _env(home)
    env.update(PATH=f"{bin_}{os.pathsep}{env['PATH']}", README_TEST_LOG=str(log))
    env.pop("VIRTUAL_ENV", None)
    p = subprocess.run(["bash", "--noprofile", "--norc", "-c", "\n".join(script)], cwd=tmp_path, env=env,
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=2 * TIMEOUT_S)
    out = p.stdout + p.stderr
    flat, tail = " ".join(out.split()), out[-3000:]
    assert "Traceback" not in out, tail
    rows = [r.split("\t") for r in log.read_text().splitlines()] if log.exists() else []
    calls: list[list] = []   # per line: the rows of its commands
    current: list = []
    for row in rows:
        if row[0] == "line":
            n = int(row[3])
            wanted = [_stood_in(c) for c in _split_shell(lines[n].text)]
            wanted = [w for w in wanted if w]
            ran = [(r[0], r[3]) for r in current]
            where = f"{doc}:{lines[n].line}"
            assert ran == wanted, f"{where}: ran {ran}, the line has {wanted}\n{tail}"
            for r in current:
                assert r[1] == "0" or (r[0] == "attn-drill" and r[1] == "1" and _checks_untouched_stub(r)), \
                    f"{where}: `{r[0]} {r[3]}` exited {r[1]} in {r[2]}: {r[4:] or ''}\n{tail}"
            last = [r for r in current if r[0] == "attn-drill"][-1:]
            expected = "1" if last and last[0][1] == "1" and _checks_untouched_stub(last[0]) else "0"
            assert row[1] == expected, f"{where}: the line exited {row[1]}, expected {expected}\n{tail}"
            assert Path(row[2]) == clone.resolve() or Path(row[2]) == clone, \
                f"{where}: the line ends in {row[2]}, not where it started: the next line starts there\n{tail}"
            calls.append(current)
            current = []
        else:
            current.append(row)
    assert len(calls) == len(lines), f"only {len(calls)} of {len(lines)} lines ran\n{tail}"
    if any("check" in r[3] for c in calls for r in c if r[0] == "attn-drill"):
        # what the README says the stub's check shows
        assert re.search(r"\bFAIL\b", flat) and "still raises NotImplementedError" in flat, tail


def _stood_in(command: str) -> tuple[str, str] | None:
    """(program, arguments) as the stand-ins log a command of the shell line; None: not logged."""
    argv = _argv(command)
    if argv[0] in ("attn-drill", "pip"):
        return argv[0], " ".join(argv[1:])
    if argv[0] in ("python", "python3") and argv[1:3] in (["-m", "venv"], ["-m", "pytest"]):
        return (argv[2], argv[3]) if argv[2] == "venv" else (argv[2], "")
    return None


def _checks_untouched_stub(row: list) -> bool:
    args = row[3].split()
    if not args or args[0] != "check":
        return False
    pid, path = _problem(args)
    target = Path(row[2]) / (path or f"{pid}.py")
    return target.is_file() and target.read_text(encoding="utf-8") == _stub(pid)


if __name__ == "__main__":  # the Quickstart's stand-ins for pip, venv and pytest call this
    sys.exit(_shim_main(sys.argv[1:]))
