"""Benchmark: the memory index at scale. Generates a year and more of daily notes (about
10,000 chunks of 400 tokens), builds the FTS5 index from scratch, then measures re-indexing
one changed file and search latency (each search includes the freshness check that stats
every memory file first, as in production).

Targets: search p95 under 20 ms, one-file reindex under 100 ms.

With --postgres the same runs against the PostgreSQL store (pg_trgm, BM25 in SQL) on a
throwaway server started from the PostgreSQL binaries (tests/postgres.py).

Run: python bench/memory.py [--chunks 10000] [--queries 300] [--seed 7] [--postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.config import MemoryConfig
from bot.memory.chunking import CHARS_PER_TOKEN
from bot.memory.index import MemoryIndex
from bot.memory.scopes import scope_of, visible_scopes
from bot.store.postgres import PostgresStore
from bot.store.sqlite import SQLiteStore
from tests.postgres import PostgresCluster, find_bin_dir

CHUNK_TOKENS = 400
OVERLAP_TOKENS = 80
# Consecutive chunks share OVERLAP_TOKENS, so each adds about this many new characters.
STRIDE_CHARS = (CHUNK_TOKENS - OVERLAP_TOKENS) * CHARS_PER_TOKEN
CHUNKS_PER_FILE = 20
SEARCH_TARGET_MS = 20.0
REINDEX_TARGET_MS = 100.0
REINDEX_ROUNDS = 20

PEOPLE = ["Alice", "Bob", "Mia", "Sam", "Priya", "Kenji", "Lena", "Omar", "Zoe", "Tomás"]
TOPICS = [
    "dentist appointment", "staging deploy", "piano lessons", "flight to Lisbon",
    "quarterly budget", "garden irrigation", "database migration", "birthday dinner",
    "kernel upgrade", "tax return", "marathon training", "book club", "car service",
    "invoice 4471", "roof repair", "conference talk", "visa renewal", "backup rotation",
]  # fmt: skip
VERBS = ["asked about", "decided on", "postponed", "confirmed", "wants to revisit", "finished"]
CJK = ["会议改到周五下午", "美式咖啡不加糖", "来週の打ち合わせ", "プロジェクトの締め切り"]


def note_line(rng: random.Random, day: int, minute: int) -> str:
    person, topic, verb = rng.choice(PEOPLE), rng.choice(TOPICS), rng.choice(VERBS)
    extra = rng.choice(CJK) if rng.random() < 0.05 else f"ref {rng.randint(1000, 99999)}"
    return (
        f"- [{day:03d} {minute // 60:02d}:{minute % 60:02d}] {person} {verb} the {topic}; "
        f"next step agreed with {rng.choice(PEOPLE)} ({extra})."
    )


# Searches as a person's DM does, so the scope filter is part of what is measured.
DM_VIEW = visible_scopes(scope_of(None, "agent:main:telegram:direct:42"), admin=False)


def write_notes(workspace: Path, chunks: int, rng: random.Random) -> int:
    """Daily notes sized so that indexing them yields about `chunks` chunks."""
    files = max(1, chunks // CHUNKS_PER_FILE)
    notes = workspace / "memory"
    notes.mkdir(parents=True)
    per_file = CHUNKS_PER_FILE * STRIDE_CHARS
    for day in range(files):
        lines = [f"# day {day:03d}", ""]
        size = 0
        minute = 0
        while size < per_file:
            line = note_line(rng, day, minute % 1440)
            lines.append(line)
            size += len(line) + 1
            minute += 7
        (notes / f"2025-{day:04d}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (workspace / "MEMORY.md").write_text("# Memory\n\n- Alice prefers oat flat whites.\n")
    return files + 1


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


async def run(chunks: int, queries: int, seed: int, postgres_url: str | None) -> bool:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        workspace = root / "workspace"
        files = write_notes(workspace, chunks, rng)
        store: SQLiteStore | PostgresStore = (
            PostgresStore(postgres_url) if postgres_url else SQLiteStore(root / "krill.db")
        )
        await store.open()
        config = MemoryConfig(chunk_tokens=CHUNK_TOKENS, chunk_overlap_tokens=OVERLAP_TOKENS)
        index = MemoryIndex(store, workspace, config)
        try:
            started = time.perf_counter()
            await index.refresh()
            build = time.perf_counter() - started
            indexed_files, indexed_chunks = await index.stats()

            reindex: list[float] = []
            note = workspace / "memory" / "2025-0007.md"
            for i in range(REINDEX_ROUNDS):
                with note.open("a", encoding="utf-8") as fh:
                    fh.write(note_line(rng, 7, i) + "\n")
                started = time.perf_counter()
                report = await index.refresh()
                reindex.append((time.perf_counter() - started) * 1000)
                assert report.indexed == ["memory/2025-0007.md"], report

            latencies: list[float] = []
            hits = 0
            for _ in range(queries):
                words = rng.sample([*PEOPLE, *TOPICS, *CJK], rng.randint(1, 3))
                query = "what happened with " + " and ".join(words) + "?"
                started = time.perf_counter()
                found = await index.search(query, DM_VIEW)
                latencies.append((time.perf_counter() - started) * 1000)
                hits += bool(found)
        finally:
            await store.close()

    search_p95 = percentile(latencies, 0.95)
    reindex_p95 = percentile(reindex, 0.95)
    rows = [
        ("files / chunks indexed", f"{indexed_files} / {indexed_chunks}", ""),
        ("index build (from scratch)", f"{build:.2f} s", ""),
        (
            "one-file reindex p50 / p95",
            f"{statistics.median(reindex):.1f} / {reindex_p95:.1f} ms",
            f"< {REINDEX_TARGET_MS:.0f} ms",
        ),
        (
            "search p50 / p95",
            f"{statistics.median(latencies):.1f} / {search_p95:.1f} ms",
            f"< {SEARCH_TARGET_MS:.0f} ms",
        ),
        ("queries with a hit", f"{hits} / {queries}", ""),
    ]
    kind = "PostgreSQL" if postgres_url else "SQLite"
    print(f"Memory index benchmark, {kind} ({files} files generated, seed {seed})\n")
    print(f"| {'measure':<28} | {'result':<22} | {'target':<8} |")
    print(f"|{'-' * 30}|{'-' * 24}|{'-' * 10}|")
    for name, value, target in rows:
        print(f"| {name:<28} | {value:<22} | {target:<8} |")
    ok = search_p95 < SEARCH_TARGET_MS and reindex_p95 < REINDEX_TARGET_MS
    print("\nall targets met" if ok else "\nTARGET MISSED")
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--postgres", action="store_true", help="use a throwaway PostgreSQL")
    args = parser.parse_args()
    if not args.postgres:
        ok = asyncio.run(run(args.chunks, args.queries, args.seed, None))
        sys.exit(0 if ok else 1)
    bin_dir = find_bin_dir()
    if bin_dir is None:
        sys.exit("PostgreSQL server binaries not found (install Debian's postgresql package)")
    cluster = PostgresCluster(bin_dir).start()
    try:
        ok = asyncio.run(run(args.chunks, args.queries, args.seed, cluster.new_database()))
    finally:
        cluster.stop()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
