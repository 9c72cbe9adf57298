"""What the room refuses to the code it runs.

1. Fused attention kernels, at dispatch level: every aten operator whose name is a fused attention
   kernel (scaled_dot_product*, *flash_attention*, *efficient_attention*, *cudnn_attention*,
   _native_multi_head_attention, _transformer_encoder_layer_fwd, _triton_*attention, _fused_sdp_choice)
   gets, on every dispatch key that has a kernel for it (CPU, CUDA, autograd, autocast, vmap,
   CompositeImplicitAutograd...), a kernel that raises ForbiddenCall while blocking is on. So
   `F.scaled_dot_product_attention`, `torch._C._nn.scaled_dot_product_attention`, `torch.ops.aten.*`,
   `sdpa_kernel(SDPBackend.MATH)`, vmap and the math decomposition are all caught where they run.
   flex_attention's higher-order operator gets the same treatment. Installed once in the zygote.
2. Python tripwires on the modules and functions the problem forbids (nn.MultiheadAttention...).
3. An audit hook (it cannot be removed once added): no reading or writing the problem bank or the
   workspace progress, no other process's /proc entry, no new processes, signals, sockets, ctypes
   libraries, and no walking the garbage collector.
"""
from __future__ import annotations

import contextlib
import os
import re
import sys
from ..i18n import t

FUSED_PATTERNS = ("scaled_dot_product", "flash_attention", "efficient_attention", "cudnn_attention",
                  "multi_head_attention", "transformer_encoder_layer", "_triton_scaled_dot", "_fused_sdp")


class ForbiddenCall(BaseException):
    """Raised by a tripwire; a BaseException so a bare `except Exception` cannot swallow it."""

    def __init__(self, name: str):
        super().__init__(t("room.forbidden_call", name=name))
        self.name = name


class _State:
    blocking = False          # fused kernels raise while this is on
    tripped: list[str] = []
    active: list = []         # the Tripwires in place now


STATE = _State()
_LIBRARY = None               # keeps the registrations alive for the life of the process


def fused_ops() -> list[str]:
    import torch
    return sorted(n[len("aten::"):] for n in torch._C._dispatch_get_all_op_names()
                  if n.startswith("aten::") and any(p in n for p in FUSED_PATTERNS))


_FLEX_DONE = False


def install_dispatch_blocks() -> int:
    """Register the raising kernels (once per process); returns how many were registered."""
    global _FLEX_DONE
    count = _register_aten()
    if not _FLEX_DONE:
        count += _block_flex()
        _FLEX_DONE = True
    return count


def _register_aten() -> int:
    global _LIBRARY
    if _LIBRARY is not None:
        return 0
    import warnings

    import torch
    lib = torch.library.Library("aten", "IMPL")
    count = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")      # "overriding a previously registered kernel"
        for op in fused_ops():
            dump = torch._C._dispatch_dump("aten::" + op)
            keys = set(re.findall(r"^(\w+)(?:\[alias\])?(?: \(inactive\))?: registered", dump, re.M))
            for key in sorted(keys - {"debug"}):
                try:
                    lib.impl(op, _blocker(op, torch.ops.aten, key), key)
                    count += 1
                except (RuntimeError, ValueError):
                    pass
    _LIBRARY = lib
    return count


def _blocker(op: str, aten, key: str):
    base, _, overload = op.partition(".")

    def kernel(*args, **kwargs):
        if STATE.blocking:
            STATE.tripped.append(base)
            raise ForbiddenCall(base)
        raise RuntimeError(f"aten::{op} is blocked in the grading process")
    return kernel


def _block_flex() -> int:
    """flex_attention is a higher-order operator dispatched in Python: replace its kernels."""
    try:
        from torch._higher_order_ops import flex_attention as fa
    except ImportError:  # pragma: no cover - older torch
        return 0
    count = 0
    for hop in (getattr(fa, "flex_attention", None), getattr(fa, "flex_attention_backward", None)):
        if hop is None:
            continue
        for table in (hop.py_kernels, hop.python_key_table):
            for key, real in list(table.items()):
                table[key] = _flex_blocker(real)
                count += 1
        hop._dispatch_cache.clear()
    return count


def _flex_blocker(real):
    def kernel(*args, **kwargs):
        if STATE.blocking:
            STATE.tripped.append("flex_attention")
            raise ForbiddenCall("flex_attention")
        return real(*args, **kwargs)
    return kernel


@contextlib.contextmanager
def unguarded():
    """For probe code only (an official module a unit test compares against): the fused kernels and
    the forbidden Python entry points work again inside."""
    global _LIBRARY
    before = STATE.blocking
    STATE.blocking = False
    active = list(STATE.active)
    for wires in reversed(active):
        wires.restore()
    blocked = _LIBRARY is not None
    if blocked:
        _LIBRARY._destroy()            # the original kernels are back until the block is registered again
        _LIBRARY = None
    try:
        yield
    finally:
        if blocked:
            _register_aten()
        for wires in active:
            wires.install()
        STATE.blocking = before


def lift() -> None:
    """Remove the block for good: only in a room that runs the reference (bench's timing of SDPA)."""
    global _LIBRARY
    if _LIBRARY is not None:
        _LIBRARY._destroy()
        _LIBRARY = None


def dispatch_blocks_hold() -> bool:
    """True when a fused kernel still raises: run after user code, to notice tampering."""
    import torch
    if not STATE.blocking:
        return True
    q = torch.zeros(1, 1, 1, 1)
    try:
        torch.ops.aten._scaled_dot_product_attention_math(q, q, q)
    except ForbiddenCall:
        STATE.tripped.pop()
        return True
    except BaseException:  # noqa: BLE001
        return False
    return False


# ---------------------------------------------------------------- Python-level tripwires
class Tripwires:
    """Replaces forbidden torch entry points with tripwires while user code runs."""

    def __init__(self, names):
        self.names = set(names)
        self._saved = []

    def _targets(self):
        import torch
        F, nn = torch.nn.functional, torch.nn
        table = {
            "scaled_dot_product_attention": [(F, "scaled_dot_product_attention")],
            "multi_head_attention_forward": [(F, "multi_head_attention_forward")],
            "MultiheadAttention": [(nn, "MultiheadAttention"), (nn.modules.activation, "MultiheadAttention")],
        }
        flex = sys.modules.get("torch.nn.attention.flex_attention")
        if flex is not None:
            table["flex_attention"] = [(flex, "flex_attention")]
        return [(obj, attr, name) for name, places in table.items() if name in self.names
                for obj, attr in places]

    def __enter__(self):
        if "scaled_dot_product_attention" in self.names:
            STATE.blocking = True
        self.install()
        STATE.active.append(self)
        return self

    def install(self) -> None:
        for obj, attr, name in self._targets():
            self._saved.append((obj, attr, getattr(obj, attr)))
            setattr(obj, attr, self._tripwire(name))

    def restore(self) -> None:
        for obj, attr, value in reversed(self._saved):
            setattr(obj, attr, value)
        self._saved.clear()

    @staticmethod
    def _tripwire(name):
        def tripwire(*args, **kwargs):
            STATE.tripped.append(name)
            raise ForbiddenCall(name)
        return tripwire

    def __exit__(self, *exc):
        self.restore()
        if self in STATE.active:
            STATE.active.remove(self)
        STATE.blocking = any("scaled_dot_product_attention" in w.names for w in STATE.active)
        return False


# ---------------------------------------------------------------- the audit hook
_BLOCKED_EVENTS = ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
                   "os.forkpty", "pty.spawn", "os.kill", "os.killpg", "signal.pthread_kill", "socket.",
                   "ctypes.dlopen", "ctypes.dlsym", "ctypes.cdata", "gc.get_objects", "gc.get_referrers",
                   "gc.get_referents", "sys.settrace", "sys.setprofile", "sys._current_frames",
                   "sys.remote_exec", "os.startfile", "webbrowser.open", "winreg.")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_PATH_EVENTS = {"os.remove": (0,), "os.rmdir": (0,), "os.mkdir": (0,), "os.rename": (0, 1), "os.chmod": (0,),
                "os.chown": (0,), "os.symlink": (1,), "os.link": (1,), "os.truncate": (0,), "os.utime": (0,),
                "os.listdir": (0,), "os.scandir": (0,), "shutil.rmtree": (0,), "shutil.copyfile": (0, 1),
                "shutil.copytree": (0, 1), "shutil.move": (0, 1), "os.chdir": (0,)}


def install_audit_hook(hidden: list[str], writable: list[str] | None = None) -> None:
    """hidden: folders the room may neither read nor write (the bank, progress state);
    writable: if given, the only folders it may write to (grading someone else's files)."""
    hidden = [os.path.realpath(h) for h in hidden if h]
    writable = None if writable is None else [os.path.realpath(w) for w in writable] + ["/dev/null"]
    own = {"self", "thread-self", str(os.getpid())}

    def resolve(path) -> str | None:
        if isinstance(path, int) or path is None:
            return None
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        try:
            return os.path.realpath(os.path.join(os.getcwd(), os.fspath(path)))
        except (TypeError, ValueError, OSError):
            return None

    def under(full: str, roots) -> bool:
        return any(full == r or full.startswith(r.rstrip(os.sep) + os.sep) for r in roots)

    def refuse(what: str):
        raise PermissionError(t("room.not_allowed", what=what))

    def check_path(path, writing: bool, event: str):
        full = resolve(path)
        if full is None:
            return
        if under(full, hidden):
            refuse(f"{event} on {full}")
        parts = full.split(os.sep)
        if len(parts) > 2 and parts[1] == "proc" and parts[2] not in own and parts[2].isdigit():
            refuse(f"looking at another process ({full})")
        if writing and writable is not None and not under(full, writable):
            refuse(f"writing {full}")

    def hook(event: str, args: tuple) -> None:
        if event == "open":
            path, mode, flags = (tuple(args) + (None, None, None))[:3]
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or \
                (isinstance(flags, int) and bool(flags & _WRITE_FLAGS))
            check_path(path, writing, "opening")
        elif event in _PATH_EVENTS:
            for i in _PATH_EVENTS[event]:
                if i < len(args):
                    check_path(args[i], event not in ("os.listdir", "os.scandir", "os.chdir"), event)
        elif event.startswith(_BLOCKED_EVENTS):
            refuse(f"{event} (processes, signals, network, native libraries, interpreter internals)")

    sys.addaudithook(hook)
