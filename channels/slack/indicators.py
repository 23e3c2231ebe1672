"""The typing indicator on Slack: "is thinking…" under a thread where Slack offers thread
status, else an acknowledgement reaction (`slack.ack_reaction`, 👀 by default) on the message
being answered, removed or swapped for `slack.done_reaction` when the turn is over.

The reaction is recorded through the gateway: a turn another replica takes over after a
crash still swaps it. A thread status needs no such record, since Slack clears it by itself
when the reply is posted or after two minutes."""

from __future__ import annotations

import logging

from cachetools import LRUCache
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.channel_contract import Gateway
from bot.types import Address
from channels.slack.api import FEATURE_UNAVAILABLE, MEMORY_ITEMS, api_error
from channels.slack.mapping import CHANNEL

log = logging.getLogger(__name__)

THINKING_STATUS = "is thinking…"
# setStatus lasts two minutes unless a message clears it; refresh well inside that.
TYPING_REFRESH_SECONDS = 60.0
ALL_CHANNELS = "*"
REACTION_SECONDS = 86_400.0  # longer than any turn; a reaction older than that stays


def reaction_key(channel: str, ts: str) -> str:
    return f"reaction:{channel}:{ts}"


class Indicators:
    def __init__(
        self, client: AsyncWebClient, gateway: Gateway, ack_reaction: str, done_reaction: str
    ):
        self.client = client
        self.gateway = gateway
        self.ack_reaction = ack_reaction
        self.done_reaction = done_reaction
        # Where a thread status is showing, so done_typing clears only what typing set.
        self._statuses: LRUCache[tuple[str, str], bool] = LRUCache(MEMORY_ITEMS)
        self._status_off: set[str] = set()  # channels where setStatus failed (or ALL_CHANNELS)

    def _status_allowed(self, channel: str) -> bool:
        return ALL_CHANNELS not in self._status_off and channel not in self._status_off

    async def typing(self, address: Address) -> None:
        if address.private_to:
            return
        if address.thread_id and self._status_allowed(address.chat_id):
            try:
                await self.client.assistant_threads_setStatus(
                    channel_id=address.chat_id, thread_ts=address.thread_id, status=THINKING_STATUS
                )
                self._statuses[(address.chat_id, address.thread_id)] = True
                return
            except SlackApiError as exc:
                error = api_error(exc)
                off = ALL_CHANNELS if error in FEATURE_UNAVAILABLE else address.chat_id
                self._status_off.add(off)
                log.info("slack: no thread status in %s (%s); using a reaction", off, error)
        if not address.reply_to or not self.ack_reaction:
            return
        key = reaction_key(address.chat_id, address.reply_to)
        if await self.gateway.recall(CHANNEL, key) is not None:
            return
        # Recorded first: a pulse cancelled as the turn ends must not leave the reaction
        # behind without the record done_typing clears it by.
        await self.gateway.remember(CHANNEL, key, self.ack_reaction, REACTION_SECONDS)
        await self._react(address.chat_id, address.reply_to, self.ack_reaction)

    async def done_typing(self, address: Address) -> None:
        if address.thread_id and self._statuses.pop((address.chat_id, address.thread_id), None):
            await self.client.assistant_threads_setStatus(
                channel_id=address.chat_id, thread_ts=address.thread_id, status=""
            )
        if not address.reply_to:
            return
        key = reaction_key(address.chat_id, address.reply_to)
        if await self.gateway.recall(CHANNEL, key) is not None:
            await self.gateway.remember(CHANNEL, key, "", 0.0)
            try:
                await self.client.reactions_remove(
                    channel=address.chat_id, timestamp=address.reply_to, name=self.ack_reaction
                )
            except SlackApiError as exc:
                if api_error(exc) != "no_reaction":  # the pulse was cut off before it
                    raise
            if self.done_reaction:
                await self._react(address.chat_id, address.reply_to, self.done_reaction)

    async def _react(self, channel: str, ts: str, name: str) -> None:
        try:
            await self.client.reactions_add(channel=channel, timestamp=ts, name=name)
        except SlackApiError as exc:
            if api_error(exc) != "already_reacted":
                raise
