"""Optional embeddings for memory search: an OpenAI-compatible `/embeddings` client with an
in-memory cache of vectors by text, and cosine similarity. Any failure raises
`EmbeddingsUnavailable`, on which search falls back to keywords alone.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Sequence

import aiohttp
from cachetools import LRUCache

from bot.config import MemoryEmbeddingsConfig

log = logging.getLogger(__name__)

MAX_CACHED_VECTORS = 20_000
BATCH = 64  # texts per request


class EmbeddingsUnavailable(Exception):
    """The endpoint is unset, unreachable, or answered something unusable."""


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    if len(a) != len(b) or not a:
        return 0.0
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


class Embeddings:
    """Vectors for texts, fetched in batches and cached by content."""

    def __init__(self, config: MemoryEmbeddingsConfig) -> None:
        self.config = config
        self._cache: LRUCache[str, list[float]] = LRUCache(MAX_CACHED_VECTORS)

    @property
    def enabled(self) -> bool:
        return bool(self.config.base_url)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order. Raises EmbeddingsUnavailable."""
        if not self.enabled:
            raise EmbeddingsUnavailable("memory.embeddings.base_url is not set")
        keys = [hashlib.sha256(t.encode()).hexdigest() for t in texts]
        missing = sorted(
            {k: t for k, t in zip(keys, texts, strict=True) if k not in self._cache}.items()
        )
        for start in range(0, len(missing), BATCH):
            batch = missing[start : start + BATCH]
            vectors = await self._request([t for _, t in batch])
            for (key, _), vector in zip(batch, vectors, strict=True):
                self._cache[key] = vector
        return [self._cache[k] for k in keys]

    async def _request(self, texts: list[str]) -> list[list[float]]:
        cfg = self.config
        headers = {"Authorization": f"Bearer {cfg.api_key}"} if cfg.api_key else {}
        url = cfg.base_url.rstrip("/") + "/embeddings"
        try:
            timeout = aiohttp.ClientTimeout(total=cfg.timeout_seconds)
            async with aiohttp.ClientSession(timeout=timeout) as http:
                async with http.post(
                    url, json={"model": cfg.model, "input": texts}, headers=headers
                ) as response:
                    if response.status != 200:
                        raise EmbeddingsUnavailable(f"{url} answered HTTP {response.status}")
                    body = await response.json()
            rows = sorted(body["data"], key=lambda row: row["index"])
            vectors = [[float(x) for x in row["embedding"]] for row in rows]
        except EmbeddingsUnavailable:
            raise
        except (aiohttp.ClientError, TimeoutError, ValueError, KeyError, TypeError) as exc:
            raise EmbeddingsUnavailable(f"{url}: {type(exc).__name__}: {exc}") from exc
        if len(vectors) != len(texts):
            raise EmbeddingsUnavailable(f"{url} returned {len(vectors)} of {len(texts)} vectors")
        return vectors
