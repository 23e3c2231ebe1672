"""The local web chat: a page at `/` (its script, style and icon under `/static/`), a
WebSocket for streamed replies, the person's recent history for the page to redraw itself
(`GET /api/history`), and a JSON endpoint (`POST /api/chat`) that waits for the reply, for
scripts and tests. Replies carry their Markdown and the safe HTML the page shows
(`channels.local.markup`), and their buttons; a press comes back over the WebSocket (or
`POST /api/press`) and its answer goes to the page that pressed. From the moment a message
is accepted the page is told Krill is working on it (`thinking`) until the session is idle
again (`idle`), so it can show a typing indicator while the model thinks, before the first
word streams in.

Its sessions are DMs, which see private memory, so other web sites must not reach it: the
server's browser guard (`bot.http_guard`) refuses foreign `Host` and `Origin` headers, the
JSON endpoint takes only `application/json` (which a cross-site form cannot send without a
CORS preflight we never grant), and beyond loopback a token is required.
"""

from __future__ import annotations

import asyncio
import hmac
import itertools
import json
import logging
import math
import re
import time
import uuid
from collections import defaultdict
from collections.abc import Sequence
from importlib import resources
from typing import Any

from aiohttp import WSMsgType, web

from bot.channel_contract import AcceptResult, Gateway
from bot.forwarded import Network, client_of
from bot.http_guard import is_loopback_host as is_loopback_host  # re-exported for app wiring
from bot.types import (
    Address,
    ButtonPress,
    ButtonRows,
    ChatType,
    HistoryLine,
    InboundMessage,
    OutboundMessage,
    Speaker,
)
from channels.local.markup import to_html
from channels.sources import with_sources

log = logging.getLogger(__name__)

CHANNEL = "local"
NAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
MAX_TEXT_CHARS = 100_000
REPLY_WAIT_SECONDS = 300.0
MAX_MESSAGE_ID_CHARS = 200
HISTORY_LINES = 50  # what the page shows after a reload
LABEL_CHARS = 80  # a button's label is cut to this

# The page's own files, by name under /static/, with their content types.
STATIC_FILES = {
    "chat.js": "text/javascript",
    "chat.css": "text/css",
    "favicon.svg": "image/svg+xml",
}
# The page runs only its own script and style, and talks only to this server: should
# anything slip through the Markdown renderer, the browser still refuses to run or load it.
PAGE_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


class BadClientId(ValueError):
    """A client's message id that is not a string or number of a sensible length."""


def client_message_id(value: object) -> str | None:
    """A client's own id for its message (so a resend counts once), or None when not given.

    Raises BadClientId for anything but a string or number of at most MAX_MESSAGE_ID_CHARS.
    """
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, str | int)
        or len(str(value)) > MAX_MESSAGE_ID_CHARS
    ):
        raise BadClientId(f"message_id must be a string of at most {MAX_MESSAGE_ID_CHARS} chars")
    return str(value)


def reply_event(
    kind: str, message_id: str, text: str, buttons: ButtonRows | None = None
) -> dict[str, Any]:
    """A reply as the page receives it: its Markdown, the HTML to show, and its buttons
    (on an edit, the ones it keeps: none takes them away)."""
    event: dict[str, Any] = {"type": kind, "id": message_id, "text": text, "html": to_html(text)}
    if buttons is not None:
        event["buttons"] = [[button.to_dict() for button in row] for row in buttons]
    return event


def local_press(name: str, data: object, press_id: object, message_id: object) -> ButtonPress:
    """A press in `name`'s web chat; raises ValueError for a malformed one. The page's own
    press id is kept under the person's name, like a message id."""
    if not isinstance(data, str) or not data or len(data) > MAX_MESSAGE_ID_CHARS:
        raise ValueError("data must be the pressed button's data")
    given = client_message_id(press_id) or uuid.uuid4().hex
    return ButtonPress(
        channel=CHANNEL,
        press_id=f"{name}/{given}",
        data=data,
        chat_id=name,
        user_id=name,
        user_name=name,
        message_id=str(message_id or "")[:MAX_MESSAGE_ID_CHARS],
    )


def history_event(line: HistoryLine) -> dict[str, Any]:
    event: dict[str, Any] = {"speaker": line.speaker, "text": line.text, "at": line.timestamp}
    if line.speaker == Speaker.ASSISTANT:
        event["html"] = to_html(line.text)
    return event


def local_message(name: str, text: str, client_id: str | None = None) -> InboundMessage:
    """A web or terminal message from `name`. A client's own message id is kept under the
    sender's name, so dedupe is per sender: nobody can reuse another person's id to make
    their message count as a duplicate."""
    return InboundMessage(
        channel=CHANNEL,
        message_id=f"{name}/{client_id}" if client_id else uuid.uuid4().hex,
        chat_type=ChatType.DIRECT,
        chat_id=name,
        user_id=name,
        user_name=name,
        text=text,
        address=Address(CHANNEL, name),
        timestamp=time.time(),
    )


class WebChannel:
    name = CHANNEL
    stream_interval = 0.2
    typing_interval = 3.0
    button_label_chars = LABEL_CHARS

    def __init__(
        self, gateway: Gateway, *, token: str = "", trusted_proxies: Sequence[Network] = ()
    ):
        self.gateway = gateway
        self.token = token
        self.trusted_proxies = trusted_proxies
        self._sockets: dict[str, set[web.WebSocketResponse]] = defaultdict(set)
        self._listeners: dict[str, list[asyncio.Queue[dict[str, Any]]]] = defaultdict(list)
        self._ids = itertools.count(1)
        self._watchers: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        for task in self._watchers:
            task.cancel()
        await asyncio.gather(*self._watchers, return_exceptions=True)
        for sockets in self._sockets.values():
            for ws in list(sockets):
                await ws.close()

    async def _json_refusal(self, request: web.Request) -> web.Response | None:
        """The answer to a JSON API call that may not use the chat (`_refusal`) or whose
        body is not JSON, or None when it may go on."""
        refusal = await self._refusal(request)
        if refusal is None and request.content_type != "application/json":
            return web.json_response({"error": "Content-Type must be application/json"}, status=415)
        return refusal

    async def _refusal(self, request: web.Request) -> web.Response | None:
        """The answer to a request that may not use the chat, or None when it may (foreign
        hosts and origins are refused before this, by the server's browser guard)."""
        if not self.token:
            return None
        given = request.query.get("token", "")
        auth = request.headers.get("Authorization", "")
        if auth.startswith("Bearer "):
            given = auth[len("Bearer ") :]
        if hmac.compare_digest(given.encode(), self.token.encode()):
            return None
        if given:  # no token at all is not a guess
            client = client_of(request.remote, request.headers, self.trusted_proxies)
            wait = await self.gateway.wrong_token(CHANNEL, client.address)
            if wait:
                return web.json_response(
                    {"error": "too many wrong tokens; wait a minute"},
                    status=429,
                    headers={"Retry-After": str(math.ceil(wait))},
                )
        return web.json_response({"error": "a valid token is required"}, status=403)

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/", self.page),
            web.get("/static/{name}", self.static),
            web.get("/ws/chat", self.websocket),
            web.get("/api/history", self.api_history),
            web.post("/api/chat", self.api_chat),
            web.post("/api/press", self.api_press),
        ]

    def render(self, markdown: str) -> list[str]:
        return [markdown] if markdown else []

    async def _publish(self, name: str, event: dict[str, Any]) -> None:
        for queue in self._listeners.get(name, []):
            queue.put_nowait(event)
        for ws in list(self._sockets.get(name, ())):
            try:
                await ws.send_json(event)
            except (ConnectionError, RuntimeError):
                self._sockets[name].discard(ws)

    async def deliver(self, out: OutboundMessage) -> str:
        message_id = out.edit_of or str(next(self._ids))
        kind = "message" if out.final else "preview"
        text = with_sources(out.text, out.sources)  # links after the reply
        event = reply_event(kind, message_id, text, out.buttons)
        await self._publish(out.address.chat_id, event)
        return message_id

    async def typing(self, address: Address) -> None:
        await self._publish(address.chat_id, {"type": "typing"})

    async def done_typing(self, address: Address) -> None:
        return None

    # --- HTTP handlers --------------------------------------------------------------------

    async def page(self, request: web.Request) -> web.Response:
        return _asset("index.html", "text/html")

    async def static(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in STATIC_FILES:
            raise web.HTTPNotFound()
        return _asset(name, STATIC_FILES[name])

    async def websocket(self, request: web.Request) -> web.StreamResponse:
        refusal = await self._refusal(request)
        if refusal:
            return refusal
        name = request.query.get("name", "web")
        if not NAME_RE.match(name):
            raise web.HTTPBadRequest(text="name must be 1-64 letters, digits, '.', '_' or '-'")
        ws = web.WebSocketResponse(heartbeat=30)
        await ws.prepare(request)
        self._sockets[name].add(ws)
        try:
            async for frame in ws:
                if frame.type != WSMsgType.TEXT:
                    continue
                try:
                    data = json.loads(frame.data)
                    if "press" in data:
                        await ws.send_json(await self._press(name, data))
                        continue
                    text = str(data["text"])[:MAX_TEXT_CHARS]
                    client_id = client_message_id(data.get("message_id"))
                except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
                    await ws.send_json(
                        {"type": "error", "text": 'send {"text": "...", "message_id": "..."}'}
                    )
                    continue
                if text.strip():
                    msg = local_message(name, text, client_id)
                    result = await self.gateway.accept(msg)
                    if client_id is not None:
                        # The page keeps a message pending until the server has it.
                        await ws.send_json({"type": "received", "message_id": client_id})
                    if result == AcceptResult.ACCEPTED:
                        await self._publish(name, {"type": "thinking"})
                        self._watch_until_idle(name, msg)
        finally:
            self._sockets[name].discard(ws)
        return ws

    def _watch_until_idle(self, name: str, msg: InboundMessage) -> None:
        """Tell `name`'s pages once the session has answered (or given up on) everything."""

        async def watch() -> None:
            try:
                await self.gateway.wait_idle(msg)
            except Exception as exc:  # the indicator then ends with the connection
                log.debug("web chat: could not wait for %s's session: %s", name, exc)
                return
            await self._publish(name, {"type": "idle"})

        task = asyncio.create_task(watch(), name=f"web-idle:{name}")
        self._watchers.add(task)
        task.add_done_callback(self._watchers.discard)

    async def api_chat(self, request: web.Request) -> web.Response:
        refusal = await self._json_refusal(request)
        if refusal:
            return refusal
        try:
            data = await request.json()
            name = str(data.get("user", "web"))
            text = str(data["text"])
        # RecursionError: JSON nested thousands deep is malformed input, not a server fault.
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
            return web.json_response(
                {"error": 'expected JSON {"user": "name", "text": "..."}'}, status=400
            )
        if not NAME_RE.match(name):
            return web.json_response({"error": "invalid user name"}, status=400)
        try:
            client_id = client_message_id(data.get("message_id"))
        except BadClientId as exc:
            return web.json_response({"error": str(exc)}, status=400)
        if len(text) > MAX_TEXT_CHARS:
            return web.json_response({"error": "text too long"}, status=413)
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._listeners[name].append(queue)
        try:
            msg = local_message(name, text, client_id)
            result = await self.gateway.accept(msg)
            # /api/chat returns once the turn (or command) is answered and the reply sent.
            await asyncio.wait_for(self.gateway.wait_idle(msg), REPLY_WAIT_SECONDS)
            replies = [e["text"] for e in _drain(queue) if e["type"] == "message"]
        finally:
            self._listeners[name].remove(queue)
        return web.json_response({"result": result, "replies": replies})

    async def _press(self, name: str, data: dict[str, Any]) -> dict[str, Any]:
        """A press the page sent ({"press": data, "press_id", "message_id"}), recorded;
        the event that tells the page what came of it."""
        press = local_press(name, data["press"], data.get("press_id"), data.get("message_id"))
        answer = await self.gateway.press(press)
        return {
            "type": "pressed",
            "id": press.message_id,
            "result": str(answer.result),
            "text": answer.text,
        }

    async def api_press(self, request: web.Request) -> web.Response:
        """`POST {"user": "name", "data": "...", "press_id": "..."}`: press a button of that
        person's chat, for scripts and tests; answers {"result", "text"}."""
        refusal = await self._json_refusal(request)
        if refusal:
            return refusal
        try:
            data = await request.json()
            name = str(data.get("user", "web"))
            if not NAME_RE.match(name):
                raise ValueError("invalid user name")
            press = local_press(
                name, data.get("data"), data.get("press_id"), data.get("message_id")
            )
        except (ValueError, TypeError, AttributeError, RecursionError) as exc:
            return web.json_response({"error": f"bad press: {exc}"}, status=400)
        answer = await self.gateway.press(press)
        return web.json_response({"result": str(answer.result), "text": answer.text})

    async def api_history(self, request: web.Request) -> web.Response:
        """`{"messages": [...]}`: the recent lines of `?name=`'s session, oldest first."""
        refusal = await self._refusal(request)
        if refusal:
            return refusal
        name = request.query.get("name", "web")
        if not NAME_RE.match(name):
            return web.json_response({"error": "invalid user name"}, status=400)
        lines = await self.gateway.recent_history(local_message(name, ""), HISTORY_LINES)
        return web.json_response(
            {"messages": [history_event(line) for line in lines]},
            headers={"Cache-Control": "no-store"},
        )


def _asset(name: str, content_type: str) -> web.Response:
    body = resources.files("channels.local").joinpath("static", name).read_bytes()
    headers = {"Cache-Control": "no-cache"}
    if name == "index.html":
        headers["Content-Security-Policy"] = PAGE_POLICY
    return web.Response(body=body, content_type=content_type, charset="utf-8", headers=headers)


def _drain(queue: asyncio.Queue[dict[str, Any]]) -> list[dict[str, Any]]:
    items = []
    while not queue.empty():
        items.append(queue.get_nowait())
    return items
