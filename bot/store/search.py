"""Full-text search over the memory index's chunks: the one part of the memory index each
database does its own way. Both match case-folded substrings of 3+ characters through
trigrams (so Chinese, Japanese and Korean text, which has no spaces between words, is found)
and rank by BM25 with FTS5's defaults, so a rank means the same on both.

- `Fts5Search` (SQLite): an FTS5 table with the trigram tokenizer, external-content over
  `memory_chunks` and kept in step by hand (no triggers).
- `TrigramSearch` (PostgreSQL): a case-folded copy of each chunk's text under a pg_trgm GIN
  index, with BM25 computed in SQL from the per-file totals in `memory_files`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from bot.store.db import Db
from bot.store.memory_index import (
    ChunkMatch,
    IndexedChunk,
    VisiblePaths,
    chunk_matches,
    newest_chunks,
    visible_condition,
)


class Search(Protocol):
    # The DDL of what it keeps beside the shared tables, run after them on a new database,
    # and those objects' names: tables (with their shadow tables), "table.column"s and
    # indexes, which the schema parity test leaves out.
    schema: str
    owns: tuple[str, ...]

    async def add(self, tx: Db, path: str, chunks: Sequence[IndexedChunk]) -> None:
        """Store `path`'s chunks and index them."""

    async def forget(self, tx: Db, path: str) -> None:
        """Drop `path`'s chunks from the index, before their rows are deleted."""

    async def term_counts(self, db: Db, terms: Sequence[str], cap: int) -> list[int]:
        """Chunks holding each term, counted only up to `cap` (so cheap), in one query."""
        ...

    async def match(
        self, db: Db, terms: Sequence[str], *, ranked: bool, limit: int, visible: VisiblePaths
    ) -> list[ChunkMatch]:
        """Top `limit` chunks holding any of `terms`, by BM25 (`ranked`, lower is better) or
        newest first; files `visible` leaves out never take a place in the limit."""
        ...

    def containing(self, terms: Sequence[str]) -> tuple[str, list[Any]]:
        """A condition on a chunk holding any of `terms`, whatever their length (a scan),
        and its arguments."""
        ...


def match_expression(terms: Sequence[str]) -> str:
    """An FTS5 MATCH expression for any of `terms`, each quoted as a phrase so no query
    syntax (AND, NEAR, *, quotes) from the message can reach FTS5."""
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


class Fts5Search:
    # External-content over memory_chunks, kept in step by hand (no triggers).
    schema = (
        "CREATE VIRTUAL TABLE memory_fts USING fts5("
        "text, content='memory_chunks', content_rowid='id', tokenize='trigram')"
    )
    owns: tuple[str, ...] = ("memory_fts",)

    async def add(self, tx: Db, path: str, chunks: Sequence[IndexedChunk]) -> None:
        await tx.executemany(
            "INSERT INTO memory_chunks(path, start_line, end_line, text) VALUES (?, ?, ?, ?)",
            [(path, c.start_line, c.end_line, c.text) for c in chunks],
        )
        await tx.execute(
            "INSERT INTO memory_fts(rowid, text) SELECT id, text FROM memory_chunks WHERE path = ?",
            path,
        )

    async def forget(self, tx: Db, path: str) -> None:
        # External-content FTS needs the old text to remove a row's index entries.
        await tx.execute(
            "INSERT INTO memory_fts(memory_fts, rowid, text)"
            " SELECT 'delete', id, text FROM memory_chunks WHERE path = ?",
            path,
        )

    async def term_counts(self, db: Db, terms: Sequence[str], cap: int) -> list[int]:
        probe = "(SELECT COUNT(*) FROM (SELECT 1 FROM memory_fts WHERE memory_fts MATCH ? LIMIT ?))"
        args: list[Any] = []
        for term in terms:
            args += [match_expression([term]), cap]
        row = await db.fetchrow("SELECT " + ", ".join([probe] * len(terms)), *args)
        return [int(n) for n in row] if row else [0] * len(terms)

    async def match(
        self, db: Db, terms: Sequence[str], *, ranked: bool, limit: int, visible: VisiblePaths
    ) -> list[ChunkMatch]:
        # Ordering and limiting happen inside the FTS query, so only the rows returned are
        # joined with their text; hidden files are filtered there by rowid for the same
        # reason. bm25() is negative, lower is better; only computed when ranking by it.
        condition, args = visible_condition(visible)
        hidden = (
            ""
            if visible.everything
            else f" AND rowid IN (SELECT id FROM memory_chunks WHERE {condition})"
        )
        rank, by = ("bm25(memory_fts)", "rank") if ranked else ("0.0", "rowid DESC")
        rows = await db.fetch(
            "SELECT c.path, c.start_line, c.text, m.rank FROM ("
            f"SELECT rowid, {rank} AS rank FROM memory_fts WHERE memory_fts MATCH ?{hidden}"
            f" ORDER BY {by} LIMIT ?) AS m JOIN memory_chunks c ON c.id = m.rowid",
            match_expression(terms),
            *args,
            limit,
        )
        found = chunk_matches(rows)
        return sorted(found, key=lambda c: c.rank) if ranked else found

    def containing(self, terms: Sequence[str]) -> tuple[str, list[Any]]:
        return f"({' OR '.join('text LIKE ?' for _ in terms)})", [f"%{t}%" for t in terms]


# FTS5's bm25() defaults.
BM25_K1 = 1.2
BM25_B = 0.75
MIN_IDF = 1e-6  # FTS5 floors a term's weight here when it is in most chunks


def _pattern(term: str) -> str:
    """A LIKE pattern for chunks holding `term` in any case (it is matched case-folded)."""
    escaped = term.casefold().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


# Corpus size and mean length come from the per-file totals (no scan); each term's document
# frequency is counted through the trigram index; a term's frequency in a chunk is how often
# it occurs in the folded text.
_RANKED = """
WITH terms AS (
    SELECT term, pattern FROM unnest(?::text[], ?::text[]) AS t(term, pattern)
), corpus AS (
    SELECT greatest(coalesce(sum(chunks), 0), 1)::float8 AS n,
           greatest(coalesce(sum(chars)::float8 / nullif(sum(chunks), 0), 1), 1) AS avg_chars
    FROM memory_files
), weights AS (
    SELECT t.term, greatest(ln((corpus.n - d.df + 0.5) / (d.df + 0.5)), {min_idf}) AS idf
    FROM terms AS t CROSS JOIN corpus CROSS JOIN LATERAL (
        SELECT count(*)::float8 AS df FROM memory_chunks WHERE folded LIKE t.pattern
    ) AS d
), hits AS (
    SELECT id, path, start_line, text, folded FROM memory_chunks
    WHERE folded LIKE ANY(?::text[]) AND {visible}
)
SELECT h.path, h.start_line, h.text, -sum(
    w.idf * tf.n * {k1_plus_1}
    / (tf.n + {k1} * (1 - {b} + {b} * length(h.folded) / corpus.avg_chars))
) AS rank
FROM hits AS h CROSS JOIN corpus CROSS JOIN weights AS w CROSS JOIN LATERAL (
    SELECT (length(h.folded) - length(replace(h.folded, w.term, '')))::float8
           / length(w.term) AS n
) AS tf
WHERE tf.n > 0
GROUP BY h.id, h.path, h.start_line, h.text
ORDER BY rank, h.id DESC
LIMIT ?
"""


class TrigramSearch:
    # `folded` is the text case-folded by Python (str.casefold), so matching is plain LIKE
    # and does not depend on the database's locale.
    schema = """
        CREATE EXTENSION IF NOT EXISTS pg_trgm;
        ALTER TABLE memory_chunks ADD COLUMN folded TEXT NOT NULL;
        CREATE INDEX memory_chunks_trgm ON memory_chunks USING gin (folded gin_trgm_ops)
    """
    owns: tuple[str, ...] = ("memory_chunks.folded", "memory_chunks_trgm")

    async def add(self, tx: Db, path: str, chunks: Sequence[IndexedChunk]) -> None:
        await tx.executemany(
            "INSERT INTO memory_chunks(path, start_line, end_line, text, folded)"
            " VALUES (?, ?, ?, ?, ?)",
            [(path, c.start_line, c.end_line, c.text, c.text.casefold()) for c in chunks],
        )

    async def forget(self, tx: Db, path: str) -> None:
        """The trigram index follows the rows it indexes."""

    async def term_counts(self, db: Db, terms: Sequence[str], cap: int) -> list[int]:
        rows = await db.fetch(
            "SELECT (SELECT count(*) FROM (SELECT 1 FROM memory_chunks WHERE folded LIKE p"
            " LIMIT ?) AS m) FROM unnest(?::text[]) WITH ORDINALITY AS t(p, n) ORDER BY n",
            cap,
            [_pattern(t) for t in terms],
        )
        return [int(r[0]) for r in rows]

    async def match(
        self, db: Db, terms: Sequence[str], *, ranked: bool, limit: int, visible: VisiblePaths
    ) -> list[ChunkMatch]:
        if not ranked:
            holding, holding_args = self.containing(terms)
            return await newest_chunks(db, limit, visible, holding, *holding_args)
        condition, args = visible_condition(visible)
        sql = _RANKED.format(
            visible=condition, min_idf=MIN_IDF, k1_plus_1=BM25_K1 + 1, k1=BM25_K1, b=BM25_B
        )
        patterns = [_pattern(t) for t in terms]
        folded = [t.casefold() for t in terms]
        return chunk_matches(await db.fetch(sql, folded, patterns, patterns, *args, limit))

    def containing(self, terms: Sequence[str]) -> tuple[str, list[Any]]:
        return "folded LIKE ANY(?::text[])", [[_pattern(t) for t in terms]]
