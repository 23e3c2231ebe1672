"""Slash commands (`/krill <command>`) and the answers only their asker sees: through the
command's response_url while it is valid, else chat.postEphemeral. The response_url is kept
through the gateway, so whichever replica sends the answer finds it."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from bot.channel_contract import AcceptResult, Gateway
from bot.log_context import Content
from bot.types import InboundMessage, OutboundMessage
from channels.slack.buttons import actions_blocks, press_url_key, section_blocks
from channels.slack.format import to_mrkdwn
from channels.slack.mapping import CHANNEL, slash_message, slash_text
from channels.slack.outbound import Poster

log = logging.getLogger(__name__)

RESPONSE_URL_SECONDS = 1_500.0  # Slack honours a response_url for 30 minutes
NOT_ENABLED_HERE = "Krill is not enabled in this conversation."


def response_url_key(channel: str, user: str) -> str:
    """Where the response_url of `user`'s latest command in `channel` is kept."""
    return f"response_url:{channel}:{user}"


class SlashCommands:
    def __init__(self, gateway: Gateway, client: AsyncWebClient, poster: Poster):
        self.gateway = gateway
        self.client = client
        self.poster = poster
        self._tasks: set[asyncio.Task[None]] = set()
        self._ephemeral_ids = itertools.count(1)

    async def on_command(self, ack: Callable[..., Awaitable[Any]], body: dict[str, Any]) -> None:
        command = str(body.get("command") or "/krill")
        text = slash_text(str(body.get("text") or ""))
        if text is None:
            await ack(response_type="ephemeral", text=f"Unknown command. Try `{command} help`.")
            return
        msg = slash_message(body, text)
        if body.get("response_url"):
            key = response_url_key(msg.chat_id, msg.user_id)
            await self.gateway.remember(
                CHANNEL, key, str(body["response_url"]), RESPONSE_URL_SECONDS
            )
        await ack()
        # Commands run after the ack: /compact can take longer than Slack's 3 s, and Slack
        # never retries a slash command, so there is nothing to record first.
        task = asyncio.create_task(self._run(msg), name=f"slack-command:{text}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, msg: InboundMessage) -> None:
        try:
            result = await self.gateway.accept(msg)
            log.info(
                "slack: %s %s from %s in %s", result, Content(msg.text), msg.user_id, msg.chat_id
            )
            if result == AcceptResult.IGNORED:
                await self.send_private(OutboundMessage(msg.address, NOT_ENABLED_HERE, "", 0))
        except Exception:
            log.exception("slack: command %r from %s failed", msg.text, msg.user_id)

    async def send_private(self, out: OutboundMessage) -> str:
        """An answer only its asker sees: via the slash command's response_url while it is
        valid (it works even where the bot is not a member), else chat.postEphemeral. An
        edit (a pressed button's outcome) replaces the message through the press's own
        response_url; without one it comes as a new answer."""
        address = out.address
        assert address.private_to is not None
        press_url = None
        if out.edit_of is not None:
            press_url = await self.gateway.recall(CHANNEL, press_url_key(out.edit_of))
        replaces = press_url is not None
        url = press_url or await self.gateway.recall(
            CHANNEL, response_url_key(address.chat_id, address.private_to)
        )
        if url is not None:
            text = to_mrkdwn(out.text)
            blocks = None
            if out.buttons is not None:
                blocks = section_blocks(text) + actions_blocks(out.buttons)
            webhook = AsyncWebhookClient(url, session=self.client.session)
            try:
                response = await webhook.send(
                    text=text,
                    blocks=blocks,
                    response_type="ephemeral",
                    replace_original=replaces or None,
                )
                status: object = response.status_code
            except (OSError, aiohttp.ClientError, TimeoutError) as exc:
                status = exc
            if status == 200:
                return out.edit_of if replaces and out.edit_of else self._ephemeral_id()
            log.warning("slack: response_url failed (%s); using chat.postEphemeral", status)
        thread: dict[str, Any] = {"thread_ts": address.thread_id} if address.thread_id else {}
        reply = await self.poster.with_markdown(
            self.client.chat_postEphemeral,
            out.text,
            buttons=out.buttons or None,
            channel=address.chat_id,
            user=address.private_to,
            **thread,
        )
        return str(reply.get("message_ts") or self._ephemeral_id())

    def _ephemeral_id(self) -> str:
        return f"ephemeral:{next(self._ephemeral_ids)}"

    async def stop(self) -> None:
        """Cancel the commands still running."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
