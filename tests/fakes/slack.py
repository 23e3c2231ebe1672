"""Loopback fake of Slack for tests.

`FakeSlack` runs an aiohttp server on 127.0.0.1 that serves the Web API at
`/api/<method>` and a Socket Mode WebSocket at `/ws`, so the real slack-sdk
`AsyncWebClient` and slack-bolt `AsyncApp` / `AsyncSocketModeHandler` can be
pointed at it (`base_url=fake.api_url`). It records every call, can inject
failures, and builds event payloads. `sign()` and `post_event()` help tests
drive Bolt's HTTP (Events API) mode with correctly or wrongly signed requests.
"""

# Test helpers take a `timeout=` argument by design (it is their public contract).

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Self
from urllib.parse import urlencode

import aiohttp
import pytest
from aiohttp import web
from slack_sdk.web.async_client import AsyncWebClient

from tests.fakes.flood import SLACK_CHANNEL, FloodControl, SlidingLimit, retry_after_seconds

Params = dict[str, Any]
Call = tuple[str, Params]

__all__ = [
    "Call",
    "FakeSlack",
    "Params",
    "SlackEvents",
    "app_mention",
    "block_actions",
    "bot_message",
    "channel_message",
    "event_callback",
    "fake_slack",
    "im_message",
    "interactivity_form",
    "message_changed",
    "message_deleted",
    "new_ts",
    "post_event",
    "sign",
    "slash_command",
    "url_verification",
]

# Shared by every fake and builder in the process so that bot posts and user
# events interleave in one strictly increasing order, as they would in Slack.
_TS_BASE_MICROS = 1_700_000_000_000_100
_ts_counter = itertools.count()
_event_counter = itertools.count(1)


def new_ts() -> str:
    """Return a fresh, strictly increasing Slack message timestamp ("1700000000.000100")."""
    micros = _TS_BASE_MICROS + 100 * next(_ts_counter)
    return f"{micros // 1_000_000}.{micros % 1_000_000:06d}"


def _ts_key(ts: Any) -> float:
    try:
        return float(ts)
    except (TypeError, ValueError):
        return 0.0


class SlackEvents:
    """Builders for Events API payloads, bound to one workspace and bot identity."""

    def __init__(
        self,
        *,
        team_id: str = "T1",
        bot_user_id: str = "UBOT",
        api_app_id: str = "A1",
        response_url_base: str = "https://hooks.slack.com/commands/T1",
    ) -> None:
        self.team_id = team_id
        self.bot_user_id = bot_user_id
        self.api_app_id = api_app_id
        self.response_url_base = response_url_base
        self._response_targets: dict[str, Params] = {}  # response_url id -> what it answers

    def event_callback(
        self, event: Params, *, event_id: str | None = None, event_time: int | None = None
    ) -> Params:
        """Wrap an inner event in an `event_callback` envelope with a unique event_id."""
        ts = event.get("event_ts") or event.get("ts") or new_ts()
        return {
            "token": "verification-token",
            "team_id": self.team_id,
            "context_team_id": self.team_id,
            "api_app_id": self.api_app_id,
            "event": event,
            "type": "event_callback",
            "event_id": event_id or f"Ev{next(_event_counter):010d}",
            "event_time": event_time if event_time is not None else int(_ts_key(ts)),
            "authorizations": [
                {
                    "enterprise_id": None,
                    "team_id": self.team_id,
                    "user_id": self.bot_user_id,
                    "is_bot": True,
                    "is_enterprise_install": False,
                }
            ],
            "is_ext_shared_channel": False,
            "event_context": f"4-{uuid.uuid4().hex}",
        }

    def _user_message(
        self,
        channel: str,
        user: str,
        text: str,
        ts: str | None,
        thread_ts: str | None,
        channel_type: str,
        fields: Mapping[str, Any],
    ) -> Params:
        ts = ts or new_ts()
        event: Params = {
            "type": "message",
            "client_msg_id": str(uuid.uuid4()),
            "user": user,
            "text": text,
            "ts": ts,
            "team": self.team_id,
            "channel": channel,
            "event_ts": ts,
            "channel_type": channel_type,
        }
        if thread_ts:
            event["thread_ts"] = thread_ts
        event.update(fields)
        return self.event_callback(event)

    def im_message(
        self,
        user: str,
        text: str,
        *,
        channel: str = "D1",
        ts: str | None = None,
        thread_ts: str | None = None,
        **fields: Any,
    ) -> Params:
        """A direct message to the bot (`message.im`)."""
        return self._user_message(channel, user, text, ts, thread_ts, "im", fields)

    def channel_message(
        self,
        channel: str,
        user: str,
        text: str,
        *,
        ts: str | None = None,
        thread_ts: str | None = None,
        channel_type: str = "channel",
        **fields: Any,
    ) -> Params:
        """A plain message in a channel (`message.channels`, or group/mpim via channel_type)."""
        return self._user_message(channel, user, text, ts, thread_ts, channel_type, fields)

    def app_mention(
        self,
        channel: str,
        user: str,
        text: str,
        *,
        ts: str | None = None,
        thread_ts: str | None = None,
        **fields: Any,
    ) -> Params:
        """An `app_mention`; the text is prefixed with `<@BOT> ` unless it already mentions it."""
        mention = f"<@{self.bot_user_id}>"
        if not text.startswith(mention):
            text = f"{mention} {text}"
        ts = ts or new_ts()
        event: Params = {
            "type": "app_mention",
            "client_msg_id": str(uuid.uuid4()),
            "user": user,
            "text": text,
            "ts": ts,
            "team": self.team_id,
            "channel": channel,
            "event_ts": ts,
        }
        if thread_ts:
            event["thread_ts"] = thread_ts
        event.update(fields)
        return self.event_callback(event)

    def bot_message(
        self,
        channel: str,
        text: str,
        *,
        bot_id: str = "B2",
        username: str = "otherbot",
        ts: str | None = None,
        thread_ts: str | None = None,
        channel_type: str = "channel",
        **fields: Any,
    ) -> Params:
        """A message from some bot (`subtype: bot_message`); pass bot_id=fake.bot_id for self."""
        ts = ts or new_ts()
        event: Params = {
            "type": "message",
            "subtype": "bot_message",
            "bot_id": bot_id,
            "username": username,
            "text": text,
            "ts": ts,
            "channel": channel,
            "event_ts": ts,
            "channel_type": channel_type,
        }
        if thread_ts:
            event["thread_ts"] = thread_ts
        event.update(fields)
        return self.event_callback(event)

    def message_changed(
        self,
        channel: str,
        ts: str,
        text: str,
        *,
        user: str = "U1",
        previous_text: str = "",
        thread_ts: str | None = None,
        channel_type: str = "channel",
    ) -> Params:
        """An edit of message `ts` to `text` (`subtype: message_changed`)."""
        event_ts = new_ts()
        message: Params = {
            "type": "message",
            "user": user,
            "text": text,
            "ts": ts,
            "edited": {"user": user, "ts": event_ts},
        }
        previous: Params = {"type": "message", "user": user, "text": previous_text, "ts": ts}
        if thread_ts:
            message["thread_ts"] = thread_ts
            previous["thread_ts"] = thread_ts
        event: Params = {
            "type": "message",
            "subtype": "message_changed",
            "hidden": True,
            "channel": channel,
            "ts": event_ts,
            "event_ts": event_ts,
            "message": message,
            "previous_message": previous,
            "channel_type": channel_type,
        }
        return self.event_callback(event)

    def message_deleted(
        self,
        channel: str,
        ts: str,
        *,
        user: str = "U1",
        previous_text: str = "",
        thread_ts: str | None = None,
        channel_type: str = "channel",
    ) -> Params:
        """A deletion of message `ts` (`subtype: message_deleted`)."""
        event_ts = new_ts()
        previous: Params = {"type": "message", "user": user, "text": previous_text, "ts": ts}
        if thread_ts:
            previous["thread_ts"] = thread_ts
        event: Params = {
            "type": "message",
            "subtype": "message_deleted",
            "hidden": True,
            "deleted_ts": ts,
            "channel": channel,
            "ts": event_ts,
            "event_ts": event_ts,
            "previous_message": previous,
            "channel_type": channel_type,
        }
        return self.event_callback(event)

    def slash_command(
        self,
        command: str = "/krill",
        text: str = "status",
        user_id: str = "U1",
        channel_id: str = "C1",
        **fields: str,
    ) -> dict[str, str]:
        """Slash-command form fields, as Slack posts them (all values are strings)."""
        trigger = uuid.uuid4().hex
        payload = {
            "token": "verification-token",
            "team_id": self.team_id,
            "team_domain": "test",
            "channel_id": channel_id,
            "channel_name": "directmessage" if channel_id.startswith("D") else "general",
            "user_id": user_id,
            "user_name": user_id.lower(),
            "command": command,
            "text": text,
            "api_app_id": self.api_app_id,
            "is_enterprise_install": "false",
            "response_url": f"{self.response_url_base}/{trigger}",
            "trigger_id": f"{next(_event_counter)}.{trigger}",
        }
        payload.update(fields)
        self._response_targets[trigger] = {
            "channel": payload["channel_id"],
            "user": payload["user_id"],
        }
        return payload

    def block_actions(
        self,
        user: str,
        channel: str,
        message: Params,
        button: Params,
        *,
        ephemeral: bool = False,
        response_url: str | None = None,
    ) -> Params:
        """The `block_actions` payload of `user` pressing `button` (an element of an actions
        block) under `message`, as Slack sends it (JSON over Socket Mode; over HTTP it is
        form-encoded as `payload=`: see `interactivity_form`)."""
        trigger = uuid.uuid4().hex
        container: Params = {
            "type": "message",
            "message_ts": message["ts"],
            "channel_id": channel,
            "is_ephemeral": ephemeral,
        }
        if message.get("thread_ts"):
            container["thread_ts"] = message["thread_ts"]
        payload: Params = {
            "type": "block_actions",
            "user": {
                "id": user,
                "username": user.lower(),
                "name": user.lower(),
                "team_id": self.team_id,
            },
            "api_app_id": self.api_app_id,
            "token": "verification-token",
            "container": container,
            "trigger_id": f"{next(_event_counter)}.{trigger}",
            "team": {"id": self.team_id, "domain": "test"},
            "channel": {"id": channel, "name": "general"},
            "response_url": response_url or f"{self.response_url_base}/{trigger}",
            "actions": [
                {
                    "action_id": button["action_id"],
                    "block_id": button.get("block_id", uuid.uuid4().hex[:5]),
                    "text": button["text"],
                    "value": button.get("value", ""),
                    "type": "button",
                    "action_ts": new_ts(),
                }
            ],
        }
        if not ephemeral:
            payload["message"] = dict(message)
        return payload

    def url_verification(self, challenge: str | None = None) -> Params:
        """The handshake Slack sends when an Events API request URL is configured."""
        return {
            "token": "verification-token",
            "challenge": challenge or uuid.uuid4().hex,
            "type": "url_verification",
        }


# Module-level builders for tests that have no FakeSlack (e.g. pure HTTP mode).
_default_events = SlackEvents()
event_callback = _default_events.event_callback
im_message = _default_events.im_message
channel_message = _default_events.channel_message
app_mention = _default_events.app_mention
bot_message = _default_events.bot_message
message_changed = _default_events.message_changed
message_deleted = _default_events.message_deleted
slash_command = _default_events.slash_command
url_verification = _default_events.url_verification
block_actions = _default_events.block_actions


def interactivity_form(payload: Params) -> dict[str, str]:
    """An interactivity payload as Slack POSTs it: one form field, `payload`, holding JSON."""
    return {"payload": json.dumps(payload)}


@dataclass
class _Failure:
    error: str
    status: int
    retry_after: int | None
    remaining: int


class _ApiError(Exception):
    def __init__(self, error: str) -> None:
        super().__init__(error)
        self.error = error


_TS_PARAMS = ("ts", "thread_ts", "timestamp", "message_ts", "latest", "oldest")


async def _read_params(request: web.Request) -> Params:
    # slack_sdk spreads arguments over the query string, form bodies and JSON
    # bodies depending on the method, so all three are merged.
    params: Params = dict(request.query)
    if request.can_read_body:
        if request.content_type == "application/json":
            raw = await request.read()
            if raw.strip():
                body = json.loads(raw)
                if isinstance(body, dict):
                    params.update(body)
        else:
            form = await request.post()
            params.update({k: v for k, v in form.items() if isinstance(v, str)})
    for key in _TS_PARAMS:
        if key in params and params[key] is not None and not isinstance(params[key], str):
            params[key] = str(params[key])
    return params


def _blocks_of(params: Params) -> list[Params]:
    blocks = params.get("blocks") or []
    return json.loads(blocks) if isinstance(blocks, str) else list(blocks)


def _buttons_of(message: Params | None) -> list[Params]:
    """The buttons of a message's actions blocks."""
    return [
        element
        for block in _blocks_of(message or {})
        if block.get("type") == "actions"
        for element in block.get("elements", [])
        if element.get("type") == "button"
    ]


def _button(message: Params, label: str) -> Params:
    for button in _buttons_of(message):
        if button["text"]["text"] == label:
            return button
    raise AssertionError(f"no button {label!r} under message {message.get('ts')}")


def _with_metadata(messages: list[Params], params: Params) -> list[Params]:
    """Slack returns message metadata only to a caller that asks with include_all_metadata."""
    if str(params.get("include_all_metadata", "")).lower() in ("1", "true"):
        return messages
    return [{k: v for k, v in m.items() if k != "metadata"} for m in messages]


def _bearer(request: web.Request) -> str | None:
    header = request.headers.get("Authorization", "")
    if header.startswith("Bearer "):
        return header[len("Bearer ") :].strip()
    return None


def _chunk_text(params: Params) -> str:
    text = params.get("markdown_text") or ""
    chunks = params.get("chunks")
    if isinstance(chunks, str):
        # Form-encoded callers send chunks as a JSON string.
        try:
            chunks = json.loads(chunks)
        except json.JSONDecodeError:
            chunks = None
    for chunk in chunks or []:
        if isinstance(chunk, dict) and chunk.get("type") == "markdown_text":
            text += chunk.get("text") or ""
    return text


MARKDOWN_BLOCKS_MAX = 12_000  # characters of all markdown blocks of one message
CONTEXT_ELEMENTS_MAX = 10
TEXT_OBJECT_MAX = 3_000


def _check_blocks(params: Params, *, alone: bool = True) -> None:
    """Block Kit rules Slack enforces: `markdown_text` only alone (when `alone`), markdown
    blocks within their shared limit, context blocks of at most ten text elements."""
    blocks = params.get("blocks")
    if isinstance(blocks, str):
        blocks = json.loads(blocks)
    if alone and params.get("markdown_text") and (params.get("text") or blocks):
        raise _ApiError("markdown_text_conflict")
    markdown = 0
    action_ids: set[str] = set()
    for block in blocks or []:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "markdown":
            if not isinstance(block.get("text"), str):
                raise _ApiError("invalid_blocks")
            markdown += len(block["text"])
        elif kind == "context":
            elements = block.get("elements")
            if not isinstance(elements, list) or not 1 <= len(elements) <= CONTEXT_ELEMENTS_MAX:
                raise _ApiError("invalid_blocks")
            for element in elements:
                if element.get("type") in ("mrkdwn", "plain_text") and (
                    not element.get("text") or len(element["text"]) > TEXT_OBJECT_MAX
                ):
                    raise _ApiError("invalid_blocks")
        elif kind == "section":
            text = block.get("text") or {}
            if not text.get("text") or len(text["text"]) > TEXT_OBJECT_MAX:
                raise _ApiError("invalid_blocks")
        elif kind == "actions":
            _check_actions(block, action_ids)
        elif kind is None:
            raise _ApiError("invalid_blocks")
    if markdown > MARKDOWN_BLOCKS_MAX:
        raise _ApiError("invalid_blocks")


ACTIONS_ELEMENTS_MAX = 25
BUTTON_TEXT_MAX = 75
BUTTON_VALUE_MAX = 2_000
ACTION_ID_MAX = 255


def _check_actions(block: Params, action_ids: set[str]) -> None:
    """An actions block as Slack takes it: 1-25 elements; a button's text 1-75 characters,
    its value at most 2,000, its style primary or danger; action ids unique in a message."""
    elements = block.get("elements")
    if not isinstance(elements, list) or not 1 <= len(elements) <= ACTIONS_ELEMENTS_MAX:
        raise _ApiError("invalid_blocks")
    for element in elements:
        if element.get("type") != "button":
            continue
        text = element.get("text") or {}
        action_id = str(element.get("action_id", ""))
        if (
            text.get("type") != "plain_text"
            or not 1 <= len(text.get("text") or "") <= BUTTON_TEXT_MAX
            or len(str(element.get("value", ""))) > BUTTON_VALUE_MAX
            or element.get("style", "primary") not in ("primary", "danger")
            or not 1 <= len(action_id) <= ACTION_ID_MAX
            or action_id in action_ids
        ):
            raise _ApiError("invalid_blocks")
        action_ids.add(action_id)


# Rate-limited per channel when enforce_rate_limits is on (about 1 a second per channel).
PACED_METHODS = frozenset({"chat.postMessage", "chat.update"})
# The read scopes a lookup needs, by the kind of conversation (the id's first letter) for
# conversations.info; see deploy/slack-manifest.yaml.
CONVERSATION_SCOPES = {"C": "channels:read", "G": "groups:read", "D": "im:read"}
GRANTED_SCOPES = frozenset(
    {"chat:write", "users:read", "channels:read", "groups:read", "im:read", "mpim:read"}
)


class FakeSlack(SlackEvents):
    """A loopback Slack: Web API at `{url}/api/<method>` and Socket Mode at `{url}/ws`."""

    def __init__(
        self,
        bot_token: str = "xoxb-test",
        app_token: str = "xapp-test",
        signing_secret: str = "test-secret",
        bot_user_id: str = "UBOT",
        bot_id: str = "BBOT",
        team_id: str = "T1",
        *,
        api_app_id: str = "A1",
    ) -> None:
        super().__init__(team_id=team_id, bot_user_id=bot_user_id, api_app_id=api_app_id)
        self.bot_token = bot_token
        self.app_token = app_token
        self.signing_secret = signing_secret
        self.bot_id = bot_id
        self.url = ""

        self.calls: list[Call] = []
        self.messages: dict[str, list[Params]] = {}
        self.reactions: set[tuple[str, str, str]] = set()
        self.streams: dict[str, Params] = {}
        self.response_url_posts: list[tuple[str, Any]] = []
        # Messages only one person sees (chat.postEphemeral, or a response_url answer): each
        # {"channel", "user", "ts", "text", "blocks"}; a press's response_url may replace one.
        self.ephemerals: list[Params] = []
        self.socket_connections = 0
        self.socket_acks: list[str] = []
        self.socket_ack_messages: dict[str, Params] = {}

        self._posts: list[Params] = []
        # file id -> (file object, bytes, the token that may download it)
        self.hosted_files: dict[str, tuple[Params, bytes, str]] = {}
        # External uploads: file id -> {"filename", "length", "data"} until completed, then
        # `shared_files` records where each went.
        self.uploads: dict[str, Params] = {}
        self.shared_files: list[Params] = []
        self._threads: dict[tuple[str, str], list[Params]] = {}
        self._channels: dict[str, Params] = {}
        self._users: dict[str, Params] = {}
        self._failures: dict[str, list[_Failure]] = {}
        self.scopes = set(GRANTED_SCOPES)  # what the app was installed with; see revoke_scope
        self.flood: FloodControl | None = None  # see enforce_rate_limits
        self._holds: dict[str, asyncio.Event] = {}
        self._late: dict[str, list[float]] = {}  # see answer_late
        self._sockets: list[web.WebSocketResponse] = []
        self._pulse = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self._methods: dict[str, Callable[[Params], Params]] = {
            "auth.test": self._auth_test,
            "apps.connections.open": self._apps_connections_open,
            "chat.postMessage": self._chat_post_message,
            "chat.update": self._chat_update,
            "chat.delete": self._chat_delete,
            "chat.postEphemeral": self._chat_post_ephemeral,
            "chat.getPermalink": self._chat_get_permalink,
            "chat.startStream": self._chat_start_stream,
            "chat.appendStream": self._chat_append_stream,
            "chat.stopStream": self._chat_stop_stream,
            "reactions.add": self._reactions_add,
            "reactions.remove": self._reactions_remove,
            "assistant.threads.setStatus": self._assistant_ok,
            "assistant.threads.setTitle": self._assistant_ok,
            "assistant.threads.setSuggestedPrompts": self._assistant_ok,
            "conversations.replies": self._conversations_replies,
            "conversations.history": self._conversations_history,
            "conversations.info": self._conversations_info,
            "users.info": self._users_info,
            "files.getUploadURLExternal": self._files_get_upload_url,
            "files.completeUploadExternal": self._files_complete_upload,
        }

    # -- lifecycle -------------------------------------------------------

    async def start(self) -> str:
        """Start serving on a free port; returns `http://127.0.0.1:PORT`."""
        app = web.Application()
        app.router.add_route("*", "/api/{method}", self._handle_api)
        app.router.add_get("/ws", self._handle_ws)
        app.router.add_post("/response/{rid}", self._handle_response_url)
        app.router.add_get("/files-pri/{file_id}/{name}", self._serve_file)
        app.router.add_post("/upload/v1/{file_id}", self._receive_upload)
        # A short shutdown timeout keeps teardown fast when a client keeps a
        # keep-alive connection open.
        self._runner = web.AppRunner(app, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.url = f"http://{host}:{port}"
        self.response_url_base = f"{self.url}/response"
        return self.url

    async def stop(self) -> None:
        """Close open sockets and stop the server."""
        for ws in list(self._sockets):
            await ws.close(code=aiohttp.WSCloseCode.GOING_AWAY, message=b"server stopping")
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    @property
    def api_url(self) -> str:
        """The `base_url` to give slack_sdk clients (ends with a slash)."""
        return f"{self.url}/api/"

    def web_client(self, token: str | None = None) -> AsyncWebClient:
        """A real AsyncWebClient pointed at this fake."""
        return AsyncWebClient(token=token or self.bot_token, base_url=self.api_url)

    # -- scripting -------------------------------------------------------

    def fail_next(
        self,
        method: str,
        error: str = "ratelimited",
        *,
        status: int = 200,
        retry_after: int | None = None,
        times: int = 1,
    ) -> None:
        """Make the next `times` calls of `method` fail with `{"ok":false,"error":error}`."""
        self._failures.setdefault(method, []).append(_Failure(error, status, retry_after, times))

    def enforce_rate_limits(self, channel: SlidingLimit = SLACK_CHANNEL) -> FloodControl:
        """From now on, answer posts and edits over the per-channel limit with 429,
        `ratelimited` and `Retry-After`; `flood.refused` counts those answers."""
        self.flood = FloodControl({"channel": channel})
        return self.flood

    def _flood_wait(self, method: str, params: Params) -> float | None:
        if self.flood is None or method not in PACED_METHODS or "channel" not in params:
            return None
        return self.flood.admit({"channel": params["channel"]})

    def answer_late(self, method: str, *seconds: float) -> None:
        """Carry out each of the next calls to `method` at once (a post shows in the
        channel, as on the real Slack) but answer it only after the next of `seconds`,
        whether or not the client is still waiting."""
        self._late.setdefault(method, []).extend(seconds)

    def hold_next_answer(self, method: str) -> asyncio.Event:
        """Carry out the next call to `method` but answer only once the returned event is
        set: a crash in between leaves the caller not knowing the call succeeded."""
        self._holds[method] = asyncio.Event()
        return self._holds[method]

    def set_thread(self, channel: str, thread_ts: str, messages: list[Params]) -> None:
        """Script what conversations.replies returns for a thread (merged with later posts)."""
        scripted = []
        for message in messages:
            m = {"type": "message", **message}
            m.setdefault("ts", new_ts())
            scripted.append(m)
        self._threads[(channel, thread_ts)] = scripted

    def revoke_scope(self, scope: str) -> None:
        """From now on, answer the lookups that need `scope` as Slack does for an app
        installed without it: `missing_scope`, with what was `needed` and `provided`."""
        self.scopes.discard(scope)

    def _missing_scope(self, method: str, params: Params) -> Params | None:
        if method == "users.info":
            needed = "users:read"
        elif method == "conversations.info":
            needed = CONVERSATION_SCOPES.get(str(params.get("channel", ""))[:1], "mpim:read")
        else:
            return None
        if needed in self.scopes:
            return None
        provided = ",".join(sorted(self.scopes))
        return {"ok": False, "error": "missing_scope", "needed": needed, "provided": provided}

    def set_channel(self, channel: str, **info: Any) -> None:
        """Override fields conversations.info returns for `channel`."""
        self._channels.setdefault(channel, {}).update(info)

    def set_user(self, user_id: str, real_name: str | None = None, **info: Any) -> None:
        """Override fields users.info returns for `user_id`."""
        user = self._users.setdefault(user_id, {})
        if real_name is not None:
            user["real_name"] = real_name
        user.update(info)

    def record_event(self, payload: Params) -> None:
        """Let the fake know about a user message delivered outside Socket Mode."""
        event = payload.get("event", payload)
        channel = event.get("channel")
        if not channel or event.get("type") not in ("message", "app_mention"):
            return
        subtype = event.get("subtype")
        if subtype == "message_changed":
            inner = event.get("message", {})
            stored = self._find_message(channel, inner.get("ts"))
            if stored is not None:
                stored["text"] = inner.get("text", "")
                stored["edited"] = inner.get("edited")
        elif subtype == "message_deleted":
            self._remove_message(channel, event.get("deleted_ts"))
        elif subtype in (None, "bot_message", "thread_broadcast", "file_share"):
            if self._find_message(channel, event.get("ts")) is None:
                message = {k: v for k, v in event.items() if k not in ("channel_type", "event_ts")}
                message["type"] = "message"
                self._store(channel, message)

    # -- inspection ------------------------------------------------------

    def calls_to(self, method: str) -> list[Params]:
        """Params of every call to `method` (including injected failures), in order."""
        return [params for name, params in self.calls if name == method]

    def posted_texts(self, channel: str | None = None) -> list[str]:
        """Text (or markdown_text) of each successful chat.postMessage, in order."""
        return [
            p.get("text") or p.get("markdown_text") or ""
            for p in self._posts
            if channel is None or p.get("channel") == channel
        ]

    def message_texts(self, channel: str | None = None) -> list[str]:
        """Current text of every bot message still present (posts, edits, streams)."""
        texts: list[str] = []
        for name, messages in self.messages.items():
            if channel is not None and name != channel:
                continue
            texts.extend(m.get("text", "") for m in messages if m.get("user") == self.bot_user_id)
        return texts

    def buttons(self, channel: str, ts: str | None = None) -> list[str]:
        """The labels of the buttons under the bot's message `ts` (default: its latest one
        with buttons in `channel`), as the channel shows them now."""
        message = self._button_message(channel, ts)
        return [b["text"]["text"] for b in _buttons_of(message)] if message else []

    def _latest_ephemeral(self, user: str) -> Params | None:
        """The latest message only `user` sees that has buttons."""
        mine = [m for m in self.ephemerals if m["user"] == user and _buttons_of(m)]
        return mine[-1] if mine else None

    def ephemeral_buttons(self, user: str) -> list[str]:
        """The labels of the latest message with buttons only `user` sees."""
        message = self._latest_ephemeral(user)
        return [b["text"]["text"] for b in _buttons_of(message)] if message else []

    def _button_message(self, channel: str, ts: str | None) -> Params | None:
        if ts is not None:
            return self._find_message(channel, ts)
        bots = [m for m in self.messages.get(channel, []) if m.get("user") == self.bot_user_id]
        return next((m for m in reversed(bots) if _buttons_of(m)), None)

    def press(self, channel: str, user: str, label: str, *, ts: str | None = None) -> Params:
        """The `block_actions` payload of `user` pressing the button labelled `label` under
        the bot's message `ts` (default: its latest one with buttons in `channel`)."""
        message = self._button_message(channel, ts)
        if message is None:
            raise AssertionError(f"no bot message with buttons in {channel}")
        return self.block_actions(user, channel, message, _button(message, label))

    def press_ephemeral(self, user: str, label: str) -> Params:
        """`user` pressing `label` on the latest message with buttons only they see; the
        press's response_url replaces that message."""
        message = self._latest_ephemeral(user)
        if message is None:
            raise AssertionError(f"no message with buttons only {user} sees")
        rid = uuid.uuid4().hex
        self._response_targets[rid] = {
            "channel": message["channel"],
            "user": user,
            "ts": message["ts"],
        }
        return self.block_actions(
            user,
            message["channel"],
            message,
            _button(message, label),
            ephemeral=True,
            response_url=f"{self.response_url_base}/{rid}",
        )

    def stream_text(self, ts: str | None = None) -> str:
        """Markdown streamed so far into stream `ts` (default: the latest stream)."""
        if not self.streams:
            raise AssertionError("no chat.startStream call was made")
        stream = self.streams[ts] if ts is not None else list(self.streams.values())[-1]
        return stream["text"]

    async def wait_for(
        self,
        method: str,
        count: int = 1,
        timeout: float = 5.0,
        predicate: Callable[[Params], bool] | None = None,
    ) -> list[Params]:
        """Wait until `count` calls of `method` (matching `predicate`) were made; return them."""

        def matches() -> list[Params]:
            return [p for p in self.calls_to(method) if predicate is None or predicate(p)]

        if await self._wait_until(lambda: len(matches()) >= count, timeout):
            return matches()
        raise AssertionError(
            f"expected {count} call(s) to {method}, got {len(matches())} within {timeout}s;"
            f" calls were:\n{self._dump_calls()}"
        )

    async def wait_for_ack(self, envelope_id: str, timeout: float = 5.0) -> Params:
        """Wait until the client acked `envelope_id`; return the ack message."""
        if await self._wait_until(lambda: envelope_id in self.socket_ack_messages, timeout):
            return self.socket_ack_messages[envelope_id]
        raise AssertionError(
            f"no ack for envelope {envelope_id} within {timeout}s; acks: {self.socket_acks};"
            f" calls were:\n{self._dump_calls()}"
        )

    async def wait_for_socket(self, connections: int = 1, timeout: float = 5.0) -> None:
        """Wait until `connections` sockets were accepted in total and one is open."""
        if not await self._wait_until(
            lambda: self.socket_connections >= connections and self._open_socket() is not None,
            timeout,
        ):
            raise AssertionError(
                f"expected {connections} socket connection(s), got {self.socket_connections}"
                f" ({len(self._sockets)} open) within {timeout}s"
            )

    # -- socket mode -----------------------------------------------------

    async def push_socket(
        self,
        type: str,
        payload: Params,
        *,
        accepts_response_payload: bool = False,
        timeout: float = 5.0,
        to: int | None = None,
    ) -> str:
        """Send one Socket Mode envelope to the newest client, or with `to` to the `to`-th
        open connection in the order they were opened (Slack spreads an app's envelopes
        across all its connections, e.g. one per replica); returns its envelope_id."""
        envelope_id = str(uuid.uuid4())
        envelope: Params = {
            "envelope_id": envelope_id,
            "type": type,
            "accepts_response_payload": accepts_response_payload,
            "payload": payload,
        }
        if type == "events_api":
            envelope["retry_attempt"] = 0
            envelope["retry_reason"] = ""
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            remaining = deadline - asyncio.get_running_loop().time()
            if not await self._wait_until(lambda: self._open_socket(to) is not None, remaining):
                raise AssertionError(f"no Socket Mode client connected within {timeout}s")
            ws = self._open_socket(to)
            assert ws is not None
            try:
                await ws.send_json(envelope)
                return envelope_id
            except ConnectionError:
                # The socket closed between the check and the send (e.g. during a
                # reconnect); try the next one.
                if ws in self._sockets:
                    self._sockets.remove(ws)

    async def push_socket_event(
        self, payload: Params, *, timeout: float = 5.0, to: int | None = None
    ) -> str:
        """Deliver an event_callback payload over Socket Mode; returns the envelope_id."""
        self.record_event(payload)
        return await self.push_socket("events_api", payload, timeout=timeout, to=to)

    async def push_socket_slash_command(
        self, payload: Mapping[str, str], *, timeout: float = 5.0, to: int | None = None
    ) -> str:
        """Deliver slash-command fields over Socket Mode; returns the envelope_id."""
        return await self.push_socket(
            "slash_commands", dict(payload), accepts_response_payload=True, timeout=timeout, to=to
        )

    async def push_socket_interactive(
        self, payload: Params, *, timeout: float = 5.0, to: int | None = None
    ) -> str:
        """Deliver an interactivity payload (a button press) over Socket Mode."""
        return await self.push_socket("interactive", payload, timeout=timeout, to=to)

    async def disconnect_socket(
        self, reason: str = "refresh_requested", *, grace: float = 2.0
    ) -> None:
        """Ask connected clients to reconnect, then close their sockets."""
        sockets = list(self._sockets)
        for ws in sockets:
            if not ws.closed:
                await ws.send_json(
                    {
                        "type": "disconnect",
                        "reason": reason,
                        "debug_info": {"host": "fake-slack"},
                    }
                )
        # Real Slack gives the client time to open a new connection and close
        # the old one itself; only force-close sockets that linger.
        await self._wait_until(lambda: not any(ws in self._sockets for ws in sockets), grace)
        for ws in sockets:
            if not ws.closed:
                await ws.close(code=aiohttp.WSCloseCode.GOING_AWAY, message=reason.encode())

    # -- internals -------------------------------------------------------

    def _notify(self) -> None:
        self._pulse.set()
        self._pulse = asyncio.Event()

    async def _wait_until(self, check: Callable[[], bool], timeout: float) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not check():
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            pulse = self._pulse
            try:
                await asyncio.wait_for(pulse.wait(), remaining)
            except TimeoutError:
                pass
        return True

    def _dump_calls(self, limit: int = 50) -> str:
        lines = [
            f"  {method} {json.dumps(params, default=str)[:300]}" for method, params in self.calls
        ]
        if len(lines) > limit:
            lines = [f"  ... {len(lines) - limit} earlier call(s)", *lines[-limit:]]
        return "\n".join(lines) or "  (none)"

    def _open_socket(self, index: int | None = None) -> web.WebSocketResponse | None:
        """The newest open connection, or the `index`-th open one (oldest first)."""
        open_sockets = [ws for ws in self._sockets if not ws.closed]
        if index is None:
            return open_sockets[-1] if open_sockets else None
        return open_sockets[index] if index < len(open_sockets) else None

    def _take_failure(self, method: str) -> _Failure | None:
        queue = self._failures.get(method)
        if not queue:
            return None
        failure = queue[0]
        failure.remaining -= 1
        if failure.remaining <= 0:
            queue.pop(0)
        return failure

    def add_file(
        self, data: bytes, name: str, mimetype: str, *, readable_with: str | None = None
    ) -> Params:
        """Host `data` as a Slack file; returns the file object an event's `files` carries.

        `readable_with` is the token Slack serves it to (default: the bot's); any other
        request gets Slack's HTML sign-in page, as the real file host answers.
        """
        file_id = f"F{uuid.uuid4().hex[:10].upper()}"
        url = f"{self.url}/files-pri/{self.team_id}-{file_id}/{name}"
        item: Params = {
            "id": file_id,
            "name": name,
            "title": name,
            "mimetype": mimetype,
            "filetype": name.rsplit(".", 1)[-1],
            "size": len(data),
            "url_private": url,
            "url_private_download": url + "?download=1",
            "mode": "hosted",
        }
        self.hosted_files[file_id] = (item, data, readable_with or self.bot_token)
        return item

    def _files_get_upload_url(self, params: Params) -> Params:
        filename, length = params.get("filename"), params.get("length")
        if not filename or not str(length or "").isdigit() or int(length) < 1:
            raise _ApiError("invalid_arguments")
        file_id = f"F{uuid.uuid4().hex[:10].upper()}"
        self.uploads[file_id] = {"filename": filename, "length": int(length), "data": None}
        return {"ok": True, "upload_url": f"{self.url}/upload/v1/{file_id}", "file_id": file_id}

    async def _receive_upload(self, request: web.Request) -> web.Response:
        upload = self.uploads.get(request.match_info["file_id"])
        if upload is None:
            return web.Response(status=404, text="unknown upload")
        data = await request.read()
        if len(data) != upload["length"]:
            return web.Response(status=400, text="length mismatch")
        upload["data"] = data
        return web.Response(text=f"OK - {len(data)}")

    def _files_complete_upload(self, params: Params) -> Params:
        raw = params.get("files")
        items = json.loads(raw) if isinstance(raw, str) else raw
        if not isinstance(items, list) or not items:
            raise _ApiError("invalid_arguments")
        done = []
        for item in items:
            upload = self.uploads.get(str(item.get("id")))
            if upload is None or upload["data"] is None:
                raise _ApiError("file_not_found")
            done.append((str(item["id"]), item, upload))
        shared = []
        for file_id, item, upload in done:
            self.uploads.pop(file_id)
            record = {
                "id": file_id,
                "name": upload["filename"],
                "title": item.get("title") or upload["filename"],
                "data": upload["data"],
                "channel": params.get("channel_id"),
                "thread_ts": params.get("thread_ts"),
                "initial_comment": params.get("initial_comment"),
            }
            self.shared_files.append(record)
            shared.append({"id": file_id, "title": record["title"]})
        return {"ok": True, "files": shared}

    async def _serve_file(self, request: web.Request) -> web.Response:
        file_id = request.match_info["file_id"].split("-", 1)[-1]
        hosted = self.hosted_files.get(file_id)
        if hosted is None:
            return web.Response(status=404, text="file not found")
        item, data, token = hosted
        if _bearer(request) != token:
            page = "<!DOCTYPE html><html><title>Sign in | Slack</title></html>"
            return web.Response(text=page, content_type="text/html")
        return web.Response(body=data, content_type=item["mimetype"])

    async def _handle_api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params = await _read_params(request)
        token = _bearer(request) or params.get("token")
        params.pop("token", None)
        self.calls.append((method, params))
        self._notify()

        expected = self.app_token if method == "apps.connections.open" else self.bot_token
        if token != expected:
            return web.json_response({"ok": False, "error": "invalid_auth"})
        wait = self._flood_wait(method, params)
        if wait is not None:
            headers = {"Retry-After": str(retry_after_seconds(wait))}
            return web.json_response(
                {"ok": False, "error": "ratelimited"}, status=429, headers=headers
            )
        failure = self._take_failure(method)
        if failure is not None:
            headers = {}
            if failure.status == 429 or failure.retry_after is not None:
                retry_after = failure.retry_after if failure.retry_after is not None else 1
                headers["Retry-After"] = str(retry_after)
            return web.json_response(
                {"ok": False, "error": failure.error}, status=failure.status, headers=headers
            )
        refused = self._missing_scope(method, params)
        if refused is not None:
            return web.json_response(refused)
        handler = self._methods.get(method)
        if handler is None:
            return web.json_response({"ok": False, "error": "unknown_method"})
        try:
            body = handler(params)
        except _ApiError as exc:
            body = {"ok": False, "error": exc.error}
        self._notify()
        hold = self._holds.pop(method, None)
        if hold is not None:  # done, but the answer is late (the caller may die meanwhile)
            await hold.wait()
        late = self._late.get(method)
        if late:
            await asyncio.sleep(late.pop(0))
        return web.json_response(body)

    async def _handle_ws(self, request: web.Request) -> web.WebSocketResponse:
        # autoping answers the ping frames the SDK uses to detect stale sessions.
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        self._sockets.append(ws)
        self.socket_connections += 1
        await ws.send_json(
            {
                "type": "hello",
                "num_connections": len(self._sockets),
                "debug_info": {
                    "host": "fake-slack",
                    "build_number": 1,
                    "approximate_connection_time": 18060,
                },
                "connection_info": {"app_id": self.api_app_id},
            }
        )
        self._notify()
        try:
            async for msg in ws:
                if msg.type != aiohttp.WSMsgType.TEXT:
                    continue
                try:
                    data = json.loads(msg.data)
                except json.JSONDecodeError:
                    continue
                envelope_id = data.get("envelope_id") if isinstance(data, dict) else None
                if envelope_id:
                    self.socket_acks.append(envelope_id)
                    self.socket_ack_messages[envelope_id] = data
                    self._notify()
        finally:
            if ws in self._sockets:
                self._sockets.remove(ws)
            self._notify()
        return ws

    async def _handle_response_url(self, request: web.Request) -> web.Response:
        raw = await request.read()
        try:
            body: Any = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            body = raw.decode(errors="replace")
        rid = request.match_info["rid"]
        self.response_url_posts.append((rid, body))
        target = self._response_targets.get(rid)
        if isinstance(body, dict) and target is not None:
            replaced = self._ephemeral(target.get("ts", ""))
            if body.get("replace_original") and replaced is not None:
                # A press's response_url: the message pressed is replaced.
                replaced.update(text=body.get("text", ""), blocks=body.get("blocks") or [])
            elif body.get("response_type", "ephemeral") == "ephemeral":
                self.ephemerals.append(
                    {
                        "channel": target["channel"],
                        "user": target["user"],
                        "ts": new_ts(),
                        "text": body.get("text", ""),
                        "blocks": body.get("blocks") or [],
                    }
                )
        self._notify()
        return web.Response(text="ok")

    def _ephemeral(self, ts: str) -> Params | None:
        return next((m for m in self.ephemerals if m["ts"] == ts), None)

    # -- message store ---------------------------------------------------

    def _store(self, channel: str, message: Params) -> None:
        messages = self.messages.setdefault(channel, [])
        messages.append(message)
        messages.sort(key=lambda m: _ts_key(m.get("ts")))

    def _find_message(self, channel: str, ts: Any) -> Params | None:
        for message in self.messages.get(channel, []):
            if message.get("ts") == ts:
                return message
        return None

    def _remove_message(self, channel: str, ts: Any) -> bool:
        message = self._find_message(channel, ts)
        if message is None:
            return False
        self.messages[channel].remove(message)
        return True

    def _bot_message(self, params: Params, ts: str, text: str) -> Params:
        message: Params = {
            "type": "message",
            "text": text,
            "user": self.bot_user_id,
            "bot_id": self.bot_id,
            "app_id": self.api_app_id,
            "team": self.team_id,
            "ts": ts,
        }
        if params.get("thread_ts"):
            message["thread_ts"] = params["thread_ts"]
        for key in ("attachments", "metadata"):
            if params.get(key):
                message[key] = params[key]
        if params.get("blocks"):
            message["blocks"] = _blocks_of(params)
        return message

    # -- Web API methods -------------------------------------------------

    @staticmethod
    def _require(params: Params, *names: str, error: str = "invalid_arguments") -> None:
        for name in names:
            if not params.get(name):
                raise _ApiError(error)

    def _auth_test(self, params: Params) -> Params:
        return {
            "ok": True,
            "url": "https://test.slack.com/",
            "team": "Test",
            "user": "krill",
            "team_id": self.team_id,
            "user_id": self.bot_user_id,
            "bot_id": self.bot_id,
            "is_enterprise_install": False,
        }

    def _apps_connections_open(self, params: Params) -> Params:
        ws_url = self.url.replace("http://", "ws://", 1)
        return {"ok": True, "url": f"{ws_url}/ws?ticket={uuid.uuid4().hex}"}

    def _chat_post_message(self, params: Params) -> Params:
        self._require(params, "channel", error="channel_not_found")
        if not any(params.get(k) for k in ("text", "markdown_text", "blocks", "attachments")):
            raise _ApiError("no_text")
        _check_blocks(params)
        channel = params["channel"]
        ts = new_ts()
        text = params.get("text") or params.get("markdown_text") or ""
        message = self._bot_message(params, ts, text)
        self._store(channel, message)
        self._posts.append(params)
        return {"ok": True, "channel": channel, "ts": ts, "message": dict(message)}

    def _chat_update(self, params: Params) -> Params:
        self._require(params, "channel", error="channel_not_found")
        self._require(params, "ts", error="message_not_found")
        channel, ts = params["channel"], params["ts"]
        message = self._find_message(channel, ts)
        if message is None:
            raise _ApiError("message_not_found")
        if message.get("user") != self.bot_user_id:
            raise _ApiError("cant_update_message")
        _check_blocks(params)
        text = params.get("text") or params.get("markdown_text")
        if text is not None:
            message["text"] = text
        if "blocks" in params:
            message["blocks"] = _blocks_of(params)
        message["edited"] = {"user": self.bot_user_id, "ts": new_ts()}
        return {
            "ok": True,
            "channel": channel,
            "ts": ts,
            "text": message.get("text", ""),
            "message": dict(message),
        }

    def _chat_delete(self, params: Params) -> Params:
        self._require(params, "channel", error="channel_not_found")
        if not self._remove_message(params["channel"], params.get("ts")):
            raise _ApiError("message_not_found")
        return {"ok": True, "channel": params["channel"], "ts": params["ts"]}

    def _chat_post_ephemeral(self, params: Params) -> Params:
        self._require(params, "channel", error="channel_not_found")
        self._require(params, "user", error="user_not_in_channel")
        _check_blocks(params)
        ts = new_ts()
        self.ephemerals.append(
            {
                "channel": params["channel"],
                "user": params["user"],
                "ts": ts,
                "text": params.get("text") or params.get("markdown_text") or "",
                "blocks": _blocks_of(params),
            }
        )
        return {"ok": True, "message_ts": ts}

    def _chat_get_permalink(self, params: Params) -> Params:
        self._require(params, "channel", error="channel_not_found")
        self._require(params, "message_ts", error="message_not_found")
        channel, ts = params["channel"], params["message_ts"]
        return {
            "ok": True,
            "channel": channel,
            "permalink": f"https://test.slack.com/archives/{channel}/p{ts.replace('.', '')}",
        }

    def _chat_start_stream(self, params: Params) -> Params:
        self._require(params, "channel", error="channel_not_found")
        self._require(params, "thread_ts")
        channel = params["channel"]
        ts = new_ts()
        text = _chunk_text(params)
        self.streams[ts] = {
            "channel": channel,
            "thread_ts": params["thread_ts"],
            "text": text,
            "state": "in_progress",
            "start": params,
        }
        self._store(channel, self._bot_message(params, ts, text))
        return {"ok": True, "channel": channel, "ts": ts}

    def _stream_for(self, params: Params) -> tuple[Params, Params]:
        self._require(params, "channel", error="channel_not_found")
        stream = self.streams.get(params.get("ts", ""))
        if stream is None or stream["channel"] != params["channel"]:
            raise _ApiError("message_not_found")
        if stream["state"] != "in_progress":
            raise _ApiError("message_not_in_streaming_state")
        message = self._find_message(params["channel"], params["ts"])
        if message is None:
            raise _ApiError("message_not_found")
        return stream, message

    def _chat_append_stream(self, params: Params) -> Params:
        stream, message = self._stream_for(params)
        stream["text"] += _chunk_text(params)
        message["text"] = stream["text"]
        return {"ok": True, "channel": params["channel"], "ts": params["ts"]}

    def _chat_stop_stream(self, params: Params) -> Params:
        _check_blocks(params, alone=False)  # blocks show under the streamed text
        stream, message = self._stream_for(params)
        stream["text"] += _chunk_text(params)
        stream["state"] = "completed"
        message["text"] = stream["text"]
        if params.get("blocks"):
            message["blocks"] = params["blocks"]
        return {
            "ok": True,
            "channel": params["channel"],
            "ts": params["ts"],
            "message": dict(message),
        }

    def _reactions_add(self, params: Params) -> Params:
        self._require(params, "channel", error="channel_not_found")
        self._require(params, "timestamp", error="message_not_found")
        self._require(params, "name", error="invalid_name")
        key = (params["channel"], params["timestamp"], params["name"])
        if key in self.reactions:
            raise _ApiError("already_reacted")
        self.reactions.add(key)
        return {"ok": True}

    def _reactions_remove(self, params: Params) -> Params:
        self._require(params, "channel", error="channel_not_found")
        self._require(params, "timestamp", error="message_not_found")
        self._require(params, "name", error="invalid_name")
        key = (params["channel"], params["timestamp"], params["name"])
        if key not in self.reactions:
            raise _ApiError("no_reaction")
        self.reactions.discard(key)
        return {"ok": True}

    def _assistant_ok(self, params: Params) -> Params:
        self._require(params, "channel_id", "thread_ts")
        return {"ok": True}

    @staticmethod
    def _page(messages: list[Params], params: Params) -> Params:
        try:
            limit = int(params.get("limit") or 0) or 1000
            offset = int(params.get("cursor") or 0)
        except ValueError as exc:
            raise _ApiError("invalid_cursor") from exc
        page = messages[offset : offset + limit]
        more = offset + limit < len(messages)
        return {
            "ok": True,
            "messages": page,
            "has_more": more,
            "response_metadata": {"next_cursor": str(offset + limit) if more else ""},
        }

    def _conversations_replies(self, params: Params) -> Params:
        self._require(params, "channel", error="channel_not_found")
        self._require(params, "ts", error="thread_not_found")
        channel, thread_ts = params["channel"], params["ts"]
        by_ts: dict[str, Params] = {}
        for message in self.messages.get(channel, []):
            if message.get("ts") == thread_ts or message.get("thread_ts") == thread_ts:
                by_ts[message["ts"]] = dict(message)
        for message in self._threads.get((channel, thread_ts), []):
            by_ts[message["ts"]] = dict(message)
        messages = sorted(by_ts.values(), key=lambda m: _ts_key(m.get("ts")))
        if len(messages) > 1 and messages[0].get("ts") == thread_ts:
            messages[0].setdefault("thread_ts", thread_ts)
            messages[0].setdefault("reply_count", len(messages) - 1)
        if params.get("oldest"):
            # Like Slack: only replies after `oldest` (exclusive), the parent always first.
            oldest = _ts_key(params["oldest"])
            messages = [
                m for m in messages if m.get("ts") == thread_ts or _ts_key(m.get("ts")) > oldest
            ]
        return self._page(_with_metadata(messages, params), params)

    def _conversations_history(self, params: Params) -> Params:
        self._require(params, "channel", error="channel_not_found")
        top_level = [
            dict(m)
            for m in self.messages.get(params["channel"], [])
            if m.get("thread_ts") in (None, m.get("ts"))
        ]
        return self._page(_with_metadata(list(reversed(top_level)), params), params)

    def _conversations_info(self, params: Params) -> Params:
        self._require(params, "channel", error="channel_not_found")
        channel = params["channel"]
        kind = channel[:1]
        info: Params = {
            "id": channel,
            "name": channel.lower(),
            "is_channel": kind == "C",
            "is_group": kind == "G",
            "is_im": kind == "D",
            "is_mpim": False,
            "is_private": kind in ("G", "D"),
            "is_archived": False,
            "is_member": True,
            "context_team_id": self.team_id,
        }
        if kind == "D":
            info["user"] = "U1"
        info.update(self._channels.get(channel, {}))
        return {"ok": True, "channel": info}

    def _users_info(self, params: Params) -> Params:
        self._require(params, "user", error="user_not_found")
        user_id = params["user"]
        is_bot = user_id == self.bot_user_id
        name = "krill" if is_bot else user_id.lower()
        user: Params = {
            "id": user_id,
            "team_id": self.team_id,
            "name": name,
            "real_name": "Krill" if is_bot else f"User {user_id}",
            "deleted": False,
            "is_bot": is_bot,
            "tz": "UTC",
            "tz_offset": 0,
        }
        user.update(self._users.get(user_id, {}))
        user["profile"] = {
            "real_name": user["real_name"],
            "display_name": user["name"],
            **user.get("profile", {}),
        }
        return {"ok": True, "user": user}


@pytest.fixture
async def fake_slack() -> AsyncIterator[FakeSlack]:
    """A started FakeSlack with default tokens and ids; stopped after the test."""
    async with FakeSlack() as fake:
        yield fake


# -- HTTP (Events API) helpers ---------------------------------------------


def sign(secret: str, body: bytes, timestamp: int | None = None) -> dict[str, str]:
    """Slack request-signing headers for `body` (v0 HMAC-SHA256)."""
    ts = int(time.time()) if timestamp is None else timestamp
    base = b"v0:" + str(ts).encode() + b":" + body
    digest = hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": str(ts), "X-Slack-Signature": f"v0={digest}"}


def _is_form_payload(payload: Mapping[str, Any]) -> bool:
    # Slash commands and interactivity payloads arrive form-encoded; events as JSON.
    return "command" in payload or isinstance(payload.get("payload"), str)


async def post_event(
    session_or_url: aiohttp.ClientSession | str | None,
    url: str,
    payload: Mapping[str, Any] | None,
    secret: str,
    *,
    timestamp: int | None = None,
    retry_num: int | None = None,
    retry_reason: str = "http_timeout",
    forge: bool = False,
    raw_body: bytes | None = None,
    form: bool | None = None,
) -> tuple[int, str]:
    """POST a signed Slack request to a Bolt HTTP endpoint; returns (status, body text).

    `session_or_url` is an aiohttp ClientSession (or anything with its `post`), a
    base URL that `url` is joined to, or None (then `url` is absolute). The body is
    JSON, or form-encoded for slash commands/interactivity (override with `form`).
    `raw_body` replaces the encoded body; `forge` signs with the wrong secret;
    `retry_num` adds Slack's retry headers.
    """
    use_form = _is_form_payload(payload or {}) if form is None else form
    if raw_body is not None:
        body = raw_body
    elif use_form:
        body = urlencode(dict(payload or {})).encode()
    else:
        body = json.dumps(payload or {}).encode()
    headers = sign(secret + "-forged" if forge else secret, body, timestamp)
    headers["Content-Type"] = (
        "application/x-www-form-urlencoded" if use_form else "application/json"
    )
    if retry_num is not None:
        headers["X-Slack-Retry-Num"] = str(retry_num)
        headers["X-Slack-Retry-Reason"] = retry_reason

    target = url
    if isinstance(session_or_url, str) and "://" not in url:
        target = f"{session_or_url.rstrip('/')}/{url.lstrip('/')}"
    if session_or_url is None or isinstance(session_or_url, str):
        async with (
            aiohttp.ClientSession() as session,
            session.post(target, data=body, headers=headers) as resp,
        ):
            return resp.status, await resp.text()
    async with session_or_url.post(target, data=body, headers=headers) as resp:
        return resp.status, await resp.text()
