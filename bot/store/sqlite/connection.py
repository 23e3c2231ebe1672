"""The SQLite store's connection: one aiosqlite connection in WAL mode, schema migrations,
and the write-transaction helper every write goes through.

Writes go through one connection guarded by a lock, so every multi-statement change is one
transaction; readers in other processes (the CLI) see committed data thanks to WAL.

Another process holding the write lock (a backup, a CLI command, an operator's sqlite3
shell) makes a write wait: SQLite's own busy handler waits a moment, then the write is tried
again with growing pauses for up to `busy_wait` seconds before `StoreUnavailable` is raised.
The pauses happen in the event loop, so reads on the connection go on meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO, Any, Literal

import aiosqlite

from bot.backoff import Backoff
from bot.errors import StoreUnavailable
from bot.store.sqlite.backup import Progress, backup_database, hold_shared
from bot.store.sqlite.migrations import BACKFILLS, MIGRATIONS

log = logging.getLogger(__name__)

# SQLite's own wait (in the database thread, which blocks every query on the connection)
# before a write lock attempt fails; `write_transaction` then pauses and tries again.
BUSY_TIMEOUT_MS = 1000
RETRY_FIRST = 0.1
RETRY_CAP = 2.0
# SQLITE_BUSY and SQLITE_LOCKED: another connection holds the lock, not a broken database.
_BUSY_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})
DEFAULT_BUSY_WAIT = 60.0


class Connection:
    """Opens, migrates and closes the database; the per-concern tables build on it.
    `path` may be ":memory:" for tests."""

    def __init__(
        self,
        path: Path | str,
        *,
        synchronous: Literal["normal", "full"] = "normal",
        busy_wait: float = DEFAULT_BUSY_WAIT,
    ):
        self.path = path
        self.synchronous = synchronous
        self.busy_wait = busy_wait
        self._db: aiosqlite.Connection | None = None
        self._lock = asyncio.Lock()
        self._in_use: IO[bytes] | None = None  # tells `krill restore` the store is open

    @property
    def db(self) -> aiosqlite.Connection:
        if self._db is None:
            raise RuntimeError("store is not open")
        return self._db

    async def open(self) -> None:
        if str(self.path) != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self._in_use = hold_shared(Path(self.path))
        self._db = await aiosqlite.connect(str(self.path), isolation_level=None)
        for pragma in (
            "PRAGMA journal_mode=WAL",
            f"PRAGMA synchronous={self.synchronous.upper()}",
            f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}",
            "PRAGMA foreign_keys=ON",
        ):
            await self.db.execute(pragma)
        await self._migrate()

    async def close(self) -> None:
        if self._db is not None:
            await self._db.close()
            self._db = None
        if self._in_use is not None:
            self._in_use.close()
            self._in_use = None

    async def backup(self, target: Path, progress: Progress | None = None) -> None:
        """Write a consistent copy of the database to `target`, while it stays in use."""
        await asyncio.to_thread(backup_database, Path(self.path), target, progress)

    async def _migrate(self) -> None:
        await self.db.execute(
            "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)"
        )
        current = await self.schema_version()
        for version, sql in MIGRATIONS:
            if version <= current:
                continue
            log.info("store: applying schema migration %d", version)
            async with self.transaction() as db:
                for statement in _split_sql(sql):
                    await db.execute(statement)
                if version in BACKFILLS:
                    await BACKFILLS[version](db)
                await db.execute("INSERT INTO schema_version(version) VALUES (?)", (version,))

    async def schema_version(self) -> int:
        row = await self._fetchone("SELECT MAX(version) FROM schema_version")
        return int(row[0] or 0) if row else 0

    async def integrity_check(self) -> str:
        row = await self._fetchone("PRAGMA integrity_check")
        return str(row[0]) if row else "unknown"

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[aiosqlite.Connection]:
        async with self._lock, write_transaction(self.db, self.busy_wait) as db:
            yield db

    # One round trip to the database thread each: execute + fetch + close would be three.
    async def _fetchone(self, sql: str, params: Iterable[Any] = ()) -> aiosqlite.Row | None:
        return await fetchone(self.db, sql, params)

    async def _fetchall(self, sql: str, params: Iterable[Any] = ()) -> list[aiosqlite.Row]:
        return list(await self.db.execute_fetchall(sql, tuple(params)))


async def fetchone(
    db: aiosqlite.Connection, sql: str, params: Iterable[Any] = ()
) -> aiosqlite.Row | None:
    rows = await db.execute_fetchall(sql, tuple(params))
    return next(iter(rows), None)


@asynccontextmanager
async def write_transaction(
    db: aiosqlite.Connection, busy_wait: float = DEFAULT_BUSY_WAIT
) -> AsyncIterator[aiosqlite.Connection]:
    """One write transaction, safe under cancellation: aiosqlite runs statements in order
    even when the awaiting task is cancelled, so a BEGIN may still happen and must be paired
    with a ROLLBACK, or every later write on the connection fails."""
    try:
        await _begin(db, busy_wait)
        yield db
        await asyncio.shield(db.execute("COMMIT"))
    except BaseException:
        await asyncio.shield(_rollback_quietly(db))
        raise


async def _begin(db: aiosqlite.Connection, busy_wait: float) -> None:
    """Take the write lock, waiting with bounded backoff while another connection holds it.
    Only BEGIN can meet a busy database: in WAL mode, once IMMEDIATE holds the lock, the
    statements after it and the COMMIT never wait for another writer."""
    deadline = time.monotonic() + busy_wait
    backoff = Backoff(RETRY_FIRST, RETRY_CAP)
    while True:
        try:
            await db.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as exc:
            left = deadline - time.monotonic()
            if exc.sqlite_errorcode not in _BUSY_CODES:
                raise
            if left <= 0:
                raise StoreUnavailable(
                    f"the database stayed locked for {busy_wait:.0f}s ({exc})"
                ) from exc
            pause = min(backoff.next(), left)
            if backoff.failures == 1:
                log.warning("store: the database is locked by another process; waiting")
            await asyncio.sleep(pause)


async def _rollback_quietly(db: aiosqlite.Connection) -> None:
    try:
        await db.execute("ROLLBACK")
    except sqlite3.OperationalError:
        pass  # no transaction was open: BEGIN failed, or COMMIT already went through


def _split_sql(script: str) -> list[str]:
    return [s.strip() for s in script.split(";") if s.strip()]
