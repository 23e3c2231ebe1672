"""Telegram channel for Krill: DMs, groups and forum topics over long polling or a webhook,
built on python-telegram-bot. `SPEC` is its entry in `channels.registry`."""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING

from bot.channel_contract import ChannelSpec, ChannelStatus, LeaderLookup
from bot.config import Config
from bot.errors import ConfigError
from channels.telegram.config import TelegramConfig
from channels.telegram.doctor import check

if TYPE_CHECKING:
    from bot.channel_contract import Gateway
    from channels.telegram.adapter import TelegramChannel

log = logging.getLogger(__name__)

# Telegram's own rule for secret_token; anything else makes setWebhook fail.
SECRET_RE = re.compile(r"[A-Za-z0-9_-]{1,256}")


def _workspace_name(config: Config) -> str | None:
    """The bot's name from the workspace's IDENTITY.md, which people may call it by."""
    from channels.telegram.mapping import identity_name

    path = config.workspace_dir / "IDENTITY.md"
    try:
        return identity_name(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("cannot read %s for the bot's name: %s", path, exc)
        return None


def create(telegram: TelegramConfig, config: Config, gateway: Gateway) -> TelegramChannel:
    """Build the channel from `[telegram]`; raises ConfigError for settings Telegram would
    refuse later."""
    # Imported here, so the platform library loads only when the channel is enabled.
    from channels.telegram.adapter import TelegramChannel

    if telegram.mode == "webhook" and not SECRET_RE.fullmatch(telegram.webhook_secret):
        raise ConfigError(
            "telegram.webhook_secret: use 1-256 characters from A-Z, a-z, 0-9, '_' and '-' "
            "(Telegram refuses any other secret_token)"
        )
    from channels.telegram.reactions import check_reaction

    check_reaction("telegram.ack_reaction", telegram.ack_reaction)
    check_reaction("telegram.done_reaction", telegram.done_reaction)
    name = _workspace_name(config)
    return TelegramChannel(
        telegram,
        gateway,
        # Telegram answers a second poller with 409 Conflict: only the replica holding this
        # lock polls. Webhook updates reach every replica, so they need none.
        leader=gateway.leadership(telegram.polling_lock) if telegram.mode == "polling" else None,
        names=(name,) if name else (),
        stale_after=config.server.health_stale_after,
        media_max_bytes=config.media.max_bytes if config.media.enabled else None,
    )


async def status(telegram: TelegramConfig, leader: LeaderLookup) -> ChannelStatus | None:
    """Which replica polls Telegram, when it is polled: the holder of the polling lock; any
    other replica stands by."""
    if not (telegram.enabled and telegram.mode == "polling"):
        return None
    holder = await leader(telegram.polling_lock)
    line = (
        "telegram: no replica polls right now (none runs, or the lock changes hands)"
        if holder is None
        else f"telegram: polled by replica {holder}; any other replica stands by"
    )
    return ChannelStatus(line, {"mode": "polling", "leader": holder})


SPEC = ChannelSpec(
    name="telegram", config=TelegramConfig, create=create, check=check, status=status
)
