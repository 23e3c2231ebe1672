"""Native Slack streams (chat.startStream / appendStream / stopStream) for reply previews in
threads, with post-and-update as the fallback where Slack does not offer them."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from cachetools import LRUCache
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.types import Address, OutboundMessage
from channels.slack.api import FEATURE_UNAVAILABLE, MEMORY_ITEMS, api_error
from channels.slack.outbound import Poster

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Stream:
    """A stream still open, and the text it shows."""

    channel: str
    shown: str


class Streams:
    def __init__(self, client: AsyncWebClient, poster: Poster):
        self.client = client
        self.poster = poster
        self._native = True  # False once Slack said streaming is off for this app
        self._open: LRUCache[str, _Stream] = LRUCache(MEMORY_ITEMS)
        # (channel, thread) -> (team, user) a stream there is for; Slack requires it
        # outside DMs.
        self._recipients: LRUCache[tuple[str, str], tuple[str, str]] = LRUCache(MEMORY_ITEMS)

    def remember_recipient(self, channel: str, thread: str, team: str, user: str) -> None:
        self._recipients[(channel, thread)] = (team, user)

    def _target(self, address: Address) -> dict[str, Any] | None:
        """chat.startStream arguments for `address`, or None to post-and-update instead."""
        if not (self._native and self.poster.markdown_ok and address.thread_id):
            return None
        target: dict[str, Any] = {"channel": address.chat_id, "thread_ts": address.thread_id}
        if address.chat_id.startswith("D"):
            return target
        recipient = self._recipients.get((address.chat_id, address.thread_id))
        if recipient is None:
            return None  # outside DMs Slack needs to know who the stream is for
        team, user = recipient
        return {**target, "recipient_team_id": team, "recipient_user_id": user}

    async def start(self, out: OutboundMessage) -> str | None:
        """Open a stream showing `out`; None when a plain post should be used instead."""
        target = self._target(out.address)
        if target is None:
            return None
        try:
            async with self.poster.paced(out.address.chat_id, final=out.final):
                reply = await self.client.chat_startStream(markdown_text=out.text, **target)
        except SlackApiError as exc:
            if api_error(exc) in FEATURE_UNAVAILABLE:
                self._native = False
                log.warning(
                    "slack: native streaming unavailable (%s); using post-and-update",
                    api_error(exc),
                )
            else:
                log.debug("slack: chat.startStream failed (%s); posting instead", api_error(exc))
            return None
        ts = str(reply["ts"])
        self._open[ts] = _Stream(out.address.chat_id, out.text)
        return ts

    async def update(self, ts: str, out: OutboundMessage) -> str | None:
        """Append a preview's new text to the open stream `ts`, or close it with the final
        text; None when no stream is open under `ts` (edit the message instead)."""
        stream = self._open.get(ts)
        if stream is None:
            return None
        grows = out.text.startswith(stream.shown)
        delta = out.text[len(stream.shown) :] if grows else ""
        if not out.final:
            # A preview that rewrote earlier text cannot be streamed; the final fixes it.
            if grows and delta:
                async with self.poster.paced(stream.channel, final=False):
                    await self.client.chat_appendStream(
                        channel=stream.channel, ts=ts, markdown_text=delta
                    )
                stream.shown = out.text
            return ts
        del self._open[ts]
        if grows:
            async with self.poster.paced(stream.channel, final=True):
                await self.client.chat_stopStream(
                    channel=stream.channel, ts=ts, markdown_text=delta or None
                )
            return ts
        async with self.poster.paced(stream.channel, final=True):
            await self.client.chat_stopStream(channel=stream.channel, ts=ts)
        await self.poster.with_markdown(
            self.client.chat_update, out.text, channel=stream.channel, ts=ts
        )
        return ts
