"""Slack events in: each message or app_mention event becomes one `InboundMessage` for the
gateway, once, however many times and ways Slack delivers it.

Socket Mode runs in every replica and Slack may hand the same event (or its app_mention and
message twins) to different replicas: the gateway's store dedupes by message id, so a post
counts once; the caches here only spare this process repeated work. The threads the bot
takes part in are remembered through the gateway (every replica finds them), so a reply in
such a thread needs no mention whichever replica receives it."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from typing import Any

from cachetools import LRUCache
from slack_bolt.request.async_request import AsyncBoltRequest

from bot.channel_contract import AcceptResult, Gateway
from bot.types import ChatType, InboundMessage
from channels.slack.api import MEMORY_ITEMS
from channels.slack.config import SlackConfig
from channels.slack.files import SlackFiles
from channels.slack.history import ThreadHistory
from channels.slack.mapping import CHANNEL, BotIdentity, SlackPost, parse_event, to_inbound
from channels.slack.people import People
from channels.slack.streams import Streams

log = logging.getLogger(__name__)

# How long a thread the bot took part in is remembered (past it, the thread's session still
# tells, once a turn ran there).
THREAD_MEMORY_SECONDS = 30 * 86_400.0


def thread_key(channel: str, thread_ts: str) -> str:
    return f"thread:{channel}:{thread_ts}"


def _header(request: AsyncBoltRequest, name: str) -> str | None:
    values = request.headers.get(name)
    return values[0] if values else None


async def _nothing() -> list[str]:
    return []


class Inbound:
    def __init__(
        self,
        config: SlackConfig,
        gateway: Gateway,
        identity: Callable[[], BotIdentity],
        people: People,
        history: ThreadHistory,
        streams: Streams,
        files: SlackFiles | None = None,
    ):
        self.config = config
        self.gateway = gateway
        self.identity = identity  # the bot as signed in (known once the adapter started)
        self.people = people
        self.history = history
        self.streams = streams
        self.files = files  # None: files stay `[attached file: ...]` lines
        self._handled_events: LRUCache[str, bool] = LRUCache(MEMORY_ITEMS)
        self._handled_posts: LRUCache[str, bool] = LRUCache(MEMORY_ITEMS)
        self._inflight: dict[str, asyncio.Future[None]] = {}

    async def on_message_event(self, body: dict[str, Any], request: AsyncBoltRequest) -> None:
        event_id = str(body.get("event_id", ""))
        if event_id and event_id in self._handled_events:
            log.debug(
                "slack: event %s already handled (retry %s)",
                event_id,
                _header(request, "x-slack-retry-num") or "-",
            )
            return
        parsed = parse_event(
            body.get("event") or {},
            self.identity(),
            allow_bots=self.config.allow_bots,
            team_id=str(body.get("team_id", "")),
            names=self.people.names,
        )
        if isinstance(parsed, SlackPost):
            await self._ingest_once(parsed)
        else:
            log.debug("slack: ignoring event %s: %s", event_id or "-", parsed.reason)
        if event_id:
            self._handled_events[event_id] = True

    async def _chat_name(self, channel: str, title: str) -> None:
        await self.gateway.chat_name(CHANNEL, channel, title)

    async def on_other_event(self, body: dict[str, Any]) -> None:
        event = body.get("event") or {}
        log.debug("slack: ignoring %r event %s", event.get("type"), body.get("event_id", "-"))

    async def _ingest_once(self, post: SlackPost) -> None:
        """Run `_ingest` once per post even when Slack delivers it twice at the same time
        (app_mention + message, or a retry): the second delivery waits for the first."""
        if post.message_id in self._handled_posts:
            log.debug("slack: %s already handled", post.message_id)
            return
        pending = self._inflight.get(post.message_id)
        if pending is None:
            pending = asyncio.ensure_future(self._ingest(post))
            self._inflight[post.message_id] = pending
            pending.add_done_callback(lambda _: self._inflight.pop(post.message_id, None))
        # shield: if this delivery's request is dropped, the post is still recorded.
        await asyncio.shield(pending)
        self._handled_posts[post.message_id] = True

    async def _ingest(self, post: SlackPost) -> None:
        msg = to_inbound(post, mentioned=post.mentioned)
        fetch_history = False
        since: str | None = None
        if post.chat_type == ChatType.CHANNEL and post.thread_ts is not None:
            # Per thread Krill is in: the newest post it has seen there, so a later mention
            # re-reads only what was posted since.
            seen = await self.gateway.recall(CHANNEL, thread_key(post.channel, post.thread_ts))
            joined = post.parent_is_bot or seen is not None
            joined = joined or await self.gateway.session_exists(msg)
            if not joined and not post.mentioned and self.gateway.requires_mention(msg):
                # Chatter in someone else's thread: not stored, because the thread's history
                # is fetched from Slack if the bot is ever called into it.
                log.debug("slack: %s is chatter in a thread Krill is not in", post.message_id)
                return
            # A reply in a thread Krill takes part in is addressed to it.
            msg = dataclasses.replace(msg, mentioned=post.mentioned or joined)
            fetch_history = not joined
            if joined and post.mentioned:
                # Called again: people may have talked in the thread without the bot seeing
                # it (no event for unmentioned replies, or a restart in between).
                since = seen or await self._last_exchange(msg)
                fetch_history = since is not None
        user_name, context = await asyncio.gather(
            self.people.name_of(post),
            self.history.context_lines(post, since) if fetch_history else _nothing(),
        )
        files = msg.attachments
        if self.files is not None and post.files:
            files = await self.files.download(post.files)
        msg = dataclasses.replace(
            msg, user_name=user_name, context_lines=context, attachments=files
        )
        thread = msg.address.thread_id
        if thread and post.chat_type == ChatType.CHANNEL:
            # Native streams in channels must name who they are for.
            await self.streams.remember_recipient(post.channel, thread, post.team, post.user)
        result = await self.gateway.accept(msg)
        if result in (AcceptResult.ACCEPTED, AcceptResult.BUFFERED, AcceptResult.COMMAND):
            if post.chat_type == ChatType.CHANNEL:
                self.people.learn_channel(post.channel, self._chat_name)
        if result == AcceptResult.ACCEPTED and thread and post.chat_type == ChatType.CHANNEL:
            await self.gateway.remember(
                CHANNEL, thread_key(post.channel, thread), post.ts, THREAD_MEMORY_SECONDS
            )
        log.info(
            "slack: %s %s from %s in %s%s%s",
            result,
            msg.message_id,
            post.user,
            post.channel,
            f" thread {thread}" if thread else "",
            f" (+{len(context)} thread messages)" if context else "",
        )

    async def _last_exchange(self, msg: InboundMessage) -> str | None:
        """When the bot last looked at a thread it forgot: the time of the sender's last
        exchange in its session."""
        history = await self.gateway.recent_history(msg, 1)
        return f"{history[-1].timestamp:.6f}" if history else None
