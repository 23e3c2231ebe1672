"""The memory index's records as the store passes them (bot/memory/index.py decides what
to index and ranks; the store keeps the chunks under a full-text index)."""

from __future__ import annotations

from dataclasses import dataclass


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
