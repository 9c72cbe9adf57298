"""An OS sandbox for grading other people's code, from bubblewrap (`bwrap`, the Debian/Ubuntu package
`bubblewrap`): Linux namespaces, no root needed where user namespaces are allowed.

Inside, a room's zygote sees: a read-only view of the system libraries and of the Python that runs
attn-drill (its site-packages and this package's code, with the problem bank hidden); the student's
scratch copy as the only writable folder (at /submission); a private /tmp, /dev and /proc (a new pid
namespace: no other process is visible); no network (a new network namespace); no capabilities. When
the sandbox's zygote ends, the kernel ends every process left in its pid namespace, so nothing a
student started outlives their grading.

Where bwrap is missing or user namespaces are off, `available()` says why; `grade` then grades with
process separation and an audit hook only, says so, and `--require-sandbox` refuses to go on.
"""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

INSIDE = "/submission"
PKG = Path(__file__).resolve().parent


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


def _ro_paths() -> list[str]:
    """What the Python running attn-drill needs, read-only: its prefix, site-packages, this package."""
    paths = {sys.base_prefix, sys.prefix, sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"],
             os.path.dirname(os.path.realpath(sys.executable))}
    for p in sys.path:
        if p and os.path.isdir(p) and ("site-packages" in p or p.startswith(sys.base_prefix)):
            paths.add(p)
    return sorted(p for p in paths if os.path.exists(p))


def _base_args() -> list[str]:
    args = ["--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
            "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
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
    from . import bank
    root = bank.root()
    return [str(root / d) for d in ("problems", "reference", "graders", "probes", "questions")] + [str(PKG / "_bank")]


def command(scratch: Path) -> tuple[list[str], dict]:
    """The bwrap argv prefix and environment for a zygote confined to `scratch`."""
    args = [shutil.which("bwrap") or "bwrap", *_base_args()]
    pkg_parent = str(PKG.parent)
    args += ["--ro-bind", str(PKG), str(PKG)]          # this package's code (the bank is not inside it...)
    for hidden in bank_dirs():
        if os.path.isdir(hidden) and hidden.startswith(str(PKG) + os.sep):
            args += ["--tmpfs", hidden]                 # ...or, in an installed wheel, is hidden here
    args += ["--bind", str(scratch), INSIDE, "--chdir", INSIDE]
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "TMPDIR": "/tmp", "MPLCONFIGDIR": "/tmp",
           "PYTHONPATH": pkg_parent, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1",
           "OMP_NUM_THREADS": "1", "LANG": "C.UTF-8", "ATTN_DRILL_MEMORY_GB": os.environ.get("ATTN_DRILL_MEMORY_GB", "6")}
    return [*args, "--clearenv", *sum((["--setenv", k, v] for k, v in env.items()), [])], env
