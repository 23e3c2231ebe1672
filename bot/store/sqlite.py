"""The SQLite adapter: one aiosqlite connection in WAL mode under the `Db` seam, and
`SQLiteStore`, the store over it (one file for one host).

Writes go through the one connection under a lock, each in a `BEGIN IMMEDIATE` transaction
(a lone statement outside `transaction()` is sent alone: SQLite makes it a transaction of
its own); readers in other processes (the CLI) see committed data thanks to WAL. Another
process holding the write lock (a backup, a CLI command, an operator's sqlite3 shell) makes
a write wait: SQLite's own busy handler waits a moment, then BEGIN (or the lone statement)
is tried again with growing pauses for up to `busy_wait` seconds before `StoreUnavailable`
is raised. The pauses happen in the event loop, so reads on the
connection go on meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO, Any, TypeVar

import aiosqlite

from bot.backoff import Backoff
from bot.errors import StoreUnavailable
from bot.store.backup import backup_database, hold_shared
from bot.store.db import Db, Queries, Row
from bot.store.dialects import SQLITE
from bot.store.store import SqlStore

log = logging.getLogger(__name__)
T = TypeVar("T")

# SQLite's own wait (in the database thread, which blocks every query on the connection)
# before a write lock attempt fails; BEGIN is then paused and tried again.
BUSY_TIMEOUT_MS = 1000
RETRY_FIRST = 0.1
RETRY_CAP = 2.0
# SQLITE_BUSY and SQLITE_LOCKED: another connection holds the lock, not a broken database.
_BUSY_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})
DEFAULT_BUSY_WAIT = 60.0


class _Statements(Queries):
    """Statements on the connection as they are: inside a write transaction."""

    dialect = SQLITE

    def __init__(self, connection: aiosqlite.Connection):
        self.connection = connection

    async def execute(self, sql: str, *args: Any) -> int:
        cursor = await self.connection.execute(sql, args)
        return cursor.rowcount

    async def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        await self.connection.executemany(sql, rows)

    # One round trip to the database thread: execute + fetch + close would be three.
    async def fetch(self, sql: str, *args: Any) -> list[Row]:
        return list(await self.connection.execute_fetchall(sql, args))


class SQLiteDb(Queries):
    """The database file (or ":memory:" for tests), opened by `open`."""

    dialect = SQLITE

    def __init__(self, path: Path | str, *, busy_wait: float = DEFAULT_BUSY_WAIT):
        self.path = path
        self.busy_wait = busy_wait
        self._connection: _Statements | None = None
        self._lock = asyncio.Lock()
        self._in_use: IO[bytes] | None = None  # tells `krill restore` the store is open

    @property
    def connection(self) -> _Statements:
        if self._connection is None:
            raise RuntimeError("store is not open")
        return self._connection

    async def open(self) -> None:
        if str(self.path) != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self._in_use = hold_shared(Path(self.path))
        connection = await aiosqlite.connect(str(self.path), isolation_level=None)
        self._connection = _Statements(connection)
        for pragma in (
            "PRAGMA journal_mode=WAL",
            "PRAGMA synchronous=NORMAL",
            f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}",
            "PRAGMA foreign_keys=ON",
        ):
            await connection.execute(pragma)

    async def close(self) -> None:
        if self._connection is not None:
            await self._connection.connection.close()
            self._connection = None
        if self._in_use is not None:
            self._in_use.close()
            self._in_use = None

    # A lone statement is its own transaction in SQLite: sent alone (under the lock, so it
    # never lands inside another task's transaction), it takes one hop to the database
    # thread instead of three (BEGIN, it, COMMIT), each hop costing more CPU than the SQL.
    async def execute(self, sql: str, *args: Any) -> int:
        async with self._lock:
            return await _when_free(lambda: self.connection.execute(sql, *args), self.busy_wait)

    async def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        async with self.transaction() as tx:
            await tx.executemany(sql, rows)

    async def fetch(self, sql: str, *args: Any) -> list[Row]:
        if sql.startswith(("SELECT", "PRAGMA")):  # a read needs no write lock
            return await self.connection.fetch(sql, *args)
        async with self._lock:  # an INSERT/UPDATE/DELETE … RETURNING, alone as `execute`
            return await _when_free(lambda: self.connection.fetch(sql, *args), self.busy_wait)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Db]:
        async with self._lock, write_transaction(self.connection.connection, self.busy_wait):
            yield self.connection

    async def integrity_check(self) -> str:
        return str(await self.fetchval("PRAGMA integrity_check") or "unknown")

    async def backup(self, target: Path, progress: Callable[[int, int], None] | None) -> None:
        await asyncio.to_thread(backup_database, Path(self.path), target, progress)


@asynccontextmanager
async def write_transaction(db: aiosqlite.Connection, busy_wait: float) -> AsyncIterator[None]:
    """One write transaction, safe under cancellation: aiosqlite runs statements in order
    even when the awaiting task is cancelled, so a BEGIN may still happen and must be paired
    with a ROLLBACK, or every later write on the connection fails."""
    try:
        await _begin(db, busy_wait)
        yield
        await asyncio.shield(db.execute("COMMIT"))
    except BaseException:
        await asyncio.shield(_rollback_quietly(db))
        raise


async def _begin(db: aiosqlite.Connection, busy_wait: float) -> None:
    """Take the write lock, waiting with bounded backoff while another connection holds it.
    Only BEGIN can meet a busy database: in WAL mode, once IMMEDIATE holds the lock, the
    statements after it and the COMMIT never wait for another writer."""
    await _when_free(lambda: db.execute("BEGIN IMMEDIATE"), busy_wait)


async def _when_free(write: Callable[[], Awaitable[T]], busy_wait: float) -> T:
    """Run `write` (BEGIN, or a lone statement), again with bounded backoff while another
    connection holds the write lock: a statement that meets a busy database has changed
    nothing yet."""
    deadline = time.monotonic() + busy_wait
    backoff = Backoff(RETRY_FIRST, RETRY_CAP)
    while True:
        try:
            return await write()
        except sqlite3.OperationalError as exc:
            left = deadline - time.monotonic()
            # The primary code: a lone write can also meet SQLITE_BUSY_SNAPSHOT.
            if exc.sqlite_errorcode & 0xFF not in _BUSY_CODES:
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


class SQLiteStore(SqlStore):
    """The embedded store (WAL mode). `path` may be ":memory:" for tests."""

    def __init__(self, path: Path | str, *, busy_wait: float = DEFAULT_BUSY_WAIT):
        super().__init__(SQLiteDb(path, busy_wait=busy_wait))
        self.path = path
