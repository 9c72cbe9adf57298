"""The wall holds against what is on no list: for each class of attack on a verdict, the routes an
attacker would try, each proven closed by the mechanism that closes the whole class (see the evidence
map in AUTHORING.md). A test fails if an attack works: a wrong submission passes, a file outside the
student's copy changes, a process outlives its grading, the tool ends with a traceback, or a report
carries what the submission printed raw.

  1 a clean interpreter       nothing beside a submission stands in for a module (judge, zygote, room)
  2 reflection by string      refused by the policy, and in the room without it
  3 evidence with other routes  every parameter's gradient, every AD route, memory from outside the room
  4 links in class grading    copies never follow a link; no student process survives into a copy
  5 the fallback              refused by default; with --no-sandbox, other copies and /tmp still refused
  6 hostile data              deep sources, oversized replies, bounded caches
  7 spoofed reports           control characters neutralised in terminal and JUnit; links and sizes named
"""
from __future__ import annotations

import json
import os
import py_compile
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from attn_drill.bank import policy
from attn_drill.cli import app
from attn_drill.judge import sandbox
from attn_drill.verbs.scratch import copy_folder
from inside import alive, descendants, sandbox_root

ROOT = Path(__file__).resolve().parent.parent
MHSA = (ROOT / "reference" / "mhsa.py").read_text()
WRONG_MHSA = MHSA.replace(" / math.sqrt(D)", "")          # no 1/sqrt(D): a mistake every report names
OK, WHY = sandbox.available()
needs_sandbox = pytest.mark.skipif(not OK, reason=f"no OS sandbox here: {WHY}")
ENV = {**os.environ, "NO_COLOR": "1", "COLUMNS": "120", "TERM": "dumb"}


def _check(folder: Path, *args: str) -> subprocess.CompletedProcess:
    """`python -m attn_drill check ...` run as a user runs it, from the submission's folder."""
    return subprocess.run([sys.executable, "-m", "attn_drill", "check", *args], cwd=folder, env=ENV,
                          capture_output=True, text=True, timeout=300)


def _grade(judge, pid: str, path: Path, **kw):
    return judge.grade(pid, str(path), 5, time_limit=kw.pop("time_limit", 60), **kw)


def _case(report, name: str):
    return next(c for c in report.cases if c.name == name)


@pytest.fixture(scope="module")
def bare():
    """Grades in this process, on the real bank, with the static policy off: only the room's own
    walls stand (its audit hook, tripwires, dispatch-level blocks, own-object checks)."""
    from attn_drill.judge import engine
    from attn_drill.judge.rooms import Zygote
    from attn_drill.judge.sandbox import hidden_from
    zyg = Zygote().spawn([], dict(os.environ))
    real = policy.vet

    def no_refusals(*args, **kwargs):
        vetted = real(*args, **kwargs)
        vetted.refusals = []
        return vetted
    policy.vet = no_refusals
    try:
        def grade(pid, path, **kw):
            return engine.grade(pid, engine.Target(str(path), hidden=hidden_from(str(path))), zyg, seed=5,
                                time_limit=kw.pop("time_limit", 30), **kw)
        yield grade
    finally:
        policy.vet = real
        zyg.close()


# ---------------------------------------------------------------- 1. a clean interpreter
MARKER = "import pathlib; pathlib.Path(__file__).with_suffix('.ran').write_text('ran')\n"


@pytest.mark.parametrize("shadow", ["source", "sourceless"])
def test_files_named_like_modules_beside_a_submission_never_run(tmp_path, shadow):
    """Files named like what the tool imports (torch, numpy, yaml, rich, typer) and like a module the
    policy allows but that is not installed (einops, as source or as a sourceless .pyc): none runs in
    the command, the judge, the zygote or the room, and the submission's import of einops fails."""
    for name in ("torch", "numpy", "yaml", "rich", "typer", "click"):
        (tmp_path / f"{name}.py").write_text(MARKER + "raise SystemExit('shadowed')\n")
    fake = tmp_path / "einops.py"
    fake.write_text(MARKER + "def rearrange(x, *a, **k):\n    return x\n")
    if shadow == "sourceless":
        py_compile.compile(str(fake), cfile=str(tmp_path / "einops.pyc"), doraise=True)
        fake.unlink()
    (tmp_path / "mhsa.py").write_text(WRONG_MHSA)
    (tmp_path / "uses_einops.py").write_text("import einops\n" + MHSA)
    wrong = _check(tmp_path, "mhsa", "mhsa.py", "--seed", "3", "--json")
    uses = _check(tmp_path, "mhsa", "uses_einops.py", "--seed", "3", "--json")
    assert sorted(p.name for p in tmp_path.glob("*.ran")) == [], (wrong.stderr, uses.stderr)
    assert wrong.returncode == 1 and json.loads(wrong.stdout)["status"] == "fail", wrong.stdout + wrong.stderr
    got = json.loads(uses.stdout)
    assert uses.returncode == 1 and got["status"] == "error", uses.stdout + uses.stderr
    assert "No module named 'einops'" in got["message"], got["message"]


# ---------------------------------------------------------------- 2. reflection by string
REFLECTION = {
    "type hints": "import typing\nclass A:\n    x: 'int'\nHINTS = typing.get_type_hints(A)\n",
    "type hints imported": "from typing import get_type_hints as hints\n",
    "type hints aliased": "import typing as T\nT.get_type_hints(int)\n",
    "formatter field": "import string\nstring.Formatter().get_field('0.real', [1], {})\n",
    "formatter imported": "from string import Formatter\n",
    "module dict": "import typing\ntyping.__dict__['get_type_hints']\n",
    "computed getattr": "import torch\nname = 'lo' + 'ad'\ngetattr(torch, name)\n",
    "getattr as a value": "import functools\nfunctools.reduce(getattr, ['real'], 1)\n",
    "dunder by match": "match 1:\n    case int(__class__=c):\n        pass\n",
    "the room's check": "__attn_drill_own__ = lambda x: x\n",
    "the room's check as a parameter": "def f(self, __attn_drill_own__=None):\n    return self._x\n",
    # a library's helper that follows attributes by a name in a string: its submodule is on no list
    "a library's getattr helper": "import torch\ntorch.ao.quantization.utils.getattr_from_fqn(torch, 'sys')\n",
    "a library's helper imported": "from torch.ao.quantization.utils import getattr_from_fqn\n",
    "a library's helper by module": "import torch.ao.quantization.utils as u\n",
    "a library's helper through a module": "import torch.nn.functional as F\nF.torch.ao\n",
    "an unlisted corner of torch.utils": "import torch.utils.hooks\n",
    # a library's attribute replaced: the room's own checks would call the submission's code
    "a library's function replaced": "import os\nos.path.realpath = str\n",
    "a library's function replaced by setattr": "import torch\nsetattr(torch, 'allclose', print)\n",
    "a library's function deleted": "import torch.nn.functional as F\ndel F.softmax\n",
    # functools copying attributes named in strings
    "update_wrapper": "import functools\nfunctools.update_wrapper(print, print)\n",
    "wraps with names": "from functools import wraps\nwraps(print, assigned=('__closure__',))\n",
    # class patterns: positional parts read the attributes __match_args__ names, a metaclass decides
    # what isinstance believes
    "attribute by a class pattern's position": "def ga(obj, C):\n    match obj:\n        case C(v):\n"
                                               "            return v\n",
    "a metaclass": "class Meta(type):\n    pass\n",
    "a metaclass keyword": "class A(metaclass=print):\n    pass\n",
    "a class made from strings": "G = type('G', (), {'__match_args__': ('__globals__',)})\n",
    "an instance check of one's own": "class A:\n    def __instancecheck__(cls, obj):\n        return True\n",
    "a closure's cell read": "def f(g):\n    return g.__closure__\ndef h(cell):\n    return cell.cell_contents\n",
    # a module under another name: bound to a plain name it is judged as itself; passed, stored or
    # returned it is refused (its attributes would be judged by their names alone)
    "a module renamed": "import torch\nT = torch\ndef f():\n    return T.serialization\n",
    "a module renamed after its use": "import torch\ndef f():\n    return T.serialization\nT = torch\n",
    "a module passed": "import torch\ndef f(m):\n    return m.serialization\nf(torch)\n",
    "a module in a list": "import torch\nmods = [torch]\n",
    "a module as a class attribute": "import torch\nclass A:\n    lib = torch\n",
    "a module as a default": "import torch\ndef f(x, lib=torch):\n    return lib\n",
    # a module a library holds under a plain attribute name is judged as what it is
    "the builtins held by enum": "import enum\nB = enum.bltns\n",
    "getattr reached as an attribute": "import enum\nenum.bltns.getattr(1, 'real')\n",
    "a module held by torch": "import torch\ntorch.glob.glob('*')\n",
    "a module held by torch.storage": "import torch\ntorch.storage.io.open('x', 'w')\n",
    "a standard module held by the standard library": "import textwrap\ntextwrap.re.compile('x')\n",
    "torch reached again inside torch": "import torch.nn.functional as F\nF.torch.utils.data.DataLoader\n",
}


@pytest.mark.parametrize("route", sorted(REFLECTION))
def test_reflection_by_string_is_refused_before_anything_runs(route):
    import ast
    policy.load_libraries(ast.parse(REFLECTION[route]))     # as the judge vets: the file's libraries loaded
    refused = policy.vet(REFLECTION[route], Path("/nowhere/submission.py")).refusals
    assert refused, route


ROOM_REFLECTION = {
    # typing evaluates a string annotation: exec from typing is refused by the audit hook
    "type hints": "import typing\nclass A:\n    x: 'open(\"/etc/hostname\").read()'\ntyping.get_type_hints(A)\n",
    # field paths follow attributes by name: the tripwire
    "formatter field": "import string\nstring.Formatter().get_field('0.__init__.__globals__', [object()], {})\n",
    # any object passed as `self`: private and refused names only on the submission's own objects
    "self is torch": "import torch\nclass Own:\n    def peek(self):\n        return self._C\nOwn.peek(torch)\n",
    "computed on a foreign self": "import torch\nclass Own:\n    def peek(self, n):\n        return getattr(self, n)\n"
                                  "Own.peek(torch, 'library').Library('aten', 'IMPL')\n",
    "staticmethod self": "import torch\nclass Own:\n    @staticmethod\n    def lib(self):\n"
                         "        return self.library\nOwn.lib(torch)\n",
    # a shared mapping of a file raises no audit event: the tripwire
    "shared file mapping": "import torch\ntorch.from_file(__file__, shared=True, size=4)\n",
}


@pytest.mark.parametrize("route", sorted(ROOM_REFLECTION))
def test_reflection_by_string_is_refused_in_the_room_without_the_policy(bare, tmp_path, route):
    path = tmp_path / "mhsa.py"
    path.write_text(ROOM_REFLECTION[route] + MHSA)
    report = bare("mhsa", path)
    assert report.status != "pass" and report.problem_error is not None, (route, report.message)
    said = report.problem_error.message
    assert any(w in said for w in ("not allowed", "forbids", "own classes")), (route, said)


ROOM_PATHS = {
    # the hook never runs the submission's own code: a path object of its own is refused, not called
    # (Python's own calls convert a path before their event; an event raised by hand hands the object over)
    "an object's own path, opened": "import sys\nclass P:\n    def __fspath__(self):\n        return 'x'\n"
                                    "sys.audit('open', P(), 'r', 0)\n",
    "an object's own path, listed": "import sys\nclass P:\n    def __fspath__(self):\n        return '.'\n"
                                    "sys.audit('os.listdir', P())\n",
    # the hook resolves paths with the functions it bound when installed, not the module's current ones
    "the hook's path functions replaced": f"import os\nos.path.realpath = lambda p: '/tmp'\n"
                                          f"open({str(ROOT / 'graders' / 'mhsa.py')!r}).read()\n",
    # the kernel's own files are read-only for a room: a reset of the peak it measures is refused
    "the peak reset": "open('/proc/self/clear_refs', 'w').write('5')\n",
    "the peak reset by pathlib": "import pathlib\npathlib.Path('/proc/self/clear_refs').write_text('5')\n",
    # a folder's descriptor: what dir_fd= resolves against, where the hook cannot follow
    "a folder's descriptor": "import os\nos.open('/', os.O_RDONLY)\n",
    "a folder's descriptor, as a directory": "import os\nos.open('/tmp', os.O_RDONLY | os.O_DIRECTORY)\n",
    # a descriptor by number: the room's channel to the judge is one (a forged reply written on it)
    "a descriptor by number": "open(3, 'wb', closefd=False).write(b'{}')\n",
    "a descriptor by number, by io": "import io\nio.open(4, 'rb', closefd=False).read(1)\n",
    # the hook's tables are its own copies: the module's globals changed afterwards change nothing
    "the hook's event list emptied": "import sys, os\nsys.modules['attn_drill.room.guards']._BLOCKED_EVENTS = ('x',)\n"
                                     "os.system('true')\n",
    "the hook's separator changed": f"import sys, os\nos.sep = '/dev/null'\n"
                                    f"open({str(ROOT / 'graders' / 'mhsa.py')!r}).read()\n",
}


@pytest.mark.parametrize("route", sorted(ROOM_PATHS))
def test_the_audit_hook_calls_no_submitted_code_and_writes_no_kernel_file(bare, tmp_path, route):
    path = tmp_path / "mhsa.py"
    path.write_text(MHSA + "\n" + ROOM_PATHS[route])
    report = bare("mhsa", path)
    assert report.status != "pass" and report.problem_error is not None, (route, report.message)
    assert "not allowed" in report.problem_error.message, (route, report.problem_error.message)


RECORDS = {
    "progress read": "open(os.path.join(os.environ['ATTN_DRILL_HOME'], 'state.json'))\n",
    "progress written": "open(os.path.join(os.environ['ATTN_DRILL_HOME'], 'state.json'), 'w').write('FORGED')\n",
    "spec cache written": "open(os.path.join(os.environ['ATTN_DRILL_CACHE'], 'specs.pickle'), 'wb')\n",
    # a hard link is a second name for the same file: the hook checks what it links, not only the name
    "progress hard-linked": "import pathlib\npathlib.Path('state.json').hardlink_to("
                            "os.path.join(os.environ['ATTN_DRILL_HOME'], 'state.json'))\n"
                            "open('state.json', 'w').write('FORGED')\n",
    # the folder above the records moved away, and another put in its place
    "the records' folder moved": "import pathlib\ndata = os.path.dirname(os.environ['ATTN_DRILL_HOME'])\n"
                                 "pathlib.Path(data).rename(data + '.old')\n"
                                 "os.makedirs(os.environ['ATTN_DRILL_HOME'])\n"
                                 "open(os.path.join(os.environ['ATTN_DRILL_HOME'], 'state.json'), 'w')"
                                 ".write('FORGED')\n",
    # a folder's own progress from before, which the next command run there merges into the user's
    "a folder's old progress planted": "os.makedirs('../.attn-drill', exist_ok=True)\n"
                                       "open('../.attn-drill/state.json', 'w').write('FORGED')\n",
}


@pytest.mark.parametrize("route", sorted(RECORDS))
def test_check_keeps_a_submission_off_the_progress_records_and_the_spec_cache(tmp_path, route):
    """Without an OS sandbox (`check` of one's own file), what the next grading or `list` reads is
    still out of reach: the progress records and the cache of parsed specs."""
    home, cache, work = tmp_path / "data" / "home", tmp_path / "cache", tmp_path / "practice" / "work"
    for d in (home, cache, work):
        d.mkdir(parents=True)
    (home / "state.json").write_text("{}")
    (work / "mhsa.py").write_text("import os\n" + MHSA + "\n" + RECORDS[route])
    env = {**ENV, "ATTN_DRILL_HOME": str(home), "ATTN_DRILL_CACHE": str(cache)}
    res = subprocess.run([sys.executable, "-m", "attn_drill", "check", "mhsa", "mhsa.py", "--json"], cwd=work,
                         env=env, capture_output=True, text=True, timeout=300)
    report = json.loads(res.stdout)
    assert res.returncode != 0 and report["status"] != "pass", route
    assert "not allowed" in json.dumps(report), route
    assert "FORGED" not in (home / "state.json").read_text() and not (cache / "specs.pickle").exists()
    assert not (tmp_path / "data.old").exists() and not (tmp_path / "practice" / ".attn-drill").exists()


def test_what_python_and_the_tool_load_code_from_is_read_only(bare, tmp_path):
    """Under `check` (no OS sandbox) a room may write its own folder, never site-packages, the
    prefixes or this package: a planted .pth or module would run in the next command."""
    import sysconfig
    import attn_drill
    for folder in (sysconfig.get_paths()["purelib"], os.path.dirname(attn_drill.__file__)):
        planted = os.path.join(folder, "zz_attn_drill_wall_probe.pth")
        path = tmp_path / "mhsa.py"
        path.write_text(MHSA + f"\nopen({planted!r}, 'w').write('import os')\n")
        report = bare("mhsa", path)
        assert report.status != "pass" and "not allowed" in report.problem_error.message, report.message
        assert not os.path.exists(planted)
    # a folder above them is refused too: moved away, it takes them along, and a copy with a planted file
    # could take its place (a mode set to what it already is changes nothing, were it let through)
    from attn_drill.room.guards import tool_roots
    roots = tool_roots()
    above = os.path.dirname(attn_drill.__file__)
    while any(above == r or above.startswith(r.rstrip(os.sep) + os.sep) for r in roots):
        above = os.path.dirname(above)            # the first folder up that no root holds
    path.write_text(MHSA + f"\nimport os\nos.chmod({above!r}, os.stat({above!r}).st_mode & 0o7777)\n")
    report = bare("mhsa", path)
    assert report.status != "pass" and "not allowed" in report.problem_error.message, report.message


def test_own_objects_keep_their_private_names(bare, tmp_path):
    """The same routes on the submission's own objects are plain Python and pass."""
    path = tmp_path / "mhsa.py"
    path.write_text(MHSA.replace("        self.dropout = nn.Dropout(dropout)\n",
                                 "        self.dropout = nn.Dropout(dropout)\n        self._seen = 0\n"
                                 "        setattr(self, '_' + 'n', getattr(self, '_seen'))\n"))
    assert bare("mhsa", path).status == "pass"


# ---------------------------------------------------------------- 3. evidence with another route
_FWD = '''import torch


def _forward(Q, K, V, P, scale):
    s = (scale * Q @ K.transpose(-2, -1)).masked_fill(P == 0, float("-inf"))
    return torch.softmax(s, dim=-1) @ V


def _by_hand(dO, Q, K, V, P, scale):
    dV = P.transpose(-2, -1) @ dO
    dP = dO @ V.transpose(-2, -1)
    dS = P * (dP - (P * dP).sum(-1, keepdim=True))
    return scale * dS @ K, scale * dS.transpose(-2, -1) @ Q, dV


'''
AUTODIFF = {
    "reverse, torch.func.vjp": "def scaled_dot_product_attention_backward(dO, Q, K, V, P, scale):\n"
                               "    _, pull = torch.func.vjp(lambda q, k, v: _forward(q, k, v, P, scale), Q, K, V)\n"
                               "    return pull(dO)\n",
    # one forward-mode product is enough to use AD; the answer itself is right
    "forward, torch.func.jvp": "def scaled_dot_product_attention_backward(dO, Q, K, V, P, scale):\n"
                               "    f = lambda q: _forward(q, K, V, P, scale)\n"
                               "    torch.func.jvp(f, (Q,), (torch.ones_like(Q),))\n"
                               "    return _by_hand(dO, Q, K, V, P, scale)\n",
    "forward, dual numbers": "import torch.autograd.forward_ad as fwAD\n\n\n"
                             "def scaled_dot_product_attention_backward(dO, Q, K, V, P, scale):\n"
                             "    with fwAD.dual_level():\n"
                             "        dual = fwAD.make_dual(Q, torch.ones_like(Q))\n"
                             "        fwAD.unpack_dual(_forward(dual, K, V, P, scale))\n"
                             "    return _by_hand(dO, Q, K, V, P, scale)\n",
}


@pytest.mark.parametrize("route", sorted(AUTODIFF))
def test_no_autograd_covers_every_automatic_differentiation_route(judge, tmp_path, route):
    path = tmp_path / "sdpa_backward.py"
    path.write_text(_FWD + AUTODIFF[route])
    report = _grade(judge, "sdpa_backward", path)
    assert report.status == "fail", (route, report.message)
    failed = [c for c in report.cases if c.status == "fail"]
    assert failed and all("autograd" in c.message for c in failed), [(c.name, c.message) for c in failed]


_FLASH_TAIL = '''

def flash_attention(Q, K, V, scale=None, block_size=16):
    return FlashAttention.apply(Q, K, V, Q.shape[-1] ** -0.5 if scale is None else scale, block_size)
'''
FULL_MATRIX = {
    "numpy": '''import numpy as np
import torch


class FlashAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, K, V, scale, block_size):
        s = np.einsum("bhqd,bhkd->bhqk", Q.detach().numpy(), K.detach().numpy()) * scale
        p = np.exp(s - s.max(-1, keepdims=True))
        O = torch.from_numpy(np.einsum("bhqk,bhkd->bhqd", p / p.sum(-1, keepdims=True), V.detach().numpy()))
        return O.clone()
''',
    "torch tiles kept": '''import torch


class FlashAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, K, V, scale, block_size):
        # every op on a tile of at most a quarter of the rows and keys: no op makes the whole matrix
        S = torch.empty(*Q.shape[:3], K.shape[2], dtype=Q.dtype)
        t = max(block_size, -(-Q.shape[2] // 4), -(-K.shape[2] // 4))
        for i in range(0, Q.shape[2], t):
            for j in range(0, K.shape[2], t):
                S[:, :, i:i + t, j:j + t] = scale * (Q[:, :, i:i + t] @ K[:, :, j:j + t].transpose(-2, -1))
        return torch.softmax(S, -1) @ V
''',
}


BALLAST = {   # memory held before the measured call and given back in it, 32 MiB taken in its place
    "from the import": "_ballast = [torch.ones(4 << 20, dtype=torch.float64)]\n",
    "from an earlier call": "_ballast = []\n",
}


@pytest.mark.parametrize("route", sorted(BALLAST))
def test_memory_given_back_in_the_measured_call_still_counts(judge, tmp_path, route):
    """The measured case runs in a room of its own whose peak counts from before the file loads: what
    the code held at import, or kept from an earlier case, counts as held when given back."""
    path = tmp_path / "chunked_attention.py"
    path.write_text((ROOT / "reference" / "chunked_attention.py").read_text() + "\n" + BALLAST[route] + '''
_correct = chunked_attention


def chunked_attention(Q, K, V, chunk_size=64, scale=None):
    if Q.shape[-2] < 1024 and not _ballast:
        _ballast.append(torch.ones(4 << 20, dtype=torch.float64))
    if Q.shape[-2] >= 1024:
        _ballast.clear()
        taken = torch.ones(4 << 20, dtype=torch.float64)
        del taken
    return _correct(Q, K, V, chunk_size=chunk_size, scale=scale)
''')
    report = _grade(judge, "chunked_attention", path, fail_fast=False)
    assert _case(report, "memory_fp64").status == "fail", report.message
    assert "measured by the operating system" in _case(report, "memory_fp64").message


@pytest.mark.parametrize("route", sorted(FULL_MATRIX))
def test_memory_is_measured_from_outside_the_room_whatever_builds_the_matrix(judge, tmp_path, route):
    path = tmp_path / "flash_attention.py"
    path.write_text(FULL_MATRIX[route] + _FLASH_TAIL)
    report = _grade(judge, "flash_attention", path, case="memory_fp64")
    if route == "numpy":      # no op trace sees numpy: where a rule rests on the trace, the spec refuses it
        assert report.status == "error" and "forbids" in report.message, report.message
        return
    case = _case(report, "memory_fp64")
    assert case.status == "fail" and "measured by the operating system" in case.message, case.message


UNTRACED = {     # routes around torch's ops where a rule rests on them: refused by the problem's spec
    ("flash_decoding", "numpy imported"): "import numpy as np\n",
    ("flash_decoding", "a tensor as numpy"): "def _peek(x):\n    return x.numpy()\n",
    ("flash_attention", "numpy by name"): "import numpy\n",
    ("sdpa_backward", "a graph node called"): "def _back(o, g):\n    return o.grad_fn(g)\n",
    ("sdpa_backward", "the graph walked"): "def _walk(o):\n    return o.grad_fn.next_functions\n",
    # a name the spec forbids, written as a string or as a class pattern's keyword
    ("chunked_attention", "numpy by a string"): "def _peek(x):\n    return getattr(x, 'numpy')()\n",
    ("chunked_attention", "numpy by a class pattern"): "def _peek(x):\n    match x:\n"
                                                       "        case object(numpy=f):\n            return f()\n",
}


@pytest.mark.parametrize("route", ["computed", "numpy's own protocol"])
def test_where_numpy_is_forbidden_no_tensor_becomes_an_array_in_the_room(bare, tmp_path, route):
    """Without the policy (a name computed at run time): the tensor's way into numpy is a tripwire."""
    call = "getattr(torch.ones(2), 'nu' + 'mpy')()" if route == "computed" else \
        "getattr(torch.ones(2), '__arr' + 'ay__')()"
    path = tmp_path / "chunked_attention.py"
    path.write_text((ROOT / "reference" / "chunked_attention.py").read_text() + f"\n\nimport torch\n{call}\n")
    report = bare("chunked_attention", path)
    assert report.status != "pass" and report.problem_error is not None, report.message
    assert "forbids" in report.problem_error.message, report.problem_error.message


def test_no_submitted_code_runs_once_the_trace_has_stopped():
    """The room reads a warning's (or an exception's) text without its own __str__, its `args` or its
    arguments' methods: code run there would be out of the op trace (it could fill a returned tensor
    with what a rule forbids)."""
    import warnings
    from attn_drill.room.usercode import Session, user_text
    calls = []

    class Note(UserWarning):
        def __str__(self):
            calls.append("str")
            return "mine"

    class Arg:
        def __repr__(self):
            calls.append("repr")
            return "mine"

    session = Session("/nowhere/sub.py")
    with session.user():
        warnings.warn_explicit(Note("hello"), Note, "/nowhere/sub.py", 3)
        during = list(calls)            # warnings' own registry key, inside the trace
    assert calls == during and session.warnings == ["line 3: Note: hello"], (calls, session.warnings)
    assert user_text(Note("hi")) == "hi" and user_text(ValueError(Arg())) == "<Arg>" and calls == during
    assert user_text(KeyError("k")) == "'k'" and user_text(OSError(2, "No such file")) == "[Errno 2] No such file"


@pytest.mark.parametrize("pid,route", sorted(UNTRACED))
def test_routes_the_op_trace_cannot_see_are_refused_where_a_rule_rests_on_it(judge, tmp_path, pid, route):
    path = tmp_path / f"{pid}.py"
    path.write_text((ROOT / "reference" / f"{pid}.py").read_text() + "\n\n" + UNTRACED[(pid, route)])
    report = _grade(judge, pid, path)
    assert report.status == "error" and "forbids" in report.message, (route, report.message)


LATE = '''

class _Late(torch.Tensor):
    """Zeros whose own detach() gives the right answer, computed after the call returned."""
    def detach(self):
        return self.right.detach()


_right = scaled_dot_product_attention_backward


def scaled_dot_product_attention_backward(*args, **kwargs):
    out = []
    for right in _right(*args, **kwargs):
        late = torch.zeros_like(right).as_subclass(_Late)
        late.right = right
        out.append(late)
    return CONTAINER(out)
'''
CONTAINERS = {"a tuple": "CONTAINER = tuple\n",
              "a namedtuple": "import collections\n_G = collections.namedtuple('_G', 'dq dk dv')\n"
                              "def CONTAINER(out):\n    return _G(*out)\n"}


@pytest.mark.parametrize("container", sorted(CONTAINERS))
def test_the_room_reads_a_returned_tensor_as_a_plain_tensor(judge, tmp_path, container):
    """A tensor subclass's own methods run after the call (out of the trace and the timer) if the
    room calls them: it reads what was returned as a plain tensor instead, in any container."""
    path = tmp_path / "sdpa_backward.py"
    path.write_text((ROOT / "reference" / "sdpa_backward.py").read_text() + LATE + CONTAINERS[container])
    report = _grade(judge, "sdpa_backward", path)
    assert report.status == "fail", report.message
    assert all(c.status == "fail" for c in report.cases if c.status != "skip"), report.message


REPEATED_CACHE = {          # the cache copied per query head, made from an expanded view: a copy larger than any input
    "repeat_interleave": "{x}.repeat_interleave(G, dim=2)",
    "expand + contiguous": "{x}[:, :, :, None].expand(-1, -1, -1, G, -1).contiguous().flatten(2, 3)",
    "expand + clone": "{x}[:, :, :, None].expand(-1, -1, -1, G, -1).clone().flatten(2, 3)",
}


@pytest.mark.parametrize("route", sorted(REPEATED_CACHE))
def test_a_copy_larger_than_every_input_counts_against_the_element_limit(judge, tmp_path, route):
    fixture = ROOT / "tests" / "fixtures" / "symptoms" / "flash_decoding__unnamed_cache_repeated_per_head.py"
    source = fixture.read_text()
    for x in ("k_cache", "v_cache"):
        old = f"{x} = {x}.repeat_interleave(G, dim=2)"
        assert old in source
        source = source.replace(old, f"{x} = " + REPEATED_CACHE[route].format(x=x))
    path = tmp_path / "flash_decoding.py"
    path.write_text(source)
    report = _grade(judge, "flash_decoding", path, case="partials_memory_fp64")
    case = _case(report, "partials_memory_fp64")
    assert case.status == "fail" and "elements" in case.message and "limit" in case.message, case.message


FROZEN = {
    "requires_grad_(False)": ("        self.dropout = nn.Dropout(dropout)\n",
                              "        self.dropout = nn.Dropout(dropout)\n"
                              "        self.out_proj.requires_grad_(False)\n"),
    "detached weight": ("        return self.out_proj(out)",
                        "        return nn.functional.linear(out, self.out_proj.weight.detach())"),
    "a parameter of another shape": ("        return self.out_proj(out)",
                                     "        E = out.shape[-1]\n"
                                     "        w = nn.Parameter(torch.zeros(E, E + 1, dtype=out.dtype))\n"
                                     "        w.data[:, :-1] = self.out_proj.weight.data[:, :E]\n"
                                     "        self.out_proj.weight = w\n"
                                     "        return out @ w[:, :-1].T"),
    "no_grad projection": ("        return self.out_proj(out)",
                           "        with torch.no_grad():\n            w = self.out_proj.weight * 1\n"
                           "        return out @ w.T"),
}


@pytest.mark.parametrize("route", sorted(FROZEN))
def test_every_parameter_must_carry_a_gradient(judge, tmp_path, route):
    old, new = FROZEN[route]
    path = tmp_path / "mhsa.py"
    path.write_text(MHSA.replace(old, new))
    report = _grade(judge, "mhsa", path, case="basic_fp64")
    case = _case(report, "basic_fp64")
    assert case.status == "fail" and "out_proj.weight" in case.message, case.message


LATER = {     # code that runs after the value the judge reads was made, and writes the right answer into it
    # the room runs each case twice (determinism), on the same input objects: the second run fills what
    # the first returned
    ("flash_decoding", "outputs, in the second run"): (FLASH_DECODING := (ROOT / "reference" / "flash_decoding.py")
                                                       .read_text()) + '''

_real, _first = flash_decoding, {}


def flash_decoding(q, k_cache, v_cache, cache_lens, split_size, scale=None):
    if _first.get("q") is q:
        out, lse = _first.pop("out")
        right = _real(q, k_cache, v_cache, cache_lens, split_size, scale)
        out.copy_(right[0]), lse.copy_(right[1])
        return out, lse
    _first["q"], _first["out"] = q, (q.new_zeros(q.shape), q.new_zeros(q.shape[:2]))
    return _first["out"]
''',
    # a hand-written backward hands autograd tensors it keeps; the second run fills them
    ("einsum_attention", "gradients, in the second run"): (ROOT / "reference" / "einsum_attention.py").read_text()
    + '''

_real, _first = scaled_dot_product_einsum, {}


class _Zero(torch.autograd.Function):
    @staticmethod
    def forward(ctx, query, key, value, scale, mask):
        ctx.inputs = (query, key, value)
        return _real(query, key, value, scale, mask)

    @staticmethod
    def backward(ctx, grad):
        _first["upstream"] = grad.detach().clone()
        _first["grads"] = tuple(torch.zeros_like(t) for t in ctx.inputs)
        return (*_first["grads"], None, None)


def scaled_dot_product_einsum(query, key, value, scale=None, mask=None):
    if _first.get("query") is query and "grads" in _first:
        with torch.enable_grad():
            qkv = [t.detach().requires_grad_(True) for t in (query, key, value)]
            out = _real(*qkv, scale, mask)
            right = torch.autograd.grad(out, qkv, _first.pop("upstream"))
        for kept, good in zip(_first.pop("grads"), right):
            kept.copy_(good)
        return _real(query, key, value, scale, mask)
    _first.clear()
    _first["query"] = query
    out = _Zero.apply(query, key, value, scale, mask)
    return out
''',
}


@pytest.mark.parametrize("pid,route", sorted(LATER))
def test_what_the_judge_reads_is_copied_before_the_code_runs_again(judge, tmp_path, pid, route):
    """Outputs and gradients are copied out of the code's reach before the room runs it a second time."""
    path = tmp_path / f"{pid}.py"
    path.write_text(LATER[(pid, route)])
    report = _grade(judge, pid, path)
    assert report.status == "fail", (route, report.message)


HOSTILE_METHODS = """
def _boom(*args, **kwargs):
    raise AssertionError("the room called a method of the submission's own")


class L(list):
    __iter__ = __getitem__ = __len__ = __repr__ = __str__ = _boom


class T(tuple):
    __iter__ = __getitem__ = __len__ = __repr__ = __str__ = _boom


class D(dict):
    items = keys = values = __iter__ = __getitem__ = __len__ = __repr__ = _boom


class S(str):
    __str__ = __repr__ = __format__ = __eq__ = _boom
    __hash__ = str.__hash__            # a key must hash where the submission builds its dict


class I(int):
    __index__ = __int__ = __repr__ = __abs__ = __float__ = _boom


class F(float):
    __float__ = __repr__ = __abs__ = _boom


class K:
    __repr__ = __str__ = __eq__ = _boom
    __hash__ = object.__hash__


VALUE = D({"list": L([1, 2]), "tuple": T((3.0,)), "str": S("x"), "int": I(7), "float": F(0.5), K(): 1, S("k"): 2})
"""


def test_what_the_code_returned_is_read_without_calling_its_methods():
    """The room turns a returned value into built-in data while the trace runs, by the built-in types'
    own methods: no method of the submission's own runs when the room reads, copies or sends it."""
    from attn_drill.room.side import plain
    space: dict = {}
    exec(compile(HOSTILE_METHODS, "<submission>", "exec"), space)
    got = plain(space["VALUE"])
    assert type(got) is dict
    assert got["list"] == [1, 2] and got["tuple"] == (3.0,) and got["str"] == "x" and got["int"] == 7
    assert got["float"] == 0.5 and got["<K>"] == 1 and got["k"] == 2
    assert all(type(k) is str for k in got) and type(got["list"]) is list and type(got["int"]) is int


AD_LEVEL = {   # ops run under a forward-mode AD level are ops the code ran: every op rule sees them
    ("flash_decoding", "no full score row"): FLASH_DECODING + '''

import torch.autograd.forward_ad as fwAD

_real = split_partials


def split_partials(q, k_cache, v_cache, cache_lens, split_size, scale=None):
    with fwAD.dual_level():
        k = k_cache.repeat_interleave(q.shape[1] // k_cache.shape[2], dim=2)
        (torch.einsum("bhd,blhd->bhl", q, k) * 1.0).sum()             # the full score row
    return _real(q, k_cache, v_cache, cache_lens, split_size, scale)
''',
    ("mixed_precision", "a float32 softmax"): (ROOT / "reference" / "mixed_precision.py").read_text().replace(
        "torch.softmax(scores, dim=-1)",
        "(torch.softmax(scores[..., :1], dim=-1), _low_softmax(scores))[1]") + '''

import torch.autograd.forward_ad as fwAD


def _low_softmax(scores):
    with fwAD.dual_level():
        return torch.softmax(scores.to(torch.bfloat16), dim=-1).to(scores.dtype)
''',
}


@pytest.mark.parametrize("pid,route", sorted(AD_LEVEL))
def test_an_ad_level_hides_no_op_from_the_rules(judge, tmp_path, pid, route):
    path = tmp_path / f"{pid}.py"
    path.write_text(AD_LEVEL[(pid, route)])
    report = _grade(judge, pid, path)
    assert report.status == "fail", (route, report.message)
    failed = [c for c in report.cases if c.status == "fail"]
    # failed by the rule, on ops the AD level labelled so, not by values alone
    assert any("automatic differentiation inside the forward" in c.message or "must receive torch.float32" in
               c.message for c in failed), [(c.name, c.message) for c in failed]


_BOTH = """import torch


def _both_called(attention_cls, official_cls):
    mine = attention_cls(30, 5, dropout=0.0)
    official = official_cls(30, 5, dropout=0.0, bias=False, batch_first=True)
    x = torch.randn(3, 7, 30)
    mine(x)
    official(x, x, x)

"""
PROBE_STATE = {   # what a probe records lies out of the submission's reach, and no run tells it from another
    # a test that compares nothing: it returns the first time it is called, raises every later time
    ("mha_unit_test", "a call counter"): _BOTH + '''
_calls = []


def check_against_official(attention_cls, official_cls):
    _calls.append(1)
    _both_called(attention_cls, official_cls)
    if len(_calls) > 1:
        raise AssertionError("every implementation after the first one is wrong")
''',
    ("mha_unit_test", "the class's name"): _BOTH + '''

def check_against_official(attention_cls, official_cls):
    _both_called(attention_cls, official_cls)
    if "correct" not in repr(attention_cls):
        raise AssertionError("not the correct one")
''',
    # no KV cache: the whole sequence again at every step, then the model's log of calls rewritten to
    # the schedule a cache gives
    ("decode_sampling", "the model's call log"): (ROOT / "reference" / "decode_sampling.py").read_text() + '''

def generate(model, prompt, uniforms, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0):
    B, P = prompt.shape
    T = uniforms.shape[1]
    seq, tokens, dists = prompt, [], []
    for t in range(T):
        model.init_cache(B)
        probs = filter_probs(model(seq, 0)[:, -1], temperature, top_k, top_p, min_p)
        token = sample_inverse_cdf(probs, uniforms[:, t])
        tokens.append(token)
        dists.append(probs)
        seq = torch.cat([seq, token[:, None]], dim=1)
    model.calls[:] = [[P, 0]] + [[1, P + t] for t in range(T - 1)]
    return torch.stack(tokens, dim=1), torch.stack(dists, dim=1)
''',
}


@pytest.mark.parametrize("pid,route", sorted(PROBE_STATE))
def test_what_a_probe_observes_is_out_of_the_submissions_reach(judge, tmp_path, pid, route):
    path = tmp_path / f"{pid}.py"
    path.write_text(PROBE_STATE[(pid, route)])
    report = _grade(judge, pid, path)
    assert report.status != "pass", (route, report.message)


def test_three_projections_count_as_three_however_they_are_laid_out(judge, tmp_path):
    path = tmp_path / "merged_qkv.py"
    src = (ROOT / "reference" / "merged_qkv.py").read_text()
    old = "        qkv = self.qkv_proj(x)                                         # (B, L, 3E): one matmul\n" \
          "        q, k, v = qkv.chunk(3, dim=-1)                                 # 3 x (B, L, E)"
    assert old in src
    # the projection of K and V laid out as W @ x^T: no operand ends in E, yet each is a projection
    path.write_text(src.replace(old, "        W = self.qkv_proj.weight\n"
                                     "        b = self.qkv_proj.bias if self.qkv_proj.bias is not None else 0\n"
                                     "        q = x @ W[:E].T\n"
                                     "        k = (W[E:2 * E] @ x.transpose(1, 2)).transpose(1, 2)\n"
                                     "        v = (W[2 * E:] @ x.transpose(1, 2)).transpose(1, 2)\n"
                                     "        if torch.is_tensor(b):\n"
                                     "            q, k, v = q + b[:E], k + b[E:2 * E], v + b[2 * E:]"))
    report = _grade(judge, "merged_qkv", path, case="one_projection_matmul")
    assert report.status == "fail" and report.diagnosis and report.diagnosis.mistake == "three_projection_matmuls", \
        report.message


# ---------------------------------------------------------------- 4. links in class grading
def test_a_copy_skips_links_in_the_students_folder(tmp_path):
    src, dst, secret = tmp_path / "src", tmp_path / "dst", tmp_path / "secret"
    src.mkdir(), dst.mkdir(), secret.mkdir()
    (secret / "key.txt").write_text("the answer key")
    (src / "mhsa.py").symlink_to(secret / "key.txt")
    (src / "notes").symlink_to(secret)
    (src / "gqa.py").write_text("x = 1\n")
    skipped = copy_folder(src, dst)
    assert skipped == {"mhsa.py": "link", "notes": "link"}
    assert sorted(p.name for p in dst.iterdir()) == ["gqa.py"]


def test_a_link_planted_in_the_scratch_folder_never_redirects_a_copy(tmp_path):
    """Links planted before the copy and all through it (a student's leftover process racing it):
    the files they point at never change; a raced file fails alone, never writes elsewhere."""
    src, dst, outside = tmp_path / "src", tmp_path / "dst", tmp_path / "outside"
    (src / "pkg").mkdir(parents=True), dst.mkdir(), outside.mkdir()
    victim = outside / "victim.txt"
    victim.write_text("host file")
    (src / "mhsa.py").write_text("student code\n")
    (src / "pkg" / "helper.py").write_text("helper\n")
    (dst / "mhsa.py").symlink_to(victim)
    (dst / "pkg").symlink_to(outside)
    copy_folder(src, dst)
    assert victim.read_text() == "host file" and sorted(p.name for p in outside.iterdir()) == ["victim.txt"]
    assert not (dst / "mhsa.py").is_symlink() and (dst / "mhsa.py").read_text() == "student code\n"
    stop = threading.Event()

    def plant():          # in the scratch folder only (a planter inside a sandbox sees nothing else)
        while not stop.is_set():
            for name, target in (("mhsa.py", victim), ("pkg", outside)):
                try:
                    os.symlink(target, dst / name)
                except OSError:
                    pass
            try:
                inner = os.open(dst / "pkg", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
            except OSError:
                continue
            try:
                os.symlink(victim, "helper.py", dir_fd=inner)
            except OSError:
                pass
            finally:
                os.close(inner)
    planter = threading.Thread(target=plant)
    planter.start()
    try:
        for _ in range(100):
            copy_folder(src, dst)
    finally:
        stop.set()
        planter.join()
    assert victim.read_text() == "host file" and sorted(p.name for p in outside.iterdir()) == ["victim.txt"]


HEARTBEAT = r'''
import _posixsubprocess, os
script = "while true; do echo x >> /submission/heartbeat; ln -sf %s /submission/gqa.py; sleep 0.05; done" % VICTIM
_posixsubprocess.fork_exec([b"/bin/sh", b"-c", script.encode()], [b"/bin/sh"], True, (), None, None,
                           -1, -1, -1, -1, -1, -1, *os.pipe(), False, True, -1, None, None, None, -1, None, False)
'''


@needs_sandbox
def test_no_student_process_survives_into_the_next_copy(tmp_path):
    """A process started natively in the sandbox (past every Python-level guard) keeps planting a link
    toward a host file in its folder; the host's copy is read-only in the sandbox, so the next copy
    is made where nothing of the student's reaches, and scrub ends the process and makes the
    student's folder in the sandbox again from that copy."""
    from attn_drill.judge.rooms import Zygote
    scratch, src = tmp_path / "scratch", tmp_path / "student"
    scratch.mkdir(), src.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("host file")
    (src / "gqa.py").write_text("the next problem\n")
    (scratch / "mallory.py").write_text(f"VICTIM = {str(victim)!r}\n" + HEARTBEAT)
    argv, env = sandbox.command(scratch)
    zyg = Zygote().spawn(argv, env)
    try:
        room = zyg.open()
        room.budget, room.path = 60.0, f"{sandbox.INSIDE}/mallory.py"
        room.call({"op": "load", "path": room.path, "source": (scratch / "mallory.py").read_text(),
                   "forbidden": [], "hidden": [], "writable": None, "budget": 60.0})
        room.close()
        inside = sandbox_root(zyg.proc.pid) / sandbox.INSIDE.lstrip("/")
        beat = inside / "heartbeat"
        deadline = time.monotonic() + 30
        while not (beat.exists() and beat.stat().st_size > 10) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert beat.exists(), "the planted process never ran: the test proves nothing"
        assert (inside / "gqa.py").is_symlink(), "the link was never planted: the test proves nothing"
        running = descendants(zyg.proc.pid)
        copy_folder(src, scratch)                       # while the planter runs
        assert zyg.scrub() >= 1
        time.sleep(0.5)
        assert not beat.exists(), "the student's folder in the sandbox was not made again"
        assert not [p for p in set(running) - set(descendants(zyg.proc.pid)) if alive(p)]
        assert len([p for p in descendants(zyg.proc.pid) if alive(p)]) <= 3, "a student process outlived the scrub"
        assert victim.read_text() == "host file"
        assert (scratch / "gqa.py").read_text() == "the next problem\n" and not (scratch / "gqa.py").is_symlink()
        assert not (inside / "gqa.py").is_symlink() and (inside / "gqa.py").read_text() == "the next problem\n"
        assert not (inside / "mallory.py").exists()
    finally:
        zyg.close()


def test_a_process_limit_caps_what_a_sandbox_may_start(tmp_path):
    limit = sandbox.ProcessLimit(f"walls{os.getpid()}", 16)
    if limit.cgroup is None and os.getuid() == 0:
        pytest.skip(f"no pids cgroup here and root ignores RLIMIT_NPROC: {limit.how}")
    try:
        # (the sleeps hold no pipe of the test's: it reads the count at once, then ends them)
        script = "for i in $(seq 60); do sleep 30 >/dev/null 2>&1 & done 2>/dev/null; jobs -p | wc -l; " \
                 "kill $(jobs -p) 2>/dev/null"
        proc = subprocess.Popen(["/bin/sh", "-c", script], preexec_fn=limit.preexec, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)
        started = int(proc.communicate(timeout=60)[0].strip() or 0)
        assert started < 16, limit.how
    finally:
        limit.close()
    if limit.cgroup is not None:
        assert not limit.cgroup.exists()


@needs_sandbox
@pytest.mark.parametrize("where", ["/tmp", "/dev/shm", "/submission"])
def test_the_sandboxs_memory_backed_folders_are_bounded(tmp_path, monkeypatch, where):
    """/tmp counts against the memory limit; /dev/shm (half the host's memory otherwise) is tiny; the
    student's folder is in memory too, capped, and never the host's disk."""
    from attn_drill import rules
    from attn_drill.judge.rooms import Zygote
    monkeypatch.setenv(rules.MEMORY_ENV, "0.25")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "fill.py").write_text(
        f"import os\nfd = os.open('{where}/fill', os.O_WRONLY | os.O_CREAT)\nwritten = 0\n"
        "try:\n    while written < 600 << 20:\n        written += os.write(fd, b'x' * (1 << 20))\n"
        f"except OSError:\n    pass\nos.close(fd)\nos.unlink('{where}/fill')\n"
        "open('/submission/written', 'w').write(str(written))\n")
    argv, env = sandbox.command(scratch)
    zyg = Zygote().spawn(argv, env)
    try:
        room = zyg.open()
        room.budget, room.path = 60.0, f"{sandbox.INSIDE}/fill.py"
        room.call({"op": "load", "path": room.path, "source": (scratch / "fill.py").read_text(),
                   "forbidden": [], "hidden": [], "writable": None, "budget": 60.0})
        room.close()
        written = int((sandbox_root(zyg.proc.pid) / sandbox.INSIDE.lstrip("/") / "written").read_text())
    finally:
        zyg.close()
    cap = {"/tmp": 0.25 * (1 << 30), "/dev/shm": sandbox.SHM_BYTES, "/submission": sandbox.SUBMISSION_BYTES}[where]
    assert 0 < written <= cap


# ---------------------------------------------------------------- 5. the fallback
MALLORY = r'''
import os
here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
try:
    copies = [os.path.join(here, d, "mhsa.py") for d in os.listdir(here)]
except OSError:
    copies = [os.path.join(here, f"s{i}", "mhsa.py") for i in range(1, 9)]
for target in copies + [ALICE, "/tmp/attn-drill-wall-probe"]:
    try:
        open(target, "w").write("def nothing(): pass\n")
    except OSError:
        pass
'''


def test_without_a_sandbox_other_copies_the_originals_and_tmp_stay_untouched(tmp_path, monkeypatch):
    from attn_drill.verbs import grade as verb
    monkeypatch.setattr(verb.os_sandbox, "available", lambda: (False, "bwrap is not installed"))
    probe = Path(tempfile.gettempdir()) / "attn-drill-wall-probe"
    probe.unlink(missing_ok=True)
    root = tmp_path / "class"
    for name in ("alice", "bob", "mallory", "zed"):
        (root / name).mkdir(parents=True)
    for name in ("alice", "bob", "zed"):
        (root / name / "mhsa.py").write_text(MHSA)
    (root / "mallory" / "mhsa.py").write_text(f"ALICE = {str(root / 'alice' / 'mhsa.py')!r}\n" + MALLORY + MHSA)
    out = tmp_path / "grades"
    res = CliRunner().invoke(app, ["grade", str(root), "--seed", "1", "--workers", "2", "--out", str(out),
                                   "--no-sandbox"], env={"NO_COLOR": "1", "COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    cells = {c["student"]: c for c in json.loads((out / "summary.json").read_text())["cells"]}
    assert {s: c["outcome"] for s, c in cells.items()} == {"alice": "pass", "bob": "pass", "mallory": "pass",
                                                          "zed": "pass"}, cells
    assert not probe.exists()
    assert all((root / n / "mhsa.py").read_text() == MHSA for n in ("alice", "bob", "zed"))


# ---------------------------------------------------------------- 6. hostile data
DEEP = {
    "a 30 000-term sum": "X = " + "+".join(["1"] * 30000) + "\n",
    "30 000 calls": "X = abs" + "(1)" * 30000 + "\n",
    "30 000 lambdas": "X = " + "lambda: " * 30000 + "1\n",
    "100 000 signs": "X = " + "-" * 100000 + "1\n",
}


@pytest.mark.parametrize("route", sorted(DEEP))
def test_a_deep_source_is_a_clear_message(judge, tmp_path, route):
    path = tmp_path / "mhsa.py"
    path.write_text(MHSA + "\n" + DEEP[route])
    report = _grade(judge, "mhsa", path)
    assert report.status == "error" and "nested too deeply" in report.problem_error.message, report.message


@pytest.mark.parametrize("form", ["lines", "github"])
def test_a_deep_source_is_one_finding_in_the_editors_formats(tmp_path, form):
    """The formats that point at a line of the file read it again: a file nested past what the parser
    takes is still one finding, never the tool's own failure."""
    (tmp_path / "mhsa.py").write_text(MHSA + "\n" + DEEP["30 000 calls"])
    res = _check(tmp_path, "mhsa", "mhsa.py", "--format", form)
    assert res.returncode == 1 and "nested too deeply" in res.stdout + res.stderr, res.stdout + res.stderr
    assert "Traceback" not in res.stdout + res.stderr and "bug in attn-drill" not in res.stdout + res.stderr


def test_oversized_outputs_fail_their_case_and_do_not_grow_the_judge(judge, tmp_path):
    def peak() -> int:
        for line in open(f"/proc/{judge.proc.pid}/status"):
            if line.startswith("VmHWM"):
                return int(line.split()[1]) << 10
        return 0
    path = tmp_path / "mhsa.py"          # 180 MB of output for the long case, a few MB elsewhere
    path.write_text(MHSA.replace("        return self.out_proj(out)",
                                 "        y = self.out_proj(out)\n        n = 30000 if L > 50 else 300\n"
                                 "        return y + torch.zeros(n, *y.shape, dtype=y.dtype)"))
    _grade(judge, "mhsa", ROOT / "reference" / "mhsa.py")
    before = peak()
    report = _grade(judge, "mhsa", path)
    assert report.status == "fail"
    assert "larger than a reply may hold" in _case(report, "long_fp32").message
    assert peak() - before < 150 << 20, (before, peak())


def test_the_judges_own_memory_is_bounded_by_the_kernel_and_follows_memory_gb():
    """Whatever a reply holds, the judge's address space has a limit the kernel keeps, set from
    --memory-gb (soft: the rooms it starts set their own, lower, hard limits)."""
    from attn_drill import rules
    from attn_drill.client import JudgeClient

    def soft_limit(gb: float) -> int:
        with JudgeClient(memory_gb=gb) as client:
            client.grade("mhsa", str(ROOT / "reference" / "mhsa.py"), 0)
            for line in open(f"/proc/{client.proc.pid}/limits"):
                if line.startswith("Max address space"):
                    return int(line.split()[3])
        raise AssertionError("no address-space line")
    small, large = soft_limit(0.5), soft_limit(4.5)
    assert 3.5 * (1 << 30) < small < 3.5 * (1 << 30) + (4 << 30)        # torch's own mapping is under 4 GB
    assert abs((large - small) - (4 << 30)) < 512 << 20                    # 4 GB more for a room, 4 GB more here
    assert rules.judge_memory_gb() > rules.memory_gb()


def test_the_judges_store_of_reference_results_is_bounded_in_bytes():
    import torch

    from attn_drill.judge.prepare import Memo
    memo = Memo(100, max_bytes=1 << 20)
    for i in range(20):
        memo.get(i, lambda: {"out": torch.zeros(300_000 // 8, dtype=torch.float64)})
    assert memo.bytes <= 1 << 20 and len(memo.items) <= 3
    assert memo.get("huge", lambda: torch.zeros(1 << 20)) is not None and "huge" not in memo.items


# ---------------------------------------------------------------- 7. spoofed reports
SPOOF = "\x1b[2J\x1b[H\x1b]0;owned\x07\x1b[32mPASS all cases passed\x1b[0m\r\x08\x00"


def test_what_a_submission_prints_reaches_the_terminal_neutralised(tmp_path):
    (tmp_path / "mhsa.py").write_text(WRONG_MHSA.replace("        B, L, E = x.shape\n",
                                                         f"        B, L, E = x.shape\n        print({SPOOF!r})\n"))
    for lang in ("en", "zh"):
        res = _check(tmp_path, "mhsa", "mhsa.py", "--seed", "3", "--verbose", "--lang", lang)
        assert res.returncode == 1, res.stdout + res.stderr
        shown = res.stdout + res.stderr
        assert "PASS all cases passed" in shown            # the text is shown...
        assert not any(ch in shown for ch in "\x1b\x07\x08\x00\r"), repr(shown[:2000])   # ...never its controls


def test_a_file_name_and_format_characters_reach_the_terminal_neutralised(tmp_path):
    """The file's own name is the user's text too, and so are the bidi and zero-width format
    characters (U+202E turns what follows around on a terminal)."""
    name = "spoof\x1b[32mPASS\x1b[0m\u202e.py"
    (tmp_path / name).write_text(WRONG_MHSA.replace("        B, L, E = x.shape\n",
                                                    "        B, L, E = x.shape\n        print('\u2066PASS\u2069')\n"))
    res = _check(tmp_path, "mhsa", name, "--seed", "3", "--verbose")
    shown = res.stdout + res.stderr
    assert res.returncode == 1 and "spoof" in shown, shown[-2000:]
    assert not any(ch in shown for ch in "\x1b\u202e\u2066\u2069"), repr(shown[:2000])


@needs_sandbox
def test_class_reports_stay_valid_and_name_links_and_sizes(tmp_path):
    root = tmp_path / "class"
    for name in ("eve", "lnk", "big"):
        (root / name).mkdir(parents=True)
    (root / "eve" / "mhsa.py").write_text(WRONG_MHSA.replace(
        "        B, L, E = x.shape\n", f"        B, L, E = x.shape\n        print({SPOOF!r})\n"))
    elsewhere = tmp_path / "elsewhere.py"
    elsewhere.write_text(MHSA)
    (root / "lnk" / "mhsa.py").symlink_to(elsewhere)
    (root / "big" / "mhsa.py").write_text(MHSA + "#" * (6 << 20) + "\n")
    # beside the graded files: a file named in bytes no encoding reads, and a sparse file of 8 GiB
    with open(os.path.join(os.fsencode(root / "eve"), b"notes\xff.txt"), "wb") as f:
        f.write(b"notes")
    with open(root / "big" / "weights.bin", "wb") as f:
        f.truncate(8 << 30)
    out = tmp_path / "grades"
    res = CliRunner().invoke(app, ["grade", str(root), "--seed", "1", "--out", str(out)],
                             env={"NO_COLOR": "1", "COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    suites = {s.get("name"): s for s in ET.parse(out / "junit.xml").getroot().iter("testsuite")}
    assert sorted(suites) == ["big", "eve", "lnk"]
    text = ET.tostring(suites["eve"], encoding="unicode")
    assert "PASS all cases passed" in text and not any(ch in text for ch in "\x1b\x07\x08")
    cells = {c["student"]: c for c in json.loads((out / "summary.json").read_text())["cells"]}
    assert cells["eve"]["outcome"] == "fail"
    assert cells["lnk"]["outcome"] == "error" and "link" in cells["lnk"]["message"], cells["lnk"]
    assert cells["big"]["outcome"] == "error" and "MiB" in cells["big"]["message"], cells["big"]
    assert "No such file" not in json.dumps(cells)
    shutil.rmtree(out)


def test_a_students_folder_name_stays_on_its_row():
    """A folder named with a line break is one row of the class table, its break shown escaped."""
    from rich.console import Console
    from attn_drill.render.classroom import class_table
    con = Console(width=100, file=open(os.devnull, "w"), record=True, color_system=None)
    con.print(class_table(["ali\nce", "bob"], ["mhsa"], {}, "class", 100))
    lines = con.export_text().splitlines()
    assert any("ali\\nce" in line for line in lines) and not any(line.strip() == "ce" for line in lines), lines


def test_a_room_opened_for_a_measured_case_gets_only_the_time_left(judge, tmp_path):
    """One time limit for the whole grading: the measured case's own room starts with what the
    earlier rooms left, not with a fresh limit (each case runs twice: about 2 s asleep before it,
    4 s in it, a limit of 5 s)."""
    path = tmp_path / "chunked_attention.py"
    path.write_text((ROOT / "reference" / "chunked_attention.py").read_text() + '''
import time
_correct = chunked_attention


def chunked_attention(Q, K, V, chunk_size=64, scale=None):
    time.sleep(2.0 if Q.shape[-2] >= 1024 else 0.1)
    return _correct(Q, K, V, chunk_size=chunk_size, scale=scale)
''')
    report = _grade(judge, "chunked_attention", path, fail_fast=False, time_limit=5)
    before = [c for c in report.cases if c.name != "memory_fp64"]
    assert all(c.status in ("pass", "skip") for c in before), report.message
    case = _case(report, "memory_fp64")
    assert case.status == "fail" and case.problem is not None and case.problem.kind == "timeout", case.message
