"""Session rows in PostgreSQL: a key's current session, starting a new one, and the
counters. Replicas may race to create or replace a key's session: a per-key advisory lock
makes creation and replacement take turns, and the partial unique index on current
sessions keeps a key to one current session whatever happens."""

from __future__ import annotations

import time
from typing import Any

from bot.store.base import SessionRow
from bot.store.mapping import (
    SELECT_SESSIONS,
    counter_deltas,
    origin_values,
    session_from_row,
    session_updates,
)
from bot.store.postgres.connection import Connection, Db
from bot.store.postgres.placeholders import numbered
from bot.store.postgres.transcript import append_rows
from bot.store.statements import ADD_USAGE, GET_CONTEXT_PLAN, PUT_CONTEXT_PLAN, usage_args
from bot.transcript import Entry, Reset, new_id
from bot.types import SessionOrigin, Usage

_INSERT = (
    "INSERT INTO sessions(session_id, session_key, is_current, created_at, updated_at,"
    " channel, chat_type, chat_id, thread_id, peer_id)"
    " VALUES ($1, $2, TRUE, $3, $3, $4, $5, $6, $7, $8)"
)
# Another replica may have made the key's current session since we looked: the partial unique
# index on (session_key) WHERE is_current refuses a second one, and this keeps the first.
_INSERT_UNLESS_CURRENT = f"{_INSERT} ON CONFLICT DO NOTHING"
# Two-key advisory locks (namespace, hash) keep clear of the one-key migration lock.
SESSION_KEY_LOCK = 1


async def lock_key(db: Db, session_key: str) -> None:
    """Make this transaction the only one creating or replacing `session_key`'s session
    until it ends: two resets at once run one after the other, as two in a row would, and a
    reset never meets a session created after it looked."""
    await db.execute(
        "SELECT pg_advisory_xact_lock($1, hashtext($2))", SESSION_KEY_LOCK, session_key
    )


def update_statement(session_id: str, fields: dict[str, Any]) -> tuple[str, list[Any]]:
    """The UPDATE (and its arguments) that sets `fields` on a session row."""
    values = session_updates(fields)
    assignments = ", ".join(f"{k} = ${i}" for i, k in enumerate(values, 2))
    sql = f"UPDATE sessions SET {assignments} WHERE session_id = $1"
    return sql, [session_id, *values.values()]


class SessionTables(Connection):
    async def current_session(self, session_key: str) -> SessionRow | None:
        row = await self._fetchone(
            f"{SELECT_SESSIONS} WHERE session_key = $1 AND is_current", session_key
        )
        return session_from_row(row) if row else None

    async def get_session(self, session_id: str) -> SessionRow | None:
        row = await self._fetchone(f"{SELECT_SESSIONS} WHERE session_id = $1", session_id)
        return session_from_row(row) if row else None

    async def get_or_create_session(self, session_key: str, origin: SessionOrigin) -> SessionRow:
        existing = await self.current_session(session_key)
        if existing:
            return existing
        async with self.transaction() as db:
            await lock_key(db, session_key)
            await db.execute(
                _INSERT_UNLESS_CURRENT, new_id(), session_key, time.time(), *origin_values(origin)
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
            await lock_key(db, session_key)
            row = await db.fetchrow(
                "SELECT session_id, chosen_model FROM sessions"
                " WHERE session_key = $1 AND is_current",
                session_key,
            )
            if row:
                old_id = row[0]
                await append_rows(db, [Entry(old_id, Reset(reason, new_session_id))])
                await db.execute(
                    "UPDATE sessions SET is_current = FALSE, updated_at = $2 WHERE session_id = $1",
                    old_id,
                    now,
                )
            await db.execute(
                _INSERT,
                new_session_id,
                session_key,
                now,
                *origin_values(origin),
            )
            if row and row[1]:  # the conversation keeps the model /model chose
                sql, args = update_statement(new_session_id, {"chosen_model": row[1]})
                await db.execute(sql, *args)
        created = await self.get_session(new_session_id)
        assert created is not None
        return created

    async def session_of_turn(self, turn_id: str) -> SessionRow | None:
        session_id = await self._fetchval(
            "SELECT session_id FROM entries WHERE turn_id = $1 LIMIT 1", turn_id
        )
        return await self.get_session(session_id) if session_id else None

    async def list_sessions(self, *, current_only: bool = True) -> list[SessionRow]:
        where = "WHERE is_current" if current_only else ""
        rows = await self._fetchall(f"{SELECT_SESSIONS} {where} ORDER BY updated_at DESC")
        return [session_from_row(r) for r in rows]

    async def sessions_for_key(self, session_key: str) -> list[SessionRow]:
        rows = await self._fetchall(
            f"{SELECT_SESSIONS} WHERE session_key = $1 ORDER BY created_at", session_key
        )
        return [session_from_row(r) for r in rows]

    async def update_session(self, session_id: str, **fields: Any) -> None:
        sql, args = update_statement(session_id, fields)
        await self._execute(sql, *args)

    async def add_usage(
        self,
        session_id: str,
        usage: Usage,
        *,
        context_tokens: int | None,
        cost_usd: float,
        at: float | None,
    ) -> None:
        args = usage_args(session_id, usage, context_tokens, cost_usd, at)
        await self._execute(numbered(ADD_USAGE), *args)

    async def increment_session(self, session_id: str, **deltas: int) -> None:
        counters = counter_deltas(deltas)
        assignments = ", ".join(f"{k} = {k} + ${i}" for i, k in enumerate(counters, 3))
        await self._execute(
            f"UPDATE sessions SET {assignments}, updated_at = $2 WHERE session_id = $1",
            session_id,
            time.time(),
            *counters.values(),
        )

    async def context_plan(self, session_id: str) -> str | None:
        plan = await self._fetchval(numbered(GET_CONTEXT_PLAN), session_id)
        return str(plan) if plan is not None else None

    async def put_context_plan(self, session_id: str, plan: str) -> None:
        await self._execute(numbered(PUT_CONTEXT_PLAN), plan, session_id)
