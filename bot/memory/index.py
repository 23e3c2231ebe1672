"""The memory index: a full-text index (trigrams, BM25 ranking) over chunks of MEMORY.md and
memory/**/*.md, kept in step with the files on disk.

The chunks live in the store (`MemoryIndexStore`), so every process using the store searches
the same index; this module decides what to index and how to rank. `refresh()` compares
each file's mtime and size with what was indexed, re-reads only what changed (and skips
files whose content hash did not change, or that another process sharing the store has
indexed already), and drops the chunks of deleted files; `search()` runs it first, so
results are never stale. With `[memory.embeddings]` set, ranking is
hybrid (keyword score blended with the cosine similarity of query and chunk, over the
keyword candidates and the newest chunks), and it falls back to keywords alone whenever the
endpoint fails.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from bot.config import MemoryConfig
from bot.memory.chunking import chunk_text
from bot.memory.embeddings import Embeddings, EmbeddingsUnavailable, cosine
from bot.memory.paths import iter_memory_files
from bot.memory.query import (
    BM25_FLOOR,
    QueryPlan,
    best_lines,
    blend_score,
    build_query,
    coverage,
)
from bot.store.base import ChunkMatch, IndexedChunk, IndexedFile, MemoryIndexStore, VisiblePaths

log = logging.getLogger(__name__)

# Candidates fetched per wanted result: re-scoring and de-duplicating overlapping chunks
# needs more than the final count.
CANDIDATE_FACTOR = 4
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
    """Search over the workspace's memory files, stored through the store. `open()` (which
    reads what is indexed already) before use."""

    def __init__(self, store: MemoryIndexStore, workspace: Path, config: MemoryConfig) -> None:
        self.store = store
        self.workspace = workspace
        self.config = config
        self.chunk_tokens = config.chunk_tokens
        self.overlap_tokens = config.chunk_overlap_tokens
        self.snippet_max_chars = config.search.snippet_max_chars
        self.embeddings = Embeddings(config.embeddings)
        # A change of chunk sizes must re-chunk every file, so it is part of each file's state.
        self._chunking = f"{self.chunk_tokens}/{self.overlap_tokens}"
        self._known: dict[str, IndexedFile] = {}
        self._lock = asyncio.Lock()

    async def stats(self) -> tuple[int, int]:
        """(files, chunks) currently indexed."""
        return await self.store.memory_stats()

    # --- keeping up with the files ----------------------------------------------------------

    async def refresh(
        self, *, force: bool = False, progress: Callable[[int, int], None] | None = None
    ) -> RefreshReport:
        """Bring the index in line with the files on disk; `force` re-reads every file.

        `progress(done, total)` is told after each file on disk, so a long reindex shows
        that it moves."""
        async with self._lock:
            started = time.perf_counter()
            report = RefreshReport()
            # The store, not this process, knows what is indexed: another process sharing it
            # and the workspace (a replica, `krill memory reindex`) may have indexed a change
            # already, or written an older version of a file after this one wrote a newer.
            self._known = {f.path: f for f in await self.store.memory_files()}
            on_disk = await asyncio.to_thread(_stat_all, self.workspace)
            for name in sorted(set(self._known) - set(on_disk)):
                await self._remove(name)
                report.removed.append(name)
            for done, (name, (real, mtime_ns, size)) in enumerate(sorted(on_disk.items()), 1):
                if progress is not None:
                    progress(done, len(on_disk))
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
        state = IndexedFile(name, mtime_ns, size, digest, self._chunking)
        same_content = known is not None and known.digest == digest
        if not force and same_content and known is not None and known.chunking == self._chunking:
            await self.store.memory_put_file(state, None)
            self._known[name] = state
            return False
        chunks = chunk_text(
            text, chunk_tokens=self.chunk_tokens, overlap_tokens=self.overlap_tokens
        )
        rows = [IndexedChunk(c.start_line, c.end_line, c.text) for c in chunks]
        await self.store.memory_put_file(state, rows)
        self._known[name] = state
        return True

    async def _remove(self, name: str) -> None:
        await self.store.memory_remove_file(name)
        self._known.pop(name, None)

    # --- searching --------------------------------------------------------------------------

    async def search(
        self,
        query: str,
        visible: VisiblePaths,
        *,
        max_results: int | None = None,
        min_score: float | None = None,
    ) -> list[SearchHit]:
        """The best snippets for `query` from the files `visible` allows (the filter runs
        inside the index query, before ranking and limits), best first, each scoring at
        least `min_score` (both default to `memory.search`)."""
        max_results = self.config.search.max_results if max_results is None else max_results
        min_score = self.config.search.min_score if min_score is None else min_score
        plan = build_query(query)
        if plan.empty:
            return []
        await self.refresh()
        limit = max_results * CANDIDATE_FACTOR
        candidates = await self._match(plan, limit, visible) if plan.match_terms else []
        if not candidates and plan.like_terms:
            candidates = await self.store.memory_substring(
                plan.like_terms, limit=limit, visible=visible
            )
        scored = self._keyword_scores(plan, candidates)
        if self.embeddings.enabled:
            try:
                scored = await self._hybrid_scores(query, plan, scored, visible)
            except EmbeddingsUnavailable as exc:
                log.warning("memory embeddings unavailable, keyword search only: %s", exc)
        return self._pick(plan, scored, max_results, min_score)

    async def _match(self, plan: QueryPlan, limit: int, visible: VisiblePaths) -> list[ChunkMatch]:
        terms = plan.match_terms
        counts = await self.store.memory_term_counts(terms, COMMON_ROWS)
        rare = [t for t, n in zip(terms, counts, strict=True) if 0 < n < COMMON_ROWS]
        if rare:
            return await self.store.memory_match(rare, ranked=True, limit=limit, visible=visible)
        if any(counts):  # only common terms: the newest chunks holding them, by coverage
            return await self.store.memory_match(
                terms, ranked=False, limit=RECENT_CANDIDATES, visible=visible
            )
        return []

    def _keyword_scores(
        self, plan: QueryPlan, candidates: list[ChunkMatch]
    ) -> list[tuple[float, ChunkMatch]]:
        if not candidates:
            return []
        best = min(c.rank for c in candidates)
        return [(blend_score(coverage(c.text, plan.terms), c.rank, best), c) for c in candidates]

    async def _hybrid_scores(
        self,
        query: str,
        plan: QueryPlan,
        keyword: list[tuple[float, ChunkMatch]],
        visible: VisiblePaths,
    ) -> list[tuple[float, ChunkMatch]]:
        """Keyword scores blended with vector similarity, over the keyword candidates and the
        newest chunks (which may share no word with the query: a paraphrase)."""
        cfg = self.config.embeddings
        pool = {(c.path, c.start_line): (score, c) for score, c in keyword}
        for c in await self.store.memory_recent(limit=cfg.recent_chunks, visible=visible):
            # Not a keyword hit: only its share of the terms counts, at the lowest BM25 weight.
            pool.setdefault((c.path, c.start_line), (coverage(c.text, plan.terms) * BM25_FLOOR, c))
        entries = list(pool.values())
        vectors = await self.embeddings.embed([query, *(c.text for _, c in entries)])
        weight = cfg.vector_weight
        return [
            ((1 - weight) * score + weight * max(0.0, cosine(vectors[0], vector)), c)
            for (score, c), vector in zip(entries, vectors[1:], strict=True)
        ]

    def _pick(
        self,
        plan: QueryPlan,
        scored: list[tuple[float, ChunkMatch]],
        max_results: int,
        min_score: float,
    ) -> list[SearchHit]:
        # Stable sort: equal scores keep the candidates' order (BM25, or newest first).
        scored = sorted(scored, key=lambda pair: -pair[0])
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
