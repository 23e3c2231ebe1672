"""Transcript entries in PostgreSQL: append-only rows with their kind in a column, and the
history a model request starts from (read by the same code as SQLite's)."""

from __future__ import annotations

from bot.store.base import UsagePoint
from bot.store.history import read_history
from bot.store.mapping import (
    ENTRY_INSERT_COLUMNS,
    chain,
    entry_from_row,
    entry_values,
    usage_point,
)
from bot.store.postgres.connection import Connection, Db
from bot.store.postgres.placeholders import numbered
from bot.store.statements import TRANSCRIPT, USAGE_SINCE
from bot.transcript import Entry

# A session's appends wait for each other (advisory lock namespace, session hash), so the
# parent chain stays one line even when two replicas write to one session.
TRANSCRIPT_LOCK = 2


async def append_rows(db: Db, entries: list[Entry]) -> None:
    """Append entries of one session, chaining each to the one before (inside a transaction)."""
    if not entries:
        return
    session_id = entries[0].session_id
    await db.execute("SELECT pg_advisory_xact_lock($1, hashtext($2))", TRANSCRIPT_LOCK, session_id)
    last_id = await db.fetchval(
        "SELECT id FROM entries WHERE session_id = $1 ORDER BY seq DESC LIMIT 1", session_id
    )
    chain(entries, last_id)
    for entry in entries:
        entry.seq = await db.fetchval(
            f"INSERT INTO entries({ENTRY_INSERT_COLUMNS})"
            " VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING seq",
            *entry_values(entry),
        )


class TranscriptTables(Connection):
    async def append_entries(self, entries: list[Entry]) -> None:
        async with self.transaction() as db:
            await append_rows(db, entries)

    async def load_history(self, session_id: str, *, max_user_turns: int = 0) -> list[Entry]:
        return await read_history(
            lambda sql, *args: self._fetchone(numbered(sql), *args),
            lambda sql, *args: self._fetchall(numbered(sql), *args),
            session_id,
            max_user_turns,
        )

    async def transcript(self, session_id: str) -> list[Entry]:
        rows = await self._fetchall(numbered(TRANSCRIPT), session_id)
        return [entry_from_row(r) for r in rows]

    async def usage_since(self, since: float) -> list[UsagePoint]:
        return [usage_point(r) for r in await self._fetchall(numbered(USAGE_SINCE), since)]
