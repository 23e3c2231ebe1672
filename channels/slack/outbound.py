"""Posting and editing replies with the Web API: Markdown as `markdown_text` where Slack takes
it, converted mrkdwn where it does not (remembered for the rest of the run), every call
paced per channel (`[slack.pacing]`) so Krill stays below Slack's rate limits. A post carries
its outbox chunk id as message metadata, so a send whose outcome a crash left unknown can be
looked up instead of posted twice."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.types import Address, ButtonRows, OutboundMessage, Source
from channels.pacing import Window, paced
from channels.slack.api import MARKDOWN_REJECTED, api_error
from channels.slack.buttons import actions_blocks, section_blocks
from channels.slack.format import sources_block, sources_mrkdwn, to_mrkdwn

log = logging.getLogger(__name__)

CHUNK_EVENT = "krill_chunk"  # metadata event_type of a reply chunk's message
LOOKUP_LIMIT = 100  # recent messages searched for a chunk's metadata


class Poster:
    def __init__(self, client: AsyncWebClient, pace: Window):
        self.client = client
        self.markdown_ok = True  # False once Slack refused `markdown_text`
        self._pace = pace

    def paced(self, channel: str, *, final: bool) -> AbstractAsyncContextManager[None]:
        """Hold the channel's slot for one call; a preview (`final=False`) is skipped with
        `PreviewSkipped` rather than kept waiting."""
        return paced([(self._pace, channel)], wait=final)

    async def with_markdown(
        self,
        call: Callable[..., Awaitable[Any]],
        markdown: str,
        *,
        final: bool = True,
        sources: tuple[Source, ...] = (),
        buttons: ButtonRows | None = None,
        **kwargs: Any,
    ) -> Any:
        """Call a Web API method with `markdown_text`, or with mrkdwn `text` where Slack does
        not take Markdown. With `sources` or `buttons`, the Markdown goes in a markdown block
        (Slack takes `markdown_text` only alone) followed by a context block of links and
        an actions block per row of buttons; `buttons=()` sends the blocks without any, so
        an edit takes away the buttons the message had."""
        under = ([sources_block(sources)] if sources else []) + actions_blocks(buttons or ())
        if self.markdown_ok:
            content: dict[str, Any] = {"markdown_text": markdown}
            if under or buttons is not None:
                blocks = [{"type": "markdown", "text": markdown}, *under]
                content = {"text": to_mrkdwn(markdown), "blocks": blocks}
            try:
                async with self.paced(kwargs["channel"], final=final):
                    return await call(**content, **kwargs)
            except SlackApiError as exc:
                if api_error(exc) not in MARKDOWN_REJECTED:
                    raise
                self.markdown_ok = False
                log.warning(
                    "slack: markdown_text was refused (%s); sending mrkdwn text from now on",
                    api_error(exc),
                )
        text = to_mrkdwn(markdown)
        if sources:
            text += "\n\n" + sources_mrkdwn(sources)
        fallback: dict[str, Any] = {"text": text}
        if buttons is not None:
            fallback["blocks"] = section_blocks(text) + actions_blocks(buttons)
        async with self.paced(kwargs["channel"], final=final):
            return await call(**fallback, **kwargs)

    async def post(
        self,
        address: Address,
        text: str,
        chunk_id: str = "",
        *,
        final: bool = True,
        sources: tuple[Source, ...] = (),
        buttons: ButtonRows | None = None,
    ) -> str:
        extra: dict[str, Any] = {"thread_ts": address.thread_id} if address.thread_id else {}
        if chunk_id:
            extra["metadata"] = {"event_type": CHUNK_EVENT, "event_payload": {"chunk_id": chunk_id}}
        reply = await self.with_markdown(
            self.client.chat_postMessage,
            text,
            final=final,
            sources=sources,
            buttons=buttons or None,
            channel=address.chat_id,
            **extra,
        )
        return str(reply["ts"])

    async def find(self, out: OutboundMessage) -> str | None:
        """The ts of a message already posted for `out.chunk_id`, if any."""
        address = out.address
        if address.thread_id:
            reply = await self.client.conversations_replies(
                channel=address.chat_id,
                ts=address.thread_id,
                include_all_metadata=True,
                limit=LOOKUP_LIMIT,
            )
        else:
            reply = await self.client.conversations_history(
                channel=address.chat_id, include_all_metadata=True, limit=LOOKUP_LIMIT
            )
        for message in reply.get("messages") or []:
            metadata = message.get("metadata") or {}
            payload = metadata.get("event_payload") or {}
            if (
                metadata.get("event_type") == CHUNK_EVENT
                and payload.get("chunk_id") == out.chunk_id
            ):
                return str(message["ts"])
        return None

    async def edit(self, out: OutboundMessage) -> str:
        assert out.edit_of is not None
        try:
            await self.with_markdown(
                self.client.chat_update,
                out.text,
                final=out.final,
                sources=out.sources,
                buttons=out.buttons,
                channel=out.address.chat_id,
                ts=out.edit_of,
            )
            return out.edit_of
        except SlackApiError as exc:
            if not out.final:
                raise
            # The preview is gone (deleted, or from a stream of a previous run): the reply
            # itself must still arrive.
            log.warning(
                "slack: could not edit %s (%s); posting the reply anew",
                out.edit_of,
                api_error(exc),
            )
            return await self.post(
                out.address, out.text, out.chunk_id, sources=out.sources, buttons=out.buttons
            )
