"""Load a bank file (a reference or a grader) as a fresh module, for the reference tests."""
import importlib.util
import itertools
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_count = itertools.count()


def load(pid: str, kind: str = "reference"):
    """reference/<pid>.py (or graders/<pid>.py with kind="graders") as a new module."""
    spec = importlib.util.spec_from_file_location(f"_test_{kind}_{pid}_{next(_count)}", ROOT / kind / f"{pid}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def failures(pid: str, case, sub, ref=None) -> list:
    """What a check case of graders/<pid>.py says about `sub` (a module, or any object with the target),
    its probe run here on both sides the way the engine runs it (the submission's side unguarded)."""
    from attn_drill.judge.prepare import Prepared
    from attn_drill.room.side import run_side
    ref = ref if ref is not None else load(pid)
    probes = load(pid, "probes") if (ROOT / "probes" / f"{pid}.py").is_file() else None
    prep = Prepared(case, ref, check=True)

    def obs(mod, data):
        side = run_side(mod, data, session=None, trace=False, repeat=False, probes=probes)
        return side.obs
    case.truth_obs = obs(ref, prep.truth)
    return list(case.check(obs(sub, prep.low), obs(ref, prep.low), case))
