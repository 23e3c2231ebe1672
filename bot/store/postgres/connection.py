"""The PostgreSQL store's connection: an asyncpg pool, schema migrations run once across
replicas, and the helpers every query goes through.

Several `krill run` processes share one database, so nothing here relies on a process lock:
a migration runs under a transaction-scoped advisory lock, and every multi-statement change
is one transaction on one pooled connection.

A server that restarts or a connection that drops is not fatal: the pool opens new
connections, and a single statement that met a broken connection is tried again, with
growing pauses, for up to `busy_wait` seconds before `StoreUnavailable` is raised. A server
that cannot be reached at start-up is tried for `connect_wait` seconds.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import asyncpg
from asyncpg.pool import PoolConnectionProxy
from asyncpg.transaction import Transaction

from bot.backoff import Backoff
from bot.errors import StoreUnavailable
from bot.store.open_errors import masked_url
from bot.store.postgres.migrations import MIGRATIONS

log = logging.getLogger(__name__)

DEFAULT_BUSY_WAIT = 60.0
DEFAULT_CONNECT_WAIT = 30.0
RETRY_FIRST = 0.2
RETRY_CAP = 2.0
POOL_MIN = 1
POOL_MAX = 10
# Any constant works as long as every replica uses the same one: it only serialises
# migrations, so two replicas starting together do not both apply version N.
MIGRATION_LOCK = 0x6B72696C6C  # "krill"

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
# A pooled connection, as `transaction()` hands it out: it has Connection's query methods.
Db = PoolConnectionProxy


class Connection:
    """Opens, migrates and closes the pool; the per-concern tables build on it."""

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
        await self._migrate()

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    async def backup(self, target: Path, progress: Callable[[int, int], None] | None) -> None:
        raise StoreUnavailable(
            "krill backup copies the SQLite file only; back up PostgreSQL with pg_dump "
            f"({masked_url(self.url)})"
        )

    async def _migrate(self) -> None:
        async with self.transaction() as db:
            await db.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK)
            await db.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            current = await db.fetchval("SELECT COALESCE(MAX(version), 0) FROM schema_version")
            for version, sql in MIGRATIONS:
                if version <= current:
                    continue
                log.info("store: applying PostgreSQL schema migration %d", version)
                await db.execute(sql)
                await db.execute("INSERT INTO schema_version(version) VALUES ($1)", version)

    async def schema_version(self) -> int:
        return int(await self._fetchval("SELECT COALESCE(MAX(version), 0) FROM schema_version"))

    async def integrity_check(self) -> str:
        # The server checks its own pages; what Krill can check is that it answers.
        await self._fetchval("SELECT 1")
        return "ok"

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Db]:
        """One transaction on one pooled connection. BEGIN is retried like a single
        statement: after a server restart every idle pooled connection is dead, and nothing
        has run yet. A connection that breaks later is `StoreUnavailable`: the caller's work
        is not half-done, it was rolled back."""
        db, transaction = await self._retrying(self._begin)
        try:
            yield db
            await transaction.commit()
        except _CONNECTION_ERRORS as exc:
            raise StoreUnavailable(f"the database connection failed ({_describe(exc)})") from exc
        except BaseException:
            await _rollback_quietly(transaction)
            raise
        finally:
            await self.pool.release(db)

    async def _begin(self) -> tuple[Db, Transaction]:
        db = await self.pool.acquire()
        transaction = db.transaction()
        try:
            await transaction.start()
        except BaseException:
            await self.pool.release(db)
            raise
        return db, transaction

    async def _fetchone(self, sql: str, *args: Any) -> asyncpg.Record | None:
        return await self._retrying(lambda: self.pool.fetchrow(sql, *args))

    async def _fetchall(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        return await self._retrying(lambda: self.pool.fetch(sql, *args))

    async def _fetchval(self, sql: str, *args: Any) -> Any:
        return await self._retrying(lambda: self.pool.fetchval(sql, *args))

    async def _execute(self, sql: str, *args: Any) -> str:
        return await self._retrying(lambda: self.pool.execute(sql, *args))

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
