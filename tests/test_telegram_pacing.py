"""Telegram pacing in-process: the real python-telegram-bot with Krill's rate limiter against
the fake Bot API enforcing flood limits (scaled down to fractions of a second)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from bot.errors import PreviewSkipped
from bot.types import Address, OutboundMessage
from channels.telegram.adapter import TelegramChannel
from channels.telegram.config import TelegramConfig, TelegramPacing
from tests.fakes.flood import SlidingLimit
from tests.fakes.telegram import FakeTelegram
from tests.stub_gateway import StubGateway

CHAT = 42
GROUP = -100700
CHAT_INTERVAL = 0.2
GROUP_MESSAGES, GROUP_PERIOD = 3, 1.0


@pytest.fixture
async def channel(fake_telegram: FakeTelegram) -> AsyncIterator[TelegramChannel]:
    pacing = TelegramPacing(
        chat_interval=CHAT_INTERVAL, group_messages=GROUP_MESSAGES, group_period=GROUP_PERIOD
    )
    config = TelegramConfig(
        enabled=True, token=fake_telegram.token, api_base_url=fake_telegram.url, pacing=pacing
    )
    channel = TelegramChannel(config, StubGateway())
    await channel.start()
    fake_telegram.enforce_flood_limits(
        chat=SlidingLimit(1, CHAT_INTERVAL), group=SlidingLimit(GROUP_MESSAGES, GROUP_PERIOD)
    )
    try:
        yield channel
    finally:
        await channel.stop()


def out(text: str, chat_id: int = CHAT, *, final: bool = True, thread: str = "") -> OutboundMessage:
    address = Address("telegram", str(chat_id), thread_id=thread or None)
    return OutboundMessage(address, text, "turn", 0, final=final)


async def test_a_burst_to_one_chat_arrives_whole_in_order_without_a_429(
    fake_telegram: FakeTelegram, channel: TelegramChannel
) -> None:
    texts = [f"part {n}" for n in range(5)]
    for text in texts:
        await channel.deliver(out(text))
    assert fake_telegram.sent_texts(CHAT) == texts
    assert fake_telegram.flood is not None and fake_telegram.flood.refused == 0


async def test_topics_of_one_group_share_its_limits_without_a_429(
    fake_telegram: FakeTelegram, channel: TelegramChannel
) -> None:
    # Forum topics are separate sessions, so their replies reach the group at once.
    async def topic(n: int) -> None:
        for part in range(2):
            await channel.deliver(out(f"topic {n} part {part}", GROUP, thread=str(n)))

    await asyncio.gather(*(topic(n) for n in range(1, 4)))
    sent = fake_telegram.sent_texts(GROUP)
    assert sorted(sent) == sorted(f"topic {n} part {p}" for n in range(1, 4) for p in range(2))
    for n in range(1, 4):
        assert [t for t in sent if t.startswith(f"topic {n} ")] == [
            f"topic {n} part 0",
            f"topic {n} part 1",
        ]
    assert fake_telegram.flood is not None and fake_telegram.flood.refused == 0


async def test_a_preview_with_no_room_is_skipped_and_sends_nothing(
    fake_telegram: FakeTelegram, channel: TelegramChannel
) -> None:
    message_id = await channel.deliver(out("the answer so far"))
    edit = out("the answer so far, and more", final=False)
    edit.edit_of = message_id
    with pytest.raises(PreviewSkipped):  # the chat had a message less than a second ago
        await channel.deliver(edit)
    await channel.typing(Address("telegram", str(CHAT)))  # "typing…" is not flood-limited
    assert fake_telegram.calls_to("editMessageText") == []
    edit.final = True  # the final text waits for its turn instead
    await channel.deliver(edit)
    assert fake_telegram.bot_messages(CHAT)[-1]["text"] == "the answer so far, and more"
    assert fake_telegram.flood is not None and fake_telegram.flood.refused == 0
