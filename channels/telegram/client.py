"""The python-telegram-bot Application Krill talks to the Bot API through: pointed at
`telegram.api_base_url`, with the timeouts of `[telegram.timeouts]` on every call and every
send and edit paced below Telegram's flood limits."""

from __future__ import annotations

from telegram.ext import Application, ApplicationBuilder

from channels.telegram.config import TelegramConfig
from channels.telegram.pacing import FloodPacer


def build_application(config: TelegramConfig) -> Application:
    """A PTB Application pointed at `telegram.api_base_url`, used for its configured `bot`.

    PTB's own Updater is left out: polling and the webhook are Krill's, so an update is
    recorded before it is confirmed to Telegram. Every send and edit is paced below
    Telegram's flood limits (`channels.telegram.pacing`). Every call, getUpdates and uploads
    included, has the timeouts of `telegram.timeouts` (PTB's own read timeout, 5 s, is
    shorter than a slow Telegram takes to answer a send it will carry out).
    """
    root = config.api_base_url.rstrip("/")
    timeouts = config.timeouts
    return (
        ApplicationBuilder()
        .token(config.token)
        .base_url(f"{root}/bot")
        .base_file_url(f"{root}/file/bot")
        .connect_timeout(timeouts.connect)
        .pool_timeout(timeouts.pool)
        .write_timeout(timeouts.write)
        .media_write_timeout(timeouts.write)
        .read_timeout(timeouts.read)
        # getUpdates adds its long-poll wait to this read timeout.
        .get_updates_connect_timeout(timeouts.connect)
        .get_updates_pool_timeout(timeouts.pool)
        .get_updates_write_timeout(timeouts.write)
        .get_updates_read_timeout(timeouts.read)
        .updater(None)
        .job_queue(None)  # timed work belongs to Krill's scheduler
        .rate_limiter(FloodPacer(config.pacing))
        .build()
    )
