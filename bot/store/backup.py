"""Copying the SQLite database while it is in use, and the lock that says it is in use.

Both directions use SQLite's online backup API, so a copy is consistent even while
`krill run` writes. Every process that opens the store holds a shared lock on a file beside
it; `krill restore` needs it exclusively, so it never overwrites a store someone has open.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from bot.errors import KrillError

# (pages copied, pages in all)
Progress = Callable[[int, int], None]
PAGES_PER_STEP = 256  # small steps let writers in between and progress move smoothly


class StoreInUse(KrillError):
    """Another process (`krill run`, `krill chat`, a CLI command) has the store open."""


def lock_path(database: Path) -> Path:
    return database.with_name(database.name + ".lock")


def hold_shared(database: Path) -> IO[bytes] | None:
    """Mark the store at `database` as open until the returned file is closed (or the
    process ends, however it ends). None when the folder is not writable to this process:
    then it cannot write the store either, and opening the database says so."""
    try:
        handle = lock_path(database).open("ab")
    except OSError:
        return None
    fcntl.flock(handle, fcntl.LOCK_SH)
    return handle


@contextlib.contextmanager
def exclusive(database: Path) -> Iterator[None]:
    """Hold the store's lock alone; raises StoreInUse when any process has it open."""
    database.parent.mkdir(parents=True, exist_ok=True)
    with lock_path(database).open("ab") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StoreInUse(
                f"the store {database} is open in a running Krill (krill run, krill chat or "
                "another command); stop it first"
            ) from None
        yield


def copy_database(source: sqlite3.Connection, target: Path, progress: Progress | None) -> None:
    """Copy `source` into a new database file at `target` (replaced if it exists)."""
    partial = target.with_name(target.name + ".partial")
    partial.unlink(missing_ok=True)
    with contextlib.closing(sqlite3.connect(partial)) as copy:
        source.backup(copy, pages=PAGES_PER_STEP, progress=_pages(progress))
        copy.execute("PRAGMA journal_mode=DELETE")  # one self-contained file
    os.replace(partial, target)


def backup_database(database: Path, target: Path, progress: Progress | None = None) -> None:
    """Copy the live database at `database` to `target`, consistent while others write."""
    with contextlib.closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True)) as live:
        copy_database(live, target, progress)


def restore_database(source: Path, target: Path, progress: Progress | None = None) -> None:
    """Overwrite the database at `target` with the one at `source`. Call it under
    `exclusive(target)`; leftover WAL files of the old database are removed first."""
    for suffix in ("-wal", "-shm"):
        target.with_name(target.name + suffix).unlink(missing_ok=True)
    with contextlib.closing(sqlite3.connect(f"file:{source}?mode=ro", uri=True)) as backup:
        check = backup.execute("PRAGMA integrity_check").fetchone()
        if not check or check[0] != "ok":
            raise KrillError(f"{source} is not a sound Krill database: {check}")
        copy_database(backup, target, progress)


def _pages(progress: Progress | None) -> Callable[[int, int, int], None] | None:
    if progress is None:
        return None

    def report(status: int, remaining: int, total: int) -> None:
        progress(total - remaining, total)

    return report
