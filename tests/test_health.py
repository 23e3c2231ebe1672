"""/healthz tells the truth after start-up too: a channel that stopped working shows as 503."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.telegram import FakeTelegram
from tests.krill_process import KrillProcess


def polling_config(telegram: FakeTelegram, **server: Any) -> dict[str, Any]:
    section = {"enabled": True, "token": telegram.token, "api_base_url": telegram.url}
    return {"server": server, "telegram": section | {"dm_policy": "open"}}


async def test_healthz_turns_503_when_telegram_revokes_the_token(
    tmp_path: Path, fake_anthropic: FakeAnthropic, fake_telegram: FakeTelegram
):
    config = polling_config(fake_telegram)
    env = {"ANTHROPIC_API_KEY": "test", "ANTHROPIC_BASE_URL": fake_anthropic.url}
    async with KrillProcess(tmp_path, config, env) as krill:
        status, body = await krill.get("/healthz")
        assert status == 200 and json.loads(body)["channels"]["telegram"] is True
        fake_telegram.fail_next("getUpdates", 401, "Unauthorized", times=50)
        # End the long poll in flight, so the next getUpdates meets the revoked token.
        fake_telegram.push_update(fake_telegram.private_message(7, "hello"))
        for _ in range(200):
            status, body = await krill.get("/healthz")
            if status == 503:
                break
            await asyncio.sleep(0.05)
        assert status == 503, body
        assert json.loads(body)["channels"] == {"local": True, "telegram": False}
    assert "Telegram rejected the bot token while polling" in krill.log()


async def wait_for_status(krill: KrillProcess, wanted: int, within: float = 20.0) -> str:
    for _ in range(int(within / 0.1)):
        status, body = await krill.get("/healthz")
        if status == wanted:
            return body
        await asyncio.sleep(0.1)
    raise AssertionError(f"/healthz stayed {status}: {body}")


async def test_healthz_turns_503_when_getupdates_keeps_failing(
    tmp_path: Path, fake_anthropic: FakeAnthropic, fake_telegram: FakeTelegram
):
    """Failing polls (the poller keeps running and retrying) are not "healthy" for long."""
    # A short window, so the test needs no 90 s wait; long polls shorten to fit in it.
    config = polling_config(fake_telegram, health_stale_after=3)
    env = {"ANTHROPIC_API_KEY": "test", "ANTHROPIC_BASE_URL": fake_anthropic.url}
    async with KrillProcess(tmp_path, config, env) as krill:
        await asyncio.sleep(4)  # longer than the window: idle long polls keep it healthy
        status, body = await krill.get("/healthz")
        assert status == 200, body
        fake_telegram.fail_next("getUpdates", 502, "Bad Gateway", times=100_000)
        body = await wait_for_status(krill, 503)
        assert json.loads(body)["down"] == ["telegram"]
        fake_telegram.clear_failures()
        await wait_for_status(krill, 200, within=40.0)
    assert "Telegram polling failed" in krill.log()


async def test_queue_depth_returns_to_zero(tmp_path: Path, fake_anthropic: FakeAnthropic):
    fake_anthropic.queue_text("hello")
    env = {"ANTHROPIC_API_KEY": "test", "ANTHROPIC_BASE_URL": fake_anthropic.url}
    async with KrillProcess(tmp_path, {}, env) as krill:
        await krill.chat("hi")
        _, metrics = await krill.get("/metrics")
    assert "krill_queue_depth 0.0" in metrics.splitlines()
