"""Buttons on Telegram: a message's buttons as an inline keyboard, a `callback_query` as a
`ButtonPress`, and the answer that stops the button's spinner.

Telegram waits for `answerCallbackQuery` and shows the person a spinner until then, so
every press is answered within `ANSWER_WITHIN` seconds, however long recording it takes:
the answer then says Krill is on it, and the message's edit shows the outcome."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from telegram import CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup
from telegram.error import TelegramError
from telegram.ext import ExtBot

from bot.channel_contract import PressAnswer
from bot.types import ButtonPress, ButtonRows, ButtonStyle
from channels.telegram.mapping import CHANNEL

log = logging.getLogger(__name__)

# Telegram shows a button's text on one line; longer text is cut with an ellipsis.
LABEL_CHARS = 64
# A press is answered within this, recorded or not (the spinner must not hang).
ANSWER_WITHIN = 5.0
STILL_WORKING = "Got it, working on it…"
NOT_RECORDED = "Sorry, that press did not go through yet; Krill is trying again."
STYLES = {ButtonStyle.PRIMARY: "primary", ButtonStyle.DANGER: "danger"}


def keyboard(rows: ButtonRows) -> InlineKeyboardMarkup:
    return InlineKeyboardMarkup(
        [
            [
                InlineKeyboardButton(b.label, callback_data=b.data, style=STYLES.get(b.style))
                for b in row
            ]
            for row in rows
        ]
    )


def press_of(query: CallbackQuery) -> ButtonPress | None:
    """The press a callback query reports; None for one Krill cannot place (a button of an
    inline-mode message, which has no chat)."""
    message = query.message
    if message is None or query.data is None:
        return None
    user = query.from_user
    name = " ".join(part for part in (user.first_name, user.last_name) if part)
    return ButtonPress(
        channel=CHANNEL,
        press_id=query.id,
        data=query.data,
        chat_id=str(message.chat.id),
        user_id=str(user.id),
        user_name=name or user.username or "",
        message_id=str(message.message_id),
    )


async def answer_press(
    bot: ExtBot[str], query: CallbackQuery, record: Callable[[ButtonPress], Awaitable[PressAnswer]]
) -> None:
    """Record the press `query` reports and answer it. Raises when it could not be
    recorded (after answering), so the update is fetched and tried again."""
    press = press_of(query)
    if press is None:
        await _answer(bot, query.id, "")
        return
    recording = asyncio.ensure_future(record(press))
    try:
        answer = await asyncio.wait_for(asyncio.shield(recording), ANSWER_WITHIN)
    except TimeoutError:
        await _answer(bot, query.id, STILL_WORKING)
        await recording
        return
    except Exception:
        await _answer(bot, query.id, NOT_RECORDED)
        raise
    await _answer(bot, query.id, answer.text)


async def _answer(bot: ExtBot[str], query_id: str, text: str) -> None:
    try:
        await bot.answer_callback_query(query_id, text=text or None)
    except TelegramError as exc:  # answered already (a redelivery), or too old
        log.info("Telegram: could not answer button press %s: %s", query_id, exc)
