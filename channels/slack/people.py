"""People's display names and channels' names: looked up with users.info and
conversations.info once, cached for a day, and not asked for again for a while after a
lookup failed. A failure (a missing scope, a rate limit) is logged once per kind and never
fails the message it came with: a person's name is looked up under a short timeout, a
channel's in the background."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

import aiohttp
from cachetools import LRUCache, TTLCache
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from channels.slack.api import MEMORY_ITEMS, api_error
from channels.slack.mapping import SlackPost

log = logging.getLogger(__name__)

# Lookups made before the acknowledgement must leave time under Slack's 3 s deadline.
USER_LOOKUP_SECONDS = 1.0
NAME_RETRY_SECONDS = 600.0
# Names change rarely; a day-old one is still the right one nearly always.
NAME_REFRESH_SECONDS = 86_400.0
# What to grant when a lookup is refused for want of a scope (Slack says which in `needed`).
_SCOPE_HINT = (
    "add the scope to the Slack app (deploy/slack-manifest.yaml lists them) and reinstall it"
)


class People:
    def __init__(self, client: AsyncWebClient):
        self.client = client
        # user id -> display name ("" when Slack has none): also read by the event mapping.
        self.names: TTLCache[str, str] = TTLCache(
            MEMORY_ITEMS, NAME_REFRESH_SECONDS, timer=time.monotonic
        )
        # channel id -> "#name"
        self.channel_names: TTLCache[str, str] = TTLCache(
            MEMORY_ITEMS, NAME_REFRESH_SECONDS, timer=time.monotonic
        )
        self._failed: TTLCache[str, bool] = TTLCache(
            MEMORY_ITEMS, NAME_RETRY_SECONDS, timer=time.monotonic
        )
        self._warned: LRUCache[str, bool] = LRUCache(64)
        self._tasks: set[asyncio.Task[None]] = set()

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
            self._failure("users.info", user, exc)
            return ""
        info = reply.get("user") or {}
        profile = info.get("profile") or {}
        name = str(
            profile.get("display_name") or profile.get("real_name") or info.get("name") or ""
        )
        self.names[user] = name
        return name

    def learn_channel(self, channel: str, found: Callable[[str, str], Awaitable[None]]) -> None:
        """Look `channel`'s name up in the background unless it is known, being looked up,
        or failed lately; `found(channel, "#name")` is called with what Slack says."""
        if channel in self.channel_names or channel in self._failed:
            return
        self._failed[channel] = True  # until the lookup ends: one lookup at a time
        task = asyncio.create_task(self._channel_lookup(channel, found))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _channel_lookup(
        self, channel: str, found: Callable[[str, str], Awaitable[None]]
    ) -> None:
        try:
            reply = await self.client.conversations_info(channel=channel)
        except (SlackApiError, OSError, aiohttp.ClientError, TimeoutError) as exc:
            self._failure("conversations.info", channel, exc)
            return
        name = str((reply.get("channel") or {}).get("name") or "")
        if not name:
            return
        title = f"#{name}"
        self.channel_names[channel] = title
        self._failed.pop(channel, None)
        await found(channel, title)

    def _failure(self, method: str, about: str, exc: Exception) -> None:
        self._failed[about] = True
        error = api_error(exc) if isinstance(exc, SlackApiError) else type(exc).__name__
        if f"{method}:{error}" in self._warned:
            log.debug("slack: %s %s failed (%s)", method, about, error)
            return
        self._warned[f"{method}:{error}"] = True
        needed = ""
        if isinstance(exc, SlackApiError) and exc.response is not None:
            needed = str(exc.response.get("needed") or "")
        hint = f": needs {needed}; {_SCOPE_HINT}" if error == "missing_scope" else ""
        log.warning(
            "slack: %s failed (%s)%s; names are shown as ids until it works", method, error, hint
        )

    async def stop(self) -> None:
        """Cancel the lookups still running."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
