"""Tests for the memory index shared by several processes (bot/memory/index.py over either
store, bot/store/memory_index.py): what one replica indexes is current for the
others, a late write of an older version is repaired, two replicas indexing one file at
once leave one copy of its chunks, a note appended through one replica is found by
another, and PostgreSQL ranks like SQLite's FTS5."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bot.config import MemoryConfig
from bot.memory.index import MemoryIndex
from bot.memory.tools import MemoryTools
from bot.store.base import IndexedChunk, IndexedFile, Store, VisiblePaths
from bot.store.postgres import PostgresStore
from bot.store.sqlite import SQLiteStore
from bot.tools.registry import ToolContext

ALL = VisiblePaths(everything=True)
NOTE = "# 2025-03-14\n\n- Mia starts piano lessons on Thursdays.\n"


def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "workspace"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "2025-03-14.md").write_text(NOTE, encoding="utf-8")
    return ws


async def replica(store: Store, ws: Path) -> MemoryIndex:
    index = MemoryIndex(store, ws, MemoryConfig())
    return index


async def test_a_change_one_replica_indexed_is_current_for_the_others(
    any_store: Store, tmp_path: Path
) -> None:
    ws = workspace(tmp_path)
    first, second = await replica(any_store, ws), await replica(any_store, ws)
    await first.refresh()
    await second.refresh()
    note = ws / "memory" / "2025-03-14.md"
    note.write_text(NOTE + "- Mia switched to the harpsichord.\n", encoding="utf-8")
    assert (await first.search("harpsichord", ALL))[0].path == "memory/2025-03-14.md"
    report = await second.refresh()
    assert report.indexed == [] and report.unchanged == 1  # the store says it is current
    assert "harpsichord" in (await second.search("harpsichord", ALL))[0].text


async def test_a_late_write_of_an_older_version_is_repaired(
    any_store: Store, tmp_path: Path
) -> None:
    ws = workspace(tmp_path)
    second = await replica(any_store, ws)
    await second.refresh()
    (old,) = await any_store.memory_files()
    note = ws / "memory" / "2025-03-14.md"
    note.write_text(NOTE + "- Mia switched to the harpsichord.\n", encoding="utf-8")
    assert await second.search("harpsichord", ALL)
    # Another replica read the note before the edit and commits after this one indexed it.
    await any_store.memory_put_file(old, [IndexedChunk(1, 3, NOTE)])
    hits = await second.search("harpsichord", ALL)
    assert hits and "harpsichord" in hits[0].text


async def test_two_replicas_indexing_one_file_at_once_leave_one_copy(pg_url: str) -> None:
    one, other = PostgresStore(pg_url), PostgresStore(pg_url)
    await one.open()
    await other.open()

    def version(n: int, word: str, chunks: int) -> tuple[IndexedFile, list[IndexedChunk]]:
        state = IndexedFile("memory/x.md", n, chunks, word, "400/80")
        return state, [IndexedChunk(k, k, f"{word} {n}") for k in range(1, chunks + 1)]

    try:
        for n in range(40):
            await asyncio.gather(
                one.memory_put_file(*version(n, "alpha", 3)),
                other.memory_put_file(*version(n, "beta", 2)),
                # and a third writer that saw the file deleted, every other round
                (one if n % 2 else other).memory_remove_file("memory/x.md"),
            )
            files = await other.memory_files()
            chunks = sorted(c.text for c in await one.memory_recent(limit=10, visible=ALL))
            # Whoever committed last wins whole: its row and only its chunks.
            expected = [f"{files[0].digest} {n}"] * files[0].size if files else []
            assert chunks == expected
            assert await one.memory_stats() == (len(files), len(expected))
    finally:
        await one.close()
        await other.close()


async def test_a_note_appended_through_one_replica_is_found_by_another(
    pg_url: str, tmp_path: Path
) -> None:
    ws = workspace(tmp_path)
    one, other = PostgresStore(pg_url), PostgresStore(pg_url)
    await one.open()
    await other.open()
    try:
        writer = MemoryTools(await replica(one, ws), MemoryConfig(), "UTC")
        reader = await replica(other, ws)
        key = "agent:main:local:direct:alice"
        context = ToolContext(key, "s1", "local:alice", True, ws, admin=True)
        await writer.append({"text": "Alice's locker code is 4471."}, context)
        hits = await reader.search("locker code", ALL)
        assert hits and "4471" in hits[0].text
        assert await one.memory_stats() == await other.memory_stats()
    finally:
        await one.close()
        await other.close()


CORPUS = {
    "MEMORY.md": (
        "# Memory\n\n- Alice prefers an oat flat white, no sugar.\n- Alice's partner is Sam.\n"
    ),
    "memory/2025-03-14.md": (
        "# 2025-03-14\n\n- Alice asked to book the dentist for Tuesday.\n"
        "- Deployed krill 0.3 to the staging box behind nginx.\n"
        "- Bob's daughter Mia starts piano lessons.\n"
    ),
    "memory/2025-03-15.md": (
        "# 2025-03-15\n\n- 用户喜欢喝美式咖啡，不加糖。\n- 来週の会議は火曜日の午後三時からです。\n"
    ),
    "memory/2025-03-16.md": (
        "# 2025-03-16\n\n- The dentist moved Alice to Wednesday; dentist dentist reminder.\n"
        "- Staging nginx config lives in deploy/nginx.conf.\n"
    ),
}
QUERIES = [
    "when is the dentist?",
    "staging nginx",
    "Alice",
    "美式咖啡",
    "会議は火曜日",
    "咖啡",
    "piano lessons for Mia",
]


async def test_postgresql_ranks_like_sqlite(pg_store: PostgresStore, tmp_path: Path) -> None:
    ws = tmp_path / "workspace"
    for name, text in CORPUS.items():
        (ws / name).parent.mkdir(parents=True, exist_ok=True)
        (ws / name).write_text(text, encoding="utf-8")
    sqlite = SQLiteStore(tmp_path / "krill.db")
    await sqlite.open()
    try:
        config = MemoryConfig(chunk_tokens=50, chunk_overlap_tokens=10)
        indexes = [MemoryIndex(store, ws, config) for store in (sqlite, pg_store)]
        for query in QUERIES:
            lite, pg = [await index.search(query, ALL) for index in indexes]
            assert lite, query
            assert [h.source for h in pg] == [h.source for h in lite], query
            assert [h.score for h in pg] == pytest.approx([h.score for h in lite], abs=0.01)
    finally:
        await sqlite.close()
