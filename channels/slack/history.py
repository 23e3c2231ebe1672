"""A thread's earlier messages, fetched when Krill is called into a thread it was not part
of, so the model sees what was said before the mention; and, when it is mentioned again in a
thread it knows, the replies posted since it last looked."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from channels.slack.mapping import BotIdentity, SlackPost, history_users, thread_context_lines
from channels.slack.people import People

log = logging.getLogger(__name__)

# The fetch happens before the acknowledgement, which must leave under Slack's 3 s deadline.
HISTORY_FETCH_SECONDS = 1.5
HISTORY_PAGE_SIZE = 200
HISTORY_MAX_PAGES = 5
HISTORY_MAX_NAME_LOOKUPS = 10


class ThreadHistory:
    def __init__(self, client: AsyncWebClient, people: People, identity: Callable[[], BotIdentity]):
        self.client = client
        self.people = people
        self.identity = identity  # the bot as signed in (known once the adapter started)

    async def context_lines(self, post: SlackPost, since_ts: str | None = None) -> list[str]:
        """Earlier messages of the thread `post` is in, labelled by sender ([] on failure);
        with `since_ts`, only others' replies posted after it."""
        assert post.thread_ts is not None
        names = self.people.names
        try:
            async with asyncio.timeout(HISTORY_FETCH_SECONDS):
                messages = await self._messages(post.channel, post.thread_ts, since_ts)
                unknown = [u for u in history_users(messages) if u not in names]
                await asyncio.gather(
                    *(self.people.lookup(u) for u in unknown[:HISTORY_MAX_NAME_LOOKUPS])
                )
        except (SlackApiError, OSError, aiohttp.ClientError, TimeoutError) as exc:
            # Context is a help, not a requirement: the post is still accepted without it.
            log.warning("slack: could not fetch thread %s history: %s", post.thread_ts, exc)
            return []
        return thread_context_lines(
            messages, before_ts=post.ts, me=self.identity(), names=names, after_ts=since_ts
        )

    async def _messages(
        self, channel: str, thread_ts: str, oldest: str | None
    ) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        cursor: str | None = None
        for _ in range(HISTORY_MAX_PAGES):
            reply = await self.client.conversations_replies(
                channel=channel, ts=thread_ts, limit=HISTORY_PAGE_SIZE, cursor=cursor, oldest=oldest
            )
            messages.extend(m for m in reply.get("messages") or [] if isinstance(m, dict))
            cursor = (reply.get("response_metadata") or {}).get("next_cursor") or None
            if not reply.get("has_more") or not cursor:
                break
        return messages
