"""The memory index: an SQLite FTS5 table (trigram tokenizer, BM25 ranking) over chunks of
MEMORY.md and memory/**/*.md, kept in step with the files on disk.

It lives in the store's SQLite file (tables from migration 2) on a connection of its own, so
reindexing never holds the store's lock. `refresh()` compares each file's mtime and size
with what was indexed, re-reads only what changed (and skips files whose content hash did
not change), and drops the chunks of deleted files; `search()` runs it first, so results
are never stale. Keyword search only: no embeddings, so nothing to download or degrade.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import aiosqlite

from bot.config import MemoryConfig
from bot.memory.chunking import Chunk, chunk_text
from bot.memory.paths import PRIVATE_FILES, iter_memory_files
from bot.memory.query import (
    QueryPlan,
    best_lines,
    blend_score,
    build_query,
    coverage,
    match_expression,
)
from bot.store.sqlite import write_transaction

log = logging.getLogger(__name__)

# Candidates fetched per wanted result: re-scoring and de-duplicating overlapping chunks
# needs more than the final count.
CANDIDATE_FACTOR = 4
BUSY_TIMEOUT_MS = 5000
# A term found in this many chunks says little about relevance (its BM25 weight is near
# zero) while ranking by it costs time in proportion to the corpus. Such terms still count
# in the coverage score; a query made only of them takes the newest chunks that match.
COMMON_ROWS = 1000
RECENT_CANDIDATES = 100


@dataclass(frozen=True, slots=True)
class SearchHit:
    path: str
    start_line: int
    end_line: int
    score: float
    text: str

    @property
    def source(self) -> str:
        """Where the snippet came from, as `path#Lstart-Lend`."""
        return f"{self.path}#L{self.start_line}-L{self.end_line}"


@dataclass(slots=True)
class RefreshReport:
    indexed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: int = 0
    seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class _FileState:
    mtime_ns: int
    size: int
    digest: str
    chunking: str


@dataclass(frozen=True, slots=True)
class _Candidate:
    path: str
    start_line: int
    text: str
    bm25: float


def _stat_all(workspace: Path) -> dict[str, tuple[str, int, int]]:
    return {f.name: (f.real, f.mtime_ns, f.size) for f in iter_memory_files(workspace)}


def _read(path: str) -> tuple[str, str] | None:
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    return raw.decode("utf-8", errors="replace"), hashlib.sha256(raw).hexdigest()


def _overlaps(hit: SearchHit, taken: Iterable[SearchHit]) -> bool:
    return any(
        t.path == hit.path and t.start_line <= hit.end_line and hit.start_line <= t.end_line
        for t in taken
    )


class MemoryIndex:
    """Search over the workspace's memory files. `open()` before use, `close()` after."""

    def __init__(self, db_path: Path | str, workspace: Path, config: MemoryConfig) -> None:
        self.db_path = db_path
        self.workspace = workspace
        self.config = config
        self.chunk_tokens = config.chunk_tokens
        self.overlap_tokens = config.chunk_overlap_tokens
        self.snippet_max_chars = config.search.snippet_max_chars
        # A change of chunk sizes must re-chunk every file, so it is part of each file's state.
        self._chunking = f"{self.chunk_tokens}/{self.overlap_tokens}"
        self._db: aiosqlite.Connection | None = None
        self._known: dict[str, _FileState] = {}
        self._lock = asyncio.Lock()

    @property
    def db(self) -> aiosqlite.Connection:
        if self._db is None:
            raise RuntimeError("memory index is not open")
        return self._db

    async def open(self) -> None:
        """Connect; the store must have run its migrations on this file already."""
        self._db = await aiosqlite.connect(str(self.db_path), isolation_level=None)
        await self.db.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        await self._load_known()

    async def close(self) -> None:
        if self._db is not None:
            await self._db.close()
            self._db = None

    async def _load_known(self) -> None:
        async with self.db.execute(
            "SELECT path, mtime_ns, size, hash, chunking FROM memory_files"
        ) as cur:
            rows = await cur.fetchall()
        self._known = {r[0]: _FileState(r[1], r[2], r[3], r[4]) for r in rows}

    async def stats(self) -> tuple[int, int]:
        """(files, chunks) currently indexed."""
        async with self.db.execute(
            "SELECT (SELECT COUNT(*) FROM memory_files), (SELECT COUNT(*) FROM memory_chunks)"
        ) as cur:
            row = await cur.fetchone()
        return (int(row[0]), int(row[1])) if row else (0, 0)

    # --- keeping up with the files ----------------------------------------------------------

    async def refresh(self, *, force: bool = False) -> RefreshReport:
        """Bring the index in line with the files on disk; `force` re-reads every file."""
        async with self._lock:
            started = time.perf_counter()
            report = RefreshReport()
            if force:
                await self._load_known()
            on_disk = await asyncio.to_thread(_stat_all, self.workspace)
            for name in sorted(set(self._known) - set(on_disk)):
                await self._remove(name)
                report.removed.append(name)
            for name, (real, mtime_ns, size) in sorted(on_disk.items()):
                if not force and self._is_current(name, mtime_ns, size):
                    report.unchanged += 1
                    continue
                if await self._index_file(name, real, mtime_ns, size, force=force):
                    report.indexed.append(name)
                else:
                    report.unchanged += 1
            report.seconds = time.perf_counter() - started
            if report.indexed or report.removed:
                log.info(
                    "memory index: %d file(s) indexed, %d removed in %.0f ms",
                    len(report.indexed),
                    len(report.removed),
                    report.seconds * 1000,
                )
            return report

    def _is_current(self, name: str, mtime_ns: int, size: int) -> bool:
        known = self._known.get(name)
        return known is not None and (known.mtime_ns, known.size, known.chunking) == (
            mtime_ns,
            size,
            self._chunking,
        )

    async def _index_file(
        self, name: str, real: str, mtime_ns: int, size: int, *, force: bool
    ) -> bool:
        """(Re)index one file; False when only its stat changed, not its content."""
        read = await asyncio.to_thread(_read, real)
        if read is None:
            return False
        text, digest = read
        known = self._known.get(name)
        state = _FileState(mtime_ns, size, digest, self._chunking)
        same_content = known is not None and known.digest == digest
        if not force and same_content and known is not None and known.chunking == self._chunking:
            await self._write_file_row(name, state)
            return False
        chunks = chunk_text(
            text, chunk_tokens=self.chunk_tokens, overlap_tokens=self.overlap_tokens
        )
        await self._replace_chunks(name, chunks, state)
        return True

    async def _replace_chunks(self, name: str, chunks: list[Chunk], state: _FileState) -> None:
        async with write_transaction(self.db):
            await self._delete_chunks(name)
            await self.db.executemany(
                "INSERT INTO memory_chunks(path, start_line, end_line, text) VALUES (?, ?, ?, ?)",
                [(name, c.start_line, c.end_line, c.text) for c in chunks],
            )
            await self.db.execute(
                "INSERT INTO memory_fts(rowid, text) SELECT id, text FROM memory_chunks"
                " WHERE path = ?",
                (name,),
            )
            await self._upsert_file(name, state)
        self._known[name] = state

    async def _write_file_row(self, name: str, state: _FileState) -> None:
        async with write_transaction(self.db):
            await self._upsert_file(name, state)
        self._known[name] = state

    async def _remove(self, name: str) -> None:
        async with write_transaction(self.db):
            await self._delete_chunks(name)
            await self.db.execute("DELETE FROM memory_files WHERE path = ?", (name,))
        self._known.pop(name, None)

    async def _delete_chunks(self, name: str) -> None:
        # External-content FTS needs the old text to remove a row's index entries.
        await self.db.execute(
            "INSERT INTO memory_fts(memory_fts, rowid, text)"
            " SELECT 'delete', id, text FROM memory_chunks WHERE path = ?",
            (name,),
        )
        await self.db.execute("DELETE FROM memory_chunks WHERE path = ?", (name,))

    async def _upsert_file(self, name: str, state: _FileState) -> None:
        await self.db.execute(
            "INSERT OR REPLACE INTO memory_files(path, mtime_ns, size, hash, chunking, indexed_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (name, state.mtime_ns, state.size, state.digest, state.chunking, time.time()),
        )

    # --- searching --------------------------------------------------------------------------

    async def search(
        self,
        query: str,
        *,
        max_results: int | None = None,
        min_score: float | None = None,
        include_private: bool = True,
    ) -> list[SearchHit]:
        """The best snippets for `query`, best first, each scoring at least `min_score`
        (both default to `memory.search`).

        `include_private=False` (group sessions) leaves out MEMORY.md entirely.
        """
        max_results = self.config.search.max_results if max_results is None else max_results
        min_score = self.config.search.min_score if min_score is None else min_score
        plan = build_query(query)
        if plan.empty:
            return []
        await self.refresh()
        limit = max_results * CANDIDATE_FACTOR
        excluded = () if include_private else tuple(sorted(PRIVATE_FILES))
        candidates = await self._match(plan, limit, excluded) if plan.match_terms else []
        if not candidates and plan.like_terms:
            candidates = await self._substring(plan, limit, excluded)
        return self._rank(plan, candidates, max_results, min_score)

    async def _match(
        self, plan: QueryPlan, limit: int, excluded: tuple[str, ...]
    ) -> list[_Candidate]:
        counts = await self._term_counts(plan.match_terms)
        rare = [t for t, n in zip(plan.match_terms, counts, strict=True) if 0 < n < COMMON_ROWS]
        if rare:
            return await self._candidates(match_expression(rare), "rank", limit, excluded)
        if any(counts):  # only common terms: the newest chunks holding them, by coverage
            expression = match_expression(plan.match_terms)
            return await self._candidates(expression, "newest", RECENT_CANDIDATES, excluded)
        return []

    async def _term_counts(self, terms: tuple[str, ...]) -> list[int]:
        """Chunks holding each term, counted only up to COMMON_ROWS (so cheap), in one query."""
        probe = "(SELECT COUNT(*) FROM (SELECT 1 FROM memory_fts WHERE memory_fts MATCH ? LIMIT ?))"
        params: list[str | int] = []
        for term in terms:
            params += [match_expression([term]), COMMON_ROWS]
        async with self.db.execute("SELECT " + ", ".join([probe] * len(terms)), params) as cur:
            row = await cur.fetchone()
        return [int(n) for n in row] if row else [0] * len(terms)

    async def _candidates(
        self, expression: str, order: str, limit: int, excluded: tuple[str, ...]
    ) -> list[_Candidate]:
        """Top `limit` chunks matching `expression`, by BM25 (`order="rank"`) or newest first.

        Ordering and limiting happen inside the FTS query, so only the rows returned are
        joined with their text; excluded files are filtered there by rowid for the same reason.
        """
        marks = ",".join("?" * len(excluded))
        where = (
            f" AND rowid NOT IN (SELECT id FROM memory_chunks WHERE path IN ({marks}))"
            if excluded
            else ""
        )
        # bm25() is negative, lower is better; only computed when ranking by it.
        rank, by = ("bm25(memory_fts)", "rank") if order == "rank" else ("0.0", "rowid DESC")
        sql = (
            "SELECT c.path, c.start_line, c.text, m.rank FROM ("
            f"SELECT rowid, {rank} AS rank FROM memory_fts WHERE memory_fts MATCH ?{where}"
            f" ORDER BY {by} LIMIT ?) AS m JOIN memory_chunks c ON c.id = m.rowid"
        )
        async with self.db.execute(sql, (expression, *excluded, limit)) as cur:
            rows = await cur.fetchall()
        found = [_Candidate(r[0], r[1], r[2], float(r[3])) for r in rows]
        return sorted(found, key=lambda c: c.bm25) if order == "rank" else found

    async def _substring(
        self, plan: QueryPlan, limit: int, excluded: tuple[str, ...]
    ) -> list[_Candidate]:
        # A scan, not an index lookup: only reached when the trigram index found nothing.
        likes = " OR ".join("text LIKE ?" for _ in plan.like_terms)
        marks = ",".join("?" * len(excluded))
        where = f" AND path NOT IN ({marks})" if excluded else ""
        sql = (
            f"SELECT path, start_line, text FROM memory_chunks WHERE ({likes}){where}"
            " ORDER BY id DESC LIMIT ?"
        )
        params = (*(f"%{t}%" for t in plan.like_terms), *excluded, limit)
        async with self.db.execute(sql, params) as cur:
            rows = await cur.fetchall()
        return [_Candidate(r[0], r[1], r[2], 0.0) for r in rows]

    def _rank(
        self, plan: QueryPlan, candidates: list[_Candidate], max_results: int, min_score: float
    ) -> list[SearchHit]:
        if not candidates:
            return []
        best = min(c.bm25 for c in candidates)
        scored = [(blend_score(coverage(c.text, plan.terms), c.bm25, best), c) for c in candidates]
        # Stable sort: equal scores keep the candidates' order (BM25, or newest first).
        scored.sort(key=lambda pair: -pair[0])
        results: list[SearchHit] = []
        for score, c in scored:
            if score < min_score or score <= 0 or len(results) >= max_results:
                break
            # Snippets only for what is returned; overlapping chunks yield the same lines.
            snip = best_lines(c.text, c.start_line, plan.terms, self.snippet_max_chars)
            hit = SearchHit(c.path, snip.start_line, snip.end_line, score, snip.text)
            if not _overlaps(hit, results):
                results.append(hit)
        return results
