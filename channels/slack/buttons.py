"""Buttons on Slack: a message's buttons as Block Kit `actions` blocks, and a press
(`block_actions`, over Socket Mode or signed at `/slack/interactivity`) handed to the
gateway before Slack is acknowledged.

Slack has no notification for a press: when it does not count (someone else's, expired,
already answered) the presser gets the reason as a message only they see; when it counts,
the message's edit shows the outcome. A press on a message only its person sees (the answer
to a slash command) can be edited only through the press's own response_url, which is
kept through the gateway for whichever replica edits it."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.channel_contract import Gateway, PressResult
from bot.types import ButtonPress, ButtonRows, ButtonStyle
from channels.slack.mapping import CHANNEL

log = logging.getLogger(__name__)

ACTION_PREFIX = "krill:"  # action ids of Krill's buttons: the prefix, then the button's data
LABEL_CHARS = 75  # Slack's limit on a button's plain_text
SECTION_CHARS = 3_000  # Slack's limit on a section's text
RESPONSE_URL_SECONDS = 1_500.0  # Slack honours a response_url for 30 minutes
NOT_RECORDED = "Sorry, that press did not go through; please press again."


def press_url_key(message_ts: str) -> str:
    """Where the response_url of a press on the private message `message_ts` is kept."""
    return f"press_url:{message_ts}"


def actions_blocks(rows: ButtonRows) -> list[dict[str, Any]]:
    """One actions block per row of buttons."""
    blocks = []
    for row in rows:
        elements = []
        for button in row:
            element: dict[str, Any] = {
                "type": "button",
                "text": {"type": "plain_text", "text": button.label, "emoji": True},
                "action_id": ACTION_PREFIX + button.data,
                "value": button.data,
            }
            if button.style is not ButtonStyle.PLAIN:
                element["style"] = str(button.style)
            elements.append(element)
        blocks.append({"type": "actions", "elements": elements})
    return blocks


def section_blocks(mrkdwn: str) -> list[dict[str, Any]]:
    """mrkdwn text as section blocks, cut at line breaks to Slack's limit per section."""
    blocks: list[dict[str, Any]] = []
    rest = mrkdwn
    while rest:
        cut = len(rest) if len(rest) <= SECTION_CHARS else rest.rfind("\n", 0, SECTION_CHARS)
        if cut <= 0:
            cut = SECTION_CHARS
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": rest[:cut]}})
        rest = rest[cut:].lstrip("\n")
    return blocks


def press_of(body: dict[str, Any]) -> ButtonPress | None:
    """The press of one of Krill's buttons a `block_actions` payload reports; None for
    anything else."""
    actions = body.get("actions") or []
    action = actions[0] if actions and isinstance(actions[0], dict) else {}
    container = body.get("container") or {}
    user = body.get("user") or {}
    channel = (body.get("channel") or {}).get("id") or container.get("channel_id")
    data = action.get("value")
    if not str(action.get("action_id", "")).startswith(ACTION_PREFIX) or not data or not channel:
        return None
    return ButtonPress(
        channel=CHANNEL,
        press_id=str(body.get("trigger_id") or action.get("action_ts") or ""),
        data=str(data),
        chat_id=str(channel),
        user_id=str(user.get("id", "")),
        user_name=str(user.get("name") or user.get("username") or ""),
        message_id=str(container.get("message_ts") or ""),
    )


class SlackPresses:
    """The Bolt listener of Krill's buttons."""

    def __init__(self, gateway: Gateway, client: AsyncWebClient):
        self.gateway = gateway
        self.client = client

    async def on_action(self, ack: Callable[[], Awaitable[Any]], body: dict[str, Any]) -> None:
        press = press_of(body)
        if press is None:
            await ack()
            return
        container = body.get("container") or {}
        if container.get("is_ephemeral") and body.get("response_url") and press.message_id:
            await self.gateway.remember(
                CHANNEL,
                press_url_key(press.message_id),
                str(body["response_url"]),
                RESPONSE_URL_SECONDS,
            )
        try:
            answer = await self.gateway.press(press)
        except Exception:  # not recorded; Slack never delivers an interaction twice
            log.exception("slack: could not record a button press of %s", press.user_id)
            await ack()
            await self._tell(press, container, NOT_RECORDED)
            return
        await ack()
        log.info("slack: button press of %s in %s: %s", press.user_id, press.chat_id, answer.result)
        if answer.result is not PressResult.DONE:
            await self._tell(press, container, answer.text)

    async def _tell(self, press: ButtonPress, container: dict[str, Any], text: str) -> None:
        """A line only the presser sees, in the message's thread."""
        thread = container.get("thread_ts")
        try:
            await self.client.chat_postEphemeral(
                channel=press.chat_id,
                user=press.user_id,
                text=text,
                **({"thread_ts": thread} if thread else {}),
            )
        except SlackApiError as exc:
            log.warning("slack: could not tell %s about their press: %s", press.user_id, exc)
