"""`krill memory search QUERY` and `krill memory reindex`: the memory index from the shell.

Both work while the service runs: the index lives in the store, and every change is keyed
by file path, so two processes refreshing it agree.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

from bot.config import Config
from bot.memory.index import MemoryIndex
from bot.memory.tools import format_hits
from bot.startup import open_store
from bot.store.base import VisiblePaths
from bot.store.factory import store_for


async def run_memory_command(
    config: Config,
    args: argparse.Namespace,
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """`progress(done, total)` follows a reindex file by file (the CLI shows it on a
    terminal)."""
    store = store_for(config)
    await open_store(store, config)  # runs the migrations that create the index tables
    index = MemoryIndex(store, config.workspace_dir, config.memory)
    try:
        if args.action == "reindex":
            started = time.perf_counter()
            report = await index.refresh(force=True, progress=progress)
            files, chunks = await index.stats()
            elapsed = (time.perf_counter() - started) * 1000
            print(
                f"indexed {files} file(s), {chunks} chunk(s) from {config.workspace_dir} "
                f"in {elapsed:.0f} ms ({len(report.removed)} removed)"
            )
            return 0
        query = " ".join(args.query).strip()
        if not query:
            print("krill memory search: a QUERY is required", file=sys.stderr)
            return 1
        # The operator at the shell sees every scope.
        hits = await index.search(query, VisiblePaths(everything=True), max_results=args.limit)
        print(format_hits(hits) if hits else f"no memory matches {query!r}")
        return 0
    finally:
        await store.close()
