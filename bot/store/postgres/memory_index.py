"""The memory index's storage in PostgreSQL: chunks with a case-folded copy of their text
under a pg_trgm GIN index (substring matching that works for CJK, where a 'simple' tsvector
would not split words), BM25 computed in SQL so ranks compare with SQLite's FTS5, and the
state of each indexed file (tables from migration 1).

Every replica searches these tables, and two of them may index the same file at once: a
file's row is written first in its transaction, so the second writer waits for the first
to commit and then replaces the chunks it wrote instead of adding to them.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from bot.store.base import ChunkMatch, IndexedChunk, IndexedFile, VisiblePaths
from bot.store.postgres.connection import Connection

# FTS5's bm25() defaults, so a rank means the same on both stores.
BM25_K1 = 1.2
BM25_B = 0.75
MIN_IDF = 1e-6  # FTS5 floors a term's weight here when it is in most chunks

# Which files a search may see, over four parameters from `_visible_args` ($n..$n+3):
# everything, the folders to be under, whether `outside` applies, the folders to avoid.
_VISIBLE = (
    "(${0} OR EXISTS (SELECT 1 FROM unnest(${1}::text[]) AS f WHERE starts_with(path, f))"
    " OR (${2} AND NOT EXISTS"
    " (SELECT 1 FROM unnest(${3}::text[]) AS f WHERE starts_with(path, f))))"
)


def _visible(first: int) -> str:
    return _VISIBLE.format(first, first + 1, first + 2, first + 3)


def _visible_args(visible: VisiblePaths) -> tuple[bool, list[str], bool, list[str]]:
    outside = visible.outside
    return visible.everything, list(visible.under), outside is not None, list(outside or ())


def _pattern(term: str) -> str:
    """A LIKE pattern for chunks holding `term` in any case (it is matched case-folded)."""
    escaped = term.casefold().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


# Ranked: BM25 over the matching chunks. Corpus size and mean length come from the per-file
# totals (no scan); each term's document frequency is counted through the trigram index.
# A term's frequency in a chunk is how often it occurs in the folded text.
_RANKED = f"""
WITH terms AS (
    SELECT term, pattern FROM unnest($1::text[], $2::text[]) AS t(term, pattern)
), corpus AS (
    SELECT greatest(coalesce(sum(chunks), 0), 1)::float8 AS n,
           greatest(coalesce(sum(chars)::float8 / nullif(sum(chunks), 0), 1), 1) AS avg_chars
    FROM memory_files
), weights AS (
    SELECT t.term, greatest(ln((corpus.n - d.df + 0.5) / (d.df + 0.5)), {MIN_IDF}) AS idf
    FROM terms AS t CROSS JOIN corpus CROSS JOIN LATERAL (
        SELECT count(*)::float8 AS df FROM memory_chunks WHERE folded LIKE t.pattern
    ) AS d
), hits AS (
    SELECT id, path, start_line, text, folded FROM memory_chunks
    WHERE folded LIKE ANY($2::text[]) AND {_visible(4)}
)
SELECT h.path, h.start_line, h.text, -sum(
    w.idf * tf.n * {BM25_K1 + 1}
    / (tf.n + {BM25_K1} * (1 - {BM25_B} + {BM25_B} * length(h.folded) / corpus.avg_chars))
) AS rank
FROM hits AS h CROSS JOIN corpus CROSS JOIN weights AS w CROSS JOIN LATERAL (
    SELECT (length(h.folded) - length(replace(h.folded, w.term, '')))::float8
           / length(w.term) AS n
) AS tf
WHERE tf.n > 0
GROUP BY h.id, h.path, h.start_line, h.text
ORDER BY rank, h.id DESC
LIMIT $3
"""

_NEWEST = f"""
SELECT path, start_line, text FROM memory_chunks
WHERE folded LIKE ANY($1::text[]) AND {_visible(3)}
ORDER BY id DESC LIMIT $2
"""


class MemoryIndexTables(Connection):
    async def memory_files(self) -> list[IndexedFile]:
        rows = await self._fetchall("SELECT path, mtime_ns, size, hash, chunking FROM memory_files")
        return [IndexedFile(*r) for r in rows]

    async def memory_stats(self) -> tuple[int, int]:
        """(files, chunks) currently indexed."""
        row = await self._fetchone("SELECT count(*), coalesce(sum(chunks), 0) FROM memory_files")
        return (int(row[0]), int(row[1])) if row else (0, 0)

    async def memory_put_file(self, file: IndexedFile, chunks: list[IndexedChunk] | None) -> None:
        """Record a file's state and, unless `chunks` is None (content unchanged), replace
        its chunks, in one transaction."""
        state = (file.path, file.mtime_ns, file.size, file.digest, file.chunking, time.time())
        if chunks is None:
            await self._execute(
                "INSERT INTO memory_files(path, mtime_ns, size, hash, chunking, indexed_at)"
                " VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (path) DO UPDATE SET"
                " mtime_ns = $2, size = $3, hash = $4, chunking = $5, indexed_at = $6",
                *state,
            )
            return
        folded = [c.text.casefold() for c in chunks]
        async with self.transaction() as db:
            # The file's row first: it holds the lock that orders concurrent writers.
            await db.execute(
                "INSERT INTO memory_files(path, mtime_ns, size, hash, chunking, indexed_at,"
                " chunks, chars) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
                " ON CONFLICT (path) DO UPDATE SET mtime_ns = $2, size = $3, hash = $4,"
                " chunking = $5, indexed_at = $6, chunks = $7, chars = $8",
                *state,
                len(chunks),
                sum(map(len, folded)),
            )
            await db.execute("DELETE FROM memory_chunks WHERE path = $1", file.path)
            await db.execute(
                "INSERT INTO memory_chunks(path, start_line, end_line, text, folded)"
                " SELECT $1, s, e, t, f FROM unnest($2::int[], $3::int[], $4::text[], $5::text[])"
                " WITH ORDINALITY AS c(s, e, t, f, n) ORDER BY n",
                file.path,
                [c.start_line for c in chunks],
                [c.end_line for c in chunks],
                [c.text for c in chunks],
                folded,
            )

    async def memory_remove_file(self, path: str) -> None:
        # Its chunks go with it (ON DELETE CASCADE), in the same statement.
        await self._execute("DELETE FROM memory_files WHERE path = $1", path)

    async def memory_term_counts(self, terms: Sequence[str], cap: int) -> list[int]:
        """Chunks holding each term, counted only up to `cap` (so cheap), in one query."""
        rows = await self._fetchall(
            "SELECT (SELECT count(*) FROM (SELECT 1 FROM memory_chunks WHERE folded LIKE p"
            " LIMIT $2) AS m) FROM unnest($1::text[]) WITH ORDINALITY AS t(p, n) ORDER BY n",
            [_pattern(t) for t in terms],
            cap,
        )
        return [int(r[0]) for r in rows]

    async def memory_match(
        self, terms: Sequence[str], *, ranked: bool, limit: int, visible: VisiblePaths
    ) -> list[ChunkMatch]:
        """Top `limit` chunks holding any of `terms`, by BM25 (`ranked`, lower is better, as
        FTS5's) or newest first; files `visible` leaves out never take a place in the limit."""
        if not ranked:
            return await self._newest(terms, limit, visible)
        rows = await self._fetchall(
            _RANKED,
            [t.casefold() for t in terms],
            [_pattern(t) for t in terms],
            limit,
            *_visible_args(visible),
        )
        return [ChunkMatch(r[0], r[1], r[2], float(r[3])) for r in rows]

    async def memory_substring(
        self, terms: tuple[str, ...], *, limit: int, visible: VisiblePaths
    ) -> list[ChunkMatch]:
        """Newest chunks containing any of `terms` (for terms too short for trigrams)."""
        return await self._newest(terms, limit, visible)

    async def memory_recent(self, *, limit: int, visible: VisiblePaths) -> list[ChunkMatch]:
        """The newest `limit` chunks of the files `visible` allows (for vector ranking)."""
        rows = await self._fetchall(
            "SELECT path, start_line, text FROM memory_chunks WHERE "
            + _visible(2)
            + " ORDER BY id DESC LIMIT $1",
            limit,
            *_visible_args(visible),
        )
        return [ChunkMatch(r[0], r[1], r[2], 0.0) for r in rows]

    async def _newest(
        self, terms: Sequence[str], limit: int, visible: VisiblePaths
    ) -> list[ChunkMatch]:
        rows = await self._fetchall(
            _NEWEST, [_pattern(t) for t in terms], limit, *_visible_args(visible)
        )
        return [ChunkMatch(r[0], r[1], r[2], 0.0) for r in rows]
