"""The SQLite store: one object over one connection, composed of a class per concern."""

from bot.store.sqlite.connection import Connection
from bot.store.sqlite.inbound import InboundTables
from bot.store.sqlite.jobs import JobTables
from bot.store.sqlite.leases import LeaseTables
from bot.store.sqlite.memory_index import MemoryIndexTables
from bot.store.sqlite.outbox import OutboxTables
from bot.store.sqlite.pairings import PairingTables
from bot.store.sqlite.reminders import ReminderTables
from bot.store.sqlite.retention import RetentionTables
from bot.store.sqlite.sessions import SessionTables
from bot.store.sqlite.shared_state import SharedStateTables
from bot.store.sqlite.transcript import TranscriptTables
from bot.store.sqlite.turns import TurnTables


class SQLiteStore(
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
    """The embedded store (WAL mode). `path` may be ":memory:" for tests."""


__all__ = ["SQLiteStore"]
