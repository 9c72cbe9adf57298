"""What the screen layer promises, without a terminal: lines break at spaces and between Chinese
characters, never inside a word or a command; Chinese reads as Chinese is written (no ASCII , ; .
between Chinese characters, no space between two of them), in the catalogue and in the bank; the
quiz reads answers as people type them; tables drop columns before they cut a word."""
import re
import string

import pytest

from attn_drill import bank
from attn_drill.bank import quiz
from attn_drill.messages import MESSAGES
from attn_drill.render.base import CJK, NO_START, VERBS, clip, commands, lines, wrap

CJK_CHAR = f"[{CJK}]"
SAMPLES = {"id": "mhsa", "file": "drills/mhsa-20261201-0930.py", "folder": "mock-20261201-0930", "n": "3",
           "command": "attn-drill check mhsa --seed 3 --verbose", "where": "", "names": "x, y"}


def _formatted(text: str) -> str:
    fields = {name for _, name, _, _ in string.Formatter().parse(text) if name}
    return text.format(**{f: SAMPLES.get(f, "x") for f in fields})


def _catalogue(lang: int) -> list[tuple[str, str]]:
    return [(k, _formatted(v[lang])) for k, v in MESSAGES.items()]


# ---------------------------------------------------------------- commands stay whole
@pytest.mark.parametrize("lang", [0, 1], ids=["en", "zh"])
def test_every_command_of_the_catalogue_is_found_whole(lang):
    """Each `attn-drill <verb> ...` of every message is one command to the layout, up to the word or
    mark that ends it, so a line never breaks inside it."""
    for key, text in _catalogue(lang):
        for m in re.finditer(r"(?<![\w/-])attn-drill (\w[\w-]*)", text):
            if m.group(1) not in VERBS:
                continue
            span = next((s for s in commands(text) if s[0] <= m.start() < s[1]), None)
            assert span is not None, f"{key}: {text!r}"
            after = text[span[1]:]
            # what follows a command: the end, a mark, a Chinese character, or a word of the sentence
            assert not after or re.match(rf"[\s,;.):：，。；）、]|{CJK_CHAR}", after), f"{key}: cut at {after!r}"
            words = text[m.start():span[1]].split()
            assert all(re.fullmatch(r"--?[\w-]+|[\w./<>{}$*,=-]+|&&|>|\|", w) for w in words), (key, words)


def test_a_command_is_never_broken_and_stands_alone_when_it_does_not_fit():
    text = "all 3 hints are shown (attn-drill hint mhsa --all to read them again); the reference: " \
           "attn-drill solution mhsa --yes > mhsa_reference.py"
    for width in range(20, 100):
        laid = lines(text, width)
        for cmd in ("attn-drill hint mhsa --all", "attn-drill solution mhsa --yes > mhsa_reference.py"):
            assert any(cmd in line for line in laid), (width, laid)
        for line in laid:
            assert len(line) <= width or any(line.strip().strip("()") .startswith(c) for c in ("attn-drill",)), laid


@pytest.mark.parametrize("lang", [0, 1], ids=["en", "zh"])
def test_lines_break_only_between_words_or_chinese_characters(lang):
    for key, text in _catalogue(lang):
        text = " ".join(text.split())
        for width in (24, 41, 60, 80):
            laid = wrap(text, width).split("\n")
            assert "".join(x.replace(" ", "") for x in laid) == text.replace(" ", ""), key   # nothing lost
            for a, b in zip(laid, laid[1:]):
                # a break between two Latin letters or digits is a word cut in two
                assert not (re.search(r"[A-Za-z0-9_]$", a) and re.match(r"[A-Za-z0-9_]", b) and
                            (a.split()[-1] + b.split()[0]) in text.replace(" ", "\n").split("\n")), (key, a, b)
                magic = re.match(r"%%?[a-z_]", b)          # a notebook magic (%%check mhsa) may start a line
                # no line starts with ，。）·
                assert (b[:1] not in NO_START or magic) and b[:1] != "·", (key, width, a, b)
            wide = [x for x in laid if len(x) > width and " " in x.strip() and not commands(x)]
            assert not wide, (key, width, wide)


def test_clip_cuts_after_a_whole_word_with_an_ellipsis():
    text = "the quick brown fox jumps over the lazy dog " * 3
    out = clip(text, 20, 2).split("\n")
    assert len(out) == 2 and out[1].endswith("…") and all(len(x) <= 20 for x in out)
    assert all(w in text.split() for x in out for w in x.rstrip("…").split())


# ---------------------------------------------------------------- Chinese as it is written
ASCII_BETWEEN = re.compile(rf"{CJK_CHAR} ?[,;](?!\d)|{CJK_CHAR}\.(?=\s|$)|{CJK_CHAR} ?[,;.] ?{CJK_CHAR}")
SPACE_BETWEEN = re.compile(f"(?<={CJK_CHAR})[ \t]+(?={CJK_CHAR})")


def _bank_texts():
    from attn_drill.bank import catalogue
    for kind in catalogue.KINDS:
        yield f"kind {kind.id}", kind.diagnosis.zh
        yield f"kind {kind.id} title", kind.title.zh
    for spec in bank.all_specs():
        yield f"{spec.id} title", spec.title.zh
        yield f"{spec.id} statement", spec.statement.zh
        for i, h in enumerate(spec.hints):
            yield f"{spec.id} hint {i}", h.zh
        for m in spec.mistakes:
            yield f"{spec.id} {m.id}", m.diagnosis.zh
            yield f"{spec.id} {m.id} title", m.shown.zh
        path = bank.questions_path(spec.id)
        for q in quiz.load(path) if path.is_file() else []:
            yield f"{spec.id} {q.id}", q.zh
            yield f"{spec.id} {q.id} explain", q.explain[1]


def _prose(text: str) -> str:
    """Chinese prose only: code, code blocks and figures keep their own spacing."""
    return re.sub(r"```.*?```|`[^`\n]*`", "x", text, flags=re.S)


def test_the_chinese_catalogue_has_no_ascii_punctuation_or_space_between_chinese_characters():
    from attn_drill.i18n import set_lang, t
    set_lang("zh")
    try:
        bad = []
        for key, (_, zh) in MESSAGES.items():
            fields = {name for _, name, _, _ in string.Formatter().parse(zh) if name}
            # filled with Chinese words, the spaces around them must go (numbers stay numbers)
            shown = t(key, **{f: "1" if f == "i" else "甲" for f in fields})
            for rx, why in ((ASCII_BETWEEN, "ASCII punctuation"), (SPACE_BETWEEN, "a space")):
                if rx.search(_prose(shown)):
                    bad.append(f"{key}: {why}: {shown!r}")
        assert not bad, "\n".join(bad)
    finally:
        set_lang("en")


def test_the_chinese_of_the_bank_has_no_ascii_punctuation_or_space_between_chinese_characters():
    bad = []
    for where, text in _bank_texts():
        prose = _prose(text)
        for rx, why in ((ASCII_BETWEEN, "ASCII punctuation"), (SPACE_BETWEEN, "a space")):
            for m in rx.finditer(prose):
                bad.append(f"{where}: {why}: …{prose[max(0, m.start() - 12):m.end() + 12]!r}")
    assert not bad, "\n".join(bad)


def test_every_known_mistake_has_a_short_title_in_both_languages():
    for spec in bank.all_specs():
        for m in spec.mistakes:
            assert m.title is not None, f"{spec.id}: {m.id} has no title"
            assert m.title.en != m.id and len(m.title.en) <= 64 and len(m.title.zh) <= 64, (spec.id, m.id)


def test_a_mistake_without_a_title_shows_its_id_as_words_and_a_long_one_is_refused(tmp_path):
    """Problems written before titles existed still load (the fixture bank's have none)."""
    import yaml
    from attn_drill.bank.spec import parse_spec
    from attn_drill.errors import SpecError
    from attn_drill.render.report import mistake_title
    path = bank.spec_path("mhsa")
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["mistakes"][0].pop("title")
    m = parse_spec(data, path).mistakes[0]
    assert m.title is None and m.shown.en == "softmax query axis" == m.shown.zh
    data["mistakes"][0]["title"] = {"en": "x " * 40, "zh": "短"}
    with pytest.raises(SpecError, match="title"):
        parse_spec(data, path)
    assert mistake_title("mhsa", "softmax_query_axis") == "softmax over the query axis"
    assert mistake_title("mhsa", "only_b1_pad") == "fails only with batch 1 and key padding"
    assert mistake_title("mhsa", "no_such_thing") == "no such thing"


# ---------------------------------------------------------------- the quiz reads answers as typed
@pytest.mark.parametrize("typed, value", [
    ("266240", 266240), ("266,240", 266240), ("266_240", 266240), ("16*(64*64+64)*4", 266240),
    ("(2**38)", 2 ** 38), ("2^38", 2 ** 38), ("2 ** 38", 2 ** 38), ("2.74877906944e11", 2 ** 38),
    ("260 KiB", 260 * 1024), ("256 GiB", 256 * 2 ** 30), ("2*2**10 GiB", 2048 * 2 ** 30), ("4 GB", 4e9),
    ("1.5k", 1500), ("(1 + 2) * 3", 9), ("10 - 2 - 3", 5), ("2**3**2", 512), ("-2**2", -4), ("100 / 8", 12.5),
    ("2 × 3 × 4", 24), ("３．２万", 32000), ("4 bytes", 4), ("1e3", 1000),
])
def test_the_quiz_reads_an_answer_as_a_person_types_it(typed, value):
    assert quiz.read_number(typed) == value


@pytest.mark.parametrize("typed", ["abc", "", "2**", "3*", "(1+2", "1,5", "2 3", "2**100000", "1/0", "(-8)^0.5",
                                   "__import__('os')", "2**0.5", "1e400", "12 parsecs"])
def test_what_is_not_a_number_is_not_read(typed):
    assert quiz.read_number(typed) is None


def test_a_choice_is_read_by_number_or_letter():
    assert [quiz.read_choice(x, 4) for x in ("1", "4", "b", "D", "2.", "5", "e", "x", "")] == \
        [0, 3, 1, 3, 1, None, None, None, None]


# ---------------------------------------------------------------- tables drop columns before words
def test_the_list_at_80_columns_keeps_level_and_minutes_and_drops_the_tags():
    from rich.console import Console
    from attn_drill.render.practice import problem_table
    from attn_drill.verbs.catalog import rows
    con = Console(width=80, color_system=None, record=True)
    con.print(problem_table(rows(bank.all_specs(), {}), "en", 80))
    out = con.export_text()
    head = out.splitlines()[2]
    assert "level" in head and "min" in head and "tags" not in head, head
    assert all(len(x) <= 80 for x in out.splitlines())
    titles = {s.title.en for s in bank.all_specs()}
    cells = [ln[25:52].strip() for ln in out.splitlines()[4:]]
    words = {w for t in titles for w in t.split()}
    assert all(w in words for c in cells for w in c.split()), "a title word was cut"
