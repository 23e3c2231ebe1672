"""The DNS-rebinding guard: which Host and Origin values the browser paths accept, through
the real aiohttp server that `krill run` builds."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest
import pytest_asyncio
from aiohttp import web
from aiohttp.test_utils import TestServer

from bot.http_guard import browser_refusal, host_accepted, is_browser_path, split_host
from bot.metrics import Metrics
from bot.server import build_server

ALLOWED = ["chat.example.com", "pinned.example.com:8443"]


@pytest.mark.parametrize(
    ("host", "accepted"),
    [
        ("localhost", True),
        ("LOCALHOST:8787", True),
        ("127.0.0.1:8787", True),
        ("127.3.4.5", True),
        ("[::1]:8787", True),
        ("[::1]", True),
        ("chat.example.com", True),
        ("Chat.Example.com:9999", True),
        ("pinned.example.com:8443", True),
        ("pinned.example.com:8444", False),
        ("pinned.example.com", False),
        ("evil.example:8787", False),
        ("localhost.evil.example", False),
        ("127.0.0.1.nip.io", False),
        ("10.0.0.5:8787", False),
        ("", False),
    ],
)
def test_host_accepted(host: str, accepted: bool) -> None:
    assert host_accepted(host, ALLOWED) is accepted


def test_split_host() -> None:
    assert split_host("[::1]:8787") == ("::1", "8787")
    assert split_host("Example.COM") == ("example.com", "")


@pytest.mark.parametrize(
    ("host", "origin", "refused"),
    [
        ("127.0.0.1:8787", None, False),
        ("127.0.0.1:8787", "http://127.0.0.1:8787", False),
        ("localhost:8787", "http://localhost:8787", False),
        # DNS rebinding: the page's own name, pointed at 127.0.0.1, with a matching Origin.
        ("evil.example:8787", "http://evil.example:8787", True),
        ("127.0.0.1:8787", "http://evil.example", True),
        ("127.0.0.1:8787", "http://localhost:3000", True),  # another local origin
        ("127.0.0.1:8787", "null", True),
        (None, None, True),
    ],
)
def test_browser_refusal(host: str | None, origin: str | None, refused: bool) -> None:
    assert bool(browser_refusal(host, origin, [])) is refused


def test_browser_paths() -> None:
    assert all(is_browser_path(p) for p in ("/", "/api/chat", "/ws/chat", "/admin", "/admin/x"))
    assert not any(
        is_browser_path(p) for p in ("/healthz", "/metrics", "/telegram/webhook", "/slack/events")
    )


@pytest_asyncio.fixture
async def server() -> AsyncIterator[TestServer]:
    async def ok(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    routes = [web.get(p, ok) for p in ("/", "/api/chat", "/admin")] + [
        web.post("/telegram/webhook", ok)
    ]
    app = build_server(
        metrics=Metrics(),
        ready=lambda: {},
        routes=routes,
        max_body_bytes=1000,
        allowed_hosts=["chat.example.com"],
    )
    test_server = TestServer(app, host="127.0.0.1")
    await test_server.start_server()
    try:
        yield test_server
    finally:
        await test_server.close()


async def status(server: TestServer, method: str, path: str, **headers: str) -> int:
    async with (
        aiohttp.ClientSession() as http,
        http.request(method, server.make_url(path), headers=headers) as resp,
    ):
        return resp.status


async def test_the_server_refuses_foreign_hosts_on_browser_paths_only(server: TestServer) -> None:
    evil = {"Host": f"evil.example:{server.port}", "Origin": f"http://evil.example:{server.port}"}
    for path in ("/", "/api/chat", "/admin"):
        assert await status(server, "GET", path) == 200
        assert await status(server, "GET", path, **evil) == 403
        assert await status(server, "GET", path, Host="chat.example.com") == 200
    # Servers, not browsers, call these; their Host is whatever name the operator set up.
    for method, path in (("GET", "/healthz"), ("GET", "/metrics"), ("POST", "/telegram/webhook")):
        assert await status(server, method, path, **evil) == 200
