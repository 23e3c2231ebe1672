"""A turn's writes in PostgreSQL, each one transaction across the transcript, the inbound
queue and the session counters, so a crash leaves either untouched work or a resumable turn."""

from __future__ import annotations

from typing import Any

from bot.store.base import InboundStatus
from bot.store.postgres.connection import Connection
from bot.store.postgres.inbound import set_inbound_rows
from bot.store.postgres.placeholders import numbered
from bot.store.postgres.sessions import update_statement
from bot.store.postgres.transcript import append_rows
from bot.store.statements import ADD_USAGE, COUNT_TURN, SET_MODEL, count_turn_args, usage_args
from bot.transcript import Entry
from bot.types import Usage


class TurnTables(Connection):
    async def begin_turn(
        self,
        entries: list[Entry],
        inbound_ids: list[int],
        turn_id: str,
        *,
        session_fields: dict[str, Any] | None = None,
    ) -> None:
        async with self.transaction() as db:
            await append_rows(db, entries)
            await set_inbound_rows(db, inbound_ids, InboundStatus.PROCESSING, turn_id)
            if session_fields and entries:
                sql, args = update_statement(entries[0].session_id, session_fields)
                await db.execute(sql, *args)

    async def record_model_call(
        self,
        entry: Entry,
        usage: Usage,
        *,
        context_tokens: int,
        cost_usd: float,
        model: str,
    ) -> None:
        async with self.transaction() as db:
            await append_rows(db, [entry])
            await db.execute(
                numbered(ADD_USAGE),
                *usage_args(entry.session_id, usage, context_tokens, cost_usd, entry.created_at),
            )
            await db.execute(numbered(SET_MODEL), model, entry.session_id, model)

    async def finish_turn(
        self,
        session_id: str,
        inbound_ids: list[int],
        status: InboundStatus,
        *,
        turns: int = 0,
        errors: int = 0,
    ) -> None:
        async with self.transaction() as db:
            await set_inbound_rows(db, inbound_ids, status)
            await db.execute(numbered(COUNT_TURN), *count_turn_args(session_id, turns, errors))
