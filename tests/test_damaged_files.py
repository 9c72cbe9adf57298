"""Nothing crashes on a damaged file, and nothing of the user's is lost.

Every file the tool reads is damaged on purpose: the progress file (`.attn-drill/state.json`, fuzzed
from a realistic one, and by hand: wrong types at every level, null, lists, huge numbers, negative
times, strings for numbers, missing and unknown keys, a folder in its place, binary garbage,
truncated JSON), the `.attn-drill` folder itself, a read-only workspace, the problem specs, and the
bank's graders, references and probe files. Each is fed to every command that reads it; each run
must exit with its usual code (0, 1 or 2), show no traceback, name the damaged file, keep what it
could not use (`*.damaged-<time>`) and still show the command's own result.

Runs on copies of the fixture bank. Grading is faked for the state fuzz; three real judge workers
(one for the bank faults, two `check` runs) keep it to a few seconds of torch imports.
"""
import builtins
import copy
import io
import json
import os
import random
import re
import shutil
import time
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from attn_drill import bank
from attn_drill.progress import store
from attn_drill.cli import app
from attn_drill.results import PASS, Report
from attn_drill.bank.spec import SpecError, parse_spec

FIXTURES = Path(__file__).resolve().parent / "fixtures"
REFERENCE = FIXTURES / "bank" / "reference" / "attend.py"
ENV = {"NO_COLOR": "1", "COLUMNS": "120", "TERM": "dumb"}
EXIT_CODES = {0, 1, 2}
runner = CliRunner()
SEED = 20240611


# ---------------------------------------------------------------- shared helpers
@pytest.fixture
def bank_copy(tmp_path, monkeypatch):
    """A copy of the fixture bank, in use (ATTN_DRILL_BANK) for the test: free to damage."""
    dest = tmp_path / "bank"
    shutil.copytree(FIXTURES / "bank", dest)
    monkeypatch.setenv("ATTN_DRILL_BANK", str(dest))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("ATTN_DRILL_LANG", raising=False)
    _fresh_bank()
    yield dest
    _fresh_bank()


def _fresh_bank():
    bank.root.cache_clear()
    bank.get.cache_clear()


class FakeClient:
    """Stands in for the judge worker: every file passes, at once."""

    def __init__(self, *a, **kw):
        pass

    def start(self):
        return self

    def close(self):
        pass

    def grade(self, problem, path, seed, **_):
        return Report(problem, Path(path).name, seed, status=PASS, message="graded by the fake judge",
                      seconds=0.01)


@pytest.fixture
def fake_judge(monkeypatch):
    monkeypatch.setattr("attn_drill.verbs.check.JudgeClient", FakeClient)


def invoke(args):
    store._SAID.clear()   # each command is its own process in real use: its warnings start unsaid
    res = runner.invoke(app, args, env=ENV)
    out = res.output
    assert "Traceback" not in out, f"{args}: a traceback\n{out}"
    assert res.exception is None or isinstance(res.exception, SystemExit), \
        f"{args}: raised {type(res.exception).__name__}: {res.exception}\n{out}"
    assert res.exit_code in EXIT_CODES, f"{args}: exit code {res.exit_code}\n{out}"
    return res


# What each command shows when it did its job: (arguments, files it needs, check of its stdout, exit code)
COMMANDS = {
    "list": (["list"], (), lambda out: "attend" in out, 0),
    "show": (["show", "attend"], (), lambda out: "Interface" in out, 0),
    "new": (["new", "attend"], (), lambda out: "wrote" in out, 0),
    "check": (["check", "attend"], ("attend.py",), lambda out: "attend" in out and "PASS" in out.upper(), 0),
    "hint": (["hint", "attend"], (), lambda out: re.search(r"hint \d of 3|All 3 hints", out), 0),
    "solution": (["solution", "attend", "--yes"], (), lambda out: "def attend(" in out, 0),
    "reset": (["reset", "attend", "--yes"], ("attend.py",), lambda out: "restored the stub" in out, 0),
    "progress": (["progress"], (), lambda out: "Solved" in out, 0),
    "progress --json": (["progress", "--json"], (), lambda out: "summary" in json.loads(out), 0),
    "mock --history": (["mock", "--history"], (), lambda out: True, 0),
}


READS_NO_STATE = {"show"}   # shows the statement only: the progress file is left as it is


def _run_command(name: str, folder: Path, monkeypatch):
    args, needs, shown, code = COMMANDS[name]
    for f in needs:
        (folder / f).write_text("# my own work\n" if name == "reset" else REFERENCE.read_text())
    monkeypatch.chdir(folder)
    monkeypatch.setenv("ATTN_DRILL_HOME", str(folder / ".attn-drill"))   # this workspace's progress is the user's
    res = invoke(args)
    assert res.exit_code == code, f"{name}: exit code {res.exit_code}, expected {code}\n{res.output}"
    assert shown(res.stdout), f"{name}: its result is not shown\n{res.output}"
    return res


# ---------------------------------------------------------------- a realistic progress file
def realistic_state() -> dict:
    """What a workspace looks like after some practice: problems, a mock link, a finished mock, and
    (as in a mock's own folder) a live mock."""
    now = time.time()
    return {
        "version": 1,
        "problems": {
            "attend": {"status": "failing", "attempts": 3, "started": now - 900, "first_pass": None,
                       "time_to_pass": None, "best_time_to_pass": None, "attempt_start": None,
                       "best_seconds": None, "last_check": now - 60, "hints_shown": 1,
                       "solution_viewed": False},
            "mhsa": {"status": "passed", "attempts": 7, "started": now - 9000, "first_pass": now - 8000,
                     "time_to_pass": 1000.0, "best_time_to_pass": 640.5, "attempt_start": None,
                     "best_seconds": 1.25, "last_check": now - 7000, "hints_shown": 2, "solution_viewed": True},
            "gqa": {"status": "not started", "attempts": 0, "hints_shown": 0},
        },
        "mocks": [
            {"id": "mock-1", "folder": "mock-1", "status": "paused", "started": now - 3000, "seconds": 2700.0,
             "elapsed": 300.0, "problem_ids": ["attend", "mhsa"], "seed": 11},
            {"id": "mock-0", "folder": "mock-0", "status": "finished", "started": now - 90000, "seconds": 1800.0,
             "elapsed": 1500.0, "problem_ids": ["mhsa"], "seed": 5,
             "scorecard": {"id": "mock-0", "seed": 5, "seconds": 1800.0, "used": 1500.0, "passed": 1, "hints": 0,
                           "score": 1.0, "verdict": "strong pass",
                           "problems": [{"id": "mhsa", "passed": True, "result": "pass", "message": "",
                                         "time_to_green": 1400.0, "checks": 4, "hints": 0,
                                         "solution_viewed": False, "score": 1.0}]}},
            {"id": "mock-live", "active": False, "status": "paused", "seed": 3, "seconds": 600.0, "elapsed": 42.0,
             "segment_start": None, "heartbeat": now - 100, "started": now - 200, "finished": None, "pid": None,
             "lang": "en", "workspace": "..",
             "problems": {"attend": {"checks": 1, "hints": 0, "solution_viewed": False, "passed_at": None,
                                     "passed_after": None, "last": "fail"},
                          "mhsa": {"checks": 2, "hints": 1, "solution_viewed": False, "passed_at": now - 150,
                                   "passed_after": 30.0, "last": "pass"}}},
        ],
    }


BAD_VALUES = [None, "abc", "12", "", -5, -1e9, 0, 10 ** 30, 1e308, -1e308, float("nan"), float("inf"), True, False,
              [], [1], {}, {"x": 1}, "\u0000", "\ud800", 3.5, "passed", [[[]]], {"version": 1}]


def _paths(node, here=()):
    """Every path in a JSON tree: (keys and indices), the root first."""
    yield here
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, here + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, here + (i,))


def _at(node, path):
    for p in path:
        node = node[p]
    return node


def mutate(rng: random.Random, data: dict) -> dict:
    """One to three random damages: a value replaced, a key removed, an unknown key added, a list or
    mapping put in place of a node."""
    data = json.loads(json.dumps(data))
    for _ in range(rng.randint(1, 3)):
        paths = list(_paths(data))[1:]
        path = rng.choice(paths)
        parent, key = _at(data, path[:-1]), path[-1]
        how = rng.random()
        if how < 0.6:
            parent[key] = copy.deepcopy(rng.choice(BAD_VALUES))
        elif how < 0.75 and isinstance(parent, dict):
            del parent[key]
        elif how < 0.9:
            target = _at(data, path)
            if isinstance(target, dict):
                target[rng.choice(["zzz_unknown", "Not An Id", "colour"])] = copy.deepcopy(rng.choice(BAD_VALUES))
            else:
                parent[key] = [target] if rng.random() < 0.5 else {"value": target}
        else:
            parent[key] = json.loads("[" * 50 + "]" * 50)
    return data


def _dump(data) -> bytes:
    return json.dumps(data, indent=1).encode("utf-8")


def _leaves(node, here=()):
    if isinstance(node, dict) and node:
        for k, v in node.items():
            yield from _leaves(v, here + (k,))
    elif isinstance(node, list) and node:
        for i, v in enumerate(node):
            yield from _leaves(v, here + (i,))
    else:
        yield here, node


def _same(a, b) -> bool:
    return a == b or (a != a and b != b)   # NaN equals NaN here


def assert_nothing_lost(folder: Path, original: bytes, res, name: str) -> None:
    """The original file is kept byte for byte as state.json.damaged-*, and the warning names the copy;
    or, with no warning, every value of it is still in state.json (the command only adds and updates
    its own problem, attend)."""
    kept = [p for p in (folder / ".attn-drill").glob("state.json.damaged-*") if p.is_file()]
    if kept:
        assert len(kept) == 1, f"{name}: {len(kept)} copies kept"
        assert kept[0].read_bytes() == original, f"{name}: the kept copy is not the original file"
        assert kept[0].name in res.stderr and "state.json" in res.stderr, \
            f"{name}: the warning does not name the kept copy\n{res.output}"
        return
    assert "damaged" not in res.stderr, f"{name}: a warning without a kept copy\n{res.output}"
    now = json.loads((folder / ".attn-drill" / "state.json").read_text())
    before = json.loads(original)
    for path, value in _leaves(before):
        if "attend" in path:
            continue
        try:
            after = _at(now, path)
        except (KeyError, IndexError, TypeError):
            raise AssertionError(f"{name}: {path} was dropped without a warning") from None
        assert _same(after, value) or isinstance(after, (dict, list)), \
            f"{name}: {path} changed from {value!r} to {after!r} without a warning"


def _workspace(root: Path, n: int, content: bytes | None) -> Path:
    folder = root / f"w{n}"
    (folder / ".attn-drill").mkdir(parents=True)
    if content is not None:
        (folder / ".attn-drill" / "state.json").write_bytes(content)
    return folder


# ---------------------------------------------------------------- the progress file: fuzz
def test_fuzzed_progress_files_never_stop_a_command(tmp_path, bank_copy, fake_judge, monkeypatch):
    rng = random.Random(SEED)
    names = list(COMMANDS)
    base = realistic_state()
    for n in range(100):
        original = _dump(mutate(rng, base))
        for k, name in enumerate((names[n % len(names)], rng.choice(names))):
            folder = _workspace(tmp_path, f"{n}-{k}", original)
            res = _run_command(name, folder, monkeypatch)
            assert_nothing_lost(folder, original, res, f"mutant {n}, {name}")


def test_an_undamaged_realistic_file_gives_no_warning(tmp_path, bank_copy, fake_judge, monkeypatch):
    original = _dump(realistic_state())
    for name in COMMANDS:
        folder = _workspace(tmp_path, name.replace(" ", ""), original)
        res = _run_command(name, folder, monkeypatch)
        assert res.stderr == "", f"{name}: {res.stderr}"
        assert_nothing_lost(folder, original, res, name)


# ---------------------------------------------------------------- the progress file: by hand
def _deep(n: int) -> str:
    return "[" * n + "]" * n


_GOOD = json.dumps(realistic_state())
HAND = {  # name: (file content, True: kept aside whole / False: its good part used / None: not damaged)
    "null": ("null", True),
    "a list": ("[]", True),
    "a list of states": (f"[{_GOOD}]", True),
    "a string": ('"passed"', True),
    "a number": ("42", True),
    "not json": ("{not json", True),
    "empty": ("", True),
    "truncated": (_GOOD[: len(_GOOD) // 2], True),
    "utf-16": (_GOOD.encode("utf-16").decode("latin-1"), True),
    "version 2": ('{"version": 2, "problems": {}, "mocks": []}', True),
    "version as text": ('{"version": "1", "problems": {}}', True),
    "version as true": ('{"version": true, "problems": {}}', True),
    "no version": ('{"problems": {}, "mocks": []}', True),
    "nested too deeply": (_deep(100_000), True),
    "a 5000-digit number": ('{"version": 1, "problems": {"mhsa": {"attempts": ' + "9" * 5000 + "}}}", True),
    "the brief's example": ('{"version": 1, "problems": {"mhsa": "passed", "gqa": {"status": "passed"}}, '
                            '"mocks": []}', False),
    "problems a list": ('{"version": 1, "problems": [], "mocks": []}', False),
    "mocks a mapping": ('{"version": 1, "problems": {}, "mocks": {"id": "m"}}', False),
    "only a version": ('{"version": 1}', None),
    "huge numbers": ('{"version": 1, "problems": {"attend": {"attempts": 1e308, "started": 1e300, '
                     '"time_to_pass": 123456789012345678901234567890, "hints_shown": -1}}}', False),
    "negative times": ('{"version": 1, "problems": {"attend": {"started": -100, "first_pass": -1, '
                       '"best_seconds": -0.5}}, "mocks": [{"id": "m", "folder": "m", "elapsed": -5, '
                       '"seconds": -60, "started": -1}]}', False),
    "strings for numbers": ('{"version": 1, "problems": {"attend": {"attempts": "3", "hints_shown": "all", '
                            '"solution_viewed": "no", "status": 1}}}', False),
    "NaN and Infinity": ('{"version": 1, "problems": {"attend": {"started": NaN, "best_seconds": Infinity}}, '
                         '"mocks": [{"id": "m", "problems": {"attend": {}}, "seconds": NaN}]}', False),
    "unknown keys": ('{"version": 1, "extra": {"a": [1, 2]}, "problems": {"attend": {"colour": "red"}}, '
                     '"mocks": [{"id": "m", "folder": "m", "new_field": ' + _deep(50) + "}]}", None),
    "a lone surrogate": ('{"version": 1, "note": "\\ud800", "problems": {"\\ud800": {}}, '
                         '"mocks": [{"id": "\\ud800", "folder": "m"}]}', False),
    "bad problem ids": ('{"version": 1, "problems": {"../../etc": {}, "": {}, "Mhsa": {}, "gqa": {}}}', False),
    "mock shapes": ('{"version": 1, "mocks": [5, null, [], {}, {"id": 3}, {"id": "a", "folder": 7}, '
                    '{"id": "b", "folder": "x\\u0000y"}, {"id": "c", "folder": ""}, '
                    '{"id": "d", "problems": []}, {"id": "e", "problems": {"attend": 1}, "seconds": 60}, '
                    '{"id": "f", "problems": {"attend": {}}}, '
                    '{"id": "g", "folder": "g", "problem_ids": "attend", "scorecard": []}, '
                    '{"id": "h", "folder": "h", "scorecard": {"passed": "all", "problems": [1, {"id": 2}]}}, '
                    '{"id": "i", "problems": {"attend": {"checks": -1, "passed_at": "now"}}, "seconds": 60, '
                    '"pid": 99999999999999999999, "seed": 1e30, "segment_start": "x", "lang": "fr", '
                    '"active": "yes", "status": "lost"}]}', False),
}


@pytest.mark.parametrize("damage", list(HAND))
def test_hand_damaged_progress_files(tmp_path, bank_copy, fake_judge, monkeypatch, damage):
    text, whole = HAND[damage]
    original = text.encode("utf-8", "surrogatepass")
    for name in COMMANDS:
        folder = _workspace(tmp_path, name.replace(" ", ""), original)
        res = _run_command(name, folder, monkeypatch)
        kept = list((folder / ".attn-drill").glob("state.json.damaged-*"))
        if name in READS_NO_STATE or whole is None:
            assert not kept and "warning" not in res.stderr, f"{damage}, {name}: {res.stderr}"
            if name in READS_NO_STATE:
                assert (folder / ".attn-drill" / "state.json").read_bytes() == original
            continue
        assert len(kept) == 1 and kept[0].read_bytes() == original, f"{damage}, {name}: not kept\n{res.output}"
        assert kept[0].name in res.stderr, f"{damage}, {name}: the warning does not name the copy\n{res.output}"
        assert res.stderr.count("warning:") == 1, f"{damage}, {name}: one warning line\n{res.stderr}"
        assert ("started afresh" in res.stderr) == whole, res.stderr
        if name in ("list", "progress --json"):   # read-only commands save the repaired file too
            assert store.load(folder / ".attn-drill", lambda m: pytest.fail(f"warned again: {m}"))["version"] == 1


def test_good_entries_are_kept_beside_a_damaged_one(tmp_path, bank_copy, fake_judge, monkeypatch):
    folder = _workspace(tmp_path, 0, HAND["the brief's example"][0].encode())
    res = _run_command("progress --json", folder, monkeypatch)
    rows = {r["id"]: r for r in json.loads(res.stdout)["problems"]}
    assert "problems.mhsa" in res.stderr and "dropped" in res.stderr
    data = store.load(folder / ".attn-drill")
    assert data["problems"]["gqa"]["status"] == "passed" and "mhsa" not in data["problems"]
    assert rows["attend"]["status"] == "not started"


def test_a_folder_in_place_of_the_file_is_kept_aside(tmp_path, bank_copy, fake_judge, monkeypatch):
    for name in COMMANDS:
        folder = _workspace(tmp_path, name.replace(" ", ""), None)
        inner = folder / ".attn-drill" / "state.json"
        inner.mkdir()
        (inner / "mine.txt").write_text("keep me")
        res = _run_command(name, folder, monkeypatch)
        if name in READS_NO_STATE:
            continue
        kept = list((folder / ".attn-drill").glob("state.json.damaged-*"))
        assert len(kept) == 1 and (kept[0] / "mine.txt").read_text() == "keep me", name
        assert kept[0].name in res.stderr and "folder" in res.stderr, res.output


def test_a_dangling_link_and_a_folder_for_the_lock(tmp_path, bank_copy, fake_judge, monkeypatch):
    for name in ("check", "hint", "progress"):
        folder = _workspace(tmp_path, "link-" + name, None)
        (folder / ".attn-drill" / "state.json").symlink_to(tmp_path / "nowhere.json")
        res = _run_command(name, folder, monkeypatch)
        assert "state.json.damaged-" in res.stderr, res.output
        folder = _workspace(tmp_path, "lock-" + name, _dump(realistic_state()))
        (folder / ".attn-drill" / "lock").mkdir()
        res = _run_command(name, folder, monkeypatch)
        assert "Traceback" not in res.output


def test_attn_drill_a_file_instead_of_a_folder(tmp_path, bank_copy, fake_judge, monkeypatch):
    for name in COMMANDS:
        folder = tmp_path / name.replace(" ", "")
        folder.mkdir()
        (folder / ".attn-drill").write_text("not a folder\n")
        res = _run_command(name, folder, monkeypatch)
        if name in READS_NO_STATE:
            continue
        kept = list(folder.glob(".attn-drill.damaged-*"))
        assert len(kept) == 1 and kept[0].read_text() == "not a folder\n", f"{name}\n{res.output}"
        assert kept[0].name in res.stderr and ".attn-drill" in res.stderr, res.output


def test_an_unreadable_progress_file_is_kept_aside(tmp_path, bank_copy, fake_judge, monkeypatch):
    original = _dump(realistic_state())
    folder = _workspace(tmp_path, 0, original)
    path = folder / ".attn-drill" / "state.json"
    real = Path.read_bytes

    def read_bytes(self):
        if self.absolute() == path and not list(path.parent.glob("state.json.damaged-*")):
            raise PermissionError(13, "Permission denied", str(self))   # until it is moved aside
        return real(self)
    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    res = _run_command("check", folder, monkeypatch)
    monkeypatch.setattr(Path, "read_bytes", real)
    kept = list((folder / ".attn-drill").glob("state.json.damaged-*"))
    assert len(kept) == 1 and kept[0].read_bytes() == original
    assert "Permission denied" in res.stderr and kept[0].name in res.stderr


# ---------------------------------------------------------------- a read-only workspace
class ReadOnly:
    """Every write under `root` fails as it would in a read-only folder (this works as root too)."""

    def __init__(self, root: Path):
        self.root = str(root.resolve())

    def _inside(self, path) -> bool:
        try:
            p = os.path.abspath(os.fspath(path))
        except TypeError:
            return False
        return p == self.root or p.startswith(self.root + os.sep)

    def _deny(self, path):
        raise PermissionError(13, "Permission denied", os.fspath(path))

    def install(self, monkeypatch):
        real_open, real_os_open = builtins.open, os.open
        real_mkdir, real_replace, real_rename = os.mkdir, os.replace, os.rename

        def opener(file, mode="r", *a, **kw):
            if isinstance(file, (str, os.PathLike)) and any(c in mode for c in "wax+") and self._inside(file):
                self._deny(file)
            return real_open(file, mode, *a, **kw)

        def os_open(path, flags, *a, **kw):
            if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT) and self._inside(path):
                self._deny(path)
            return real_os_open(path, flags, *a, **kw)

        def mkdir(path, *a, **kw):
            if self._inside(path):
                if os.path.lexists(path):
                    raise FileExistsError(17, "File exists", os.fspath(path))
                self._deny(path)
            return real_mkdir(path, *a, **kw)

        def move(real):
            def fn(src, dst, *a, **kw):
                if self._inside(src) or self._inside(dst):
                    self._deny(dst)
                return real(src, dst, *a, **kw)
            return fn
        monkeypatch.setattr(builtins, "open", opener)
        monkeypatch.setattr(io, "open", opener)
        monkeypatch.setattr(os, "open", os_open)
        monkeypatch.setattr(os, "mkdir", mkdir)
        monkeypatch.setattr(os, "replace", move(real_replace))
        monkeypatch.setattr(os, "rename", move(real_rename))


READ_ONLY_CODES = {"new": 2, "reset": 2}   # their result is a file written here: refused with a message


@pytest.mark.parametrize("content", ["none", "good", "damaged entry", "not json"])
def test_a_read_only_workspace(tmp_path, bank_copy, fake_judge, monkeypatch, content):
    original = {"none": None, "good": _dump(realistic_state()),
                "damaged entry": HAND["the brief's example"][0].encode(), "not json": b"{not json"}[content]
    for name in COMMANDS:
        folder = tmp_path / name.replace(" ", "")
        folder.mkdir()
        if original is not None:
            (folder / ".attn-drill").mkdir()
            (folder / ".attn-drill" / "state.json").write_bytes(original)
        args, needs, shown, code = COMMANDS[name]
        for f in needs:
            (folder / f).write_text("# my own work\n" if name == "reset" else REFERENCE.read_text())
        monkeypatch.chdir(folder)
        monkeypatch.setenv("ATTN_DRILL_HOME", str(folder / ".attn-drill"))
        with monkeypatch.context() as m:
            ReadOnly(folder).install(m)
            res = invoke(args)
        expected = READ_ONLY_CODES.get(name, code)
        assert res.exit_code == expected, f"{content}, {name}: {res.exit_code}\n{res.output}"
        if expected == 0:
            assert shown(res.stdout), f"{content}, {name}: no result\n{res.output}"
        else:
            assert "Permission denied" in res.stderr, res.output
        if original is not None:   # untouched, byte for byte
            assert (folder / ".attn-drill" / "state.json").read_bytes() == original
        if name == "reset":
            assert (folder / "attend.py").read_text() == "# my own work\n"
        writes = name in ("check", "hint", "solution")
        if expected == 0 and name not in READS_NO_STATE and (writes or content in ("damaged entry", "not json")):
            assert "not saved" in res.stderr or "could not" in res.stderr, f"{content}, {name}\n{res.output}"
            assert res.stderr.count("warning:") == 1, res.stderr


def _permissions_bind() -> bool:
    """False for root (or anyone who may override file permissions): chmod cannot make a folder read-only."""
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o555)
        try:
            Path(tmp, "probe").write_text("x")
            return False
        except OSError:
            return True
        finally:
            os.chmod(tmp, 0o755)


@pytest.mark.skipif(not _permissions_bind(), reason="permissions do not bind this user (root)")
def test_a_really_read_only_workspace(tmp_path, bank_copy, fake_judge, monkeypatch):
    original = HAND["the brief's example"][0].encode()
    folder = _workspace(tmp_path, 0, original)
    (folder / "attend.py").write_text(REFERENCE.read_text())
    for p in (folder / ".attn-drill", folder):
        p.chmod(0o555)
    try:
        for name in ("list", "check", "hint", "progress"):
            res = _run_command(name, folder, monkeypatch)
            assert "warning:" in res.stderr
        res = invoke(["new", "attend", "--dir", "sub"])
        assert res.exit_code == 2 and "Permission denied" in res.stderr
    finally:
        for p in (folder, folder / ".attn-drill"):
            p.chmod(0o755)
    assert (folder / ".attn-drill" / "state.json").read_bytes() == original


# ---------------------------------------------------------------- new and reset where they cannot write
def test_new_and_reset_refuse_a_folder_in_place_of_the_file(tmp_path, bank_copy, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "attend.py").mkdir()
    (tmp_path / "attend.py" / "inside.txt").write_text("mine")
    for args in (["new", "attend", "--force"], ["new", "attend"], ["reset", "attend", "--yes"]):
        res = invoke(args)
        assert res.exit_code == 2 and "is a folder" in res.stderr, res.output
    assert (tmp_path / "attend.py" / "inside.txt").read_text() == "mine"
    (tmp_path / "afile").write_text("x")
    res = invoke(["new", "attend", "--dir", "afile"])
    assert res.exit_code == 2 and "afile is a file" in res.stderr
    res = invoke(["new", "attend", "--dir", "afile/sub"])
    assert res.exit_code == 2 and "afile/sub" in res.stderr
    res = invoke(["reset", "attend", "afile/attend.py", "--yes"])
    assert res.exit_code == 2 and "afile" in res.stderr
    assert (tmp_path / "afile").read_text() == "x"


def test_new_force_keeps_the_file_when_no_backup_can_be_made(tmp_path, bank_copy, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "attend.py").write_text("my work\n")

    def no_copy(*a, **kw):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(shutil, "copy2", no_copy)
    for args in (["new", "attend", "--force"], ["reset", "attend", "--yes"]):
        res = invoke(args)
        assert res.exit_code == 2 and "backup" in res.stderr and "No space left" in res.stderr, res.output
        assert (tmp_path / "attend.py").read_text() == "my work\n"


# ---------------------------------------------------------------- problem specs
GOOD_SPEC = yaml.safe_load((FIXTURES / "bank" / "problems" / "attend.yaml").read_text())

# field: values that must be refused, each with a SpecError naming the field
BAD_SPEC_FIELDS = {
    "format_version": [None, 2, "1", True, 1.0, [1]],
    "id": [None, 5, "Attend", "other", ["attend"]],
    "title": [None, "Attend", {"en": "only English"}, {"en": "x", "zh": ""}, {"en": 5, "zh": "x"}, []],
    "statement": [None, "text", {"zh": "只有中文"}, {"en": "x"}, {"en": "x", "zh": None}, [{"en": "x", "zh": "y"}]],
    "difficulty": [None, "extreme", 3, True, ["easy"]],
    "kind": ["widget", 3, ["module"], {"module": 1}, True],
    "tags": [None, "fixture", [], [1], ["Upper Case"], {"fixture": 1}, [None]],
    "minutes": [None, "abc", -5, 0, 1.5, [1], True, 10 ** 9, "15"],
    "interface": [None, "attend", [], [1], ["not an identifier"], {"attend": 1}],
    "hints": [None, "a hint", {"en": "x", "zh": "y"}, [], ["a", "b", "c"], [{"en": "x"}] * 3,
              [{"en": "x", "zh": "y"}] * 2, [[1], [2], [3]]],
    "mistakes": [None, "x", {}, [1, 2, 3, 4], [{"id": "a"}] * 4, GOOD_SPEC["mistakes"][:3],
                 [dict(m, id="Bad Id") for m in GOOD_SPEC["mistakes"]],
                 [dict(m, mutant="dim=-1") for m in GOOD_SPEC["mistakes"]],
                 [dict(m, mutant=[{"old": "a"}]) for m in GOOD_SPEC["mistakes"]],
                 [dict(m, mutant=[{"old": "a", "new": "a"}]) for m in GOOD_SPEC["mistakes"]],
                 [dict(m, diagnosis="no languages") for m in GOOD_SPEC["mistakes"]],
                 [dict(m, id="same") for m in GOOD_SPEC["mistakes"]], [None] * 4],
    "forbidden": ["repeat_interleave", [1], {"a": 1}, [""]],
    "allow": ["MultiheadAttention", ["not_global"], [1], 5],
    "required": ["torch.tril", 5, {"api": "torch.tril"}, [5], [{"api": 5}], [{"min_count": 1}],
                 [{"api": "torch.tril", "min_count": "abc"}], [{"api": "torch.tril", "min_count": [1]}],
                 [{"api": "torch.tril", "min_count": -1}]],
    "seed_section": ["abc", -5, 1.5, [1], True, {"n": 1}],
    "cuda": ["always", 1, ["none"], True],
    "time_limit": ["abc", -5, 0, [1], True, float("inf"), float("nan"), 10 ** 9, {"s": 1}, "30"],
    "settings": ["x", [1], 5],
    "full_float64": ["yes", 1, [True], "true"],
}
REQUIRED_FIELDS = ("format_version", "id", "title", "statement", "difficulty", "tags", "minutes", "interface",
                   "hints", "mistakes")


def _spec_error(data, path: Path) -> SpecError | None:
    try:
        parse_spec(data, path)
    except SpecError as err:
        return err
    return None


@pytest.mark.parametrize("field", list(BAD_SPEC_FIELDS))
def test_every_spec_field_of_the_wrong_type_or_range_is_named(tmp_path, field):
    path = tmp_path / "attend.yaml"
    for value in BAD_SPEC_FIELDS[field]:
        err = _spec_error(dict(GOOD_SPEC, **{field: value}), path)
        assert err is not None, f"{field}: {value!r} was accepted"
        assert err.field.split("[")[0].split(".")[0] == field, f"{field}: {value!r} named {err.field}"
        assert err.path.endswith("attend.yaml") and "Fix:" in str(err) and err.fix


def test_a_missing_required_field_is_named(tmp_path):
    for field in REQUIRED_FIELDS:
        err = _spec_error({k: v for k, v in GOOD_SPEC.items() if k != field}, tmp_path / "attend.yaml")
        assert err is not None and err.field == field, field


def test_fuzzed_specs_raise_spec_errors_only(tmp_path):
    """Random damage anywhere in the spec: it parses, or it raises SpecError; never anything else."""
    rng = random.Random(SEED)
    path = tmp_path / "attend.yaml"
    bad = [None, "abc", -5, 0, 10 ** 30, 1e308, float("nan"), True, [], [1], {}, {"x": 1}, "", [[{}]]]
    refused = 0
    for _ in range(600):
        data = json.loads(json.dumps(GOOD_SPEC))
        for _ in range(rng.randint(1, 3)):
            paths = list(_paths(data))[1:]
            where = rng.choice(paths)
            parent, key = _at(data, where[:-1]), where[-1]
            if isinstance(parent, dict) and rng.random() < 0.2:
                del parent[key]
            else:
                parent[key] = copy.deepcopy(rng.choice(bad))
        try:
            parse_spec(data, path)
        except SpecError as err:
            refused += 1
            assert "Fix:" in str(err)
    assert refused > 400


# damaged spec files, as the commands meet them
SPEC_FILES = {
    "time_limit: abc": lambda t: t.replace("time_limit: 20", "time_limit: abc"),
    "time_limit: -5": lambda t: t.replace("time_limit: 20", "time_limit: -5"),
    "time_limit: [1]": lambda t: t.replace("time_limit: 20", "time_limit: [1]"),
    "seed_section: abc": lambda t: t + "seed_section: abc\n",
    "minutes: null": lambda t: t.replace("minutes: 5", "minutes: null"),
    "tags not a list": lambda t: t.replace("tags: [fixture]", "tags: fixture"),
    "statement without zh": lambda t: re.sub(r"statement: \{en: (.*), zh: .*\}", r"statement: {en: \1}", t),
    "a hint of the wrong shape": lambda t: t.replace("  - {en: Scores first., zh: 先算分数。}", "  - [Scores first.]"),
    "a mistake of the wrong shape": lambda t: t.replace("  - id: missing_scale", "  - missing_scale\n  - id: x"),
    "min_count: abc": lambda t: t + "required: [{api: torch.softmax, min_count: abc}]\n",
    "full_float64: maybe": lambda t: t + "full_float64: maybe\n",
    "invalid YAML": lambda t: t.replace("tags: [fixture]", "tags: [fixture"),
    "empty": lambda t: "",
    "a list": lambda t: "- 1\n- 2\n",
    "binary garbage": lambda t: None,
    "truncated": lambda t: t[: len(t) // 3],
    "tabs": lambda t: t.replace("  - id: missing_scale", "\t- id: missing_scale"),
    "a folder": lambda t: None,
}
SPEC_COMMANDS = [["list"], ["show", "attend"], ["new", "attend"], ["check", "attend"], ["hint", "attend"],
                 ["solution", "attend", "--yes"], ["reset", "attend", "--yes"], ["progress"], ["progress", "--json"],
                 ["mock", "--history"], ["verify", "attend"]]


@pytest.mark.parametrize("damage", list(SPEC_FILES))
def test_damaged_spec_files_in_every_command(tmp_path, bank_copy, fake_judge, monkeypatch, damage):
    spec = bank_copy / "problems" / "attend.yaml"
    text = spec.read_text(encoding="utf-8")
    if damage == "a folder":
        spec.unlink()
        spec.mkdir()
    elif damage == "binary garbage":
        spec.write_bytes(bytes(random.Random(SEED).randrange(256) for _ in range(300)) + b"\xff\xfe")
    else:
        spec.write_text(SPEC_FILES[damage](text), encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()
    (work / "attend.py").write_text("# my own work\n")
    monkeypatch.chdir(work)
    for args in SPEC_COMMANDS:
        _fresh_bank()
        res = invoke(args)
        if args[0] == "mock":          # mock --history reads no spec
            assert res.exit_code == 0
            continue
        assert res.exit_code == 2, f"{damage}, {args}: {res.exit_code}\n{res.output}"
        assert "attend.yaml" in res.stderr, f"{damage}, {args}: the file is not named\n{res.output}"
        assert "Fix:" in res.stderr, f"{damage}, {args}: no fix\n{res.output}"
    assert (work / "attend.py").read_text() == "# my own work\n"


def test_an_unreadable_spec_is_named(tmp_path, bank_copy, monkeypatch):
    spec = bank_copy / "problems" / "attend.yaml"
    real = Path.read_text

    def read_text(self, *a, **kw):
        if self == spec:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self, *a, **kw)
    monkeypatch.setattr(Path, "read_text", read_text)
    res = invoke(["show", "attend"])
    assert res.exit_code == 2 and "attend.yaml" in res.stderr and "Permission denied" in res.stderr


def test_a_bank_folder_without_problems_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTN_DRILL_BANK", str(tmp_path / "nowhere"))
    _fresh_bank()
    try:
        res = invoke(["list"])
        assert res.exit_code == 2 and "ATTN_DRILL_BANK" in res.stderr
    finally:
        _fresh_bank()


# ---------------------------------------------------------------- the bank's graders, references, probes
BROKEN = {  # problem id: (how its files are broken, the words the message must have)
    "grader_raises": ("grader", "graders/grader_raises.py", "ZeroDivisionError"),
    "grader_import": ("grader", "graders/grader_import.py", "no_such_module"),
    "reference_syntax": ("reference", "reference/reference_syntax.py", "does not parse"),
    "reference_raises": ("reference", "reference/reference_raises.py", "reference bug"),
    "probe_raises": ("probe file", "probes/probe_raises.py", "probe bug"),
}


def _broken_bank(root: Path) -> None:
    (root / "probes").mkdir(exist_ok=True)
    spec = (root / "problems" / "attend.yaml").read_text(encoding="utf-8")
    for pid in BROKEN:
        (root / "problems" / f"{pid}.yaml").write_text(spec.replace("id: attend", f"id: {pid}"), encoding="utf-8")
        shutil.copy(root / "reference" / "attend.py", root / "reference" / f"{pid}.py")
        shutil.copy(root / "graders" / "attend.py", root / "graders" / f"{pid}.py")
    (root / "graders" / "grader_raises.py").write_text("def cases(ctx):\n    return [1 / 0]\n")
    g = root / "graders" / "grader_import.py"
    g.write_text("import no_such_module\n" + g.read_text())
    r = root / "reference" / "reference_syntax.py"
    r.write_text(r.read_text() + "\ndef broken(:\n")
    r = root / "reference" / "reference_raises.py"
    r.write_text(r.read_text().replace('    """q: (B, Lq, D)', '    raise RuntimeError("reference bug")\n    """q'))
    g = root / "graders" / "probe_raises.py"
    g.write_text(g.read_text().replace('Case("basic_fp64", "attend",', 'Case("basic_fp64", "attend", probe="drive",'))
    (root / "probes" / "probe_raises.py").write_text('def drive(p):\n    raise RuntimeError("probe bug")\n')


def test_a_broken_bank_file_is_named_without_a_traceback(tmp_path, bank_copy, monkeypatch):
    from attn_drill.client import JudgeClient
    _broken_bank(bank_copy)
    _fresh_bank()
    sub = tmp_path / "attend.py"
    shutil.copy(REFERENCE, sub)
    with JudgeClient() as client:        # one judge for every broken problem
        for pid, (role, shown, words) in BROKEN.items():
            with pytest.raises(bank.BankError) as info:
                client.grade(pid, str(sub), 1)
            msg = str(info.value)
            assert msg.startswith(f"the problem's {role} failed: {shown}") and words in msg, msg
            assert "Traceback" not in msg and "not of your code" in msg
        assert client.grade("attend", str(sub), 1).status == PASS   # and the judge goes on
    monkeypatch.chdir(tmp_path)
    shutil.copy(REFERENCE, tmp_path / "grader_raises.py")
    res = invoke(["check", "grader_raises"])
    assert res.exit_code == 2, res.output
    assert "the problem's grader failed: graders/grader_raises.py" in res.stderr
    res = invoke(["new", "reference_syntax"])
    assert res.exit_code == 2 and "the problem's reference failed: reference/reference_syntax.py" in res.stderr
    (bank_copy / "reference" / "attend.py").unlink()
    _fresh_bank()
    for args in (["new", "attend", "--dir", "x"], ["solution", "attend", "--yes"]):
        res = invoke(args)
        assert res.exit_code == 2 and "reference/attend.py" in res.stderr, res.output


def test_check_with_a_damaged_progress_file_still_shows_the_report(tmp_path, bank_copy, monkeypatch):
    """A real grading (a judge worker that imports torch) beside a damaged progress file."""
    for n, damage in enumerate(("the brief's example",)):   # the fake judge covers the other damages
        text = HAND[damage][0].encode()
        folder = _workspace(tmp_path, n, text)
        shutil.copy(REFERENCE, folder / "attend.py")
        monkeypatch.chdir(folder)
        monkeypatch.setenv("ATTN_DRILL_HOME", str(folder / ".attn-drill"))
        res = invoke(["check", "attend", "--seed", "3"])
        assert res.exit_code == 0, res.output
        assert "PASS" in res.stdout and "attend" in res.stdout
        kept = list((folder / ".attn-drill").glob("state.json.damaged-*"))
        assert len(kept) == 1 and kept[0].read_bytes() == text and kept[0].name in res.stderr
        assert store.load(folder / ".attn-drill")["problems"]["attend"]["status"] == "passed"
