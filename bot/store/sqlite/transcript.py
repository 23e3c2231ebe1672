"""Transcript entries in SQLite: append-only rows with their kind in a column, and the
history a model request starts from."""

from __future__ import annotations

import aiosqlite

from bot.store.base import UsagePoint
from bot.store.history import read_history
from bot.store.mapping import (
    ENTRY_INSERT_COLUMNS,
    chain,
    entry_from_row,
    entry_values,
    usage_point,
)
from bot.store.sqlite.connection import Connection, fetchone
from bot.store.statements import TRANSCRIPT, USAGE_SINCE
from bot.transcript import Entry


async def append_rows(db: aiosqlite.Connection, entries: list[Entry]) -> None:
    """Append entries of one session, chaining each to the one before (inside a transaction)."""
    if not entries:
        return
    row = await fetchone(
        db,
        "SELECT id FROM entries WHERE session_id = ? ORDER BY seq DESC LIMIT 1",
        (entries[0].session_id,),
    )
    chain(entries, row[0] if row else None)
    for entry in entries:
        cur = await db.execute(
            f"INSERT INTO entries({ENTRY_INSERT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            entry_values(entry),
        )
        entry.seq = cur.lastrowid or 0


class TranscriptTables(Connection):
    async def append_entries(self, entries: list[Entry]) -> None:
        async with self.transaction() as db:
            await append_rows(db, entries)

    async def load_history(self, session_id: str, *, max_user_turns: int = 0) -> list[Entry]:
        return await read_history(
            lambda sql, *args: self._fetchone(sql, args),
            lambda sql, *args: self._fetchall(sql, args),
            session_id,
            max_user_turns,
        )

    async def transcript(self, session_id: str) -> list[Entry]:
        return [entry_from_row(r) for r in await self._fetchall(TRANSCRIPT, (session_id,))]

    async def usage_since(self, since: float) -> list[UsagePoint]:
        return [usage_point(r) for r in await self._fetchall(USAGE_SINCE, (since,))]
