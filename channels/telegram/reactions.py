"""Acknowledgement reactions on Telegram: 👀 on a message as soon as a turn is queued for it,
replaced by the done reaction (👍 by default) or removed once the turn is over.

setMessageReaction accepts only the Bot API's own list of emoji (`ReactionEmoji`); the
configured ones are checked against it at start-up. A reaction is a courtesy: a failure is
logged and never holds up or fails a reply.
"""

from __future__ import annotations

import asyncio
import logging

from cachetools import LRUCache
from telegram import Bot
from telegram.constants import ReactionEmoji
from telegram.error import TelegramError

from bot.errors import ConfigError

log = logging.getLogger(__name__)

ALLOWED_EMOJI = frozenset(e.value for e in ReactionEmoji)
# How long the end of a turn may wait for its reactions; a slow Bot API must not hold the
# session's lane for long.
FINISH_SECONDS = 5.0
# Conversations tracked at once; one whose turn never ended (a crash) must not stay forever.
MAX_CONVERSATIONS = 2048


def check_reaction(key: str, emoji: str) -> None:
    """Raise ConfigError unless `emoji` is empty (off) or one Telegram accepts."""
    if emoji and emoji not in ALLOWED_EMOJI:
        raise ConfigError(
            f"{key}: Telegram bots may react only with the Bot API's own emoji, and "
            f"{emoji!r} is not one of them (✅ is refused, for example). Use one of "
            f'{" ".join(sorted(ALLOWED_EMOJI))}, or "" for none.'
        )


class Reactions:
    """Tracks which messages of a conversation carry the acknowledgement reaction."""

    def __init__(self, bot: Bot, ack: str, done: str):
        self._bot = bot
        self._ack = ack
        self._done = done
        # (chat id, topic id) -> messages acknowledged and not yet answered, oldest first.
        self._pending: LRUCache[tuple[int, str | None], list[int]] = LRUCache(MAX_CONVERSATIONS)
        self._tasks: set[asyncio.Task[None]] = set()

    def acknowledge(self, chat_id: int, topic: str | None, message_id: int) -> None:
        """React to a message a turn was queued for, in the background."""
        if not self._ack:
            return
        self._pending.setdefault((chat_id, topic), []).append(message_id)
        task = asyncio.create_task(self._react(chat_id, message_id, self._ack))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def finish(self, chat_id: int, topic: str | None, answered: int | None) -> None:
        """The turn for this conversation is over: swap its acknowledgements for the done
        reaction (or clear them). With `answered` (the message a group reply quotes), later
        messages stay acknowledged: they wait for the next turn."""
        waiting = self._pending.pop((chat_id, topic), [])
        acknowledged = [m for m in waiting if answered is None or m <= answered]
        if later := [m for m in waiting if m not in acknowledged]:
            self._pending[(chat_id, topic)] = later
        if not acknowledged:
            return
        try:
            async with asyncio.timeout(FINISH_SECONDS):
                running = [t for t in self._tasks if not t.done()]
                if running:  # the 👀 must land before it is replaced, or it would win the race
                    await asyncio.wait(running)
                for message_id in acknowledged:
                    await self._react(chat_id, message_id, self._done)
        except TimeoutError:
            log.info("Telegram: gave up on the done reactions in %d (too slow)", chat_id)

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _react(self, chat_id: int, message_id: int, emoji: str) -> None:
        try:
            await self._bot.set_message_reaction(chat_id, message_id, emoji or None)
        except TelegramError as exc:
            log.info("Telegram: could not react to message %d in %d: %s", message_id, chat_id, exc)
