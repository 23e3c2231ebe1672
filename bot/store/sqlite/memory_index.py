"""The memory index's storage in SQLite: an FTS5 table (trigram tokenizer, BM25) that is
external-content over `memory_chunks`, kept in step by hand (no triggers), and the state
of each indexed file (tables from migration 2)."""

from __future__ import annotations

import time
from collections.abc import Sequence

import aiosqlite

from bot.store.base import ChunkMatch, IndexedChunk, IndexedFile, VisiblePaths
from bot.store.sqlite.connection import Connection


def match_expression(terms: Sequence[str]) -> str:
    """An FTS5 MATCH expression for any of `terms`, each quoted as a phrase so no query
    syntax (AND, NEAR, *, quotes) from the message can reach FTS5."""
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


async def _delete_chunks(db: aiosqlite.Connection, path: str) -> None:
    # External-content FTS needs the old text to remove a row's index entries.
    await db.execute(
        "INSERT INTO memory_fts(memory_fts, rowid, text)"
        " SELECT 'delete', id, text FROM memory_chunks WHERE path = ?",
        (path,),
    )
    await db.execute("DELETE FROM memory_chunks WHERE path = ?", (path,))


def visible_condition(visible: VisiblePaths) -> tuple[str, list[str | int]]:
    """An SQL condition on `path` that holds for the files `visible` allows, and its
    parameters (folders are compared with substr, so no LIKE wildcard in a name matters)."""
    params: list[str | int] = []

    def under(folder: str) -> str:
        params.extend([len(folder), folder])
        return "substr(path, 1, ?) = ?"

    allowed = [under(folder) for folder in visible.under]
    if visible.outside is not None:
        allowed.append("NOT (" + " OR ".join(["0", *map(under, visible.outside)]) + ")")
    return "(" + " OR ".join(["0", *allowed]) + ")", params


class MemoryIndexTables(Connection):
    async def memory_files(self) -> list[IndexedFile]:
        rows = await self._fetchall("SELECT path, mtime_ns, size, hash, chunking FROM memory_files")
        return [IndexedFile(*r) for r in rows]

    async def memory_stats(self) -> tuple[int, int]:
        """(files, chunks) currently indexed."""
        row = await self._fetchone(
            "SELECT (SELECT COUNT(*) FROM memory_files), (SELECT COUNT(*) FROM memory_chunks)"
        )
        return (int(row[0]), int(row[1])) if row else (0, 0)

    async def memory_put_file(self, file: IndexedFile, chunks: list[IndexedChunk] | None) -> None:
        """Record a file's state and, unless `chunks` is None (content unchanged), replace
        its chunks, in one transaction."""
        async with self.transaction() as db:
            if chunks is not None:
                await _delete_chunks(db, file.path)
                await db.executemany(
                    "INSERT INTO memory_chunks(path, start_line, end_line, text)"
                    " VALUES (?, ?, ?, ?)",
                    [(file.path, c.start_line, c.end_line, c.text) for c in chunks],
                )
                await db.execute(
                    "INSERT INTO memory_fts(rowid, text) SELECT id, text FROM memory_chunks"
                    " WHERE path = ?",
                    (file.path,),
                )
            await db.execute(
                "INSERT OR REPLACE INTO memory_files(path, mtime_ns, size, hash, chunking,"
                " indexed_at) VALUES (?, ?, ?, ?, ?, ?)",
                (file.path, file.mtime_ns, file.size, file.digest, file.chunking, time.time()),
            )

    async def memory_remove_file(self, path: str) -> None:
        async with self.transaction() as db:
            await _delete_chunks(db, path)
            await db.execute("DELETE FROM memory_files WHERE path = ?", (path,))

    async def memory_term_counts(self, terms: Sequence[str], cap: int) -> list[int]:
        """Chunks holding each term, counted only up to `cap` (so cheap), in one query."""
        probe = "(SELECT COUNT(*) FROM (SELECT 1 FROM memory_fts WHERE memory_fts MATCH ? LIMIT ?))"
        params: list[str | int] = []
        for term in terms:
            params += [match_expression([term]), cap]
        row = await self._fetchone("SELECT " + ", ".join([probe] * len(terms)), params)
        return [int(n) for n in row] if row else [0] * len(terms)

    async def memory_match(
        self, terms: Sequence[str], *, ranked: bool, limit: int, visible: VisiblePaths
    ) -> list[ChunkMatch]:
        """Top `limit` chunks holding any of `terms`, by BM25 (`ranked`) or newest first.

        Ordering and limiting happen inside the FTS query, so only the rows returned are
        joined with their text; files `visible` leaves out are filtered there by rowid for
        the same reason, so they never take a place in the limit.
        """
        where, params = "", list[str | int]()
        if not visible.everything:
            condition, params = visible_condition(visible)
            where = f" AND rowid IN (SELECT id FROM memory_chunks WHERE {condition})"
        # bm25() is negative, lower is better; only computed when ranking by it.
        rank, by = ("bm25(memory_fts)", "rank") if ranked else ("0.0", "rowid DESC")
        sql = (
            "SELECT c.path, c.start_line, c.text, m.rank FROM ("
            f"SELECT rowid, {rank} AS rank FROM memory_fts WHERE memory_fts MATCH ?{where}"
            f" ORDER BY {by} LIMIT ?) AS m JOIN memory_chunks c ON c.id = m.rowid"
        )
        rows = await self._fetchall(sql, (match_expression(terms), *params, limit))
        found = [ChunkMatch(r[0], r[1], r[2], float(r[3])) for r in rows]
        return sorted(found, key=lambda c: c.rank) if ranked else found

    async def memory_substring(
        self, terms: tuple[str, ...], *, limit: int, visible: VisiblePaths
    ) -> list[ChunkMatch]:
        """Newest chunks containing any of `terms` (for terms too short for trigrams)."""
        # A scan, not an index lookup: callers reach it only when the index found nothing.
        likes = " OR ".join("text LIKE ?" for _ in terms)
        where, params = "", list[str | int]()
        if not visible.everything:
            condition, params = visible_condition(visible)
            where = f" AND {condition}"
        sql = (
            f"SELECT path, start_line, text FROM memory_chunks WHERE ({likes}){where}"
            " ORDER BY id DESC LIMIT ?"
        )
        rows = await self._fetchall(sql, (*(f"%{t}%" for t in terms), *params, limit))
        return [ChunkMatch(r[0], r[1], r[2], 0.0) for r in rows]

    async def memory_recent(self, *, limit: int, visible: VisiblePaths) -> list[ChunkMatch]:
        """The newest `limit` chunks of the files `visible` allows (for vector ranking)."""
        where, params = "", list[str | int]()
        if not visible.everything:
            condition, params = visible_condition(visible)
            where = f" WHERE {condition}"
        sql = f"SELECT path, start_line, text FROM memory_chunks{where} ORDER BY id DESC LIMIT ?"
        rows = await self._fetchall(sql, (*params, limit))
        return [ChunkMatch(r[0], r[1], r[2], 0.0) for r in rows]
