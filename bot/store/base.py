"""The one narrow interface the core uses for persistence, and the records it passes: each
concern module (bot/store/sessions.py, transcript.py, outbox.py, …) holds its records, its
protocol and its tables; `Store` is all of them. Nothing outside `bot/store/` depends on
which database is behind it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from bot.store.choices import ChoiceStore
from bot.store.costs import CostStore
from bot.store.inbound import BufferedLine, InboundRow, InboundStatus, InboundStore
from bot.store.jobs import JobStore
from bot.store.leases import LeaseStore
from bot.store.memory_index import (
    ChunkMatch,
    IndexedChunk,
    IndexedFile,
    MemoryIndexStore,
    VisiblePaths,
)
from bot.store.names import NameStore
from bot.store.outbox import OutboxStore
from bot.store.pairings import Pairing, PairingStatus, PairingStore
from bot.store.reminders import Reminder, ReminderStatus, ReminderStore
from bot.store.retention import Pruned, RetentionStore
from bot.store.schedules import JobState, RunRecord, ScheduledJob, ScheduleStore
from bot.store.sessions import ContextPlanStore, SessionRow, SessionStore
from bot.store.shared_state import SharedStateStore
from bot.store.transcript import TranscriptStore, UsagePoint, UsageStore
from bot.store.turns import TurnStore

__all__ = [
    "BufferedLine",
    "ChoiceStore",
    "ChunkMatch",
    "ContextPlanStore",
    "CostStore",
    "InboundRow",
    "InboundStatus",
    "InboundStore",
    "IndexedChunk",
    "IndexedFile",
    "JobState",
    "JobStore",
    "LeaseStore",
    "MemoryIndexStore",
    "NameStore",
    "OutboxStore",
    "Pairing",
    "PairingStatus",
    "PairingStore",
    "Pruned",
    "Reminder",
    "ReminderStatus",
    "ReminderStore",
    "RetentionStore",
    "RunRecord",
    "ScheduleStore",
    "ScheduledJob",
    "SessionRow",
    "SessionStore",
    "SharedStateStore",
    "Store",
    "TranscriptStore",
    "TurnStore",
    "UsagePoint",
    "UsageStore",
    "VisiblePaths",
]


class Store(
    SessionStore,
    ContextPlanStore,
    TranscriptStore,
    UsageStore,
    TurnStore,
    InboundStore,
    OutboxStore,
    PairingStore,
    RetentionStore,
    JobStore,
    ReminderStore,
    ScheduleStore,
    LeaseStore,
    MemoryIndexStore,
    SharedStateStore,
    ChoiceStore,
    CostStore,
    NameStore,
    Protocol,
):
    """Everything the service persists; a consumer asks for the narrow part it uses."""

    async def open(self) -> None: ...
    async def close(self) -> None: ...
    async def schema_version(self) -> int: ...
    async def integrity_check(self) -> str: ...
    async def backup(self, target: Path, progress: Callable[[int, int], None] | None) -> None:
        """A consistent copy of everything at `target` while the store stays in use;
        `progress(done, total)` is called as it goes."""
