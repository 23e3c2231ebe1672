"""The local web chat: a page at `/`, a WebSocket for streamed replies, and a JSON endpoint
(`POST /api/chat`) that waits for the reply, for scripts and tests.

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
import re
import time
import uuid
from collections import defaultdict
from importlib import resources
from typing import Any

from aiohttp import WSMsgType, web

from bot.channel_contract import AcceptResult, Gateway
from bot.http_guard import is_loopback_host as is_loopback_host  # re-exported for app wiring
from bot.types import Address, ChatType, InboundMessage, OutboundMessage

log = logging.getLogger(__name__)

CHANNEL = "local"
NAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
MAX_TEXT_CHARS = 100_000
REPLY_WAIT_SECONDS = 300.0


MAX_MESSAGE_ID_CHARS = 200


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

    def __init__(self, gateway: Gateway, *, token: str = ""):
        self.gateway = gateway
        self.token = token
        self._sockets: dict[str, set[web.WebSocketResponse]] = defaultdict(set)
        self._listeners: dict[str, list[asyncio.Queue[dict[str, Any]]]] = defaultdict(list)
        self._ids = itertools.count(1)

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        for sockets in self._sockets.values():
            for ws in list(sockets):
                await ws.close()

    def _refusal(self, request: web.Request) -> str | None:
        """Why this request may not use the chat, or None when it may (foreign hosts and
        origins are refused before this, by the server's browser guard)."""
        if self.token:
            given = request.query.get("token", "")
            auth = request.headers.get("Authorization", "")
            if auth.startswith("Bearer "):
                given = auth[len("Bearer ") :]
            if not hmac.compare_digest(given.encode(), self.token.encode()):
                return "a valid token is required"
        return None

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/", self.page),
            web.get("/ws/chat", self.websocket),
            web.post("/api/chat", self.api_chat),
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
        await self._publish(out.address.chat_id, {"type": kind, "id": message_id, "text": out.text})
        return message_id

    async def typing(self, address: Address) -> None:
        await self._publish(address.chat_id, {"type": "typing"})

    async def done_typing(self, address: Address) -> None:
        return None

    # --- HTTP handlers --------------------------------------------------------------------

    async def page(self, request: web.Request) -> web.Response:
        html = resources.files("channels.local").joinpath("static/index.html").read_text("utf-8")
        return web.Response(text=html, content_type="text/html")

    async def websocket(self, request: web.Request) -> web.WebSocketResponse:
        refusal = self._refusal(request)
        if refusal:
            raise web.HTTPForbidden(text=refusal)
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
                    text = str(data["text"])[:MAX_TEXT_CHARS]
                except (ValueError, KeyError, TypeError, RecursionError):
                    await ws.send_json({"type": "error", "text": 'send {"text": "..."}'})
                    continue
                if text.strip():
                    await self.gateway.accept(local_message(name, text))
        finally:
            self._sockets[name].discard(ws)
        return ws

    async def api_chat(self, request: web.Request) -> web.Response:
        refusal = self._refusal(request)
        if refusal:
            return web.json_response({"error": refusal}, status=403)
        if request.content_type != "application/json":
            return web.json_response({"error": "Content-Type must be application/json"}, status=415)
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
        client_id = data.get("message_id")
        if client_id is not None and (
            isinstance(client_id, bool)
            or not isinstance(client_id, str | int)
            or len(str(client_id)) > MAX_MESSAGE_ID_CHARS
        ):
            return web.json_response(
                {"error": f"message_id must be a string of at most {MAX_MESSAGE_ID_CHARS} chars"},
                status=400,
            )
        if len(text) > MAX_TEXT_CHARS:
            return web.json_response({"error": "text too long"}, status=413)
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._listeners[name].append(queue)
        try:
            msg = local_message(name, text, None if client_id is None else str(client_id))
            result = await self.gateway.accept(msg)
            if result == AcceptResult.ACCEPTED:
                # /api/chat returns once the turn is answered.
                await asyncio.wait_for(self.gateway.wait_idle(msg), REPLY_WAIT_SECONDS)
            replies = [e["text"] for e in _drain(queue) if e["type"] == "message"]
        finally:
            self._listeners[name].remove(queue)
        return web.json_response({"result": result, "replies": replies})


def _drain(queue: asyncio.Queue[dict[str, Any]]) -> list[dict[str, Any]]:
    items = []
    while not queue.empty():
        items.append(queue.get_nowait())
    return items
