"""The seam between the store and a database driver: `Db`, what every concern module runs
its SQL through (written once, with `?` placeholders), and `Dialect`, the few things the
two databases really do differently (the two are in bot/store/dialects.py). The adapters
are bot/store/sqlite.py and bot/store/postgres.py; each concern (sessions, transcript,
outbox, …) is written once against these.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from bot.store.search import Search

# The namespaces of `lock_key`: a session key's creation and replacement, a session's
# transcript appends, the schema's migrations, and a memory file's index rows.
SCHEMA_LOCK = 0
SESSION_KEY_LOCK = 1
TRANSCRIPT_LOCK = 2
MEMORY_FILE_LOCK = 3


class Row(Protocol):
    """A stored row as either driver returns it (an aiosqlite row, an asyncpg record), read
    by position."""

    def __getitem__(self, index: int, /) -> Any: ...
    def __iter__(self) -> Iterator[Any]: ...
    def __len__(self) -> int: ...


class Db(Protocol):
    """One database, or one transaction on it. SQL uses `?` placeholders. A statement
    outside `transaction()` is its own transaction (tried again while the database is
    locked or the connection is being replaced); inside, nothing is retried: a failure rolls
    the whole transaction back."""

    dialect: Dialect

    async def execute(self, sql: str, *args: Any) -> int:
        """Run one statement; the number of rows it changed."""
        ...

    async def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None: ...
    async def fetch(self, sql: str, *args: Any) -> list[Row]: ...
    async def fetchrow(self, sql: str, *args: Any) -> Row | None: ...
    async def fetchval(self, sql: str, *args: Any) -> Any:
        """The first column of the first row (None: no row)."""
        ...

    def transaction(self) -> AbstractAsyncContextManager[Db]:
        """A write transaction; on a transaction, the same one."""
        ...


class Database(Db, Protocol):
    """A `Db` that opens and closes: what the store is built over."""

    async def open(self) -> None: ...
    async def close(self) -> None: ...
    async def integrity_check(self) -> str: ...
    async def backup(self, target: Path, progress: Callable[[int, int], None] | None) -> None:
        """A consistent copy at `target` while the database stays in use."""


class Queries:
    """What both adapters do alike: `fetchrow` and `fetchval` over the driver's `fetch`,
    and `transaction()` on statements that already run in one (it joins it)."""

    async def fetch(self, sql: str, *args: Any) -> list[Row]:
        raise NotImplementedError

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Any]:
        yield self

    async def fetchrow(self, sql: str, *args: Any) -> Row | None:
        rows = await self.fetch(sql, *args)
        return rows[0] if rows else None

    async def fetchval(self, sql: str, *args: Any) -> Any:
        row = await self.fetchrow(sql, *args)
        return row[0] if row else None


@dataclass(frozen=True, slots=True)
class Dialect:
    """What differs between the databases, and nothing else."""

    name: str
    # Takes a lock on (namespace, key) until the transaction ends: two replicas' writes to
    # one key take turns. "" where a write transaction already excludes every other writer.
    key_lock: str
    # Ends a SELECT of rows about to be claimed: rows another writer is claiming are passed
    # over instead of waited for. "" where writers are serial anyway.
    skip_locked: str
    # Whether a list is passed as one array parameter (`= ANY(?)`) or as one `?` per value.
    arrays: bool
    generated_key: str  # the DDL of a table's generated integer key (`{key}` in a schema)
    search: Search  # the memory index's full-text search

    def one_of(self, column: str, values: Sequence[Any]) -> tuple[str, tuple[Any, ...]]:
        """A condition that `column` is one of `values`, and its arguments."""
        if self.arrays:
            return f"{column} = ANY(?)", (list(values),)
        return f"{column} IN ({', '.join('?' * len(values))})", tuple(values)

    async def lock_key(self, tx: Db, namespace: int, key: str) -> None:
        """Hold (namespace, key) until `tx` ends, where writers can run side by side."""
        if self.key_lock:
            await tx.execute(self.key_lock, namespace, key)
