"""The one store implementation: every concern's tables over one `Database` (SQLite or
PostgreSQL, bot/store/sqlite.py and bot/store/postgres.py), with its schema migrated when
it opens."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from bot.store.choices import ChoiceTables
from bot.store.costs import CostTables
from bot.store.db import Database
from bot.store.inbound import InboundTables
from bot.store.jobs import JobTables
from bot.store.leases import LeaseTables
from bot.store.memory_index import MemoryIndexTables
from bot.store.migrations import migrate, schema_version
from bot.store.names import NameTables
from bot.store.outbox import OutboxTables
from bot.store.pairings import PairingTables
from bot.store.reminders import ReminderTables
from bot.store.retention import RetentionTables
from bot.store.schedules import ScheduleTables
from bot.store.sessions import SessionTables
from bot.store.shared_state import SharedStateTables
from bot.store.transcript import TranscriptTables
from bot.store.turns import TurnTables


class SqlStore(
    SessionTables,
    TranscriptTables,
    TurnTables,
    InboundTables,
    OutboxTables,
    PairingTables,
    RetentionTables,
    JobTables,
    ReminderTables,
    ScheduleTables,
    LeaseTables,
    MemoryIndexTables,
    SharedStateTables,
    ChoiceTables,
    CostTables,
    NameTables,
):
    """Everything the service persists, over `db` (not yet opened)."""

    def __init__(self, db: Database):
        self.db: Database = db

    async def open(self) -> None:
        await self.db.open()
        await migrate(self.db)

    async def close(self) -> None:
        await self.db.close()

    async def schema_version(self) -> int:
        return await schema_version(self.db)

    async def integrity_check(self) -> str:
        return await self.db.integrity_check()

    async def backup(self, target: Path, progress: Callable[[int, int], None] | None) -> None:
        """A consistent copy of everything at `target` while the store stays in use;
        `progress(done, total)` is called as it goes."""
        await self.db.backup(target, progress)
