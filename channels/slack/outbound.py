"""Posting and editing replies with the Web API: Markdown as `markdown_text` where Slack takes
it, converted mrkdwn where it does not (remembered for the rest of the run)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.types import Address, OutboundMessage
from channels.slack.api import MARKDOWN_REJECTED, api_error
from channels.slack.format import to_mrkdwn

log = logging.getLogger(__name__)


class Poster:
    def __init__(self, client: AsyncWebClient):
        self.client = client
        self.markdown_ok = True  # False once Slack refused `markdown_text`

    async def with_markdown(
        self, call: Callable[..., Awaitable[Any]], markdown: str, **kwargs: Any
    ) -> Any:
        """Call a Web API method with `markdown_text`, or with mrkdwn `text` where Slack does
        not take Markdown."""
        if self.markdown_ok:
            try:
                return await call(markdown_text=markdown, **kwargs)
            except SlackApiError as exc:
                if api_error(exc) not in MARKDOWN_REJECTED:
                    raise
                self.markdown_ok = False
                log.warning(
                    "slack: markdown_text was refused (%s); sending mrkdwn text from now on",
                    api_error(exc),
                )
        return await call(text=to_mrkdwn(markdown), **kwargs)

    async def post(self, address: Address, text: str) -> str:
        thread = {"thread_ts": address.thread_id} if address.thread_id else {}
        reply = await self.with_markdown(
            self.client.chat_postMessage, text, channel=address.chat_id, **thread
        )
        return str(reply["ts"])

    async def edit(self, out: OutboundMessage) -> str:
        assert out.edit_of is not None
        try:
            await self.with_markdown(
                self.client.chat_update, out.text, channel=out.address.chat_id, ts=out.edit_of
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
            return await self.post(out.address, out.text)
