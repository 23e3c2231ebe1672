"""Session rows in SQLite: a key's current session, starting a new one, and the counters."""

from __future__ import annotations

import json
import time
from typing import Any

import aiosqlite

from bot.store.base import SessionRow
from bot.store.sqlite.connection import Connection, fetchone
from bot.store.sqlite.transcript import append_rows
from bot.transcript import Entry, Reset, new_id
from bot.types import ChatType, SessionOrigin, Usage

_SESSION_COLUMNS = [
    "session_id", "session_key", "is_current", "created_at", "updated_at", "channel", "address",
    "model", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
    "context_tokens", "turns", "compaction_count", "memory_flush_at",
    "memory_flush_compaction_count", "memory_flush_count", "memory_flush_error",
    "last_model_call_at", "last_activity_at", "cost_usd", "errors",
    "chat_type", "chat_id", "thread_id", "peer_id", "chosen_model", "context_window",
]  # fmt: skip
_SELECT = f"SELECT {', '.join(_SESSION_COLUMNS)} FROM sessions"
# The conversation is fixed when the session is created.
_ORIGIN_COLUMNS = {"channel", "chat_type", "chat_id", "thread_id", "peer_id"}
_UPDATABLE = (
    set(_SESSION_COLUMNS)
    - {"session_id", "session_key", "is_current", "created_at"}
    - _ORIGIN_COLUMNS
)
_COUNTERS = {"turns", "errors", "compaction_count", "memory_flush_count"}
_INSERT = (
    "INSERT {conflict} INTO sessions(session_id, session_key, is_current, created_at,"
    " updated_at, channel, chat_type, chat_id, thread_id, peer_id)"
    " VALUES (?, ?, 1, ?, ?, ?, ?, ?, ?, ?)"
)


def _session_from_row(row: aiosqlite.Row) -> SessionRow:
    data = dict(zip(_SESSION_COLUMNS, row, strict=True))
    data["is_current"] = bool(data["is_current"])
    data["address"] = json.loads(data["address"]) if data["address"] else None
    data["chat_type"] = ChatType(data["chat_type"]) if data["chat_type"] else None
    return SessionRow(**data)


def _origin_values(origin: SessionOrigin) -> tuple[str, str, str, str | None, str | None]:
    return origin.channel, origin.chat_type, origin.chat_id, origin.thread_id, origin.peer_id


async def update_session_row(
    db: aiosqlite.Connection, session_id: str, fields: dict[str, Any]
) -> None:
    unknown = set(fields) - _UPDATABLE
    if unknown:
        raise ValueError(f"not updatable session fields: {sorted(unknown)}")
    fields = dict(fields)
    if "address" in fields and fields["address"] is not None:
        fields["address"] = json.dumps(fields["address"])
    fields.setdefault("updated_at", time.time())
    assignments = ", ".join(f"{k} = ?" for k in fields)
    await db.execute(
        f"UPDATE sessions SET {assignments} WHERE session_id = ?",
        (*fields.values(), session_id),
    )


async def add_usage_row(
    db: aiosqlite.Connection,
    session_id: str,
    usage: Usage,
    context_tokens: int | None,
    cost_usd: float,
    at: float | None,
) -> None:
    # None leaves the context size or the last model call time as they are: one
    # statement, so concurrent callers never lose each other's increments.
    await db.execute(
        "UPDATE sessions SET input_tokens = input_tokens + ?,"
        " output_tokens = output_tokens + ?, cache_read_tokens = cache_read_tokens + ?,"
        " cache_write_tokens = cache_write_tokens + ?,"
        " context_tokens = COALESCE(?, context_tokens), cost_usd = cost_usd + ?,"
        " last_model_call_at = COALESCE(?, last_model_call_at), updated_at = ?"
        " WHERE session_id = ?",
        (
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_tokens,
            usage.cache_write_tokens,
            context_tokens,
            cost_usd,
            at,
            time.time() if at is None else at,
            session_id,
        ),
    )


class SessionTables(Connection):
    async def current_session(self, session_key: str) -> SessionRow | None:
        row = await self._fetchone(
            f"{_SELECT} WHERE session_key = ? AND is_current = 1", (session_key,)
        )
        return _session_from_row(row) if row else None

    async def get_session(self, session_id: str) -> SessionRow | None:
        row = await self._fetchone(f"{_SELECT} WHERE session_id = ?", (session_id,))
        return _session_from_row(row) if row else None

    async def get_or_create_session(self, session_key: str, origin: SessionOrigin) -> SessionRow:
        existing = await self.current_session(session_key)
        if existing:
            return existing
        now = time.time()
        async with self.transaction() as db:
            await db.execute(
                _INSERT.format(conflict="OR IGNORE"),
                (new_id(), session_key, now, now, *_origin_values(origin)),
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
                (new_session_id, session_key, now, now, *_origin_values(origin)),
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
        rows = await self._fetchall(f"{_SELECT} {where} ORDER BY updated_at DESC")
        return [_session_from_row(r) for r in rows]

    async def sessions_for_key(self, session_key: str) -> list[SessionRow]:
        rows = await self._fetchall(
            f"{_SELECT} WHERE session_key = ? ORDER BY created_at", (session_key,)
        )
        return [_session_from_row(r) for r in rows]

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
            await add_usage_row(db, session_id, usage, context_tokens, cost_usd, at)

    async def increment_session(self, session_id: str, **deltas: int) -> None:
        unknown = set(deltas) - _COUNTERS
        if unknown:
            raise ValueError(f"not countable session fields: {sorted(unknown)}")
        assignments = ", ".join(f"{k} = {k} + ?" for k in deltas)
        async with self.transaction() as db:
            await db.execute(
                f"UPDATE sessions SET {assignments}, updated_at = ? WHERE session_id = ?",
                (*deltas.values(), time.time(), session_id),
            )
