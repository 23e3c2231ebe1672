"""The PostgreSQL adapter: an asyncpg pool under the `Db` seam (the store's `?` placeholders
numbered for it), and `PostgresStore`, the store over it, which several replicas share.

Nothing here relies on a process lock: writes that must take turns across replicas take a
transaction-scoped advisory lock (`Dialect.lock_key`), and every multi-statement change is
one transaction on one pooled connection.

A server that restarts or a connection that drops is not fatal: the pool opens new
connections, and a single statement (or the BEGIN of a transaction) that met a broken
connection is tried again, with growing pauses, for up to `busy_wait` seconds before
`StoreUnavailable` is raised. A server that cannot be reached at start-up is tried for
`connect_wait` seconds.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import asyncpg
from asyncpg.pool import PoolConnectionProxy
from asyncpg.transaction import Transaction

from bot.backoff import Backoff
from bot.errors import StoreUnavailable
from bot.store.db import Db, Queries, Row
from bot.store.dialects import POSTGRES
from bot.store.open_errors import masked_url
from bot.store.store import SqlStore

log = logging.getLogger(__name__)

DEFAULT_BUSY_WAIT = 60.0
DEFAULT_CONNECT_WAIT = 30.0
RETRY_FIRST = 0.2
RETRY_CAP = 2.0
POOL_MIN = 1
POOL_MAX = 10

# What a dropped connection or an unreachable server looks like; anything else (a
# constraint violation, bad SQL) is a bug to surface at once, not a reason to wait.
_CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    asyncpg.PostgresConnectionError,
    asyncpg.InterfaceError,
    asyncpg.CannotConnectNowError,
    asyncpg.AdminShutdownError,
    asyncpg.CrashShutdownError,
    asyncpg.TooManyConnectionsError,
    # What asyncpg raises when the server closed a pooled connection under it.
    asyncpg.InternalClientError,
)

T = TypeVar("T")


@functools.lru_cache(maxsize=1024)
def numbered(sql: str) -> str:
    """`sql` with each `?` replaced by the next $n (the store's SQL has no `?` in literals)."""
    count = itertools.count(1)
    return re.sub(r"\?", lambda _: f"${next(count)}", sql)


def rowcount(status: str) -> int:
    """The rows a statement touched, from asyncpg's status string ("UPDATE 3")."""
    return int(status.rsplit(" ", 1)[-1]) if status[-1:].isdigit() else 0


class _Statements(Queries):
    """Statements on one pooled connection, inside its transaction."""

    dialect = POSTGRES

    def __init__(self, connection: PoolConnectionProxy):
        self.connection = connection

    async def execute(self, sql: str, *args: Any) -> int:
        return rowcount(await self.connection.execute(numbered(sql), *args))

    async def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        await self.connection.executemany(numbered(sql), rows)

    async def fetch(self, sql: str, *args: Any) -> list[Row]:
        return list(await self.connection.fetch(numbered(sql), *args))


class PostgresDb(Queries):
    """The database at `url`, through a pool opened by `open`."""

    dialect = POSTGRES

    def __init__(
        self,
        url: str,
        *,
        busy_wait: float = DEFAULT_BUSY_WAIT,
        connect_wait: float = DEFAULT_CONNECT_WAIT,
    ):
        self.url = url
        self.busy_wait = busy_wait
        self.connect_wait = connect_wait
        self._pool: asyncpg.Pool | None = None

    @property
    def pool(self) -> asyncpg.Pool:
        if self._pool is None:
            raise RuntimeError("store is not open")
        return self._pool

    async def open(self) -> None:
        self._pool = await self._retrying(
            lambda: asyncpg.create_pool(self.url, min_size=POOL_MIN, max_size=POOL_MAX),
            wait=self.connect_wait,
            failing=f"cannot reach the database at {masked_url(self.url)}",
        )

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    async def execute(self, sql: str, *args: Any) -> int:
        return rowcount(await self._retrying(lambda: self.pool.execute(numbered(sql), *args)))

    async def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        await self._retrying(lambda: self.pool.executemany(numbered(sql), rows))

    async def fetch(self, sql: str, *args: Any) -> list[Row]:
        return list(await self._retrying(lambda: self.pool.fetch(numbered(sql), *args)))

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Db]:
        """One transaction on one pooled connection. BEGIN is retried like a single
        statement: after a server restart every idle pooled connection is dead, and nothing
        has run yet. A connection that breaks later is `StoreUnavailable`: the caller's work
        is not half-done, it was rolled back."""
        connection, transaction = await self._retrying(self._begin)
        try:
            yield _Statements(connection)
            await transaction.commit()
        except _CONNECTION_ERRORS as exc:
            raise StoreUnavailable(f"the database connection failed ({_describe(exc)})") from exc
        except BaseException:
            await _rollback_quietly(transaction)
            raise
        finally:
            await self.pool.release(connection)

    async def _begin(self) -> tuple[PoolConnectionProxy, Transaction]:
        connection = await self.pool.acquire()
        transaction = connection.transaction()
        try:
            await transaction.start()
        except BaseException:
            await self.pool.release(connection)
            raise
        return connection, transaction

    async def integrity_check(self) -> str:
        # The server checks its own pages; what Krill can check is that it answers.
        await self.fetchval("SELECT 1")
        return "ok"

    async def backup(self, target: Path, progress: Callable[[int, int], None] | None) -> None:
        raise StoreUnavailable(
            "krill backup copies the SQLite file only; back up PostgreSQL with pg_dump "
            f"({masked_url(self.url)})"
        )

    async def _retrying(
        self,
        call: Callable[[], Awaitable[T]],
        *,
        wait: float | None = None,
        failing: str = "the database was unreachable",
    ) -> T:
        """`call` (a statement, a BEGIN, opening the pool), tried again while the connection
        or server is away: for `wait` seconds (`busy_wait` unless given), then
        `StoreUnavailable` saying what was `failing`."""
        patience = self.busy_wait if wait is None else wait
        deadline = time.monotonic() + patience
        backoff = Backoff(RETRY_FIRST, RETRY_CAP)
        while True:
            try:
                return await call()
            except _CONNECTION_ERRORS as exc:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise StoreUnavailable(
                        f"{failing} for {patience:.0f}s ({_describe(exc)})"
                    ) from exc
                if backoff.failures == 0:
                    log.warning(
                        "store: %s (%s); trying again for up to %.0fs",
                        failing,
                        _describe(exc),
                        patience,
                    )
                await asyncio.sleep(min(backoff.next(), left))


async def _rollback_quietly(transaction: Transaction) -> None:
    try:
        await transaction.rollback()
    except _CONNECTION_ERRORS:
        pass  # the connection is gone, and the transaction with it


def _describe(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


class PostgresStore(SqlStore):
    """The server store (`storage.url = "postgresql://…"`)."""

    def __init__(
        self,
        url: str,
        *,
        busy_wait: float = DEFAULT_BUSY_WAIT,
        connect_wait: float = DEFAULT_CONNECT_WAIT,
    ):
        super().__init__(PostgresDb(url, busy_wait=busy_wait, connect_wait=connect_wait))
        self.url = url
