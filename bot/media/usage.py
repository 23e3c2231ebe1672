"""How big the data folder is, by kind, for `krill status` and the console's health page:
the parts that grow while Krill runs (the database, received media, kept tool results and
the rest of the workspace), so an operator sees which one fills the disk before it is full."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from bot.config import Config
from bot.media.prepare import human_size
from bot.tools.results import RESULTS_DIR

# SQLite keeps recent writes beside the database until a checkpoint folds them in.
SQLITE_COMPANIONS = ("", "-wal", "-shm")


@dataclass(frozen=True)
class DiskUse:
    kind: str  # the key in `krill status --json`'s "disk" object
    label: str
    path: Path
    size: int  # bytes


def folder_size(path: Path) -> int:
    """Bytes of the files under `path` (links not followed; 0 when it does not exist)."""
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except FileNotFoundError:  # removed while we looked (retention, a reset)
                continue
    return total


def file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def data_use(config: Config) -> list[DiskUse]:
    """Each kind of data with its size. PostgreSQL's tables live on its server (ask it:
    `SELECT pg_size_pretty(pg_database_size(current_database()))`), so only files here count."""
    found = []
    if not config.uses_postgres:
        database = config.sqlite_path
        size = sum(file_size(Path(f"{database}{end}")) for end in SQLITE_COMPANIONS)
        found.append(DiskUse("database", "database", database, size))
    results = config.workspace_dir / RESULTS_DIR
    result_size = folder_size(results)
    found += [
        DiskUse("media", "media", config.media_dir, folder_size(config.media_dir)),
        DiskUse("tool_results", "tool results", results, result_size),
        DiskUse(
            "workspace",
            "workspace",
            config.workspace_dir,
            folder_size(config.workspace_dir) - result_size,
        ),
    ]
    return found


def disk_line(uses: list[DiskUse]) -> str:
    return "data: " + ", ".join(f"{use.label} {human_size(use.size)}" for use in uses)
