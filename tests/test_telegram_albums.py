"""Telegram albums in-process against the fake Bot API with the real python-telegram-bot:
the photos of one album reach the core as one message, and no update of it is confirmed to
Telegram (poll offset or webhook 200) before that message is recorded."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from channels.telegram import polling
from channels.telegram.adapter import WEBHOOK_PATH, TelegramChannel
from channels.telegram.config import TelegramConfig
from tests.fakes.telegram import FakeTelegram
from tests.stub_gateway import StubGateway

SECRET = "album-secret"
WAIT = 0.2  # the album's quiet window, short for tests
MAX_BYTES = 20_000_000


def photos(count: int) -> list[bytes]:
    return [f"photo {i}".encode() for i in range(count)]


def channel_for(fake: FakeTelegram, core: StubGateway, **config: str) -> TelegramChannel:
    settings = TelegramConfig(enabled=True, token=fake.token, api_base_url=fake.url, **config)
    return TelegramChannel(settings, core, media_max_bytes=MAX_BYTES, album_wait=WAIT)


@pytest.fixture
def core() -> StubGateway:
    return StubGateway()


@pytest.fixture
async def polled(fake_telegram: FakeTelegram, core: StubGateway) -> AsyncIterator[TelegramChannel]:
    channel = channel_for(fake_telegram, core)
    await channel.start()
    try:
        yield channel
    finally:
        await channel.stop()


async def test_polled_album_is_one_message_with_every_photo_and_the_caption(
    fake_telegram: FakeTelegram, core: StubGateway, polled: TelegramChannel
) -> None:
    album = fake_telegram.album(42, 42, photos(3), caption="our trip")
    for update in album:
        fake_telegram.push_update(update)
    later = fake_telegram.push_update(fake_telegram.private_message(42, "and this after"))
    first, after = await core.wait(2)
    assert first.text == "our trip"
    assert [a.data for a in first.attachments] == photos(3)
    assert first.message_id == f"42:{album[0]['message']['message_id']}"
    assert after.text == "and this after"  # order kept: the album first
    # One 👀 for the album (on its first photo), not one per photo; the later text's last.
    reactions = await fake_telegram.wait_for("setMessageReaction", 2)
    reacted = {c["message_id"] for c in reactions}
    assert reacted == {album[0]["message"]["message_id"], later["message"]["message_id"]}


async def test_album_is_fetched_again_until_the_core_records_it(
    fake_telegram: FakeTelegram, core: StubGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(polling, "FIRST_BACKOFF", 0.05)
    core.failures = 1
    channel = channel_for(fake_telegram, core)
    await channel.start()
    try:
        for update in fake_telegram.album(42, 42, photos(2), caption="keep us"):
            fake_telegram.push_update(update)
        (album,) = await core.wait(1)
    finally:
        await channel.stop()
    assert album.text == "keep us" and len(album.attachments) == 2
    offsets = [c.get("offset") for c in fake_telegram.calls_to("getUpdates")]
    assert offsets[:2] == [None, None]  # nothing confirmed while the core was failing


async def test_webhook_answers_an_albums_updates_only_once_it_is_recorded(
    fake_telegram: FakeTelegram, core: StubGateway
) -> None:
    channel = channel_for(fake_telegram, core, mode="webhook", webhook_secret=SECRET)
    await channel.start()
    app = web.Application()
    app.add_routes(channel.routes())
    core.gate = asyncio.Event()
    try:
        async with TestClient(TestServer(app)) as http:

            async def post(update: dict[str, object]) -> int:
                headers = {"X-Telegram-Bot-Api-Secret-Token": SECRET}
                async with http.post(WEBHOOK_PATH, json=update, headers=headers) as resp:
                    return resp.status

            album = fake_telegram.album(42, 42, photos(3), caption="hold on")
            posts = [asyncio.create_task(post(update)) for update in album]
            await asyncio.wait_for(core.waiting.wait(), 5)
            assert not any(p.done() for p in posts)  # no 200 before the album is recorded
            core.gate.set()
            assert await asyncio.gather(*posts) == [200, 200, 200]
    finally:
        await channel.stop()
    (merged,) = core.accepted
    assert merged.text == "hold on" and [a.data for a in merged.attachments] == photos(3)
