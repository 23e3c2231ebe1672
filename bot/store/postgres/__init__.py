"""The PostgreSQL store, for several replicas sharing one database: one object over one
connection pool, composed of a class per concern."""

from bot.store.postgres.connection import Connection


class PostgresStore(
    Connection,
):
    """The server store (`storage.url = "postgresql://…"`)."""


__all__ = ["PostgresStore"]
