"""End to end in webhook mode: the real `krill run` process receives updates on
POST /telegram/webhook, checks the secret, records each update before answering 200, and
replies through the fake Bot API."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.telegram import FakeTelegram
from tests.krill_process import KrillProcess, free_port

pytestmark = pytest.mark.asyncio(loop_scope="module")

SECRET = "hook-Secret_123"
ALLOWED = 42
STRANGER = 44
REPLY_TIMEOUT = 10.0
_sentinels = itertools.count(1)


@dataclass
class Env:
    tg: FakeTelegram
    model: FakeAnthropic
    krill: KrillProcess

    @property
    def hook(self) -> str:
        return f"{self.krill.url}/telegram/webhook"


def webhook_config(tg: FakeTelegram, port: int) -> dict[str, Any]:
    return {
        "server": {"port": port},
        "anthropic": {"max_retries": 0},
        "telegram": {
            "enabled": True,
            "token": tg.token,
            "api_base_url": tg.url,
            "mode": "webhook",
            "webhook_url": f"http://127.0.0.1:{port}/telegram/webhook",
            "webhook_secret": SECRET,
            "allow_from": [str(ALLOWED)],
        },
    }


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Env]:
    directory = tmp_path_factory.mktemp("telegram-webhook")
    async with FakeTelegram() as tg, FakeAnthropic() as model:
        config = webhook_config(tg, free_port())
        async with KrillProcess(directory, config, model.env()) as krill:
            yield Env(tg, model, krill)


async def post(
    url: str, body: bytes | dict[str, Any], secret: str | None = SECRET
) -> tuple[int, str]:
    headers = {"Content-Type": "application/json"}
    if secret is not None:
        headers["X-Telegram-Bot-Api-Secret-Token"] = secret
    data = body if isinstance(body, bytes) else None
    async with (
        aiohttp.ClientSession() as http,
        http.post(url, data=data, json=None if data else body, headers=headers) as resp,
    ):
        return resp.status, await resp.text()


async def reply_in(tg: FakeTelegram, chat: int, expect: str) -> list[str]:
    """Wait until one of the bot's messages in `chat`, as it reads after any edits (a
    streaming preview is finalised in place), contains `expect`; returns them all."""
    async with asyncio.timeout(REPLY_TIMEOUT):
        while True:
            texts = [m["text"] for m in tg.bot_messages(chat)]
            if any(expect in t for t in texts):
                return texts
            await asyncio.sleep(0.02)


async def settle(env: Env, chat: int = ALLOWED) -> str:
    """Wait until every update posted so far to `chat` has been handled: each was recorded
    before its 200 and a chat's turns run in order, so once a later message is answered,
    whatever came before it was answered or dropped. Returns the sentinel's text."""
    text = f"sentinel {next(_sentinels)}"
    update = env.tg.private_message(chat, text)
    update["message"]["from"]["id"] = ALLOWED  # an allowed user, in whichever chat
    status, _ = await post(env.hook, update)
    assert status == 200
    await reply_in(env.tg, chat, text)
    return text


def model_saw(model: FakeAnthropic, needle: str) -> bool:
    """Whether any request so far carried `needle` anywhere in its messages."""
    return any(needle in json.dumps(r.messages) for r in model.message_requests)


async def test_start_registers_the_webhook_and_does_not_poll(env: Env) -> None:
    assert env.tg.webhook is not None
    assert env.tg.webhook["url"] == env.hook
    assert env.tg.webhook["secret_token"] == SECRET
    assert env.tg.calls_to("getUpdates") == []


async def test_good_secret_is_recorded_and_answered(env: Env) -> None:
    status, _ = await post(env.hook, env.tg.private_message(ALLOWED, "hi over the webhook"))
    assert status == 200
    await reply_in(env.tg, ALLOWED, "hi over the webhook")


@pytest.mark.parametrize("secret", ["wrong-secret", "", None])
async def test_wrong_or_missing_secret_is_refused_and_ignored(env: Env, secret: str | None) -> None:
    update = env.tg.private_message(ALLOWED, f"forged {secret!r}")
    status, _ = await post(env.hook, update, secret=secret)
    assert status == 403
    await settle(env)
    assert not model_saw(env.model, "forged")
    assert not any("forged" in t for t in env.tg.sent_texts())
    assert "refused a Telegram webhook request" in env.krill.log()


@pytest.mark.parametrize("body", [b"{not json", b"[1, 2]", b'{"message": {}}'])
async def test_malformed_body_is_a_400(env: Env, body: bytes) -> None:
    status, _ = await post(env.hook, body)
    assert status == 400


async def test_duplicate_update_is_answered_once(env: Env) -> None:
    chat = 4301
    update = env.tg.private_message(chat, "answer me once")
    update["message"]["from"]["id"] = ALLOWED  # an allowed user, in a chat of its own
    results = [await post(env.hook, update) for _ in range(3)]
    assert [status for status, _ in results] == [200, 200, 200]
    await reply_in(env.tg, chat, "answer me once")
    sentinel = await settle(env, chat)
    texts = [m["text"] for m in env.tg.bot_messages(chat)]
    assert len(texts) == 2 and sentinel in texts[1]  # the answer, then the sentinel's
    assert sum("answer me once" in r.last_user_text for r in env.model.message_requests) == 1


async def test_refused_user_never_reaches_the_model(env: Env) -> None:
    status, _ = await post(env.hook, env.tg.private_message(STRANGER, "let me talk to it"))
    assert status == 200
    await reply_in(env.tg, STRANGER, "not on its list of allowed users")
    assert not any("let me talk" in r.last_user_text for r in env.model.message_requests)


async def test_edited_message_is_ignored(env: Env) -> None:
    original = env.tg.private_message(ALLOWED, "tpyo")
    status, _ = await post(env.hook, env.tg.edited_message(original, "typo fixed"))
    assert status == 200
    await settle(env)
    assert not model_saw(env.model, "typo fixed")


@pytest.mark.asyncio(loop_scope="function")  # uses the per-test fakes, not the module's
async def test_accepted_update_survives_a_crash_right_after_200(
    tmp_path: Path, fake_telegram: FakeTelegram, fake_anthropic: FakeAnthropic
) -> None:
    """200 means recorded: kill -9 straight after it, restart, and the reply still comes."""
    config = webhook_config(fake_telegram, free_port())
    fake_anthropic.hold()  # the turn cannot finish before the crash
    krill = await KrillProcess(tmp_path, config, fake_anthropic.env()).start()
    try:
        update = fake_telegram.private_message(ALLOWED, "do not lose me")
        status, _ = await post(f"{krill.url}/telegram/webhook", update)
        assert status == 200
        await krill.kill()
    finally:
        await krill.stop()
    fake_anthropic.release()
    async with KrillProcess(tmp_path, config, fake_anthropic.env()):
        await reply_in(fake_telegram, ALLOWED, "do not lose me")
