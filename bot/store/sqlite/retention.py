"""Retention in SQLite: pruning finished inbound rows, delivered outbox rows, stale group
buffers and old sessions' transcripts once they are older than `storage.retention_days`."""

from __future__ import annotations

from bot.store.base import InboundStatus, Pruned
from bot.store.sqlite.connection import Connection

# Rows still needed to answer someone: recovery after a restart reads them.
_UNFINISHED = (InboundStatus.PENDING, InboundStatus.PROCESSING)


class RetentionTables(Connection):
    async def prune_before(self, cutoff: float) -> Pruned:
        async with self.transaction() as db:
            inbound = await db.execute(
                "DELETE FROM inbound WHERE updated_at < ? AND status NOT IN (?, ?)",
                (cutoff, *_UNFINISHED),
            )
            outbox = await db.execute(
                "DELETE FROM outbox WHERE status = 'sent' AND updated_at < ?", (cutoff,)
            )
            buffered = await db.execute("DELETE FROM group_buffer WHERE created_at < ?", (cutoff,))
            old = "SELECT session_id FROM sessions WHERE is_current = 0 AND updated_at < ?"
            entries = await db.execute(
                f"DELETE FROM entries WHERE session_id IN ({old})", (cutoff,)
            )
            sessions = await db.execute(
                "DELETE FROM sessions WHERE is_current = 0 AND updated_at < ?", (cutoff,)
            )
            return Pruned(
                inbound=inbound.rowcount,
                outbox=outbox.rowcount,
                buffered=buffered.rowcount,
                sessions=sessions.rowcount,
                entries=entries.rowcount,
            )
