"""Storage of the memory index (bot/memory/index.py decides what to index and ranks):
the state of each indexed file and its chunks, searched through the dialect's full-text
search (bot/store/search.py). A file's row also keeps its chunk count and folded length,
the corpus statistics BM25 needs, so no search scans the chunks to learn them.

Every replica searches these tables, and two of them may index the same file at once: a
file's row is written first in its transaction, so the second writer waits for the first
to commit and then replaces the chunks it wrote instead of adding to them.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from bot.store.db import MEMORY_FILE_LOCK, Db, Row


@dataclass(frozen=True, slots=True)
class IndexedFile:
    """A memory file as the index last read it."""

    path: str  # relative to the workspace, e.g. "memory/2025-03-14.md"
    mtime_ns: int
    size: int
    digest: str
    chunking: str  # the chunk sizes it was cut with; a change re-chunks the file


@dataclass(frozen=True, slots=True)
class IndexedChunk:
    start_line: int
    end_line: int
    text: str


@dataclass(frozen=True, slots=True)
class ChunkMatch:
    """A chunk a full-text query found; `rank` is BM25 (lower is better) or 0.0 unranked."""

    path: str
    start_line: int
    text: str
    rank: float


@dataclass(frozen=True, slots=True)
class VisiblePaths:
    """Which indexed files a search may return: every file when `everything`; otherwise
    those under one of the `under` folders, plus, unless `outside` is None, every file
    under none of the `outside` folders. Folders end in "/"."""

    everything: bool = False
    under: tuple[str, ...] = ()
    outside: tuple[str, ...] | None = None

    def allows(self, path: str) -> bool:
        if self.everything or path.startswith(self.under):
            return True
        return self.outside is not None and not path.startswith(self.outside)


def chunk_matches(rows: Sequence[Row]) -> list[ChunkMatch]:
    """Rows of path, start_line, text and rank."""
    return [ChunkMatch(r[0], r[1], r[2], float(r[3])) for r in rows]


def visible_condition(visible: VisiblePaths) -> tuple[str, list[Any]]:
    """An SQL condition on `path` that holds for the files `visible` allows, and its
    arguments (folders are compared with substr, so no LIKE wildcard in a name matters)."""
    if visible.everything:
        return "TRUE", []
    args: list[Any] = []

    def under(folder: str) -> str:
        args.extend([len(folder), folder])
        return "substr(path, 1, ?) = ?"

    allowed = [under(folder) for folder in visible.under]
    if visible.outside is not None:
        allowed.append("NOT (" + " OR ".join(["FALSE", *map(under, visible.outside)]) + ")")
    return "(" + " OR ".join(["FALSE", *allowed]) + ")", args


class MemoryIndexStore(Protocol):
    """Chunks of memory files under a full-text index that matches substrings (trigrams), so
    CJK text is searchable. Search terms are case-folded substrings of 3+ characters (the
    store turns them into its own query syntax); a term matches a chunk holding it in any
    case. A search returns only chunks of the files `visible` allows."""

    async def memory_files(self) -> list[IndexedFile]: ...
    async def memory_stats(self) -> tuple[int, int]: ...
    async def memory_put_file(
        self, file: IndexedFile, chunks: list[IndexedChunk] | None
    ) -> None: ...
    async def memory_remove_file(self, path: str) -> None: ...
    async def memory_term_counts(self, terms: Sequence[str], cap: int) -> list[int]: ...
    async def memory_match(
        self, terms: Sequence[str], *, ranked: bool, limit: int, visible: VisiblePaths
    ) -> list[ChunkMatch]: ...
    async def memory_substring(
        self, terms: tuple[str, ...], *, limit: int, visible: VisiblePaths
    ) -> list[ChunkMatch]: ...
    async def memory_recent(self, *, limit: int, visible: VisiblePaths) -> list[ChunkMatch]: ...


_PUT_FILE = (
    "INSERT INTO memory_files(path, mtime_ns, size, hash, chunking, indexed_at, chunks, chars)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (path) DO UPDATE SET"
    " mtime_ns = excluded.mtime_ns, size = excluded.size, hash = excluded.hash,"
    " chunking = excluded.chunking, indexed_at = excluded.indexed_at"
)


class MemoryIndexTables:
    db: Db

    async def memory_files(self) -> list[IndexedFile]:
        rows = await self.db.fetch("SELECT path, mtime_ns, size, hash, chunking FROM memory_files")
        return [IndexedFile(*r) for r in rows]

    async def memory_stats(self) -> tuple[int, int]:
        """(files, chunks) currently indexed."""
        row = await self.db.fetchrow("SELECT COUNT(*), COALESCE(SUM(chunks), 0) FROM memory_files")
        return (int(row[0]), int(row[1])) if row else (0, 0)

    async def memory_put_file(self, file: IndexedFile, chunks: list[IndexedChunk] | None) -> None:
        """Record a file's state and, unless `chunks` is None (content unchanged), replace
        its chunks, in one transaction."""
        state = (file.path, file.mtime_ns, file.size, file.digest, file.chunking, time.time())
        if chunks is None:
            await self.db.execute(_PUT_FILE, *state, 0, 0)
            return
        chars = sum(len(c.text.casefold()) for c in chunks)
        async with self.db.transaction() as tx:
            await tx.dialect.lock_key(tx, MEMORY_FILE_LOCK, file.path)
            await tx.execute(
                f"{_PUT_FILE}, chunks = excluded.chunks, chars = excluded.chars",
                *state,
                len(chunks),
                chars,
            )
            await self._drop_chunks(tx, file.path)
            await tx.dialect.search.add(tx, file.path, chunks)

    async def memory_remove_file(self, path: str) -> None:
        async with self.db.transaction() as tx:
            # A row lock is not enough: with no row yet there is nothing to lock, and the
            # chunk delete would then see, and remove, chunks a writer committed meanwhile.
            await tx.dialect.lock_key(tx, MEMORY_FILE_LOCK, path)
            await tx.execute("DELETE FROM memory_files WHERE path = ?", path)
            await self._drop_chunks(tx, path)

    @staticmethod
    async def _drop_chunks(tx: Db, path: str) -> None:
        await tx.dialect.search.forget(tx, path)
        await tx.execute("DELETE FROM memory_chunks WHERE path = ?", path)

    async def memory_term_counts(self, terms: Sequence[str], cap: int) -> list[int]:
        """Chunks holding each term, counted only up to `cap` (so cheap), in one query."""
        return await self.db.dialect.search.term_counts(self.db, terms, cap)

    async def memory_match(
        self, terms: Sequence[str], *, ranked: bool, limit: int, visible: VisiblePaths
    ) -> list[ChunkMatch]:
        """Top `limit` chunks holding any of `terms`, by BM25 (`ranked`) or newest first."""
        search = self.db.dialect.search
        return await search.match(self.db, terms, ranked=ranked, limit=limit, visible=visible)

    async def memory_substring(
        self, terms: tuple[str, ...], *, limit: int, visible: VisiblePaths
    ) -> list[ChunkMatch]:
        """Newest chunks containing any of `terms` (for terms too short for trigrams); a
        scan, not an index lookup: callers reach it only when the index found nothing."""
        holding, args = self.db.dialect.search.containing(terms)
        return await newest_chunks(self.db, limit, visible, holding, *args)

    async def memory_recent(self, *, limit: int, visible: VisiblePaths) -> list[ChunkMatch]:
        """The newest `limit` chunks of the files `visible` allows (for vector ranking)."""
        return await newest_chunks(self.db, limit, visible)


async def newest_chunks(
    db: Db, limit: int, visible: VisiblePaths, condition: str = "TRUE", *args: Any
) -> list[ChunkMatch]:
    """The newest `limit` chunks of the files `visible` allows that meet `condition`."""
    allowed, allowed_args = visible_condition(visible)
    rows = await db.fetch(
        "SELECT path, start_line, text, 0.0 FROM memory_chunks"
        f" WHERE {condition} AND {allowed} ORDER BY id DESC LIMIT ?",
        *args,
        *allowed_args,
        limit,
    )
    return chunk_matches(rows)
