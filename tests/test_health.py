"""/healthz tells the truth after start-up too: a channel that stopped working shows as 503."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.telegram import FakeTelegram
from tests.krill_process import KrillProcess


async def test_healthz_turns_503_when_telegram_revokes_the_token(
    tmp_path: Path, fake_anthropic: FakeAnthropic, fake_telegram: FakeTelegram
):
    config = {
        "telegram": {
            "enabled": True,
            "token": fake_telegram.token,
            "api_base_url": fake_telegram.url,
            "dm_policy": "open",
        }
    }
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
