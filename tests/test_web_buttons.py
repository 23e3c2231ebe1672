"""Buttons in the web chat, the channel over a real aiohttp server with a stub core: a reply's
buttons reach the page, a press comes back over the WebSocket (or `POST /api/press`) as the
person's own, and its answer goes to the page that pressed."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web

from bot.channel_contract import PressAnswer, PressResult
from bot.server import listen
from bot.types import Address, Button, ButtonStyle, OutboundMessage
from channels.local.web import WebChannel
from tests.stub_gateway import StubGateway

ROWS = ((Button("Sonnet", "k1:abc:0", ButtonStyle.PRIMARY), Button("Haiku", "k1:abc:1")),)


@pytest.fixture
async def served() -> AsyncIterator[tuple[WebChannel, StubGateway, str]]:
    core = StubGateway()
    channel = WebChannel(core)
    app = web.Application()
    app.add_routes(channel.routes())
    runner, port = await listen(app, "127.0.0.1", 0)
    try:
        yield channel, core, f"http://127.0.0.1:{port}"
    finally:
        await channel.stop()
        await runner.cleanup()


async def test_buttons_reach_the_page_and_its_press_comes_back(
    served: tuple[WebChannel, StubGateway, str],
) -> None:
    channel, core, base = served
    core.answer = PressAnswer(PressResult.EXPIRED, "Sorry, this button has expired.")
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(f"{base}/ws/chat?name=alice") as ws,
    ):
        offer = OutboundMessage(Address("local", "alice"), "Which model?", "m", 0, buttons=ROWS)
        message_id = await channel.deliver(offer)
        event = await ws.receive_json(timeout=5)
        assert event["id"] == message_id
        assert event["buttons"] == [
            [
                {"label": "Sonnet", "data": "k1:abc:0", "style": "primary"},
                {"label": "Haiku", "data": "k1:abc:1", "style": "plain"},
            ]
        ]
        await ws.send_json({"press": "k1:abc:1", "press_id": "p1", "message_id": message_id})
        answer = await ws.receive_json(timeout=5)
        assert answer == {
            "type": "pressed",
            "id": message_id,
            "result": "expired",
            "text": "Sorry, this button has expired.",
        }
        (press,) = core.presses
        assert (press.channel, press.chat_id, press.user_id) == ("local", "alice", "alice")
        assert (press.press_id, press.data, press.message_id) == ("alice/p1", "k1:abc:1", "1")

        # The outcome's edit keeps no buttons, and says so to the page.
        done = OutboundMessage(
            Address("local", "alice"), "Which model?\n\n✅ Haiku", "d", 0, edit_of="1", buttons=()
        )
        await channel.deliver(done)
        edited = await ws.receive_json(timeout=5)
        assert (edited["id"], edited["buttons"]) == ("1", [])


async def test_api_press_and_its_bad_input(served: tuple[WebChannel, StubGateway, str]) -> None:
    _, core, base = served
    async with aiohttp.ClientSession() as session:
        body = {"user": "bob", "data": "k1:abc:0", "press_id": "x"}
        async with session.post(f"{base}/api/press", json=body) as resp:
            assert resp.status == 200
            assert await resp.json() == {"result": "done", "text": "✓ Yes"}
        for bad in ({"user": "bob"}, {"user": "bob", "data": 7}, {"user": "no way", "data": "d"}):
            async with session.post(f"{base}/api/press", json=bad) as resp:
                assert resp.status == 400
        async with session.post(f"{base}/api/press", data="data=x") as resp:
            assert resp.status == 415
    assert [p.press_id for p in core.presses] == ["bob/x"]
