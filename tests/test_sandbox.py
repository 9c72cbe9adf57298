"""The OS sandbox of `grade` (bubblewrap): a student's code, run with the audit hook bypassed on
purpose (raw fork_exec, dir_fd writes, ctypes, UDP), can change nothing outside its own copy, see no
other process, reach no network, and leaves nothing running once its sandbox is closed. Skipped,
with the reason, where bubblewrap cannot make a sandbox."""
from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import pytest

from attn_drill.judge import sandbox
from inside import alive, descendants, sandbox_root

OK, WHY = sandbox.available()
needs_sandbox = pytest.mark.skipif(not OK, reason=f"no OS sandbox here: {WHY}")

HOSTILE = r'''
import _posixsubprocess, ctypes, json, os, socket
seen = {}

def attempt(name, fn):
    try:
        seen[name] = repr(fn())[:200]
    except BaseException as exc:
        seen[name] = "refused: " + type(exc).__name__

fds = {}
attempt("open_parent_dir", lambda: fds.setdefault("parent", os.open("..", os.O_RDONLY)))
attempt("write_parent_dir_fd", lambda: os.open("escaped.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fds["parent"]))
attempt("mkdir_parent_dir_fd", lambda: os.mkdir("escaped_dir", dir_fd=fds["parent"]))
attempt("read_secret", lambda: open(SECRET).read())
attempt("write_secret", lambda: open(SECRET, "w").write("pwned"))
attempt("write_bob", lambda: open(BOB, "w").write("pwned"))
attempt("write_out", lambda: open(OUT, "w").write("pwned"))
attempt("read_bank", lambda: open(BANK).read())
attempt("udp", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"leak", ("127.0.0.1", PORT)))
attempt("proc", lambda: sorted(p for p in os.listdir("/proc") if p.isdigit()))
attempt("ctypes_fork", lambda: ctypes.CDLL(None).getpid())
script = ("while true; do echo x >> /submission/heartbeat; echo pwned > %s 2>/dev/null; "
          "echo pwned > %s 2>/dev/null; sleep 0.05; done" % (BOB, OUT))
attempt("fork_exec", lambda: _posixsubprocess.fork_exec(
    [b"/bin/sh", b"-c", script.encode()], [b"/bin/sh"], True, (), None, None,
    -1, -1, -1, -1, -1, -1, *os.pipe(), False, True, -1, None, None, None, -1, None, False))
def fill(path):
    with open(path, "wb") as fh:
        for _ in range(40):
            fh.write(b"x" * (8 << 20))
        fh.flush()
        os.fsync(fh.fileno())
    return os.path.getsize(path)
attempt("write_handed_in", lambda: open("/handed-in/planted.py", "w").write("pwned"))
attempt("fill_submission", lambda: fill("/submission/big.bin"))
if os.path.exists("/submission/big.bin"):
    os.unlink("/submission/big.bin")
with open("/submission/seen.json", "w") as fh:
    json.dump(seen, fh)
'''


def _fingerprint(folder: Path) -> dict:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@needs_sandbox
def test_a_hostile_student_changes_nothing_outside_its_copy(tmp_path):
    from attn_drill import bank
    from attn_drill.judge.rooms import Zygote
    scratch = tmp_path / "scratch" / "s1"
    scratch.mkdir(parents=True)
    bob = tmp_path / "class" / "bob"
    bob.mkdir(parents=True)
    (bob / "mhsa.py").write_text("bob's work\n")
    out = tmp_path / "grades"
    out.mkdir()
    (out / "summary.json").write_text("{}")
    secret = tmp_path / "secret.txt"
    secret.write_text("the answer key\n")
    before = {p: _fingerprint(p) for p in (bob, out)}
    listener = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    listener.bind(("127.0.0.1", 0))
    listener.settimeout(0.5)
    code = (f"SECRET, BOB, OUT, BANK, PORT = {str(secret)!r}, {str(bob / 'mhsa.py')!r}, "
            f"{str(out / 'summary.json')!r}, {str(bank.reference_path('mhsa'))!r}, {listener.getsockname()[1]}\n"
            + HOSTILE)
    (scratch / "mallory.py").write_text(code)
    host_copy = _fingerprint(scratch)
    argv, env = sandbox.command(scratch)
    zyg = Zygote().spawn(argv, env)
    room = zyg.open()
    room.budget, room.path = 60.0, f"{sandbox.INSIDE}/mallory.py"
    room.call({"op": "load", "path": room.path, "forbidden": [], "hidden": [], "writable": None,
               "folders": [sandbox.INSIDE], "budget": 60.0})
    time.sleep(0.5)                                      # the spawned loop runs meanwhile
    inside = sandbox_root(zyg.proc.pid) / sandbox.INSIDE.lstrip("/")   # the sandbox's view, read from outside
    seen = json.loads((inside / "seen.json").read_text())
    beats = (inside / "heartbeat").stat().st_size if (inside / "heartbeat").exists() else 0
    running = descendants(zyg.proc.pid)
    room.close()
    zyg.close()                                          # the sandbox ends: every process in it with it
    time.sleep(0.5)
    assert not [p for p in running if alive(p)], "a process of the sandbox outlived it"
    assert _fingerprint(scratch) == host_copy, "the host's copy of the student's files changed"
    assert seen["write_handed_in"].startswith("refused"), seen
    assert seen["fill_submission"] == "refused: OSError", seen        # /submission is capped, in memory
    assert {p: _fingerprint(p) for p in (bob, out)} == before, seen
    assert secret.read_text() == "the answer key\n"
    assert not (tmp_path / "scratch" / "escaped.txt").exists() and not (tmp_path / "scratch" / "escaped_dir").exists()
    assert seen["read_secret"].startswith("refused") and seen["read_bank"].startswith("refused"), seen
    assert seen["open_parent_dir"] == "refused: PermissionError", seen   # the hook: no folder's descriptor
    assert not seen["fork_exec"].startswith("refused"), seen   # the spawn itself worked: the sandbox must contain it
    assert beats > 0, seen
    assert seen["udp"].startswith("refused") or seen["udp"] == "4"   # no network: nothing arrives either way
    with pytest.raises(socket.timeout):
        listener.recvfrom(100)
    pids = json.loads(seen["proc"].replace("'", '"')) if not seen["proc"].startswith("refused") else []
    assert str(os.getpid()) not in pids and len(pids) < 10, pids   # a pid namespace of its own


@needs_sandbox
def test_grade_keeps_other_students_and_the_outputs_untouched(tmp_path):
    """End to end through `attn-drill grade`, with attacks the static policy lets through."""
    from typer.testing import CliRunner

    from attn_drill.cli import app
    root = tmp_path / "class"
    for name in ("alice", "mallory"):
        (root / name).mkdir(parents=True)
    ref = Path(__file__).resolve().parents[1] / "reference" / "mhsa.py"
    (root / "alice" / "mhsa.py").write_text(ref.read_text())
    (root / "mallory" / "mhsa.py").write_text(
        "import os\n"
        "for target in ('../alice/mhsa.py', '../../class/alice/mhsa.py', '../grades/summary.json'):\n"
        "    try:\n"
        "        open(target, 'w').write('pwned')\n"
        "    except OSError:\n"
        "        pass\n"
        "try:\n"
        "    os.remove('../alice/mhsa.py')\n"
        "except OSError:\n"
        "    pass\n" + ref.read_text())
    before = (root / "alice" / "mhsa.py").read_bytes()
    res = CliRunner().invoke(app, ["grade", str(root), "--seed", "1", "--out", str(tmp_path / "grades"),
                                   "--require-sandbox", "--json"], env={"NO_COLOR": "1"})
    assert res.exit_code == 0, res.output
    assert (root / "alice" / "mhsa.py").read_bytes() == before
    summary = json.loads((tmp_path / "grades" / "summary.json").read_text())
    assert summary["sandbox"] == "bubblewrap"
    assert {c["student"]: c["outcome"] for c in summary["cells"]} == {"alice": "pass", "mallory": "pass"}


def test_without_a_sandbox_grade_refuses_unless_asked_and_then_says_what_is_not_protected(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from attn_drill.cli import app
    from attn_drill.verbs import grade as verb
    monkeypatch.setattr(verb.os_sandbox, "available", lambda: (False, "bwrap is not installed"))
    root = tmp_path / "class"
    (root / "alice").mkdir(parents=True)
    (root / "alice" / "mhsa.py").write_text("x = 1\n")
    env = {"NO_COLOR": "1", "COLUMNS": "400"}
    for extra in ([], ["--require-sandbox"]):       # refused by default; the old flag still refuses
        res = CliRunner().invoke(app, ["grade", str(root), "--seed", "1", "--out", str(tmp_path / "g"), *extra],
                                 env=env)
        assert res.exit_code == 2 and "no OS sandbox can be made here (bwrap is not installed)" in res.output
        assert "--no-sandbox" in res.output and not (tmp_path / "g").exists()
    res = CliRunner().invoke(app, ["grade", str(root), "--seed", "1", "--out", str(tmp_path / "g"), "--no-sandbox"],
                             env=env)
    assert res.exit_code == 0, res.output
    said = " ".join(res.output.split())
    assert "NO OS SANDBOX (bwrap is not installed)" in said and "NOT protected" in said
    for unprotected in ("written by native code", "outlive the grading", "outside the class folder", "memory and CPU"):
        assert unprotected in said, unprotected
    assert json.loads((tmp_path / "g" / "summary.json").read_text())["sandbox"] is None
