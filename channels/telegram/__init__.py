"""Telegram channel for Krill: DMs, groups and forum topics over long polling or a webhook,
built on python-telegram-bot. `create` is what `bot.app` calls when `telegram.enabled`."""

from __future__ import annotations

import logging

from bot.config import Config
from bot.errors import ConfigError
from channels.telegram.adapter import SECRET_RE, TelegramChannel, TelegramCore
from channels.telegram.mapping import identity_name

log = logging.getLogger(__name__)

__all__ = ["TelegramChannel", "create"]


def _workspace_name(config: Config) -> str | None:
    """The bot's name from the workspace's IDENTITY.md, which people may call it by."""
    path = config.workspace_dir / "IDENTITY.md"
    try:
        return identity_name(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("cannot read %s for the bot's name: %s", path, exc)
        return None


def create(config: Config, core: TelegramCore) -> TelegramChannel:
    """Build the channel from `[telegram]`; raises ConfigError for settings Telegram would
    refuse later."""
    telegram = config.telegram
    if telegram.mode == "webhook" and not SECRET_RE.fullmatch(telegram.webhook_secret):
        raise ConfigError(
            "telegram.webhook_secret: use 1-256 characters from A-Z, a-z, 0-9, '_' and '-' "
            "(Telegram refuses any other secret_token)"
        )
    name = _workspace_name(config)
    return TelegramChannel(telegram, core, names=(name,) if name else ())
