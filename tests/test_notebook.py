"""`%load_ext attn_drill` in a real kernel (nbclient runs a small notebook from a folder of its own):
a `%%check` cell gets the verdict `check` gives the same code, its report as HTML with the maps as
images and the replay as a cell, and the attempt in the user's progress (here a folder the test
names with ATTN_DRILL_HOME); `%attn_drill new` puts
the stub in the next cell. IPython is imported by attn_drill.notebook only, never by the CLI."""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from attn_drill.progress import rules as progress
from attn_drill.verbs import check
from attn_drill.verbs.scaffold import stub_text

ROOT = Path(__file__).resolve().parent.parent
CLASS = ROOT / "tests" / "fixtures" / "class"
SEED = 5
CODE = {"right": (ROOT / "reference" / "mhsa.py").read_text(),
        "wrong": (CLASS / "bob" / "mhsa.py").read_text(),
        "raises": (CLASS / "carol" / "mhsa.py").read_text()}
MIME = "text/html"


def _kernel_tools():
    for name in ("nbformat", "nbclient", "ipykernel"):
        pytest.importorskip(name, reason=f"the notebook tests need {name} (the test extra)")


def _outputs(cell) -> list[dict]:
    return [o for o in cell.get("outputs", []) if o.get("output_type") == "display_data"]


@pytest.fixture(scope="module")
def notebook(tmp_path_factory):
    """A notebook run by nbclient in a fresh folder (not the repository): load, then a right, a wrong and
    a raising cell. Returns (executed notebook, its folder)."""
    _kernel_tools()
    import nbformat
    from nbclient import NotebookClient
    folder = tmp_path_factory.mktemp("kernel-home")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("%load_ext attn_drill")] + \
        [nbformat.v4.new_code_cell(f"%%check mhsa --seed {SEED}\n{CODE[k]}") for k in ("right", "wrong", "raises")] + \
        [nbformat.v4.new_code_cell("%%check no_such_problem\nx = 1")]
    old = os.environ.get("ATTN_DRILL_HOME")
    os.environ["ATTN_DRILL_HOME"] = str(folder / ".attn-drill")     # the kernel's progress: here, not the user's
    try:
        NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,
                       resources={"metadata": {"path": str(folder)}}).execute()
    finally:
        if old is None:
            os.environ.pop("ATTN_DRILL_HOME", None)
        else:
            os.environ["ATTN_DRILL_HOME"] = old
    nbformat.write(nb, folder / "practice.ipynb")
    return nb, folder


def _cell_report(nb, i: int) -> tuple[dict, str]:
    out = _outputs(nb.cells[i])
    assert len(out) == 1, nb.cells[i]["outputs"]
    return out[0]["metadata"]["attn-drill"], out[0]["data"][MIME]


@pytest.mark.parametrize("i, kind", [(1, "right"), (2, "wrong"), (3, "raises")])
def test_a_cell_gets_the_verdict_check_gives_the_same_code(notebook, judge, tmp_path, i, kind):
    nb, _ = notebook
    cell, page = _cell_report(nb, i)
    f = tmp_path / "mhsa.py"
    f.write_text(CODE[kind])
    [r] = check.run([("mhsa", f)], SEED, False, None, judge)
    assert cell["status"] == r.status
    assert cell["cases"] == {c.name: c.status for c in r.cases}
    assert cell["diagnosis"] == (r.diagnosis.mistake if r.diagnosis else None)
    assert cell["first_failure"] == (r.first_failure().name if r.first_failure() else None)
    if kind == "right":
        assert cell["replay"] is None and ">PASS<" in page
    else:
        assert cell["replay"] == f"%%check mhsa --seed {SEED} --case {r.first_failure().name}"
        assert ">FAIL<" in page and "%%check mhsa --seed" in page
    if kind == "wrong":
        assert "softmax_query_axis" in page and page.count("data:image/png;base64,") >= 2   # the heatmaps
    if kind == "raises":
        # the line of the cell: the %%check line is line 1, so one more than in the file
        line = r.first_failure().problem.frames[-1].line
        assert f"cell.py:{line + 1}</code>" in page
        assert nb.cells[i]["source"].splitlines()[line] == CODE[kind].splitlines()[line - 1]


def test_the_attempts_are_in_the_users_progress(notebook, monkeypatch):
    _, folder = notebook
    monkeypatch.setenv("ATTN_DRILL_HOME", str(folder / ".attn-drill"))
    assert progress.statuses().get("mhsa") == "passed"
    state = json.loads((folder / ".attn-drill" / "state.json").read_text())
    assert state["problems"]["mhsa"]["attempts"] == 3


def test_a_saved_notebook_holds_no_script(notebook):
    nb, folder = notebook
    saved = (folder / "practice.ipynb").read_text()
    assert "<script" not in saved.lower() and "application/javascript" not in saved
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            assert set(o.get("data", {})) <= {"text/html", "text/plain"}, o


def test_an_unknown_problem_is_a_short_error(notebook):
    nb, _ = notebook
    text = "".join(o.get("text", "") + o.get("evalue", "") for o in nb.cells[4]["outputs"])
    assert "No problem called 'no_such_problem'" in text and "Traceback" not in text


def test_new_puts_the_stub_in_the_next_cell(tmp_path):
    _kernel_tools()
    from jupyter_client.manager import start_new_kernel
    km, kc = start_new_kernel(kernel_name="python3", cwd=str(tmp_path))
    try:
        kc.execute_interactive("%load_ext attn_drill", timeout=120)
        reply = kc.execute_interactive("%attn_drill new gqa", timeout=120)
        [payload] = [p for p in reply["content"]["payload"] if p["source"] == "set_next_input"]
        assert payload["text"] == f"%%check gqa\n{stub_text('gqa').rstrip()}\n" and not payload["replace"]
        shown = []
        kc.execute_interactive("%attn_drill show gqa", timeout=120, output_hook=shown.append)
        assert any("gqa" in json.dumps(m["content"].get("data", {})) for m in shown if m["msg_type"] == "display_data")
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_only_the_notebook_module_imports_ipython():
    wrong = []
    for path in (ROOT / "attn_drill").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            if any(n.split(".")[0] in ("IPython", "ipykernel", "nbformat", "nbclient") for n in names):
                wrong.append(str(path.relative_to(ROOT)))
    assert sorted(set(wrong)) == ["attn_drill/notebook.py"]
    code = ("import sys, runpy; sys.argv = ['attn-drill', 'list']\n"
            "try:\n    runpy.run_module('attn_drill', run_name='__main__')\n"
            "except SystemExit as e:\n    assert e.code == 0, e.code\n"
            "import attn_drill\n"
            "assert 'IPython' not in sys.modules, 'the CLI imported IPython'\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={"NO_COLOR": "1", "COLUMNS": "100", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr


def test_the_notebook_extra_brings_ipython():
    text = (ROOT / "pyproject.toml").read_text()
    assert any(line.startswith("notebook = [") and "ipython" in line for line in text.splitlines())
