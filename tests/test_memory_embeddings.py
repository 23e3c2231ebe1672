"""Hybrid memory search against the fake embeddings server: paraphrases are found, and an
unset or failing endpoint falls back to keyword search, never to nothing; on both stores."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.config import MemoryConfig, MemoryEmbeddingsConfig, load_config
from bot.memory.index import MemoryIndex
from bot.store.base import Store, VisiblePaths
from channels.registry import CHANNELS
from tests.fakes.embeddings import FakeEmbeddings

ALL = VisiblePaths(everything=True)
NOTES = """\
# 2025-03-14

- [2025-03-14 11:40] Deployed krill 0.3 to the staging box behind nginx.
"""
PEOPLE = "# Alice\n\n- Drinks a double espresso every morning, no sugar.\n"
PARAPHRASE = "which coffee does she like?"  # shares no word with the espresso note


def workspace(tmp_path: Path) -> Path:
    (tmp_path / "ws" / "memory").mkdir(parents=True)
    (tmp_path / "ws" / "memory" / "2025-03-14.md").write_text(NOTES)
    (tmp_path / "ws" / "memory" / "alice.md").write_text(PEOPLE)
    return tmp_path / "ws"


async def index_with(store: Store, ws: Path, embeddings: MemoryEmbeddingsConfig) -> MemoryIndex:
    index = MemoryIndex(store, ws, MemoryConfig(embeddings=embeddings))
    return index


async def test_a_paraphrase_is_found_only_with_embeddings(
    tmp_path: Path, any_store: Store, fake_embeddings: FakeEmbeddings
) -> None:
    ws = workspace(tmp_path)
    keyword = await index_with(any_store, ws, MemoryEmbeddingsConfig())
    assert await keyword.search(PARAPHRASE, ALL) == []
    assert fake_embeddings.requests == []  # unset: no calls at all
    config = MemoryEmbeddingsConfig(base_url=fake_embeddings.url, api_key="emb-key")
    hybrid = await index_with(any_store, ws, config)
    hits = await hybrid.search(PARAPHRASE, ALL)
    assert hits and "double espresso" in hits[0].text
    assert fake_embeddings.requests[0]["model"] == "text-embedding-3-small"
    # Keyword matches still rank first for a query that names them.
    assert "staging" in (await hybrid.search("which box got the staging deploy?", ALL))[0].text


async def test_a_failing_or_refusing_endpoint_falls_back_to_keywords(
    tmp_path: Path,
    any_store: Store,
    fake_embeddings: FakeEmbeddings,
    caplog: pytest.LogCaptureFixture,
) -> None:
    ws = workspace(tmp_path)
    fake_embeddings.fail_with = 503
    down = await index_with(
        any_store, ws, MemoryEmbeddingsConfig(base_url=fake_embeddings.url, api_key="emb-key")
    )
    hits = await down.search("staging nginx", ALL)
    assert hits and "staging box" in hits[0].text
    assert "keyword search only" in caplog.text and "HTTP 503" in caplog.text
    fake_embeddings.fail_with = None
    wrong_key = await index_with(
        any_store, ws, MemoryEmbeddingsConfig(base_url=fake_embeddings.url, api_key="nope")
    )
    assert "staging box" in (await wrong_key.search("staging nginx", ALL))[0].text
    unreachable = MemoryEmbeddingsConfig(base_url="http://127.0.0.1:9/v1", timeout_seconds=2)
    assert (
        "staging box"
        in (await (await index_with(any_store, ws, unreachable)).search("staging nginx", ALL))[
            0
        ].text
    )


def test_the_key_may_come_from_embeddings_api_key(tmp_path: Path) -> None:
    toml = tmp_path / "krill.toml"
    toml.write_text('[memory.embeddings]\nbase_url = "http://127.0.0.1:1/v1"\n')
    config = load_config(str(toml), env={"EMBEDDINGS_API_KEY": "from-env"}, channels=CHANNELS)
    assert config.memory.embeddings.api_key == "from-env"
