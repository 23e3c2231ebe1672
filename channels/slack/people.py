"""People's display names: looked up with users.info once, cached, and not asked for again
for a while after a lookup failed."""

from __future__ import annotations

import asyncio
import logging
import time

import aiohttp
from cachetools import LRUCache, TTLCache
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from channels.slack.api import MEMORY_ITEMS
from channels.slack.mapping import SlackPost

log = logging.getLogger(__name__)

# Lookups made before the acknowledgement must leave time under Slack's 3 s deadline.
USER_LOOKUP_SECONDS = 1.0
NAME_RETRY_SECONDS = 600.0


class People:
    def __init__(self, client: AsyncWebClient):
        self.client = client
        # user id -> display name ("" when Slack has none): also read by the event mapping.
        self.names: LRUCache[str, str] = LRUCache(MEMORY_ITEMS)
        self._failed: TTLCache[str, bool] = TTLCache(
            MEMORY_ITEMS, NAME_RETRY_SECONDS, timer=time.monotonic
        )

    async def name_of(self, post: SlackPost) -> str:
        """The display name of `post`'s author ("" when unknown: the id is used)."""
        if post.user_name:
            return post.user_name
        return await self.lookup(post.user)

    async def lookup(self, user: str) -> str:
        """A person's display name via users.info, cached; "" when unknown."""
        known = self.names.get(user)
        if known is not None:
            return known
        if user in self._failed:
            return ""
        try:
            reply = await asyncio.wait_for(self.client.users_info(user=user), USER_LOOKUP_SECONDS)
        except (SlackApiError, OSError, aiohttp.ClientError, TimeoutError) as exc:
            log.debug("slack: no name for %s (%s)", user, exc)
            self._failed[user] = True
            return ""
        info = reply.get("user") or {}
        profile = info.get("profile") or {}
        name = str(
            profile.get("display_name") or profile.get("real_name") or info.get("name") or ""
        )
        self.names[user] = name
        return name
