"""Retention in PostgreSQL: pruning finished inbound rows, delivered outbox rows, stale group
buffers and old sessions' transcripts once they are older than `storage.retention_days`."""

from __future__ import annotations

from bot.store.base import Pruned
from bot.store.postgres.connection import Connection
from bot.store.postgres.placeholders import numbered, rowcount
from bot.store.statements import PRUNE_STEPS


class RetentionTables(Connection):
    async def prune_before(self, cutoff: float) -> Pruned:
        async with self.transaction() as db:
            removed = {
                name: rowcount(await db.execute(numbered(sql), cutoff)) for name, sql in PRUNE_STEPS
            }
        return Pruned(**removed)
