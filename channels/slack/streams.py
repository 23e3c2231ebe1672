"""Native Slack streams (chat.startStream / appendStream / stopStream) for reply previews in
threads, with post-and-update as the fallback where Slack does not offer them.

An open stream (and whom a thread's stream is for) is kept through the gateway rather than
in memory: the next chunk of a reply may be sent by another replica's outbox sender."""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.channel_contract import Gateway
from bot.types import Address, OutboundMessage
from channels.slack.api import FEATURE_UNAVAILABLE, api_error
from channels.slack.format import sources_block
from channels.slack.mapping import CHANNEL
from channels.slack.outbound import Poster

log = logging.getLogger(__name__)

# Longer than any reply takes to stream; a stream left open by a crash is then forgotten.
STREAM_SECONDS = 3_600.0
RECIPIENT_SECONDS = 86_400.0


def recipient_key(channel: str, thread: str) -> str:
    return f"recipient:{channel}:{thread}"


def stream_key(ts: str) -> str:
    return f"stream:{ts}"


@dataclass(slots=True)
class _Stream:
    """A stream still open, and the text it shows."""

    channel: str
    shown: str


class Streams:
    def __init__(self, client: AsyncWebClient, poster: Poster, gateway: Gateway):
        self.client = client
        self.poster = poster
        self.gateway = gateway
        self._native = True  # False once Slack said streaming is off for this app

    async def remember_recipient(self, channel: str, thread: str, team: str, user: str) -> None:
        """Whom a stream in `thread` is for: Slack requires it outside DMs."""
        key = recipient_key(channel, thread)
        await self.gateway.remember(CHANNEL, key, f"{team} {user}", RECIPIENT_SECONDS)

    async def _keep(self, ts: str, stream: _Stream | None) -> None:
        """Record the open stream `ts` (None: it is closed)."""
        value = json.dumps(asdict(stream)) if stream is not None else ""
        await self.gateway.remember(
            CHANNEL, stream_key(ts), value, STREAM_SECONDS if stream is not None else 0.0
        )

    async def _target(self, address: Address) -> dict[str, Any] | None:
        """chat.startStream arguments for `address`, or None to post-and-update instead."""
        if not (self._native and self.poster.markdown_ok and address.thread_id):
            return None
        target: dict[str, Any] = {"channel": address.chat_id, "thread_ts": address.thread_id}
        if address.chat_id.startswith("D"):
            return target
        recipient = await self.gateway.recall(
            CHANNEL, recipient_key(address.chat_id, address.thread_id)
        )
        if recipient is None:
            return None  # outside DMs Slack needs to know who the stream is for
        team, _, user = recipient.partition(" ")
        return {**target, "recipient_team_id": team, "recipient_user_id": user}

    async def start(self, out: OutboundMessage) -> str | None:
        """Open a stream showing `out`; None when a plain post should be used instead."""
        target = await self._target(out.address)
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
        await self._keep(ts, _Stream(out.address.chat_id, out.text))
        return ts

    async def update(self, ts: str, out: OutboundMessage) -> str | None:
        """Append a preview's new text to the open stream `ts`, or close it with the final
        text; None when no stream is open under `ts` (edit the message instead)."""
        kept = await self.gateway.recall(CHANNEL, stream_key(ts))
        if not kept:
            return None
        stream = _Stream(**json.loads(kept))
        grows = out.text.startswith(stream.shown)
        delta = out.text[len(stream.shown) :] if grows else ""
        if not out.final:
            # A preview that rewrote earlier text cannot be streamed; the final fixes it.
            if grows and delta:
                async with self.poster.paced(stream.channel, final=False):
                    await self.client.chat_appendStream(
                        channel=stream.channel, ts=ts, markdown_text=delta
                    )
                await self._keep(ts, _Stream(stream.channel, out.text))
            return ts
        await self._keep(ts, None)
        if grows:
            # Blocks given when a stream stops show under the text it streamed.
            blocks = [sources_block(out.sources)] if out.sources else None
            async with self.poster.paced(stream.channel, final=True):
                await self.client.chat_stopStream(
                    channel=stream.channel, ts=ts, markdown_text=delta or None, blocks=blocks
                )
            return ts
        async with self.poster.paced(stream.channel, final=True):
            await self.client.chat_stopStream(channel=stream.channel, ts=ts)
        await self.poster.with_markdown(
            self.client.chat_update, out.text, sources=out.sources, channel=stream.channel, ts=ts
        )
        return ts
