from pathlib import Path

import pytest

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


@pytest.fixture
def cli_env():
    return {"NO_COLOR": "1", "COLUMNS": "120", "TERM": "dumb"}
