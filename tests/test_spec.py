"""Spec loading: every problem in the bank is valid; a bad spec names file, field and fix."""
import os
from pathlib import Path

import pytest
import yaml

from attn_drill import bank
from attn_drill.bank import sources
from attn_drill.bank.spec import SpecError, load_spec, parse_spec

ROOT = Path(__file__).resolve().parent.parent
GOOD = yaml.safe_load((ROOT / "tests" / "fixtures" / "bank" / "problems" / "attend.yaml").read_text())


@pytest.mark.parametrize("pid", bank.ids())
def test_bank_spec_is_complete(pid):
    spec = bank.get(pid)
    assert spec.id == pid
    assert len(spec.hints) >= 3 and len(spec.mistakes) >= 4
    assert spec.statement.en and spec.statement.zh
    ref = sources.read(bank.reference_path(pid))
    assert bank.grader_path(pid).is_file()
    stub = sources.make_stub(spec, ref)           # the stub is derived from the reference: no drift
    for name in spec.interface:
        assert f"def {name}(" in stub or f"class {name}" in stub
    assert "raise NotImplementedError" in stub
    for m in spec.mistakes:
        assert sources.mutant_source(spec, ref, m.id) != ref
    assert not [f for f in sources.scan(ref, spec) if f.line], "the reference uses a forbidden API"


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
    absent = dict(GOOD["mistakes"][0], mutant=[{"old": "not in the file", "new": "x"}])
    data["mistakes"] = [absent] + GOOD["mistakes"][1:]
    spec = parse_spec(data, tmp_path / "attend.yaml")
    ref = (ROOT / "tests" / "fixtures" / "bank" / "reference" / "attend.py").read_text()
    with pytest.raises(sources.MutantError, match="does not occur"):
        sources.mutant_source(spec, ref, "missing_scale")


# ---------------------------------------------------------------- the parsed-spec cache
def test_the_spec_cache_follows_the_file_and_builds_nothing_but_specs(tmp_path, monkeypatch):
    import pickle

    from attn_drill.bank import cache
    from attn_drill.bank.spec import load_spec
    monkeypatch.setenv(cache.ENV, str(tmp_path / "cache"))
    problems = tmp_path / "problems"
    problems.mkdir()
    path = problems / "mhsa.yaml"
    path.write_text((ROOT / "problems" / "mhsa.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    first = cache.SpecCache(problems)
    assert first.get(path) is None
    first.put(path, load_spec(path))
    first.save()
    again = cache.SpecCache(problems)
    assert again.get(path) == load_spec(path)                       # read back from the cache
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("Multi-head self-attention", "Multi-head self-attention!", 1), encoding="utf-8")
    assert cache.SpecCache(problems).get(path) is None              # the file changed: parsed again

    class Boom:
        def __reduce__(self):
            return (os.system, (f"touch {tmp_path / 'ran'}",))
    again.file.write_bytes(pickle.dumps({"version": again.version, "entries": {"mhsa.yaml": ((1, 1), Boom())}}))
    assert cache.SpecCache(problems).entries == {} and not (tmp_path / "ran").exists()
    again.file.write_bytes(b"\0not a pickle")
    assert cache.SpecCache(problems).entries == {}                  # damaged: not used, no error
    monkeypatch.setenv(cache.ENV, "off")
    assert cache.SpecCache(problems).file is None
