"""What the room refuses to the code it runs. Every guard here is installed before any submitted code
runs and cannot be undone from Python: there is no switch to turn off, no handle to drop.

1. Fused attention kernels, at dispatch level: every aten operator whose name is a fused attention
   kernel (scaled_dot_product*, *flash_attention*, *efficient_attention*, *cudnn_attention*,
   _native_multi_head_attention, _transformer_encoder_layer_fwd, _triton_*attention, _fused_sdp_choice)
   gets, on every dispatch key that has a kernel for it (CPU, CUDA, autograd, autocast, vmap,
   CompositeImplicitAutograd...), a kernel that raises ForbiddenCall. So
   `F.scaled_dot_product_attention`, `torch._C._nn.scaled_dot_product_attention`, `torch.ops.aten.*`,
   `sdpa_kernel(SDPBackend.MATH)`, vmap and the math decomposition are all caught where they run.
   flex_attention's higher-order operator gets the same treatment. Installed once in the zygote, so
   every room is born with it; the registrations are held by the kernels themselves (the
   dispatcher keeps them), and no module attribute leads to them.
2. Python tripwires on the entry points the problem forbids (nn.MultiheadAttention...), replaced for
   the life of the room when it loads a submission.
3. An audit hook (it cannot be removed once added): no reading or writing the problem bank or the
   workspace progress, no other process's /proc entry, no new processes, signals, sockets, ctypes
   libraries, no walking the garbage collector or the interpreter's frames; and, for code called
   from the submission, no compiling or running code from text (eval by another name: typing's
   string annotations, generated code) and no imports beyond what the policy allows. The static
   policy (attn_drill.bank.policy) refuses the same before the file runs; the hook is what holds if a
   route was missed.
"""
from __future__ import annotations

import os
import pathlib
import re
import sys
import threading

from ..i18n import t

FUSED_PATTERNS = ("scaled_dot_product", "flash_attention", "efficient_attention", "cudnn_attention",
                  "multi_head_attention", "transformer_encoder_layer", "_triton_scaled_dot", "_fused_sdp")


class ForbiddenCall(BaseException):
    """Raised by a guard; a BaseException so a bare `except Exception` cannot swallow it."""

    def __init__(self, name: str):
        super().__init__(t("room.forbidden_call", name=name))
        self.name = name


def fused_ops() -> list[str]:
    import torch
    return sorted(n[len("aten::"):] for n in torch._C._dispatch_get_all_op_names()
                  if n.startswith("aten::") and any(p in n for p in FUSED_PATTERNS))


def install_dispatch_blocks() -> int:
    """Register the raising kernels and block flex_attention (once per process, in the zygote);
    returns how many kernels were replaced."""
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
                    lib.impl(op, _blocker(op.partition(".")[0], lib), key)
                    count += 1
                except (RuntimeError, ValueError):
                    pass
    return count + _block_flex()


def _blocker(name: str, registrations):
    def kernel(*args, **kwargs):
        _ = registrations   # held in this closure: they last as long as the dispatcher holds the kernel
        raise ForbiddenCall(name)
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
            for key in list(table):
                table[key] = _flex_blocker
                count += 1
        hop._dispatch_cache.clear()
    return count


def _flex_blocker(*args, **kwargs):
    raise ForbiddenCall("flex_attention")


def dispatch_blocks_hold() -> bool:
    """True when a fused kernel still raises: run after user code, to notice tampering."""
    import torch
    q = torch.zeros(1, 1, 1, 1)
    try:
        torch.ops.aten._scaled_dot_product_attention_math(q, q, q)
    except ForbiddenCall:
        return True
    except BaseException:  # noqa: BLE001
        return False
    return False


# ---------------------------------------------------------------- Python-level tripwires
def install_tripwires(names) -> None:
    """Replace the forbidden torch entry points by tripwires, for the life of this process; and, as the
    policy refuses them too, the standard library's lookups of attributes by name (string.Formatter's
    field paths) and torch's mappings of a file into memory, which raise no audit event (a shared
    mapping writes the file)."""
    import string

    import torch
    string.Formatter.get_field = _tripwire("string.Formatter.get_field")
    for obj in (torch, torch.UntypedStorage, torch.TypedStorage):
        setattr(obj, "from_file", _tripwire("from_file"))
    F, nn = torch.nn.functional, torch.nn
    table = {
        "scaled_dot_product_attention": [(F, "scaled_dot_product_attention")],
        "multi_head_attention_forward": [(F, "multi_head_attention_forward")],
        "MultiheadAttention": [(nn, "MultiheadAttention"), (nn.modules.activation, "MultiheadAttention")],
    }
    if "numpy" in names:
        # where a rule rests on the op trace, data may not leave torch for numpy (whose work the
        # trace never sees): no tensor becomes an array, by .numpy() or by numpy's own __array__
        # (a library such as matplotlib would call it); the room's wire keeps the real one
        table["numpy"] = [(torch.Tensor, "numpy"), (torch.Tensor, "__array__")]
        from . import wire
        _TRUSTED_CALLERS.add(wire._enc.__code__)
    flex = sys.modules.get("torch.nn.attention.flex_attention")
    if flex is not None:
        table["flex_attention"] = [(flex, "flex_attention")]
    for name, places in table.items():
        if name in names:
            for obj, attr in places:
                setattr(obj, attr, _tripwire(name, getattr(obj, attr)))


_LET_THROUGH: dict = {}      # (entry point, torch's code object that may call it) -> the exact classes of its self
_TRUSTED_CALLERS: set = set()  # the room's own code that may call any tripwired entry point (the wire's encoder)


def let_through(name: str, code, cls: type) -> None:
    """For a trusted probe: torch's own `code` (e.g. nn.MultiheadAttention.forward) may call the
    tripwired entry point `name` when its `self` is exactly of the probe's class `cls` (the official
    module a unit-test problem hands to the test); a subclass of it, or any other caller, trips.
    Classes are held weakly: a probe makes one per case."""
    import weakref
    _LET_THROUGH.setdefault((name, code), weakref.WeakSet()).add(cls)


def _tripwire(name, real=None):
    def tripwire(*args, **kwargs):
        if real is not None and _TRUSTED_CALLERS and sys._getframe(1).f_code in _TRUSTED_CALLERS:
            return real(*args, **kwargs)
        if real is not None and _LET_THROUGH:
            caller = sys._getframe(1)
            classes = _LET_THROUGH.get((name, caller.f_code))
            if classes is not None and type(caller.f_locals.get("self")) in classes:
                return real(*args, **kwargs)
        raise ForbiddenCall(name)
    return tripwire


# ---------------------------------------------------------------- the audit hook
_BLOCKED_EVENTS = ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
                   "os.forkpty", "pty.spawn", "os.kill", "os.killpg", "signal.pthread_kill", "socket.",
                   "ctypes.", "gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys.settrace",
                   "sys.setprofile", "sys._current_frames", "sys.remote_exec", "os.startfile", "webbrowser.open",
                   "winreg.", "sys.addaudithook", "cpython.remote_debugger_script", "mmap.__new__")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_PATH_EVENTS = {"os.remove": (0,), "os.rmdir": (0,), "os.mkdir": (0,), "os.rename": (0, 1), "os.chmod": (0,),
                "os.chown": (0,), "os.symlink": (1,), "os.link": (0, 1), "os.truncate": (0,), "os.utime": (0,),
                "os.listdir": (0,), "os.scandir": (0,), "shutil.rmtree": (0,), "shutil.copyfile": (0, 1),
                "shutil.copytree": (0, 1), "shutil.move": (0, 1), "os.chdir": (0,)}
# folder names that hold the tool's own records wherever they lie (a folder's progress from before,
# which the next command run there merges into the user's): never read or written from a room
_RECORD_FOLDERS = (".attn-drill",)
# library files that evaluate text their caller hands them (string annotations): no exec from there
_EVALUATORS = ("/typing.py", "/typing_extensions.py")
_IMPORT_FRAMES = ("<frozen importlib._bootstrap", "<frozen zipimport>")


def tool_roots() -> list[str]:
    """Where Python and attn-drill load code from (the prefixes, site-packages, the user's site,
    PYTHONPATH, this package): a room may read them, never write them; else a `.pth` file or a
    module planted there would run in the next command, which renders the next verdict."""
    import site
    import sysconfig
    roots = {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix, site.getusersitepackages(),
             os.path.dirname(os.path.dirname(os.path.abspath(__file__)))}
    roots |= {p for p in sysconfig.get_paths().values() if p}
    roots |= {p for p in sys.path if p and os.path.isabs(p)}
    roots |= {p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and os.path.isabs(p)}
    return sorted(os.path.realpath(r) for r in roots)


def install_audit_hook(hidden: list[str], writable: list[str] | None = None, user_files=(),
                       may_import=None) -> None:
    """hidden: folders the room may neither read nor write (the bank, progress state; without an OS
    sandbox other students' folders), but for those in writable;
    writable: if given, the only folders it may write to (grading someone else's files);
    user_files: the filenames the submission's code runs under (its file and vetted helpers): code
    called from them may not compile or run text as code, reach frames, or import what
    `may_import(module)` refuses (None: any import)."""
    # the functions the hook resolves paths with, bound now: a module's attribute replaced later
    # (os.path.realpath = ...) never changes what the hook sees
    realpath, join, getcwd, fspath, fsdecode = os.path.realpath, os.path.join, os.getcwd, os.fspath, os.fsdecode
    isdir, getframe, sep = os.path.isdir, sys._getframe, os.sep
    # and the tables it decides by, copied now: rebinding or editing this module's globals later
    # (an emptied _BLOCKED_EVENTS, os.sep set to another string) changes nothing here
    blocked, path_events = tuple(_BLOCKED_EVENTS), {k: tuple(v) for k, v in _PATH_EVENTS.items()}
    write_flags, evaluators, import_frames = int(_WRITE_FLAGS), tuple(_EVALUATORS), tuple(_IMPORT_FRAMES)
    records = frozenset(_RECORD_FOLDERS)
    hidden = [realpath(h) for h in hidden if h]
    writable = None if writable is None else [realpath(w) for w in writable] + ["/dev/null"]
    own = {"self", "thread-self", str(os.getpid())}
    # read-only: the tool's code and Python's, but for a root holding the submission's own folder
    folders = [realpath(os.path.dirname(f)) for f in user_files if f and os.path.isabs(f)] + (writable or [])
    readonly = [r for r in tool_roots() if r != sep and not any(
        f == r or f.startswith(r.rstrip(sep) + sep) for f in folders)]
    users = frozenset(user_files)
    busy = threading.local()

    def resolve(path) -> str | None:
        if isinstance(path, int) or path is None:
            return None
        if isinstance(path, bytes):
            path = fsdecode(path)
        if not isinstance(path, (str, pathlib.PurePath, os.DirEntry)):
            # os.fspath would run the object's own __fspath__ here, inside the hook, beside its state
            refuse(f"a path given as a {type(path).__name__} (give a str or a pathlib.Path)")
        try:
            return realpath(join(getcwd(), fspath(path)))
        except (TypeError, ValueError, OSError):
            return None

    def under(full: str, roots) -> bool:
        return any(full == r or full.startswith(r.rstrip(sep) + sep) for r in roots)

    def holds(full: str, roots) -> bool:
        """A folder above one of roots: moving, removing or changing it moves what the root holds."""
        base = full.rstrip(sep) + sep
        return any(r.startswith(base) for r in roots)

    def refuse(what: str):
        raise PermissionError(t("room.not_allowed", what=what))

    def check_path(path, writing: bool, event: str):
        if isinstance(path, int) and event == "opening" and users and submitted():
            # a descriptor by number is one the room holds (its channel to the judge among them)
            refuse(f"opening the file descriptor {path} (open files by their path)")
        full = resolve(path)
        if full is None:
            return
        if event == "opening" and users and isdir(full) and submitted():
            # a directory's descriptor is what dir_fd= and the *at() calls resolve against, where this
            # hook cannot follow: the submission gets none (its paths are read against the cwd here)
            refuse(f"opening the folder {full} (open files by their path)")
        if under(full, hidden) and not (writable is not None and under(full, writable)):
            refuse(f"{event} on {full}")
        if records.intersection(full.split(sep)):
            refuse(f"{event} on {full} (attn-drill's own records)")
        if writing and holds(full, hidden + readonly):
            refuse(f"{event} on {full} (it holds attn-drill's records or the code Python loads)")
        parts = full.split(sep)
        if len(parts) > 2 and parts[1] == "proc" and parts[2] not in own and parts[2].isdigit():
            refuse(f"looking at another process ({full})")
        if writing and len(parts) > 1 and parts[1] in ("proc", "sys"):
            refuse(f"writing {full} (the kernel's own files: e.g. clear_refs would reset the measured peak)")
        if writing and writable is not None and not under(full, writable):
            refuse(f"writing {full}")
        if writing and under(full, readonly):
            refuse(f"writing {full} (where Python and attn-drill load code from)")

    def caller(depth: int = 3):
        """The frame that raised the event (`depth` frames up from here: the event, the hook, its
        helper), and whether the submission's code is on the stack."""
        frame = getframe(depth)
        on_stack, f = False, frame
        while f is not None and not on_stack:
            on_stack = f.f_code.co_filename in users
            f = f.f_back
        return frame, on_stack

    def submitted() -> bool:
        """Whether the submission's code is on the stack of the event being checked now."""
        if getattr(busy, "on", False):
            return False
        busy.on = True
        try:
            return caller(4)[1]
        finally:
            busy.on = False

    def code_checks(event: str, args: tuple) -> None:
        frame, on_stack = caller()
        if not on_stack:
            return
        name = frame.f_code.co_filename
        if event == "import":
            while frame is not None and frame.f_code.co_filename.startswith(import_frames):
                frame = frame.f_back
            if frame is not None and frame.f_code.co_filename in users and may_import is not None \
                    and not may_import(str(args[0])):
                refuse(f"importing {args[0]}")
        elif event in ("compile", "exec"):
            # the submission's own eval/exec/compile, or a library evaluating text on its behalf
            # (typing's string annotations); libraries may still generate and run code of their own
            if name in users or (event == "exec" and name.endswith(evaluators)):
                refuse(f"{event} (running text as code)")
        elif name in users:   # object.__getattr__ (frames, code objects), sys._getframe from the submission
            refuse(f"{event} {args[1] if len(args) > 1 else ''}".strip())

    def hook(event: str, args: tuple) -> None:
        if event == "open":
            path, mode, flags = (tuple(args) + (None, None, None))[:3]
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or \
                (isinstance(flags, int) and bool(flags & write_flags))
            check_path(path, writing, "opening")
        elif event in path_events:
            for i in path_events[event]:
                if i < len(args):
                    check_path(args[i], event not in ("os.listdir", "os.scandir", "os.chdir"), event)
        elif event.startswith(blocked):
            refuse(f"{event} (processes, signals, network, native libraries, interpreter internals)")
        elif users and event in ("compile", "exec", "import", "object.__getattr__", "sys._getframe"):
            if getattr(busy, "on", False):
                return
            busy.on = True
            try:
                code_checks(event, args)
            finally:
                busy.on = False

    sys.addaudithook(hook)
