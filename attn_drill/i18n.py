"""The language of everything the tool says, and the lookup into the message catalogue.

    t("report.cases_failed", failed=9, ran=10)      -> "9 of 10 cases failed" / "10 个用例中 9 个失败"
    tn("hint.more", n)                              -> picks "hint.more.one" or "hint.more.many"

The catalogue (attn_drill/messages.py) holds every user-facing string of the tool in both
languages; problems carry their own (statements, hints, diagnoses) in their specs. The language is
chosen once per process: by `--lang`, else ATTN_DRILL_LANG, else the workspace or user config
(attn_drill.config). No torch, no rich.
"""
from __future__ import annotations


from .messages import MESSAGES
from . import lazyre

LANGS = ("en", "zh")
_lang = "en"


def set_lang(lang: str | None) -> str:
    global _lang
    if lang in LANGS:
        _lang = lang
    return _lang


def lang() -> str:
    return _lang


def _entry(key: str) -> tuple[str, str]:
    try:
        return MESSAGES[key]
    except KeyError:
        raise KeyError(f"message {key!r} is not in the catalogue (attn_drill/messages.py)") from None


def has(key: str) -> bool:
    return key in MESSAGES


def t(_key: str, **kw) -> str:
    en, zh = _entry(_key)
    if _lang == "zh":
        return tidy(zh.format(**kw))
    return en.format(**kw)


def tn(_key: str, n: int, **kw) -> str:
    """A message whose English depends on a count: key.one for 1, key.many otherwise."""
    return t(f"{_key}.{'one' if n == 1 else 'many'}", n=n, **kw)


def labelled(label: str, message: str) -> str:
    """"warning: x"; after a full-width colon ("警告：") no space."""
    return label + message if label.endswith("：") else label + " " + message


def pick(en: str, zh: str) -> str:
    """One of two texts that come with the data (a problem's statement, a diagnosis)."""
    return _BETWEEN.sub("", zh) if _lang == "zh" and zh else en


def index(ix) -> str:
    """A tensor index, always as (0, 3, 0)."""
    ix = tuple(ix) if ix is not None else ()
    return "(" + ", ".join(str(int(i)) for i in ix) + ("," if len(ix) == 1 else "") + ")"


_CJK = "\u4e00-\u9fff"
_CJK_MARKS = "\u3000-\u303f\uff00-\uffef"     # full-width punctuation: ，。（）：；
_SPACE_AFTER = lazyre.compile(f"(?<=[{_CJK}])(?=[A-Za-z0-9`(])")
_SPACE_BEFORE = lazyre.compile(f"(?<=[A-Za-z0-9`)])(?=[{_CJK}])")
_BETWEEN = lazyre.compile(f"(?<=[{_CJK}{_CJK_MARKS}])[ \t]+(?=[{_CJK}{_CJK_MARKS}])")


def spaced(text: str) -> str:
    """Chinese text with a space between a Han character and Latin letters or digits, as is usual."""
    return _SPACE_BEFORE.sub(" ", _SPACE_AFTER.sub(" ", text))


def tidy(text: str) -> str:
    """Chinese as it is written: no space between two Chinese characters or marks (a message whose
    placeholder was filled with Chinese words), one between a Han character and Latin or a digit."""
    return spaced(_BETWEEN.sub("", text))
