"""A grading worker confined to one folder, for grading other people's code (`attn-drill grade`).

`SandboxClient` is a WorkerClient whose process starts with its working directory inside a scratch
folder (the grader copies a student's files there) and runs `python -m attn_drill.sandbox`, which
loads torch and the engine, then tightens the process before serving the usual worker protocol:

  - an audit hook refuses file writes, deletes, renames and mkdirs outside the scratch folder and
    the client's own temporary folder, and refuses starting processes, forking and sockets
    (the submission sees a PermissionError, which grades as an exception in its code);
  - RLIMIT_FSIZE caps any file it writes (64 MiB), RLIMIT_CORE = 0, and the worker's own
    address-space limit (ATTN_DRILL_MEMORY_GB) applies as for `check`;
  - bytecode caches are not written.

What it does NOT provide: a real sandbox. Code that uses ctypes or a C extension to make system
calls, or that patches the engine in its own process, is not stopped; run untrusted classes in a
container or CI runner that holds nothing of value. See docs/classroom.md.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .worker import WorkerClient

FILE_SIZE_LIMIT = 64 << 20

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_PATH_EVENTS = {  # event -> indexes of its path arguments
    "os.remove": (0,), "os.rmdir": (0,), "os.mkdir": (0,), "os.rename": (0, 1), "os.chmod": (0,),
    "os.chown": (0,), "os.symlink": (1,), "os.link": (1,), "os.truncate": (0,), "os.utime": (0,),
    "shutil.rmtree": (0,), "shutil.copyfile": (1,), "shutil.copytree": (1,), "shutil.move": (1,),
}
_BLOCKED_EVENTS = ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
                   "os.forkpty", "pty.spawn", "socket.connect", "socket.bind", "os.kill", "os.killpg")


# `-c` instead of `-m`: drop the working directory from the front of sys.path, so a student's
# `torch.py` or `attn_drill/` cannot shadow the real ones; _main appends it at the end instead.
_BOOT = "import sys; sys.path.pop(0); from attn_drill.sandbox import _main; _main(sys.argv[1:])"


class SandboxClient(WorkerClient):
    """A WorkerClient whose process works inside `folder` and may write only there."""

    def __init__(self, folder: Path, memory_gb: float | None = None, warm: str | None = None):
        super().__init__()
        self.warm = warm  # a problem id: grade its reference once before serving, off the students' clock
        self.folder = Path(folder).resolve()
        self.folder.mkdir(parents=True, exist_ok=True)
        self.memory_gb = memory_gb

    def start(self) -> "SandboxClient":
        if self.proc is None or self.proc.poll() is not None:
            env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONFAULTHANDLER="1", PYTHONDONTWRITEBYTECODE="1")
            if self.memory_gb is not None:
                env["ATTN_DRILL_MEMORY_GB"] = str(self.memory_gb)
            # the package must stay importable with a working directory inside the scratch folder
            pkg_root = str(Path(__file__).resolve().parent.parent)
            env["PYTHONPATH"] = os.pathsep.join([pkg_root] + [p for p in [env.get("PYTHONPATH")] if p])
            self._stderr = open(self._stderr_path, "ab")
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _BOOT, str(self.folder), self._tmp.name, self.warm or ""],
                cwd=self.folder, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                env=env, text=True, bufsize=1)
            self._ready = False
        return self


def _install(allowed: list[str]) -> None:
    """Confine this process: the audit hook and resource limits described in the module docstring."""
    import resource
    import signal

    roots = [os.path.realpath(a) for a in allowed] + ["/dev/null"]

    def inside(path) -> bool:
        if isinstance(path, int) or path is None:
            return True  # an fd we already hold
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        full = os.path.realpath(os.path.join(os.getcwd(), os.fspath(path)))
        return any(full == r or full.startswith(r + os.sep) for r in roots)

    def refuse(what: str):
        raise PermissionError(f"attn-drill grade: {what} is not allowed while grading; "
                              f"a submission may write only inside its own folder")

    def hook(event: str, args: tuple) -> None:
        if event == "open":
            path, mode, flags = (tuple(args) + (None, None, None))[:3]
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or \
                (isinstance(flags, int) and flags & _WRITE_FLAGS)
            if writing and not inside(path):
                refuse(f"writing {path}")
        elif event in _PATH_EVENTS:
            for i in _PATH_EVENTS[event]:
                if i < len(args) and not inside(args[i]):
                    refuse(f"{event} on {args[i]}")
        elif event.startswith(_BLOCKED_EVENTS):
            refuse(f"{event} (starting processes, signals, network)")

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an oversized write raises OSError instead of killing us
    for limit, value in ((resource.RLIMIT_FSIZE, FILE_SIZE_LIMIT), (resource.RLIMIT_CORE, 0)):
        try:
            resource.setrlimit(limit, (value, value))
        except (ValueError, OSError):
            pass
    sys.addaudithook(hook)


def _main(argv: list[str]) -> None:
    import torch  # noqa: F401 - load everything the engine needs before the hook is in place

    from . import engine, worker  # noqa: F401
    from . import bank
    if len(argv) > 2 and argv[2]:  # first-call costs (lazy imports, dispatcher caches) are paid here
        try:
            engine.grade(argv[2], str(bank.reference_path(argv[2])), seed=0, diagnose=False)
        except Exception:  # noqa: BLE001 - a broken problem shows up in the real grading
            pass
    _install(argv[:2])
    sys.path.append(argv[0])  # a student's helper modules import, after everything installed
    worker._serve()

