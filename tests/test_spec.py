"""Spec loading: every problem in the bank is valid; a bad spec names file, field and fix."""
from pathlib import Path

import pytest
import yaml

from attn_drill import bank, source
from attn_drill.spec import SpecError, load_spec, parse_spec

ROOT = Path(__file__).resolve().parent.parent
GOOD = yaml.safe_load((ROOT / "tests" / "fixtures" / "bank" / "problems" / "attend.yaml").read_text())


@pytest.mark.parametrize("pid", bank.ids())
def test_bank_spec_is_complete(pid):
    spec = bank.get(pid)
    assert spec.id == pid
    assert len(spec.hints) >= 3 and len(spec.mistakes) >= 4
    assert spec.statement.en and spec.statement.zh
    ref = source.read(bank.reference_path(pid))
    assert bank.grader_path(pid).is_file()
    stub = source.make_stub(spec, ref)           # the stub is derived from the reference: no drift
    for name in spec.interface:
        assert f"def {name}(" in stub or f"class {name}" in stub
    assert "raise NotImplementedError" in stub
    for m in spec.mistakes:
        assert source.mutant_source(spec, ref, m.id) != ref
    assert not [f for f in source.scan(ref, spec) if f.line], "the reference uses a forbidden API"


def _bad(tmp_path, **changes):
    data = dict(GOOD)
    data.update(changes)
    for k, v in list(data.items()):
        if v is None:
            del data[k]
    return parse_spec(data, tmp_path / "attend.yaml")


@pytest.mark.parametrize("changes, field, words", [
    ({"hints": GOOD["hints"][:2]}, "hints", "at least 3"),
    ({"mistakes": GOOD["mistakes"][:3]}, "mistakes", "at least 4"),
    ({"difficulty": "extreme"}, "difficulty", "easy, medium, hard"),
    ({"format_version": 2}, "format_version", "format_version: 1"),
    ({"id": "other"}, "id", "id: attend"),
    ({"title": {"en": "only English"}}, "title", "zh"),
    ({"interface": None}, "interface", "missing"),
    ({"colour": "red"}, "colour", "not a known field"),
    ({"mistakes": [dict(GOOD["mistakes"][0], mutant=[])] + GOOD["mistakes"][1:]}, "mistakes[0].mutant", "patches"),
])
def test_bad_spec_names_file_field_and_fix(tmp_path, changes, field, words):
    with pytest.raises(SpecError) as info:
        _bad(tmp_path, **changes)
    err = info.value
    assert err.path.endswith("attend.yaml") and err.field == field
    assert words in str(err)
    assert "Fix:" in str(err)


def test_invalid_yaml_reports_the_line(tmp_path):
    path = tmp_path / "attend.yaml"
    path.write_text("format_version: 1\nid: [unclosed\n")
    with pytest.raises(SpecError, match="line"):
        load_spec(path)


def test_a_mutant_patch_that_does_not_apply_is_reported(tmp_path):
    data = dict(GOOD)
    data["mistakes"] = [dict(GOOD["mistakes"][0], mutant=[{"old": "not in the file", "new": "x"}])] + GOOD["mistakes"][1:]
    spec = parse_spec(data, tmp_path / "attend.yaml")
    ref = (ROOT / "tests" / "fixtures" / "bank" / "reference" / "attend.py").read_text()
    with pytest.raises(source.MutantError, match="does not occur"):
        source.mutant_source(spec, ref, "missing_scale")
