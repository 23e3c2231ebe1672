"""The PostgreSQL store, for several replicas sharing one database: one object over one
connection pool, composed of a class per concern."""

from bot.store.postgres.connection import Connection
from bot.store.postgres.inbound import InboundTables
from bot.store.postgres.jobs import JobTables
from bot.store.postgres.leases import LeaseTables
from bot.store.postgres.memory_index import MemoryIndexTables
from bot.store.postgres.outbox import OutboxTables
from bot.store.postgres.pairings import PairingTables
from bot.store.postgres.reminders import ReminderTables
from bot.store.postgres.retention import RetentionTables
from bot.store.postgres.sessions import SessionTables
from bot.store.postgres.shared_state import SharedStateTables
from bot.store.postgres.transcript import TranscriptTables
from bot.store.postgres.turns import TurnTables


class PostgresStore(
    SessionTables,
    TranscriptTables,
    TurnTables,
    InboundTables,
    OutboxTables,
    PairingTables,
    RetentionTables,
    JobTables,
    ReminderTables,
    LeaseTables,
    MemoryIndexTables,
    SharedStateTables,
    Connection,
):
    """The server store (`storage.url = "postgresql://…"`)."""


__all__ = ["PostgresStore"]
