"""The PostgreSQL store, for several replicas sharing one database: one object over one
connection pool, composed of a class per concern."""

from bot.store.postgres.connection import Connection
from bot.store.postgres.memory_index import MemoryIndexTables
from bot.store.postgres.shared_state import SharedStateTables


class PostgresStore(
    MemoryIndexTables,
    SharedStateTables,
    Connection,
):
    """The server store (`storage.url = "postgresql://…"`)."""


__all__ = ["PostgresStore"]
