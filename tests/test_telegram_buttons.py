"""Buttons on Telegram, the adapter against the fake Bot API: a reply's buttons as an inline
keyboard, a press handed to the core and always answered, and an edit that takes the
buttons away."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from bot.buttons.choices import button_data
from bot.channel_contract import PressAnswer, PressResult
from bot.types import Address, Button, ButtonStyle, OutboundMessage
from channels.telegram import buttons as telegram_buttons
from channels.telegram.adapter import TelegramChannel
from channels.telegram.config import TelegramConfig
from tests.fakes.telegram import CALLBACK_DATA_MAX_BYTES, FakeTelegram
from tests.stub_gateway import StubGateway

GROUP = -100777


@pytest.fixture
def core() -> StubGateway:
    return StubGateway()


@pytest.fixture
async def channel(fake_telegram: FakeTelegram, core: StubGateway) -> AsyncIterator[TelegramChannel]:
    config = TelegramConfig(enabled=True, token=fake_telegram.token, api_base_url=fake_telegram.url)
    channel = TelegramChannel(config, core)
    await channel.start()
    try:
        yield channel
    finally:
        await channel.stop()


def choice_rows() -> tuple[tuple[Button, ...], ...]:
    choice = "A" * 16  # as long as a real choice id
    return (
        (
            Button("✅ Approve", button_data(choice, 0), ButtonStyle.PRIMARY),
            Button("❌ Deny", button_data(choice, 1), ButtonStyle.DANGER),
        ),
    )


async def send_with_buttons(channel: TelegramChannel, chat: int = GROUP) -> str:
    out = OutboundMessage(
        Address("telegram", str(chat)), "Send report.pdf?", "choice-1", 0, buttons=choice_rows()
    )
    return await channel.deliver(out)


async def test_buttons_are_an_inline_keyboard_and_a_press_reaches_the_core_and_is_answered(
    fake_telegram: FakeTelegram, core: StubGateway, channel: TelegramChannel
) -> None:
    message_id = await send_with_buttons(channel)
    assert fake_telegram.buttons(GROUP) == ["✅ Approve", "❌ Deny"]
    keyboard = fake_telegram.bot_messages(GROUP)[-1]["reply_markup"]["inline_keyboard"]
    assert [b["style"] for b in keyboard[0]] == ["primary", "danger"]
    assert all(len(b["callback_data"].encode()) <= CALLBACK_DATA_MAX_BYTES for b in keyboard[0])

    update = fake_telegram.push_update(
        fake_telegram.press(GROUP, 7, "❌ Deny", first_name="Bob", username="bob")
    )
    answers = await fake_telegram.wait_for("answerCallbackQuery", successful=True)
    press = core.presses[0]
    query = update["callback_query"]
    assert (press.channel, press.press_id, press.chat_id, press.user_id) == (
        "telegram",
        query["id"],
        str(GROUP),
        "7",
    )
    assert press.data == keyboard[0][1]["callback_data"]
    assert (press.message_id, press.user_name) == (message_id, "Bob")
    assert answers[0] == {"callback_query_id": query["id"], "text": "✓ Yes"}


async def test_an_edit_without_buttons_takes_them_away(
    fake_telegram: FakeTelegram, channel: TelegramChannel
) -> None:
    message_id = await send_with_buttons(channel)
    edit = OutboundMessage(
        Address("telegram", str(GROUP)),
        "Send report.pdf?\n\n✅ Approved by Bob",
        "choice-1-done",
        0,
        edit_of=message_id,
        buttons=(),
    )
    assert await channel.deliver(edit) == message_id
    shown = fake_telegram.messages[(GROUP, int(message_id))]
    assert shown["text"].endswith("Approved by Bob")
    assert "reply_markup" not in shown


async def test_a_slow_press_is_answered_at_once_and_still_recorded(
    fake_telegram: FakeTelegram,
    core: StubGateway,
    channel: TelegramChannel,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(telegram_buttons, "ANSWER_WITHIN", 0.2)
    core.press_gate = asyncio.Event()  # the store is slow to record it
    await send_with_buttons(channel)
    fake_telegram.push_update(fake_telegram.press(GROUP, 7, "✅ Approve"))
    answers = await fake_telegram.wait_for("answerCallbackQuery", successful=True)
    assert answers[0]["text"] == telegram_buttons.STILL_WORKING
    assert core.presses == []
    core.press_gate.set()
    await core.wait_presses(1)


async def test_a_press_that_could_not_be_recorded_is_answered_and_fetched_again(
    fake_telegram: FakeTelegram, core: StubGateway, channel: TelegramChannel
) -> None:
    await send_with_buttons(channel)
    core.failures = 1  # the first attempt to record it fails
    core.answer = PressAnswer(PressResult.DONE, "✓ Approve")
    fake_telegram.push_update(fake_telegram.press(GROUP, 7, "✅ Approve"))
    answers = await fake_telegram.wait_for("answerCallbackQuery", successful=True)
    assert answers[0]["text"] == telegram_buttons.NOT_RECORDED
    await core.wait_presses(1, timeout=10)
    # Fetched again and recorded; its second answer is refused by Telegram (answered once).
    await fake_telegram.wait_for("answerCallbackQuery", count=2)
    assert len(core.presses) == 1
