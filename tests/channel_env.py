"""A real `krill run` wired to the fake Telegram, Slack and Anthropic servers, with helpers
that deliver messages the way each platform does: Telegram webhook POSTs (or updates queued
for polling) and signed Slack Events API requests.

Shared by the reliability tests and `bench/reliability.py`.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.slack import FakeSlack, post_event
from tests.fakes.telegram import FakeTelegram
from tests.krill_process import KrillProcess, free_port

WEBHOOK_SECRET = "hook-Secret_123"
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"


def telegram_section(
    tg: FakeTelegram, *, port: int | None = None, mode: str = "webhook"
) -> dict[str, Any]:
    """[telegram] for the fake Bot API, open to everyone, streaming previews off; in webhook
    mode pointed at `port` with WEBHOOK_SECRET."""
    section: dict[str, Any] = {
        "enabled": True,
        "token": tg.token,
        "api_base_url": tg.url,
        "mode": mode,
        "dm_policy": "open",
        "stream_interval": 0,
    }
    if mode == "webhook":
        assert port is not None, "a webhook needs the port Krill listens on"
        section |= {
            "webhook_url": f"http://127.0.0.1:{port}/telegram/webhook",
            "webhook_secret": WEBHOOK_SECRET,
        }
    return section


def slack_section(slack: FakeSlack) -> dict[str, Any]:
    """[slack] for the fake Slack over HTTP events, open to everyone, streaming off."""
    return {
        "enabled": True,
        "mode": "http",
        "bot_token": slack.bot_token,
        "signing_secret": slack.signing_secret,
        "api_base_url": slack.api_url,
        "dm_policy": "open",
        "stream_interval": 0,
    }


def channel_config(
    tg: FakeTelegram,
    slack: FakeSlack,
    *,
    port: int | None = None,
    telegram_mode: str = "webhook",
    telegram: dict[str, Any] | None = None,
    slack_settings: dict[str, Any] | None = None,
    **sections: Any,
) -> dict[str, Any]:
    """krill.toml for Telegram (webhook or polling) and Slack over HTTP;
    `telegram`/`slack_settings` override keys."""
    port = port or free_port()
    return {
        "server": {"port": port},
        "anthropic": {"max_retries": 0},
        "telegram": telegram_section(tg, port=port, mode=telegram_mode) | (telegram or {}),
        "slack": slack_section(slack) | (slack_settings or {}),
        **sections,
    }


@dataclass
class ChannelKrill:
    tg: FakeTelegram
    slack: FakeSlack
    model: FakeAnthropic
    krill: KrillProcess

    @property
    def webhook_secret(self) -> str:
        return str(self.krill.config["telegram"].get("webhook_secret", ""))

    async def telegram(
        self, body: bytes | dict[str, Any], *, secret: str | None = None
    ) -> tuple[int, str]:
        """POST to /telegram/webhook; `secret` defaults to the configured one."""
        headers = {"Content-Type": "application/json"}
        header = self.webhook_secret if secret is None else secret
        if header:
            headers[SECRET_HEADER] = header
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        async with (
            aiohttp.ClientSession() as http,
            http.post(f"{self.krill.url}/telegram/webhook", data=data, headers=headers) as resp,
        ):
            return resp.status, await resp.text()

    async def slack_event(self, payload: dict[str, Any] | None, **kw: Any) -> tuple[int, str]:
        """A signed POST to /slack/events (see `post_event` for forging, raw bodies, ...)."""
        if payload is not None:
            self.slack.record_event(payload)
        url = f"{self.krill.url}/slack/events"
        return await post_event(None, url, payload, self.slack.signing_secret, **kw)

    async def telegram_reply(self, chat: int, needle: str, within: float = 10.0) -> str:
        """The bot's message in `chat` that contains `needle`, once it is there."""
        async with asyncio.timeout(within):
            while True:
                for message in self.tg.bot_messages(chat):
                    if needle in message.get("text", ""):
                        return str(message["text"])
                await asyncio.sleep(0.02)

    async def log_line(self, needle: str, within: float = 10.0) -> None:
        await self.krill.logged(needle, within)

    async def slack_reply(self, channel: str, needle: str, within: float = 10.0) -> str:
        """The bot's post in `channel` that contains `needle`, once it is there."""
        async with asyncio.timeout(within):
            while True:
                for text in self.slack.posted_texts(channel):
                    if needle in text:
                        return text
                await asyncio.sleep(0.02)


async def start_channel_krill(
    directory: Path,
    tg: FakeTelegram,
    slack: FakeSlack,
    model: FakeAnthropic,
    config: dict[str, Any],
    env: dict[str, str] | None = None,
) -> ChannelKrill:
    krill = await KrillProcess(directory, config, model.env() | (env or {})).start()
    return ChannelKrill(tg, slack, model, krill)
