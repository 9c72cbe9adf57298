"""The message catalogue (attn_drill/messages.py): both languages complete, the same placeholders in
each, every key the code asks for present, no key left unused."""
import ast
import re
import string
from pathlib import Path


from attn_drill.messages import MESSAGES

PACKAGE = Path(__file__).resolve().parent.parent / "attn_drill"


def _fields(text: str) -> list[str]:
    return sorted({name for _, name, _, _ in string.Formatter().parse(text) if name})


def _uses():
    """(keys, prefixes of keys built at run time) the code asks for: the first argument of t() and
    tn(), and any string literal that is a key (a table of keys, as in render.practice.outcome_word)."""
    keys, prefixes = set(), set()
    for path in PACKAGE.rglob("*.py"):
        if path.name == "i18n.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in MESSAGES:
                keys.add(node.value)
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("t", "tn")
                    and node.args):
                continue
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                keys |= {f"{arg.value}.one", f"{arg.value}.many"} if node.func.id == "tn" else {arg.value}
            elif isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
                prefixes.add(arg.values[0].value)
            elif isinstance(arg, ast.BinOp) and isinstance(arg.left, ast.Constant):
                prefixes.add(arg.left.value)
            elif isinstance(arg, ast.JoinedStr):
                raise AssertionError(f"{path.name}:{node.lineno}: a key the test cannot read; start it with a literal")
            # a name or a lookup (t(words[st])): its keys are literals in a table, counted above
    return keys, prefixes


def test_every_message_has_both_languages_with_the_same_placeholders():
    for key, pair in MESSAGES.items():
        assert isinstance(pair, tuple) and len(pair) == 2, key
        en, zh = pair
        assert en.strip() and zh.strip(), f"{key}: a language is empty"
        assert _fields(en) == _fields(zh), f"{key}: placeholders differ: {_fields(en)} vs {_fields(zh)}"
        en.format(**{f: "x" for f in _fields(en)})        # both format without error
        zh.format(**{f: "x" for f in _fields(zh)})


def test_chinese_is_chinese():
    """A Chinese text that is only a copy of the English is a missing translation (ids, units and
    a few technical words are the same in both and are allowed)."""
    same_ok = {"table.dtype", "list.id", "verdict.skip"}
    copies = [k for k, (en, zh) in MESSAGES.items() if en == zh and k not in same_ok and re.search("[a-z]{4}", en)]
    assert not copies, copies


def test_every_key_the_code_uses_is_in_the_catalogue_and_every_key_is_used():
    keys, prefixes = _uses()
    missing = sorted(k for k in keys if k not in MESSAGES)
    assert not missing, f"used but not in the catalogue: {missing}"
    for p in prefixes:
        assert any(k.startswith(p) for k in MESSAGES), f"no key starts with {p!r}"
    unused = sorted(k for k in MESSAGES if k not in keys and not any(k.startswith(p) for p in prefixes))
    assert not unused, f"in the catalogue but never used: {unused}"


def test_the_catalogue_size_per_language():
    en = sum(len(e) for e, _ in MESSAGES.values())
    zh = sum(len(z) for _, z in MESSAGES.values())
    print(f"\n{len(MESSAGES)} messages; {en} characters in English, {zh} in Chinese")
    assert len(MESSAGES) > 200
