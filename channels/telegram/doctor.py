"""`krill doctor`'s check of the Telegram channel: does the bot token work at `api_base_url`,
and are the configured reactions ones Telegram accepts."""

from __future__ import annotations

import asyncio

from bot.checks import FAIL, NETWORK_TIMEOUT, OK, Check
from bot.config import Config
from bot.config.origins import origin
from bot.errors import ConfigError
from channels.telegram.config import TelegramConfig


async def check(telegram: TelegramConfig, config: Config) -> list[Check]:
    if not telegram.enabled:
        return [Check("telegram", OK, "disabled")]
    # Imported here: `krill doctor` loads the platform library only when the channel is on.
    from telegram import Bot
    from telegram.error import InvalidToken, TelegramError

    from channels.telegram.reactions import check_reaction

    try:
        check_reaction("telegram.ack_reaction", telegram.ack_reaction)
        check_reaction("telegram.done_reaction", telegram.done_reaction)
    except ConfigError as exc:
        return [Check("telegram", FAIL, str(exc))]
    base = telegram.api_base_url.rstrip("/")
    bot = Bot(telegram.token, base_url=f"{base}/bot", base_file_url=f"{base}/file/bot")
    try:
        async with asyncio.timeout(NETWORK_TIMEOUT):
            me = await bot.get_me()
    except InvalidToken:
        where = origin(config, "telegram", "token")
        return [
            Check(
                "telegram",
                FAIL,
                f"the bot token was rejected; copy it again from @BotFather into {where}",
            )
        ]
    except (TelegramError, TimeoutError, OSError) as exc:
        where = origin(config, "telegram", "api_base_url")
        return [
            Check(
                "telegram",
                FAIL,
                f"cannot reach the Bot API at {base} ({exc or type(exc).__name__}); "
                f"check the network, or {where}",
            )
        ]
    return [Check("telegram", OK, f"token works for @{me.username} ({telegram.mode} mode)")]
