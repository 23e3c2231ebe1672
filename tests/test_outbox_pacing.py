"""The outbox sender with the real Telegram channel and its pacer, against the fake Bot API
enforcing flood limits: a chat waiting out its flood window does not hold up replies to
other chats, and nothing provokes a 429."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.metrics import Metrics
from bot.outbox.sender import Sender
from bot.outbox.writer import Outbox
from bot.store.sqlite import SQLiteStore
from bot.types import Address
from channels.telegram.adapter import TelegramChannel
from channels.telegram.config import TelegramConfig, TelegramPacing
from tests.fakes.flood import SlidingLimit
from tests.fakes.telegram import FakeTelegram
from tests.stub_gateway import StubGateway

CHAT_INTERVAL = 3.0  # long, so a chat's second reply visibly waits for its slot
BUSY_CHATS = 40  # chats with two replies each
FIRST_CHAT = 7_000


@pytest.fixture
async def channel(fake_telegram: FakeTelegram) -> AsyncIterator[TelegramChannel]:
    pacing = TelegramPacing(chat_interval=CHAT_INTERVAL, overall_per_second=1_000)
    config = TelegramConfig(
        enabled=True, token=fake_telegram.token, api_base_url=fake_telegram.url, pacing=pacing
    )
    channel = TelegramChannel(config, StubGateway())
    await channel.start()
    fake_telegram.enforce_flood_limits(
        chat=SlidingLimit(1, CHAT_INTERVAL), overall=SlidingLimit(1_000, 1.0)
    )
    try:
        yield channel
    finally:
        await channel.stop()


async def test_a_chat_waiting_for_its_slot_does_not_hold_up_other_chats(
    fake_telegram: FakeTelegram, channel: TelegramChannel, tmp_path: Path
) -> None:
    store = SQLiteStore(tmp_path / "krill.db")
    await store.open()
    channels = {"telegram": channel}
    outbox = Outbox(store=store, channels=channels)
    sender = Sender(
        store=store, channels=channels, wakeup=outbox.wakeup, metrics=Metrics(), holder="here"
    )
    try:
        chats = [Address("telegram", str(FIRST_CHAT + n)) for n in range(BUSY_CHATS)]
        for address in chats:
            await outbox.put(address, f"first-{address.chat_id}", [f"first {address.chat_id}"])
        for address in chats:
            await outbox.put(address, f"second-{address.chat_id}", [f"second {address.chat_id}"])
        # Written last: a chat that has had nothing, so nothing stops its reply going out.
        await outbox.put(Address("telegram", "42"), "quiet", ["quiet chat's reply"])
        await sender.start()
        async with asyncio.timeout(30):
            while not fake_telegram.sent_texts(42):  # noqa: ASYNC110 - the fake's record
                await asyncio.sleep(0.02)
        # Every busy chat's second reply waits CHAT_INTERVAL for its slot; the quiet chat's
        # reply must not wait behind them.
        order = fake_telegram.sent_texts()
        assert not [t for t in order[: order.index("quiet chat's reply")] if "second" in t]
        async with asyncio.timeout(30):
            while len(fake_telegram.sent_texts()) < 2 * BUSY_CHATS + 1:  # noqa: ASYNC110
                await asyncio.sleep(0.05)
        assert fake_telegram.flood is not None and fake_telegram.flood.refused == 0
    finally:
        await sender.stop()
        await store.close()
