"""`config`: show or change the settings made once (the language)."""
from __future__ import annotations

from pathlib import Path

from .. import render
from ..errors import UsageError
from ..i18n import set_lang, t
from ..progress import config


def settings(key: str | None, value: str | None, user: bool, cwd: Path) -> int:
    con = render.console()
    if key is None:
        for name in config.KEYS:
            val, where, _ = config.resolve(name, None, cwd)
            render.say(t("config.line", key=name, value=val or "en", where=where if val else t("config.default")),
                       con=con)
        return 0
    if key not in config.KEYS:
        raise UsageError(t("config.unknown", key=key, keys=", ".join(config.KEYS)))
    if value is None:
        val, where, _ = config.resolve(key, None, cwd)
        con.print(val or "en")
        return 0
    if value not in config.KEYS[key]:
        raise UsageError(t("config.bad_value", key=key, value=value, allowed=", ".join(config.KEYS[key])))
    path = config.write(key, value, user, cwd)
    if key == "lang":
        set_lang(value)
    render.say(t("config.saved", key=key, value=value, path=path), con=con)
    return 0
