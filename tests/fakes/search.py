"""Loopback fakes of the two web search APIs Krill queries itself, answering as the real
servers do:

- SearXNG: `GET /search?q=...&format=json` -> `{"query", "number_of_results", "results":
  [{"url", "title", "content", "engine", ...}], ...}`; a format the instance does not allow
  (json is off by default in its settings.yml) gets 403, its limiter 429.
- Brave Search: `GET /res/v1/web/search?q=...&count=N` with `X-Subscription-Token` ->
  `{"type": "search", "query": {...}, "web": {"type": "search", "results": [{"title",
  "url", "description", ...}]}}`; a wrong token gets 401 with Brave's error body, an
  exhausted quota 429 with its rate-limit headers. `count` above 20 is a 422.

Results are scripted per query word (`add`); every request is recorded.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest_asyncio
from aiohttp import web

BRAVE_MAX_COUNT = 20


@dataclass
class Page:
    url: str
    title: str
    snippet: str


@dataclass
class FakeSearch:
    """Both APIs on one loopback server: SearXNG at `searxng_url`, Brave at `brave_url`."""

    brave_token: str = "brave-test-token"
    json_enabled: bool = True  # SearXNG: whether settings.yml lists json in search.formats
    fail_with: int | None = None  # answer every search with this status
    pages: list[Page] = field(default_factory=list)
    requests: list[tuple[str, dict[str, str], dict[str, str]]] = field(default_factory=list)
    url: str = ""
    _runner: web.AppRunner | None = None

    def add(self, url: str, title: str, snippet: str) -> None:
        """A page every query that shares a word with its title or snippet finds."""
        self.pages.append(Page(url, title, snippet))

    @property
    def searxng_url(self) -> str:
        return self.url

    @property
    def brave_url(self) -> str:
        return f"{self.url}/res/v1"

    def queries(self, api: str) -> list[str]:
        return [q.get("q", "") for path, q, _ in self.requests if api in path]

    def _found(self, query: str) -> list[Page]:
        words = {w for w in query.lower().split() if len(w) > 2}
        return [p for p in self.pages if words & set(f"{p.title} {p.snippet}".lower().split())]

    def _record(self, request: web.Request) -> None:
        self.requests.append((request.path, dict(request.query), dict(request.headers)))

    async def _searxng(self, request: web.Request) -> web.Response:
        self._record(request)
        if self.fail_with is not None:
            return web.Response(status=self.fail_with, text="Too Many Requests")
        query = request.query.get("q", "")
        if request.query.get("format") != "json" or not self.json_enabled:
            return web.Response(status=403, text="403 Forbidden")
        results = [
            {
                "url": p.url,
                "title": p.title,
                "content": p.snippet,
                "engine": "duckduckgo",
                "engines": ["duckduckgo"],
                "category": "general",
                "score": 1.0 / (i + 1),
            }
            for i, p in enumerate(self._found(query))
        ]
        return web.json_response(
            {
                "query": query,
                "number_of_results": len(results),
                "results": results,
                "answers": [],
                "corrections": [],
                "infoboxes": [],
                "suggestions": [],
                "unresponsive_engines": [],
            }
        )

    async def _brave(self, request: web.Request) -> web.Response:
        self._record(request)
        if request.headers.get("X-Subscription-Token") != self.brave_token:
            return web.json_response(
                {
                    "type": "ErrorResponse",
                    "error": {
                        "code": "SUBSCRIPTION_TOKEN_INVALID",
                        "detail": "The provided subscription token is invalid.",
                        "status": 401,
                    },
                },
                status=401,
            )
        if self.fail_with is not None:
            return web.json_response(
                {"type": "ErrorResponse", "error": {"code": "RATE_LIMITED", "status": 429}},
                status=self.fail_with,
                headers={"X-RateLimit-Limit": "1, 2000", "X-RateLimit-Remaining": "0, 0"},
            )
        try:
            count = int(request.query.get("count", "20"))
        except ValueError:
            count = 0
        if not 1 <= count <= BRAVE_MAX_COUNT:
            return web.json_response(
                {"type": "ErrorResponse", "error": {"code": "VALIDATION", "status": 422}},
                status=422,
            )
        query = request.query.get("q", "")
        results: list[dict[str, Any]] = [
            {
                "type": "search_result",
                "title": p.title,
                "url": p.url,
                # Brave marks the query's words in snippets with <strong>.
                "description": p.snippet.replace(query, f"<strong>{query}</strong>"),
                "is_source_local": False,
                "language": "en",
            }
            for p in self._found(query)[:count]
        ]
        return web.json_response(
            {
                "type": "search",
                "query": {"original": query, "more_results_available": False},
                "web": {"type": "search", "results": results, "family_friendly": True},
            }
        )

    async def start(self) -> FakeSearch:
        app = web.Application()
        app.router.add_get("/search", self._searxng)
        app.router.add_get("/res/v1/web/search", self._brave)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        await web.SockSite(self._runner, sock).start()
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeSearch:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


@pytest_asyncio.fixture
async def fake_search() -> AsyncIterator[FakeSearch]:
    async with FakeSearch() as fake:
        yield fake
