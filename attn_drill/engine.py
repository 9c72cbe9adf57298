"""The grading engine: runs one file against one problem's cases and returns a Report.

It runs inside the worker process (torch is imported here, never on the path of `list`).
Per case it builds three sides with the same parameters and inputs:
  truth     the reference in float64, on the case's inputs and parameters rounded to the case dtype
  ref_low   the reference in the case dtype (measures what that dtype costs by itself)
  sub       the submission in the case dtype, run under guards, a capture and an op tracer
and compares outputs, then gradients under a random upstream gradient.
"""
from __future__ import annotations

import contextlib
import copy
import io
import sys
import time
import traceback
import types
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch.utils._pytree import tree_flatten

from . import bank, source
from .api import Case, Ctx, Failure, OpTracer as Tracer, case_seed
from .compare import compare, detail
from .params import InterfaceError, adapt
from .results import (ERROR, FAIL, PASS, SKIP, CaseResult, Diagnosis, Frame, Report, UserProblem)

FORBIDDEN_OPS = ("scaled_dot_product", "_flash_attention", "_efficient_attention", "_cudnn_attention",
                 "flex_attention")
_counter = 0


class ForbiddenCall(BaseException):
    """Raised by a tripwire; a BaseException so a bare `except Exception` cannot swallow it."""

    def __init__(self, name: str):
        super().__init__(f"called `{name}`, which this problem forbids: write it by hand")
        self.name = name


class GraderBug(RuntimeError):
    pass


# ---------------------------------------------------------------- guards, capture, tracing
class Guard:
    """Replaces forbidden torch entry points with tripwires while user code runs."""

    def __init__(self, names):
        self.names = set(names)
        self.tripped: list[str] = []
        self._saved = []

    def _targets(self):
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
        for obj, attr, name in self._targets():
            self._saved.append((obj, attr, getattr(obj, attr)))
            setattr(obj, attr, self._tripwire(name))
        return self

    def _tripwire(self, name):
        def tripwire(*args, **kwargs):
            self.tripped.append(name)
            raise ForbiddenCall(name)
        return tripwire

    def __exit__(self, *exc):
        for obj, attr, value in reversed(self._saved):
            setattr(obj, attr, value)
        self._saved.clear()
        return False


class Session:
    """Everything that happens while user code runs: guards, captured prints and warnings."""

    def __init__(self, path: str, forbidden):
        self.path = str(Path(path).resolve())
        self.forbidden = forbidden
        self.stdout = io.StringIO()
        self.warnings: list[str] = []
        self.guard = Guard(forbidden)

    @contextlib.contextmanager
    def user(self):
        with self.guard, contextlib.redirect_stdout(self.stdout), warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            try:
                yield
            finally:
                for w in rec:
                    if str(Path(w.filename).resolve()) == self.path:
                        msg = f"line {w.lineno}: {w.category.__name__}: {w.message}"
                        if msg not in self.warnings:
                            self.warnings.append(msg)

    def frames(self, exc: BaseException) -> list[Frame]:
        out = []
        for fs in traceback.extract_tb(exc.__traceback__):
            try:
                same = str(Path(fs.filename).resolve()) == self.path
            except (OSError, ValueError):
                same = False
            if same:
                out.append(Frame(Path(fs.filename).name, fs.lineno or 0, fs.name, (fs.line or "").strip()))
        return out

    def problem(self, exc: BaseException, kind: str = "exception", context: str = "") -> UserProblem:
        if isinstance(exc, ForbiddenCall):
            kind = "forbidden"
        text = f"{type(exc).__name__}: {exc}" if not isinstance(exc, ForbiddenCall) else str(exc)
        if isinstance(exc, MemoryError) or "can't allocate memory" in str(exc):
            text = f"ran out of memory ({str(exc)[:160]}); does something allocate far more than the inputs need?"
            kind = "memory"
        return UserProblem(kind, (context + text) if context else text, self.frames(exc))


# ---------------------------------------------------------------- loading
def load_module(path: str, session: Session | None, label: str) -> types.ModuleType:
    """Execute a file as a fresh module. Raises UserProblemError for syntax/import/other errors."""
    global _counter
    _counter += 1
    src = source.read(Path(path))
    name = f"attn_drill_{label}_{_counter}"
    try:
        code = compile(src, str(path), "exec", dont_inherit=True)
    except SyntaxError as exc:
        line = (exc.text or "").rstrip("\n")
        raise UserProblemError(UserProblem(
            "syntax", f"SyntaxError: {exc.msg}",
            [Frame(Path(path).name, exc.lineno or 0, "<module>", line.strip())])) from None
    mod = types.ModuleType(name)
    mod.__file__ = str(path)
    sys.modules[name] = mod
    ctx = session.user() if session else contextlib.nullcontext()
    try:
        with ctx:
            exec(code, mod.__dict__)
    except ImportError as exc:
        prob = session.problem(exc, "import") if session else UserProblem("import", str(exc))
        prob.kind = "import"
        raise UserProblemError(prob) from None
    except BaseException as exc:  # noqa: BLE001 - anything the user's module does at import time
        if isinstance(exc, (KeyboardInterrupt, SystemExit)) and not session:
            raise
        prob = session.problem(exc, "import", "while importing your file: ") if session else \
            UserProblem("import", repr(exc))
        raise UserProblemError(prob) from None
    return mod


def load_source(src: str, label: str) -> types.ModuleType:
    global _counter
    _counter += 1
    mod = types.ModuleType(f"attn_drill_{label}_{_counter}")
    mod.__file__ = f"<{label}>"
    sys.modules[mod.__name__] = mod
    exec(compile(src, f"<{label}>", "exec", dont_inherit=True), mod.__dict__)
    return mod


class UserProblemError(Exception):
    def __init__(self, problem: UserProblem):
        super().__init__(problem.message)
        self.problem = problem


# ---------------------------------------------------------------- one side of a case
@dataclass
class Side:
    outs: list = field(default_factory=list)          # [(name, value)]
    grads: dict = field(default_factory=dict)         # name -> tensor | None
    problem: UserProblem | None = None
    ops: list = field(default_factory=list)
    seconds: float = 0.0
    mutated: list = field(default_factory=list)
    nondeterministic: str | None = None
    adapted: str = ""


def _flatten(out, names=None, prefix="out"):
    if isinstance(out, torch.Tensor) or out is None or isinstance(out, (bool, int, float, str)):
        return [(prefix, out)]
    if isinstance(out, (tuple, list)):
        res = []
        for i, v in enumerate(out):
            n = names[i] if names and i < len(names) else f"{prefix}[{i}]"
            res += _flatten(v, None, n)
        return res
    if isinstance(out, dict):
        res = []
        for k, v in out.items():
            res += _flatten(v, None, f"{prefix}[{k!r}]")
        return res
    return [(prefix, out)]


def _cast(values: dict, dtype, device, grad: bool, truth: bool = False) -> dict:
    out = {}
    for k, v in values.items():
        if isinstance(v, torch.Tensor):
            if v.is_floating_point():
                v = v.to(device=device, dtype=dtype)
                if truth:
                    v = v.to(torch.float64)
                v = v.detach().clone().requires_grad_(grad)
            else:
                v = v.to(device).clone()
        out[k] = v
    return out


class Prepared:
    """Inputs, parameters and upstream gradients of one case, shared by every side."""

    def __init__(self, case: Case, ref_mod):
        self.case = case
        dev = case.device
        d = case.dtype
        self.ref_params: dict[str, torch.Tensor] = {}
        if case.init is not None:
            torch.manual_seed(case.seed)
            base = getattr(ref_mod, case.target)(**case.init)
            self.ref_params = {n: p.detach().to(torch.float64) for n, p in base.named_parameters()}
        self.params_low = {n: p.to(device=dev, dtype=d) for n, p in self.ref_params.items()}
        self.params_truth = {n: p.to(torch.float64) for n, p in self.params_low.items()}
        self.upstream: dict[str, torch.Tensor] = {}

    def inputs(self, truth: bool):
        c = self.case
        args = _cast(c.inputs, c.dtype, c.device, c.grad, truth)
        kwargs = _cast(c.kwargs, c.dtype, c.device, False, truth)
        return args, kwargs

    def grad_for(self, name: str, like: torch.Tensor, truth: bool) -> torch.Tensor | None:
        """The upstream gradient for output `name`; None when `like` has another shape than the truth's."""
        if name in self.upstream and tuple(self.upstream[name].shape) != tuple(like.shape):
            return None
        if name not in self.upstream:
            gen = torch.Generator().manual_seed(case_seed(self.case.seed, "upstream:" + name))
            g = torch.randn(tuple(like.shape), generator=gen, dtype=torch.float64)
            self.upstream[name] = g.to(self.case.dtype if self.case.dtype.is_floating_point else torch.float32)
        g = self.upstream[name]
        return g.to(device=like.device, dtype=torch.float64 if truth else like.dtype)


def run_side(mod, prep: Prepared, *, truth: bool, session: Session | None, trace: bool,
             repeat: bool) -> Side:
    case = prep.case
    side = Side()
    user = session.user if session else contextlib.nullcontext
    dtype = torch.float64 if truth else case.dtype
    tracer = Tracer() if trace else None
    try:
        target = getattr(mod, case.target, None)
        if target is None:
            names = sorted(n for n in vars(mod) if not n.startswith("_") and callable(vars(mod)[n]))
            raise UserProblemError(UserProblem(
                "missing", f"your file defines no `{case.target}`; it defines: {', '.join(names) or 'nothing'}. "
                           f"Keep the names from the stub."))
        impl = target
        mapping = {}
        if case.init is not None:
            with user():
                torch.manual_seed(case.seed)
                impl = target(**case.init)
            if not isinstance(impl, torch.nn.Module):
                raise UserProblemError(UserProblem(
                    "interface", f"`{case.target}(...)` built a {type(impl).__name__}, not a torch.nn.Module"))
            impl.to(device=case.device, dtype=dtype)
            sub_params = dict(impl.named_parameters())
            try:
                mapping, side.adapted = adapt(prep.ref_params, {n: tuple(p.shape) for n, p in sub_params.items()})
            except InterfaceError as exc:
                raise UserProblemError(UserProblem("interface", str(exc))) from None
            src = prep.params_truth if truth else prep.params_low
            with torch.no_grad():
                for name, fn in mapping.items():
                    sub_params[name].copy_(fn(src))
            impl.train(case.train)
        args, kwargs = prep.inputs(truth)
        snapshot = {k: v.detach().clone() for k, v in {**args, **kwargs}.items() if isinstance(v, torch.Tensor)}
        amp = (torch.autocast(device_type=case.device, dtype=case.autocast)
               if case.autocast is not None and not truth else contextlib.nullcontext())

        def call():
            if case.run is not None:
                return case.run(impl, *args.values(), **kwargs)
            return impl(*args.values(), **kwargs)

        t0 = time.perf_counter()
        with user(), amp, (tracer if tracer else contextlib.nullcontext()):
            torch.manual_seed(case.seed)
            out = call()
        side.outs = _flatten(out, case.output_names)
        for k, before in snapshot.items():
            now = {**args, **kwargs}[k]
            if now.shape != before.shape or not torch.equal(now.detach(), before):
                side.mutated.append(k)
        if case.grad:
            float_outs = [(n, v) for n, v in side.outs
                          if isinstance(v, torch.Tensor) and v.is_floating_point()]
            wrt_names = [k for k, v in args.items() if isinstance(v, torch.Tensor) and v.requires_grad]
            wrt = [args[k] for k in wrt_names]
            pnames = []
            if case.init is not None:
                plist = dict(impl.named_parameters())
                pnames = [n for n in plist if plist[n].requires_grad]
                wrt += [plist[n] for n in pnames]
            diff_outs = [(n, v) for n, v in float_outs if v.requires_grad]
            if float_outs and not diff_outs:
                side.grads = {**{k: None for k in wrt_names}, **{f"param {n}": None for n in pnames}}
            elif diff_outs and wrt:
                upstream = [prep.grad_for(n, v, truth) for n, v in diff_outs]
                if all(g is not None for g in upstream):  # else a wrong shape, judged on the forward
                    if tracer:
                        tracer.phase = "backward"
                    with user(), (tracer if tracer else contextlib.nullcontext()):
                        grads = torch.autograd.grad([v for _, v in diff_outs], wrt, upstream, allow_unused=True)
                    keys = wrt_names + [f"param {n}" for n in pnames]
                    side.grads = dict(zip(keys, grads))
        side.seconds = time.perf_counter() - t0
        if repeat and case.deterministic and not case.train:
            with user(), torch.no_grad(), amp:
                torch.manual_seed(case.seed + 1)
                again = _flatten(call(), case.output_names)
            for (n, a), (_, b) in zip(side.outs, again):
                if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape:
                    if not torch.equal(a.detach(), b.detach()) and not (
                            torch.isnan(a).any() and torch.isnan(b).any()):
                        side.nondeterministic = (f"two runs in eval mode gave different `{n}` "
                                                 f"(max difference {float((a.detach() - b.detach()).abs().max()):.3g})")
                        break
        side.mapping = mapping
    except UserProblemError as exc:
        side.problem = exc.problem
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - the user's code may raise anything
        if session is None:
            raise
        side.problem = session.problem(exc)
    if tracer:
        side.ops = tracer.ops
    return side


# ---------------------------------------------------------------- judging a case
def _value_str(v) -> str:
    if isinstance(v, torch.Tensor):
        return f"tensor of shape {list(v.shape)}, {str(v.dtype).replace('torch.', '')}, on {v.device}"
    return f"{type(v).__name__} {v!r}"[:120]


def _judge(case: Case, truth: Side, low: Side | None, sub: Side, spec) -> tuple[CaseResult, dict]:
    res = CaseResult(case.name, PASS, case.shapes(), str(case.dtype).replace("torch.", ""), case.note)
    if case.autocast is not None:
        res.dtype += f" autocast {str(case.autocast).replace('torch.', '')}"
    res.time_ms = sub.seconds * 1000
    limits = {}
    if sub.problem:
        res.status, res.problem, res.message, res.forward = FAIL, sub.problem, sub.problem.message, FAIL
        res.message = _stub_message(sub.problem)
        if sub.problem.kind in ("missing", "interface"):
            res.status = ERROR
        return res, limits
    if sub.mutated:
        return _fail(res, "forward", f"your code changed its input(s) {', '.join(sub.mutated)} in place; "
                                     f"work on copies (e.g. x = x.clone()) or use out-of-place ops"), limits
    low_map = dict(low.outs) if low else {}
    sub_map = dict(sub.outs)
    res.forward = PASS
    worst = None  # (score, name, cmp, got, truth)
    # -- forward: names, shapes, dtypes, devices, then values
    for name, t in truth.outs:
        if name not in sub_map:
            return _fail(res, "forward", f"your code returned {len(sub.outs)} value(s); expected {len(truth.outs)} "
                                         f"({', '.join(n for n, _ in truth.outs)})"), limits
        got = sub_map[name]
        if isinstance(t, torch.Tensor):
            if not isinstance(got, torch.Tensor):
                return _fail(res, "forward", f"`{name}` should be a tensor; got {_value_str(got)}"), limits
            if tuple(got.shape) != tuple(t.shape):
                return _fail(res, "forward", f"`{name}` has shape {list(got.shape)}; expected {list(t.shape)}"), limits
            want_dtype = low_map[name].dtype if low and isinstance(low_map.get(name), torch.Tensor) else \
                (case.dtype if t.is_floating_point() else t.dtype)
            if got.dtype != want_dtype:
                return _fail(res, "forward", f"`{name}` has dtype {got.dtype}; expected {want_dtype} "
                                             f"(keep the input's dtype)"), limits
            if got.device.type != torch.device(case.device).type:
                return _fail(res, "forward", f"`{name}` is on {got.device}; expected {case.device}"), limits
            if not t.is_floating_point() or case.exact:
                if not torch.equal(got.detach().cpu(), t.detach().cpu().to(got.dtype)):
                    n_bad = int((got.detach().cpu() != t.detach().cpu().to(got.dtype)).sum())
                    return _fail(res, "forward", f"`{name}` differs from the expected values in {n_bad} of "
                                                 f"{t.numel()} elements"), limits
                continue
            if not torch.isfinite(t).all():
                raise GraderBug(f"{case.name}: the reference's `{name}` has NaN/inf (a grader bug)")
            cmp = compare(got, t, low_map.get(name), _tol_dtype(case), grad=False, rtol=case.rtol)
            limits[name] = cmp
            worst = _worse(worst, (name, cmp, got, t))
        else:
            if isinstance(t, float) and not case.exact:
                ok = isinstance(got, (int, float)) and abs(got - t) <= 1e-9 * max(1.0, abs(t))
            else:
                ok = type(got) is type(t) and got == t or (isinstance(t, int) and isinstance(got, int) and got == t)
            if not ok:
                return _fail(res, "forward", f"`{name}` is {got!r}; expected {t!r}"), limits
    if worst is not None:
        name, cmp, got, t = worst
        res.tensor, res.compare, res.max_error, res.allowed = name, cmp, cmp["max_abs"], cmp["allowed_abs"]
        if not cmp["ok"]:
            res.status, res.forward = FAIL, FAIL
            res.message = _cmp_message(name, cmp)
            res.detail = detail(got, t, cmp, case.axes)
            return res, limits
    if sub.nondeterministic:
        return _fail(res, "forward", sub.nondeterministic + "; is dropout or randomness active in eval mode?"), limits
    # -- gradients
    if case.grad and truth.grads:
        res.gradient = PASS
        gworst = None
        for key, tg in truth.grads.items():
            if tg is None or key.startswith("param "):
                continue  # parameters are judged in the submission's layout, by _judge_param_grads
            sg = sub.grads.get(key)
            if sg is None:
                return _fail(res, "gradient", f"no gradient reaches `{key}`: is something detached, "
                                              f"computed under no_grad, or not used?"), limits
            if tuple(sg.shape) != tuple(tg.shape):
                return _fail(res, "gradient", f"gradient of `{key}` has shape {list(sg.shape)}; "
                                              f"expected {list(tg.shape)}"), limits
            lg = low.grads.get(key) if low else None
            cmp = compare(sg, tg, lg, _tol_dtype(case), grad=True, rtol=case.rtol)
            limits["grad " + key] = cmp
            gworst = _worse(gworst, (key, cmp, sg, tg))
        if gworst is not None and not gworst[1]["ok"]:
            key, cmp, sg, tg = gworst
            res.status, res.gradient = FAIL, FAIL
            res.tensor, res.compare = f"grad {key}", cmp
            res.max_error, res.allowed = cmp["max_abs"], cmp["allowed_abs"]
            res.message = _cmp_message(f"gradient of {key}", cmp)
            axes = ("row", "col") if "param" in key else case.axes
            res.detail = detail(sg, tg, cmp, axes if "param" not in key else ("out feature", "in feature"))
            return res, limits
    # -- op-trace rules
    for i, rule in enumerate(case.trace):
        msg = rule.check(sub.ops, case)
        if msg:
            res.tensor = f"trace rule {i}"
            return _fail(res, "forward", msg), limits
    return res, limits


def judge(case: Case, truth: Side, low: Side | None, side: Side, spec) -> tuple[CaseResult, dict]:
    """The whole verdict on one side of a case: outputs, input gradients, trace rules, parameter gradients."""
    res, limits = _judge(case, truth, low, side, spec)
    if res.status == PASS and case.grad and case.init is not None:
        res = _judge_param_grads(res, case, truth, low, side, limits)
    return res, limits


_MISSING = object()


def _worse(current, candidate):
    """Of two (name, compare, got, truth) tuples, the one to report: a failure first, then the larger
    error relative to what was allowed."""
    if current is None:
        return candidate
    def key(item):
        cmp = item[1]
        return (not cmp["ok"], cmp["max_abs"] / (cmp["allowed_abs"] + 1e-300))
    return candidate if key(candidate) > key(current) else current


def _judge_param_grads(res: CaseResult, case: Case, truth: Side, low: Side | None, sub: Side, limits) -> CaseResult:
    """Gradients of parameters, compared in the submission's layout (merged or separate projections)."""
    mapping = getattr(sub, "mapping", {}) or {}
    t_by_ref = {k[len("param "):]: v for k, v in truth.grads.items() if k.startswith("param ") and v is not None}
    l_by_ref = {k[len("param "):]: v for k, v in (low.grads.items() if low else []) if k.startswith("param ")}
    worst = None
    for sub_name, fn in mapping.items():
        try:
            tg = fn(t_by_ref)
        except KeyError:
            continue
        lg = None
        if low and all(v is not None for v in l_by_ref.values()):
            try:
                lg = fn(l_by_ref)
            except KeyError:
                lg = None
        sg = sub.grads.get(f"param {sub_name}", _MISSING)
        if sg is _MISSING:
            continue
        if sg is None:
            return _fail(res, "gradient", f"no gradient reaches parameter `{sub_name}`: is it used, and is "
                                          f"nothing detached?")
        cmp = compare(sg, tg, lg, _tol_dtype(case), grad=True, rtol=case.rtol)
        limits["grad param " + sub_name] = cmp
        worst = _worse(worst, (sub_name, cmp, sg, tg))
    if worst is not None and not worst[1]["ok"]:
        name, cmp, sg, tg = worst
        res.status, res.gradient = FAIL, FAIL
        res.tensor, res.compare = f"grad param {name}", cmp
        res.max_error, res.allowed = cmp["max_abs"], cmp["allowed_abs"]
        res.message = _cmp_message(f"gradient of parameter {name}", cmp)
        res.detail = detail(sg, tg, cmp, ("out feature", "in feature"))
    return res


def _stub_message(problem: UserProblem) -> str:
    if problem.message.startswith("NotImplementedError") and problem.frames:
        fr = problem.frames[-1]
        return f"not written yet: {fr.file}:{fr.line} in {fr.func} still raises NotImplementedError"
    return problem.message


def _tol_dtype(case: Case):
    """Tolerances follow the precision the math really ran in: the autocast dtype when there is one."""
    return case.autocast or case.dtype


def _fail(res: CaseResult, where: str, message: str) -> CaseResult:
    res.status = FAIL
    setattr(res, where, FAIL)
    res.message = message
    return res


def _cmp_message(name: str, cmp: dict) -> str:
    if cmp["nonfinite"]:
        return (f"`{name}` has {cmp['nonfinite']} NaN/inf value(s), first at index {cmp['nonfinite_index']}; "
                f"the expected values are all finite")
    share = 100.0 * cmp["mismatched"] / max(cmp["total"], 1)
    if cmp["mismatched"] == 0:
        return (f"`{name}` is off as a whole: relative error norm {cmp['relnorm']:.3g} > {cmp['gate']:.3g}")
    return (f"`{name}`: {cmp['mismatched']} of {cmp['total']} elements ({share:.1f}%) differ; greatest "
            f"difference {cmp['max_abs']:.3g} at {cmp['max_abs_index']} (allowed {cmp['allowed_abs']:.3g} "
            f"+ {cmp['rtol']:.2g}·|expected|)")


# ---------------------------------------------------------------- diagnosis
def _matches(sub: Side, mut: Side, limits: dict) -> float | None:
    """How close the submission is to a mutant on this case (None: not a match)."""
    if mut.problem:
        return None
    score = 0.0
    mut_map, sub_map = dict(mut.outs), dict(sub.outs)
    pairs = [(n, sub_map.get(n), v) for n, v in mut_map.items()]
    mapping = getattr(sub, "mapping", {}) or {}
    mut_mapping = getattr(mut, "mapping", {}) or {}
    for k, v in mut.grads.items():
        if not k.startswith("param "):
            pairs.append(("grad " + k, sub.grads.get(k), v))
    if mapping and mut_mapping:
        m_by_ref = {k[len("param "):]: v for k, v in mut.grads.items() if k.startswith("param ") and v is not None}
        for sub_name, fn in mapping.items():
            try:
                pairs.append(("grad param " + sub_name, sub.grads.get(f"param {sub_name}"), fn(m_by_ref)))
            except KeyError:
                continue
    for name, s, m in pairs:
        if isinstance(m, torch.Tensor):
            if not isinstance(s, torch.Tensor) or s.shape != m.shape:
                return None
            if not m.is_floating_point():
                if not torch.equal(s.detach().cpu(), m.detach().cpu()):
                    return None
                continue
            lim = limits.get(name)
            allowed = lim["allowed_abs"] if lim else 1e-6
            rtol = lim["rtol"] if lim else 1e-5
            a, b = s.detach().cpu().double(), m.detach().cpu().double()
            same = (torch.isnan(a) & torch.isnan(b)) | (a == b)   # equal infinities too
            diff = torch.where(same, torch.zeros_like(a), (a - b).abs())
            if torch.isnan(diff).any() or (diff > 4 * allowed + 4 * rtol * b.abs().nan_to_num()).any():
                return None
            score += float(diff.nan_to_num().norm()) / (float(b.nan_to_num().norm()) + 1e-30)
        elif m is not None and s != m:
            return None
    return score


# ---------------------------------------------------------------- grading one file
@contextlib.contextmanager
def _isolated_globals():
    """Whatever a submission does to torch's global state or sys.modules ends with its grading."""
    saved = (torch.get_default_dtype(), torch.is_grad_enabled(), torch.get_num_threads(),
             torch.are_deterministic_algorithms_enabled())
    modules = set(sys.modules)
    try:
        yield
    finally:
        torch.set_default_dtype(saved[0])
        torch.set_grad_enabled(saved[1])
        if torch.get_num_threads() != saved[2]:
            torch.set_num_threads(saved[2])
        if torch.are_deterministic_algorithms_enabled() != saved[3]:  # the setter imports inductor: seconds
            torch.use_deterministic_algorithms(saved[3])
        for name in set(sys.modules) - modules:
            if name.startswith("attn_drill_"):
                del sys.modules[name]


def grade(problem: str, path: str, seed: int = 0, full: bool = False, only_case: str | None = None,
          fail_fast: bool = False, diagnose: bool = True) -> Report:
    """Grade one file against one problem; never raises for anything the file does."""
    with _isolated_globals():
        return _grade(problem, path, seed, full, only_case, fail_fast, diagnose)


def _grade(problem: str, path: str, seed: int, full: bool, only_case: str | None, fail_fast: bool,
           diagnose: bool) -> Report:
    t_start = time.perf_counter()
    spec = bank.get(problem)
    path = str(Path(path).resolve())
    report = Report(problem, path, seed, full=full)
    report.replay = f"attn-drill check {problem} {_shown(path)} --seed {seed}" + (" --full" if full else "")
    # -- static: syntax and API scan
    src = source.read(Path(path))
    err = source.syntax_error(src, path)
    if err:
        report.status = ERROR
        report.problem_error = UserProblem("syntax", f"SyntaxError: {err['message']}",
                                           [Frame(Path(path).name, err["line"], "<module>", err["text"].strip())])
        report.message = f"your file does not parse: line {err['line']}: {err['message']}"
        return _finish(report, t_start)
    report.findings = [f.__dict__ for f in source.scan(src, spec)]
    session = Session(path, spec.all_forbidden)
    try:
        sub_mod = load_module(path, session, "submission")
    except UserProblemError as exc:
        report.status, report.problem_error = ERROR, exc.problem
        report.message = exc.problem.message
        report.output = session.stdout.getvalue()
        return _finish(report, t_start)
    torch.set_default_dtype(torch.float32)   # undo what the file may have set at import time
    torch.set_grad_enabled(True)
    ref_mod = load_module(str(bank.reference_path(problem)), None, "reference")
    grader = load_module(str(bank.grader_path(problem)), None, "grader")
    ctx = Ctx(seed, full=full, settings=spec.settings)
    all_cases = grader.cases(ctx)
    names = [c.name for c in all_cases]
    if len(set(names)) != len(names):
        raise GraderBug(f"graders/{problem}.py: two cases share a name")
    if only_case is not None:
        all_cases = [c for c in all_cases if c.name == only_case]
        if not all_cases:
            raise KeyError(f"no case '{only_case}' for {problem} with seed {seed}"
                           f"{'' if full else ' (try --full)'}; cases: {', '.join(names)}")
    mutant_mods = None
    for case in all_cases:
        case.seed = case_seed(seed, case.name)
        if case.device == "cuda" and not torch.cuda.is_available():
            report.cases.append(CaseResult(case.name, SKIP, case.shapes(), str(case.dtype).replace("torch.", ""),
                                           case.note, message=case.cuda_reason + "; this machine has no CUDA"))
            continue
        if case.is_check:
            res = _run_check(case, sub_mod, ref_mod, session, spec)
        else:
            prep = Prepared(case, ref_mod)
            truth = run_side(ref_mod, prep, truth=True, session=None, trace=False, repeat=False)
            low = None if case.dtype == torch.float64 and case.autocast is None else \
                run_side(ref_mod, prep, truth=False, session=None, trace=False, repeat=False)
            sub = run_side(sub_mod, prep, truth=False, session=session, trace=True, repeat=True)
            forb = [o.name for o in sub.ops if any(f in o.name for f in FORBIDDEN_OPS)]
            if forb and "scaled_dot_product_attention" in spec.all_forbidden and not sub.problem:
                sub.problem = UserProblem("forbidden", f"your code ran {forb[0]}, a fused attention kernel this "
                                                       f"problem forbids: write it by hand")
            res, limits = judge(case, truth, low, sub, spec)
            if sub.adapted and sub.adapted not in report.warnings:
                report.warnings.append(sub.adapted)
            first_failure = report.first_failure() is None
            if res.status == FAIL and diagnose and not sub.problem and first_failure:
                if mutant_mods is None:
                    mutant_mods = _mutants(spec, ref_mod)
                best = None
                for mid, mmod in mutant_mods.items():
                    if mmod is None:
                        continue
                    try:
                        mut = run_side(mmod, prep, truth=False, session=None, trace=True, repeat=False)
                    except Exception:  # noqa: BLE001 - a mutant that crashes here cannot be the match
                        continue
                    if mut.problem:
                        continue
                    mres = judge(case, truth, low, mut, spec)[0]
                    if mres.status == PASS:
                        continue  # a mutant that is right on this case names nothing here
                    if res.tensor.startswith("trace rule") and mres.tensor != res.tensor:
                        continue  # the submission broke an op rule: only a mutant breaking the same one
                    score = _matches(sub, mut, limits)
                    if score is not None and (best is None or score < best[0]):
                        best = (score, mid)
                if best:
                    m = spec.mistake(best[1])
                    res.diagnosis = Diagnosis(m.id, m.diagnosis.en, m.diagnosis.zh)
        report.cases.append(res)
        if res.diagnosis and report.diagnosis is None:
            report.diagnosis = res.diagnosis
        if res.status in (FAIL, ERROR):
            if "--case" not in report.replay:
                report.replay = (f"attn-drill check {problem} {_shown(path)} --seed {seed} --case {res.name}"
                                 + (" --full" if full else ""))
            stub = res.message.startswith("not written yet")
            if fail_fast or res.status == ERROR or stub:
                break
    report.output = session.stdout.getvalue()
    report.warnings += session.warnings
    failed = [c for c in report.cases if c.status in (FAIL, ERROR)]
    forbidden = [f for f in report.findings if f["line"]]
    missing = [f for f in report.findings if not f["line"]]
    first = report.first_failure()
    if first is not None and first.status == ERROR and first.problem:
        report.status, report.problem_error = ERROR, first.problem
        report.message = first.problem.message
    elif failed or forbidden or missing:
        report.status = FAIL
        ran = [c for c in report.cases if c.status != SKIP]
        parts = []
        if failed:
            parts.append(f"{len(failed)} of {len(ran)} case(s) failed")
        if forbidden:
            parts.append(f"uses forbidden `{forbidden[0]['name']}` (line {forbidden[0]['line']})")
        if missing:
            parts.append(missing[0]["message"])
        report.message = "; ".join(parts)
    else:
        report.status = PASS
        skipped = [c for c in report.cases if c.status == SKIP]
        report.message = f"all {len(report.cases) - len(skipped)} cases passed" + (
            f" ({len(skipped)} skipped: {skipped[0].message})" if skipped else "")
        report.replay = ""
    return _finish(report, t_start)


def _shown(path: str) -> str:
    try:
        return str(Path(path).relative_to(Path.cwd()))
    except ValueError:
        return path


def _finish(report: Report, t_start: float) -> Report:
    report.seconds = time.perf_counter() - t_start
    return report


def _mutants(spec, ref_mod) -> dict:
    ref_src = source.read(bank.reference_path(spec.id))
    out = {}
    for m in spec.mistakes:
        try:
            out[m.id] = load_source(source.mutant_source(spec, ref_src, m.id), f"mutant_{m.id}")
        except Exception:  # noqa: BLE001 - a broken mutant is reported by verify, not here
            out[m.id] = None
    return out


def _run_check(case: Case, sub_mod, ref_mod, session: Session, spec) -> CaseResult:
    res = CaseResult(case.name, PASS, case.shapes(), str(case.dtype).replace("torch.", ""), case.note,
                     forward=PASS)
    t0 = time.perf_counter()
    try:
        with session.user():
            torch.manual_seed(case.seed)
            failures = list(case.check(sub_mod, ref_mod, case) or [])
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001
        prob = session.problem(exc)
        res.status, res.forward, res.problem, res.message = FAIL, FAIL, prob, _stub_message(prob)
        res.time_ms = (time.perf_counter() - t0) * 1000
        return res
    res.time_ms = (time.perf_counter() - t0) * 1000
    failures = [f if isinstance(f, Failure) else Failure(str(f)) for f in failures]
    if failures:
        res.status, res.forward = FAIL, FAIL
        res.checks = [f.message for f in failures]
        res.message = failures[0].message
        named = next((f.mistake for f in failures if f.mistake), None)
        m = spec.mistake(named) if named else None
        if m:
            res.diagnosis = Diagnosis(m.id, m.diagnosis.en, m.diagnosis.zh)
    return res
