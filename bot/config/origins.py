"""Where a loaded setting came from (a `KRILL_*` variable, the config file, a conventional
secret variable, or the default), so a message about a bad value can say what to change.

It follows the same precedence as `loading.load_config`.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from typing import Any

from bot.config.loading import ENV_PREFIX, secret_variables
from bot.config.root import Config


def _file_value(config: Config, section: str, key: str) -> Any:
    if config.source is None:
        return None
    try:
        data = tomllib.loads(config.source.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return None
    table: object = data
    for part in section.split("."):
        table = table.get(part) if isinstance(table, dict) else None
    return table.get(key) if isinstance(table, dict) else None


def origin(config: Config, section: str, key: str, env: Mapping[str, str] | None = None) -> str:
    """`section.key` and where its value was set, e.g. "telegram.token (from
    TELEGRAM_BOT_TOKEN)" or "server.port in /srv/krill/krill.toml"."""
    env = os.environ if env is None else env
    name = f"{section}.{key}"
    override = f"{ENV_PREFIX}{section.upper().replace('.', '__')}__{key.upper()}"
    if override in env:
        return f"{name} (from {override})"
    if _file_value(config, section, key) not in (None, ""):
        return f"{name} in {config.source}"
    conventional = secret_variables(type(config)).get((section, key))
    if conventional and env.get(conventional):
        return f"{name} (from {conventional})"
    return f"{name} (default)"
