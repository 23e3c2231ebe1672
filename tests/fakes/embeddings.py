"""A loopback fake of an OpenAI-compatible `/embeddings` endpoint. Its "model" maps words to a
handful of concepts, so paraphrases (espresso / coffee, puppy / dog) get similar vectors the
way a real embedding model's do; it checks the bearer key, records requests, and can fail."""

from __future__ import annotations

import math
import re
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio
from aiohttp import web

CONCEPTS: list[frozenset[str]] = [
    frozenset("coffee espresso latte cappuccino caffeine brew barista".split()),
    frozenset("dog puppy canine hound leash walkies".split()),
    frozenset("dentist tooth teeth appointment".split()),
    frozenset("server deploy deployed staging nginx port".split()),
    frozenset("piano lessons music".split()),
]
_WORD = re.compile(r"[a-z]+")


def concept_vector(text: str) -> list[float]:
    """Counts of each concept's words, plus a small constant so no vector is zero."""
    words = _WORD.findall(text.lower())
    vector = [float(sum(1 for w in words if w in concept)) for concept in CONCEPTS] + [0.1]
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector]


class FakeEmbeddings:
    def __init__(self, api_key: str = "emb-key") -> None:
        self.api_key = api_key
        self.fail_with: int | None = None  # answer every request with this HTTP status
        self.requests: list[dict[str, Any]] = []
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def _embeddings(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {self.api_key}":
            return web.json_response({"error": {"message": "invalid api key"}}, status=401)
        body = await request.json()
        self.requests.append(body)
        if self.fail_with is not None:
            return web.json_response({"error": {"message": "down"}}, status=self.fail_with)
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        data = [
            {"object": "embedding", "index": i, "embedding": concept_vector(text)}
            for i, text in enumerate(inputs)
        ]
        return web.json_response({"object": "list", "data": data, "model": body["model"]})

    async def start(self) -> str:
        app = web.Application()
        app.router.add_post("/v1/embeddings", self._embeddings)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        await web.SockSite(self._runner, sock).start()
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


@pytest_asyncio.fixture
async def fake_embeddings() -> AsyncIterator[FakeEmbeddings]:
    fake = FakeEmbeddings()
    await fake.start()
    try:
        yield fake
    finally:
        await fake.stop()
