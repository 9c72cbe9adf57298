import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest


def _own_folder(var: str, prefix: str) -> None:
    """A folder of the tests' own for `var` (made by the first test process, shared by the workers
    and commands it starts, removed when that process ends), unless one is given."""
    if var not in os.environ:
        os.environ[var] = tempfile.mkdtemp(prefix=prefix)
        atexit.register(shutil.rmtree, os.environ[var], True)


# the parsed-spec cache of the tests' own (and of the commands they start), never the user's; and
# the progress a test records
_own_folder("ATTN_DRILL_CACHE", "attn-drill-test-cache-")
_own_folder("ATTN_DRILL_HOME", "attn-drill-test-home-")

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture
def fixture_bank(monkeypatch):
    """Point the tool (and its worker processes) at the tiny fixture bank."""
    from attn_drill import bank
    monkeypatch.setenv("ATTN_DRILL_BANK", str(FIXTURES / "bank"))
    bank.root.cache_clear()
    bank.get.cache_clear()
    yield FIXTURES / "bank"
    monkeypatch.delenv("ATTN_DRILL_BANK")
    bank.root.cache_clear()
    bank.get.cache_clear()


@pytest.fixture(scope="session")
def graded_class(tmp_path_factory):
    """`grade` once over the 8-student fixture class (tests/fixtures/class), for every test that reads
    what it wrote: (the CLI result, the output folder, the HTML page, a fingerprint of the class taken
    before). The tests that use it run in one process (xdist group "fixture_class")."""
    from typer.testing import CliRunner

    from attn_drill.cli import app
    from attn_drill.verbs.grade import _fingerprint
    cls = FIXTURES / "class"
    before = _fingerprint(cls)
    out = tmp_path_factory.mktemp("class")
    res = CliRunner().invoke(app, ["grade", str(cls), "--time-limit", "20", "--seed", "1", "--workers", "2",
                                   "--out", str(out / "grades"), "--fail-under", "50", "--html",
                                   str(out / "class.html")], env={"NO_COLOR": "1", "COLUMNS": "100"})
    return res, out / "grades", out / "class.html", before


@pytest.fixture
def cli_env():
    return {"NO_COLOR": "1", "COLUMNS": "120", "TERM": "dumb"}


@pytest.fixture(scope="session")
def judge():
    """One judge process for the whole test session (one per test process under xdist), on the real bank."""
    from attn_drill.client import JudgeClient
    with JudgeClient() as client:
        yield client


def pytest_addoption(parser):
    parser.addoption("--sweep", action="store_true",
                     help="also grade at the other seeds (the tests marked `sweep`): what the default run "
                          "grades once, at one seed, graded again at more seeds (CI runs it)")


def pytest_collection_modifyitems(config, items):
    """The default run grades each thing once: the tests marked `sweep` (the same thing at another
    seed) run only with --sweep. Under xdist, the tests of one problem of the bank run in one process:
    the judge there keeps what it computed for that problem's cases (the reference's sides, the
    mutants' sides)."""
    if not config.getoption("--sweep"):
        kept = [item for item in items if item.get_closest_marker("sweep") is None]
        if len(kept) != len(items):
            config.hook.pytest_deselected(items=[item for item in items if item.get_closest_marker("sweep")])
            items[:] = kept
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        pid = params.get("pid")
        if pid is None and isinstance(params.get("path"), Path) and params["path"].parent.parent == FIXTURES:
            pid = params["path"].stem.split("__")[0]      # tests/fixtures/<kind>/<id>__<how>.py
        if isinstance(pid, str):
            item.add_marker(pytest.mark.xdist_group(pid))


@pytest.fixture(autouse=True)
def progress_home(tmp_path, monkeypatch):
    """One progress per user: each test's in its own folder, never the real one (the CLI processes a
    test starts inherit it). tmp_path/.attn-drill, where a folder kept its own before. And the tests
    run the same under GitHub Actions: no annotations unless a test asks for them."""
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.setenv("ATTN_DRILL_HOME", str(tmp_path / ".attn-drill"))
    from attn_drill.progress import adopt
    adopt._DONE.clear()
    yield tmp_path / ".attn-drill"
