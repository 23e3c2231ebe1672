"""Retention in SQLite: pruning finished inbound rows, delivered outbox rows, stale group
buffers and old sessions' transcripts once they are older than `storage.retention_days`."""

from __future__ import annotations

from bot.store.base import Pruned
from bot.store.sqlite.connection import Connection
from bot.store.statements import PRUNE_STEPS


class RetentionTables(Connection):
    async def prune_before(self, cutoff: float) -> Pruned:
        async with self.transaction() as db:
            removed = {
                name: (await db.execute(sql, (cutoff,))).rowcount for name, sql in PRUNE_STEPS
            }
        return Pruned(**removed)
