"""The PostgreSQL store, for several replicas sharing one database: one object over one
connection pool, composed of a class per concern."""

from bot.store.postgres.connection import Connection
from bot.store.postgres.inbound import InboundTables
from bot.store.postgres.leases import LeaseTables
from bot.store.postgres.memory_index import MemoryIndexTables
from bot.store.postgres.outbox import OutboxTables


class PostgresStore(
    InboundTables,
    OutboxTables,
    LeaseTables,
    MemoryIndexTables,
    Connection,
):
    """The server store (`storage.url = "postgresql://…"`)."""


__all__ = ["PostgresStore"]
