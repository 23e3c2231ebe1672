"""The Slack adapter under test in-process: `make_channel` starts the real slack-bolt app
against the fake Slack with a stub core (in HTTP mode, its routes on a loopback server, the
events URL returned), and stops everything it started after the test."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiohttp import web

from bot.server import listen
from channels.slack.adapter import SlackChannel
from channels.slack.config import SlackConfig
from tests.fakes.slack import FakeSlack
from tests.stub_gateway import StubGateway

Factory = Callable[..., Any]


@pytest.fixture
async def make_channel(fake_slack: FakeSlack) -> AsyncIterator[Factory]:
    started: list[tuple[SlackChannel, web.AppRunner | None]] = []

    async def make(mode: str = "socket", **settings: Any) -> tuple[SlackChannel, StubGateway, str]:
        # Back-to-back previews here test streaming, not pacing (tests/test_slack_pacing.py).
        settings.setdefault("pacing", {"channel_interval": 0})
        config = SlackConfig(
            enabled=True,
            bot_token=settings.pop("bot_token", fake_slack.bot_token),
            app_token=settings.pop("app_token", fake_slack.app_token),
            signing_secret=fake_slack.signing_secret,
            mode=mode,
            api_base_url=fake_slack.api_url,
            **settings,
        )
        core = StubGateway(config)
        channel = SlackChannel(config, core, ping_interval=0.5)
        url = ""
        runner = None
        if mode == "http":
            app = web.Application(client_max_size=100_000)
            app.add_routes(channel.routes())
            runner, port = await listen(app, "127.0.0.1", 0)
            url = f"http://127.0.0.1:{port}/slack/events"
        started.append((channel, runner))
        await channel.start()
        return channel, core, url

    yield make
    for channel, runner in started:
        await channel.stop()
        if runner is not None:
            await runner.cleanup()


async def until(check: Callable[[], object], within: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)
