"""Session rows in SQLite: a key's current session, starting a new one, and the counters."""

from __future__ import annotations

import time
from typing import Any

import aiosqlite

from bot.store.base import SessionRow
from bot.store.mapping import (
    SELECT_SESSIONS,
    counter_deltas,
    origin_values,
    session_from_row,
    session_updates,
)
from bot.store.sqlite.connection import Connection, fetchone
from bot.store.sqlite.transcript import append_rows
from bot.store.statements import ADD_USAGE, GET_CONTEXT_PLAN, PUT_CONTEXT_PLAN, usage_args
from bot.transcript import Entry, Reset, new_id
from bot.types import SessionOrigin, Usage

_INSERT = (
    "INSERT {conflict} INTO sessions(session_id, session_key, is_current, created_at,"
    " updated_at, channel, chat_type, chat_id, thread_id, peer_id)"
    " VALUES (?, ?, 1, ?, ?, ?, ?, ?, ?, ?)"
)


async def update_session_row(
    db: aiosqlite.Connection, session_id: str, fields: dict[str, Any]
) -> None:
    values = session_updates(fields)
    assignments = ", ".join(f"{k} = ?" for k in values)
    await db.execute(
        f"UPDATE sessions SET {assignments} WHERE session_id = ?",
        (*values.values(), session_id),
    )


class SessionTables(Connection):
    async def current_session(self, session_key: str) -> SessionRow | None:
        row = await self._fetchone(
            f"{SELECT_SESSIONS} WHERE session_key = ? AND is_current = 1", (session_key,)
        )
        return session_from_row(row) if row else None

    async def get_session(self, session_id: str) -> SessionRow | None:
        row = await self._fetchone(f"{SELECT_SESSIONS} WHERE session_id = ?", (session_id,))
        return session_from_row(row) if row else None

    async def get_or_create_session(self, session_key: str, origin: SessionOrigin) -> SessionRow:
        existing = await self.current_session(session_key)
        if existing:
            return existing
        now = time.time()
        async with self.transaction() as db:
            await db.execute(
                _INSERT.format(conflict="OR IGNORE"),
                (new_id(), session_key, now, now, *origin_values(origin)),
            )
        created = await self.current_session(session_key)
        assert created is not None
        return created

    async def start_new_session(
        self, session_key: str, origin: SessionOrigin, reason: str
    ) -> SessionRow:
        now = time.time()
        new_session_id = new_id()
        async with self.transaction() as db:
            row = await fetchone(
                db,
                "SELECT session_id, chosen_model FROM sessions"
                " WHERE session_key = ? AND is_current = 1",
                (session_key,),
            )
            if row:
                old_id = row[0]
                await append_rows(db, [Entry(old_id, Reset(reason, new_session_id))])
                await db.execute(
                    "UPDATE sessions SET is_current = 0, updated_at = ? WHERE session_id = ?",
                    (now, old_id),
                )
            await db.execute(
                _INSERT.format(conflict=""),
                (new_session_id, session_key, now, now, *origin_values(origin)),
            )
            if row and row[1]:  # the conversation keeps the model /model chose
                await update_session_row(db, new_session_id, {"chosen_model": row[1]})
        created = await self.get_session(new_session_id)
        assert created is not None
        return created

    async def session_of_turn(self, turn_id: str) -> SessionRow | None:
        """The session holding a turn's entries (it may no longer be its key's current one)."""
        row = await self._fetchone(
            "SELECT session_id FROM entries WHERE turn_id = ? LIMIT 1", (turn_id,)
        )
        return await self.get_session(row[0]) if row else None

    async def list_sessions(self, *, current_only: bool = True) -> list[SessionRow]:
        where = "WHERE is_current = 1" if current_only else ""
        rows = await self._fetchall(f"{SELECT_SESSIONS} {where} ORDER BY updated_at DESC")
        return [session_from_row(r) for r in rows]

    async def sessions_for_key(self, session_key: str) -> list[SessionRow]:
        rows = await self._fetchall(
            f"{SELECT_SESSIONS} WHERE session_key = ? ORDER BY created_at", (session_key,)
        )
        return [session_from_row(r) for r in rows]

    async def update_session(self, session_id: str, **fields: Any) -> None:
        async with self.transaction() as db:
            await update_session_row(db, session_id, fields)

    async def add_usage(
        self,
        session_id: str,
        usage: Usage,
        *,
        context_tokens: int | None,
        cost_usd: float,
        at: float | None,
    ) -> None:
        async with self.transaction() as db:
            await db.execute(ADD_USAGE, usage_args(session_id, usage, context_tokens, cost_usd, at))

    async def increment_session(self, session_id: str, **deltas: int) -> None:
        assignments = ", ".join(f"{k} = {k} + ?" for k in counter_deltas(deltas))
        async with self.transaction() as db:
            await db.execute(
                f"UPDATE sessions SET {assignments}, updated_at = ? WHERE session_id = ?",
                (*deltas.values(), time.time(), session_id),
            )

    async def context_plan(self, session_id: str) -> str | None:
        row = await self._fetchone(GET_CONTEXT_PLAN, (session_id,))
        return str(row[0]) if row and row[0] is not None else None

    async def put_context_plan(self, session_id: str, plan: str) -> None:
        async with self.transaction() as db:
            await db.execute(PUT_CONTEXT_PLAN, (plan, session_id))
