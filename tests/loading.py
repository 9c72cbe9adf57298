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
