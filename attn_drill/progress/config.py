"""Settings a user makes once: the language, for now.

Where a setting comes from, first match wins:
  1. the command's option (--lang zh)
  2. the environment: ATTN_DRILL_LANG=zh
  3. the workspace: .attn-drill/config.json beside your files ({"lang": "zh"})
  4. the user: $XDG_CONFIG_HOME/attn-drill/config.json (default ~/.config/attn-drill/config.json)
  5. English
`attn-drill config lang zh` writes the workspace file (`--user` the user file). A damaged config
file is ignored with a warning, never fatal. No torch.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from ..errors import UsageError
from ..i18n import LANGS

KEYS = {"lang": LANGS}
ENV = {"lang": "ATTN_DRILL_LANG"}


def user_file() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "attn-drill" / "config.json"


def workspace_file(root: Path) -> Path:
    return Path(root) / ".attn-drill" / "config.json"


def _read(path: Path, problems: list[str]) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        problems.append(f"{path}: {exc}")
        return {}
    if not isinstance(data, dict):
        problems.append(f"{path}: not a JSON object")
        return {}
    return data


def resolve(key: str, given: str | None, root: Path) -> tuple[str | None, str, list[str]]:
    """(value, where it came from, problems with the files read). None: not set anywhere."""
    problems: list[str] = []
    allowed = KEYS[key]
    if given:
        return given, "option", problems
    env = os.environ.get(ENV[key], "").strip()
    if env:
        if env in allowed:
            return env, f"${ENV[key]}", problems
        problems.append(f"${ENV[key]}={env!r} is not one of {', '.join(allowed)}")
    for path in (workspace_file(root), user_file()):
        value = _read(path, problems).get(key)
        if value is None:
            continue
        if value in allowed:
            return value, str(path), problems
        problems.append(f"{path}: {key}={value!r} is not one of {', '.join(allowed)}")
    return None, "default", problems


def write(key: str, value: str, user: bool, root: Path) -> Path:
    if value not in KEYS[key]:
        raise UsageError(f"{key} must be one of {', '.join(KEYS[key])}, not {value!r}")
    path = user_file() if user else workspace_file(root)
    data = _read(path, [])
    data[key] = value
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path
