"""The pigeon adapter: `POST /pigeon/messages` ({"user", "text"}, Bearer token) hands a DM to
the gateway; the replies delivered are kept, and `GET /pigeon/replies` (same token) lists
their texts."""

from __future__ import annotations

import hmac
import time
import uuid

from aiohttp import web

from bot.channel_contract import Gateway
from bot.types import Address, ChatType, InboundMessage, OutboundMessage
from tests.pigeon.config import PigeonConfig


class PigeonChannel:
    name = "pigeon"
    stream_interval = 0.0
    typing_interval = 0.0

    def __init__(self, config: PigeonConfig, gateway: Gateway) -> None:
        self.config = config
        self.gateway = gateway
        self.replies: list[OutboundMessage] = []

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    def routes(self) -> list[web.RouteDef]:
        return [
            web.post("/pigeon/messages", self.receive),
            web.get("/pigeon/replies", self.list_replies),
        ]

    def _check_token(self, request: web.Request) -> None:
        given = request.headers.get("Authorization", "").removeprefix("Bearer ")
        if not hmac.compare_digest(given, self.config.token):
            raise web.HTTPUnauthorized(text="wrong loft token")

    async def list_replies(self, request: web.Request) -> web.Response:
        self._check_token(request)
        final = [r for r in self.replies if r.final]
        return web.json_response([{"to": r.address.chat_id, "text": r.text} for r in final])

    async def receive(self, request: web.Request) -> web.Response:
        self._check_token(request)
        body = await request.json()
        user = str(body["user"])
        msg = InboundMessage(
            channel=self.name,
            message_id=uuid.uuid4().hex,
            chat_type=ChatType.DIRECT,
            chat_id=user,
            user_id=user,
            user_name=user,
            text=str(body["text"]),
            address=Address(self.name, user),
            timestamp=time.time(),
        )
        result = await self.gateway.accept(msg)
        return web.json_response({"result": str(result)})

    def render(self, markdown: str) -> list[str]:
        return [markdown] if markdown else []

    async def deliver(self, out: OutboundMessage) -> str:
        self.replies.append(out)
        return str(len(self.replies))

    async def typing(self, address: Address) -> None:
        return None

    async def done_typing(self, address: Address) -> None:
        return None
