"""An OS sandbox for grading other people's code, from bubblewrap (`bwrap`, the Debian/Ubuntu package
`bubblewrap`): Linux namespaces, no root needed where user namespaces are allowed.

Inside, a room's zygote sees: a read-only view of the system libraries and of the Python that runs
attn-drill (its site-packages and this package's code, with the problem bank hidden); the student's
files, read-only, at /handed-in (the host's scratch copy: only the host writes it); the folder the
code runs in, /submission, an in-memory copy of those files of at most SUBMISSION_BYTES that the
zygote makes again before each problem (nothing written there reaches the host's disk); a private
/dev and /proc (a new pid namespace: no other process is visible) and a private /tmp in memory whose
size counts against the memory limit; no network (a new network namespace); no capabilities; at
most MAX_TASKS processes and threads (ProcessLimit). Between two problems of a student every process
left in the sandbox is killed and /submission made again (the zygote's `scrub`); when the sandbox's
zygote ends, the kernel ends every process left in its pid namespace, so nothing a student started
outlives their grading.

Where bwrap is missing or user namespaces are off, `available()` says why, and `grade` refuses to go
on unless asked for `--no-sandbox`, which grades with process separation and Python-level guards only
and says exactly what that does not protect (UNPROTECTED).
"""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from .. import rules
from ..room.zygote import HANDED_IN, SUBMISSION as INSIDE   # the sandbox's paths, where the zygote expects them
PKG = Path(__file__).resolve().parent.parent      # the attn_drill package
MAX_TASKS = 256                                   # processes and threads in one sandbox
CGROUP_ROOTS = ("/sys/fs/cgroup/pids", "/sys/fs/cgroup")   # cgroup v1's pids hierarchy, or the v2 tree


@functools.lru_cache(maxsize=1)
def available() -> tuple[bool, str]:
    """(usable, why not). Tried once per process with a real sandbox start."""
    exe = shutil.which("bwrap")
    if exe is None:
        return False, "bubblewrap (bwrap) is not installed: apt-get install bubblewrap"
    if not sys.platform.startswith("linux"):
        return False, "OS sandboxing needs Linux"
    try:
        proc = subprocess.run([exe, *_base_args(), "--", sys.executable, "-c", "print('ok')"],
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"bwrap could not start: {exc}"
    if proc.returncode != 0 or "ok" not in proc.stdout:
        why = (proc.stderr or proc.stdout).strip().splitlines()
        return False, "bwrap cannot create namespaces here (" + (why[-1] if why else f"exit {proc.returncode}") + \
            "); user namespaces may be disabled"
    return True, ""


SHM_BYTES = 1 << 20
SUBMISSION_BYTES = 128 << 20   # /submission: the largest copy made (scratch.MAX_FOLDER_BYTES) and room to write


def _ro_paths() -> list[str]:
    """What the Python running attn-drill needs, read-only: its prefix, site-packages, this package."""
    paths = {sys.base_prefix, sys.prefix, sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"],
             os.path.dirname(os.path.realpath(sys.executable))}
    for p in sys.path:
        if p and os.path.isdir(p) and ("site-packages" in p or p.startswith(sys.base_prefix)):
            paths.add(p)
    return sorted(p for p in paths if os.path.exists(p))


def _base_args() -> list[str]:
    tmp_bytes = int(rules.memory_gb() * (1 << 30))
    args = ["--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
            "--proc", "/proc", "--dev", "/dev", "--size", str(tmp_bytes), "--tmpfs", "/tmp",
            # /dev's shared memory is a tmpfs of half the host's memory that no rlimit counts: a small one
            "--size", str(SHM_BYTES), "--tmpfs", "/dev/shm"]
    for d in ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32"):
        if os.path.islink(d):
            args += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            args += ["--ro-bind", d, d]
    for f in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/passwd",
              "/etc/group", "/etc/nsswitch.conf", "/etc/alternatives"):
        if os.path.exists(f):
            args += ["--ro-bind", f, f]
    for p in _ro_paths():
        args += ["--ro-bind", p, p]
    return args


def bank_dirs() -> list[str]:
    """Where the problem bank lives, to hide (the package's _bank/, or the checkout's folders)."""
    from .. import bank
    root = bank.root()
    return [str(root / d) for d in ("problems", "reference", "graders", "probes", "questions")] + [str(PKG / "_bank")]


def command(scratch: Path) -> tuple[list[str], dict]:
    """The bwrap argv prefix and environment for a zygote confined to `scratch`."""
    args = [shutil.which("bwrap") or "bwrap", *_base_args()]
    args += ["--ro-bind", str(PKG), str(PKG)]          # this package's code (the bank is not inside it...)
    for hidden in bank_dirs():
        if os.path.isdir(hidden) and hidden.startswith(str(PKG) + os.sep):
            args += ["--tmpfs", hidden]                 # ...or, in an installed wheel, is hidden here
    # the host's copy is never writable inside: a link or file planted there cannot redirect the next
    # copy; the code writes to an in-memory /submission the zygote fills from it (room/zygote._stage)
    args += ["--ro-bind", str(scratch), HANDED_IN, "--size", str(SUBMISSION_BYTES), "--tmpfs", INSIDE,
             "--chdir", INSIDE]
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "TMPDIR": "/tmp", "MPLCONFIGDIR": "/tmp",
           "OMP_NUM_THREADS": "1", "LANG": "C.UTF-8", rules.MEMORY_ENV: str(rules.memory_gb())}
    return [*args, "--clearenv", *sum((["--setenv", k, v] for k, v in env.items()), [])], env


def hidden_from(path: str) -> list[str]:
    """What a room grading a file in the user's own folder may not touch (no OS sandbox there): the
    bank, the progress records (the user's and a folder's own) and the cache of parsed specs (what
    the next grading reads)."""
    from ..bank import cache
    from ..progress import store
    here = Path(path).resolve().parent
    kept = [Path(store.home())] + ([Path(cache.folder())] if cache.folder() is not None else [])
    # a record folder set to hold the code itself (ATTN_DRILL_HOME=.) cannot be hidden from it
    kept = [str(k) for k in kept if not here.is_relative_to(k.expanduser().resolve())]
    return bank_dirs() + kept + [str(here / ".attn-drill"), str(Path.cwd() / ".attn-drill")]


UNPROTECTED = "grade.unprotected"     # the message that lists what grading without a sandbox does not protect


class ProcessLimit:
    """At most `n` processes and threads for everything started in one sandbox. Where the tool may make
    a cgroup (as root, or where the pids controller is delegated), a pids cgroup holds the sandbox;
    elsewhere RLIMIT_NPROC, which the kernel counts per user namespace (bwrap makes one for a user who
    is not root; root ignores it). `how` says which holds."""

    def __init__(self, name: str, n: int = MAX_TASKS):
        self.n, self.cgroup = n, None
        for root in CGROUP_ROOTS:
            base = Path(root)
            if not (base / "cgroup.procs").exists() or not (os.access(base, os.W_OK)):
                continue
            folder = base / f"attn-drill-{os.getpid()}-{name}"
            try:
                folder.mkdir()
                (folder / "pids.max").write_text(str(n))
                self.cgroup = folder
                break
            except OSError:
                try:
                    folder.rmdir()
                except OSError:
                    pass
        self.how = f"pids cgroup (at most {n})" if self.cgroup else \
            (f"RLIMIT_NPROC {n}" if os.getuid() != 0 else "none (root ignores RLIMIT_NPROC; no pids cgroup here)")

    def preexec(self) -> None:
        """In the sandbox's first process, before it execs bwrap: join the cgroup, set the rlimit."""
        import resource
        if self.cgroup is not None:
            try:
                (self.cgroup / "cgroup.procs").write_text(str(os.getpid()))
            except OSError:
                pass
        try:
            resource.setrlimit(resource.RLIMIT_NPROC, (self.n, self.n))
        except (OSError, ValueError):
            pass

    def close(self) -> None:
        """Kill whatever is still in the cgroup, then remove it."""
        if self.cgroup is None:
            return
        import signal
        import time
        for _ in range(50):
            try:
                pids = [int(p) for p in (self.cgroup / "cgroup.procs").read_text().split()]
            except OSError:
                break
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.02)
        try:
            self.cgroup.rmdir()
        except OSError:
            pass
        self.cgroup = None
