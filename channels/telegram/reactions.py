"""Acknowledgement reactions on Telegram: 👀 on a message as soon as a turn is queued for it,
replaced by the done reaction (👍 by default) or removed once the turn is over.

setMessageReaction accepts only the Bot API's own list of emoji (`ReactionEmoji`); the
configured ones are checked against it at start-up. A reaction is a courtesy: a failure is
logged and never holds up or fails a reply.

Which messages carry an acknowledgement is also kept in the store (`Gateway.remember`), so a
process that stops mid-turn leaves no 👀 behind for good: at start, those whose turn had
ended are cleared at once, and those still waiting are cleared when the turn that answers
them after the restart ends (a turn that had ended in the instant before the stop, without
its record saying so, is cleared by the next turn in that chat).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable

from cachetools import LRUCache
from telegram import Bot
from telegram.constants import ReactionEmoji
from telegram.error import TelegramError

from bot.channel_contract import Gateway
from bot.errors import ConfigError

log = logging.getLogger(__name__)

CHANNEL = "telegram"
RECORD_KEY = "acknowledged"
RECORD_SECONDS = 7 * 24 * 3600.0  # a record nobody updates for this long is dropped
WAITING, ANSWERED = "waiting", "answered"
# conversation ("<chat id>|<topic>") -> state (WAITING or ANSWERED) -> message ids
Record = dict[str, dict[str, list[int]]]

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


def _conversation(chat_id: int, topic: str | None) -> str:
    return f"{chat_id}|{topic or ''}"


def _parse_conversation(name: str) -> tuple[int, str | None]:
    chat, _, topic = name.partition("|")
    return int(chat), topic or None


class Reactions:
    """Tracks which messages of a conversation carry the acknowledgement reaction."""

    def __init__(self, bot: Bot, ack: str, done: str, memory: Gateway):
        self._bot = bot
        self._ack = ack
        self._done = done
        self._memory = memory  # the record that outlives this process
        self._record_lock = asyncio.Lock()
        # Changes to the record waiting for the next write, each with what its caller awaits.
        self._changes: list[tuple[Callable[[Record], None], asyncio.Future[Record]]] = []
        # (chat id, topic id) -> messages acknowledged and not yet answered, oldest first.
        self._pending: LRUCache[tuple[int, str | None], list[int]] = LRUCache(MAX_CONVERSATIONS)
        self._tasks: set[asyncio.Future[None]] = set()
        # The acknowledgements under way per conversation, which its turn's end waits for.
        self._acks: dict[tuple[int, str | None], set[asyncio.Future[None]]] = {}

    async def restore(self) -> None:
        """At start: clear what a stopped process left acknowledged after its turn ended, and
        take over what still waits for its turn (answered after the restart)."""
        if not self._ack:
            return
        leftover = await self._update(lambda record: None)
        ended = 0
        for name, states in leftover.items():
            chat_id, topic = _parse_conversation(name)
            if states.get(WAITING):
                waiting = self._pending.setdefault((chat_id, topic), [])
                waiting += [m for m in states[WAITING] if m not in waiting]
            if states.get(ANSWERED):
                ended += len(states[ANSWERED])
                self._spawn(self._clear(chat_id, topic, states[ANSWERED]))
        if ended:
            log.info("Telegram: clearing %d acknowledgement(s) a stopped process left", ended)

    def acknowledge(self, chat_id: int, topic: str | None, message_id: int) -> None:
        """React to a message a turn was queued for, in the background."""
        if not self._ack:
            return
        self._pending.setdefault((chat_id, topic), []).append(message_id)
        key = (chat_id, topic)
        task = self._spawn(self._acknowledge(chat_id, topic, message_id))
        acks = self._acks.setdefault(key, set())
        acks.add(task)

        def forget(done: asyncio.Future[None]) -> None:
            acks.discard(done)
            if not acks and self._acks.get(key) is acks:
                del self._acks[key]

        task.add_done_callback(forget)

    async def _acknowledge(self, chat_id: int, topic: str | None, message_id: int) -> None:
        # Recorded first: a stop between the two leaves a record to clear, never a 👀 alone.
        await self._move(chat_id, topic, [message_id], None, WAITING)
        await self._react(chat_id, message_id, self._ack)

    async def _clear(self, chat_id: int, topic: str | None, message_ids: list[int]) -> None:
        for message_id in message_ids:
            await self._react(chat_id, message_id, self._done)
        await self._move(chat_id, topic, message_ids, ANSWERED, None)

    def _spawn(self, work: Awaitable[None]) -> asyncio.Future[None]:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

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
                # This conversation's 👀 must land before it is replaced, or it would win the
                # race; other chats' are none of this turn's business (waiting for them held
                # every lane for as long as the busiest chat's reactions took).
                running = [t for t in self._acks.get((chat_id, topic), ()) if not t.done()]
                if running:
                    await asyncio.wait(running)
                await self._move(chat_id, topic, acknowledged, WAITING, ANSWERED)
        except TimeoutError:
            log.info("Telegram: gave up on the done reactions in %d (too slow)", chat_id)
            return
        # Recorded as answered: the done reactions need not hold the session's lane (a stop
        # before they land leaves them to the next start's `restore`).
        self._spawn(self._clear(chat_id, topic, acknowledged))

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _move(
        self,
        chat_id: int,
        topic: str | None,
        message_ids: list[int],
        source: str | None,
        target: str | None,
    ) -> None:
        """Move messages in the record from state `source` to `target` (None: out of it)."""
        name = _conversation(chat_id, topic)

        def change(record: Record) -> None:
            states = record.setdefault(name, {})
            if source is not None:
                states[source] = [m for m in states.get(source, []) if m not in message_ids]
            if target is not None:
                states[target] = states.get(target, []) + [
                    m for m in message_ids if m not in states.get(target, [])
                ]
            record[name] = {state: ids for state, ids in states.items() if ids}
            if not record[name]:
                del record[name]

        await self._update(change)

    async def _update(self, change: Callable[[Record], None]) -> Record:
        """Apply `change` to the stored record; returns the record as it was before. Changes
        that arrive while a write is under way are applied together in the next one: one
        read and one write of the record for a whole burst of messages, not one per message
        (under load that read-modify-write of every chat's ids was the channel's main cost)."""
        applied: asyncio.Future[Record] = asyncio.get_running_loop().create_future()
        self._changes.append((change, applied))
        async with self._record_lock:
            if not applied.done():
                batch, self._changes = self._changes, []
                await self._write(batch)
        return await applied

    async def _write(
        self, batch: list[tuple[Callable[[Record], None], asyncio.Future[Record]]]
    ) -> None:
        """Read the record, apply the batch's changes, write it back once. A store that
        fails leaves only the reactions unrecorded: they are a courtesy."""
        before: Record = {}
        try:
            raw = await self._memory.recall(CHANNEL, RECORD_KEY)
            before = json.loads(raw) if raw else {}
            record: Record = json.loads(raw) if raw else {}  # a copy to change
            for change, _ in batch:
                change(record)
            if record != before:
                await self._memory.remember(CHANNEL, RECORD_KEY, json.dumps(record), RECORD_SECONDS)
        except Exception as exc:
            log.info("Telegram: could not record acknowledgement reactions: %s", exc)
            before = {}
        finally:  # also when cancelled: no change of the batch may wait for ever
            for _, applied in batch:
                if not applied.done():
                    applied.set_result(before)

    async def _react(self, chat_id: int, message_id: int, emoji: str) -> None:
        try:
            await self._bot.set_message_reaction(chat_id, message_id, emoji or None)
        except TelegramError as exc:
            log.info("Telegram: could not react to message %d in %d: %s", message_id, chat_id, exc)
