"""A turn's writes, each one transaction across the transcript, the inbound queue and the
session counters, so a crash leaves either untouched work or a resumable turn."""

from __future__ import annotations

import time
from typing import Protocol

from bot.store.db import Db
from bot.store.inbound import InboundStatus, set_inbound_rows
from bot.store.sessions import ADD_USAGE, usage_args
from bot.store.transcript import append_rows
from bot.transcript import Entry
from bot.types import Address, Usage


class TurnStore(Protocol):
    """A turn's writes, each one transaction across transcript, inbound rows and counters."""

    async def begin_turn(
        self,
        entries: list[Entry],
        inbound_ids: list[int],
        turn_id: str,
        *,
        active_at: float | None = None,
        address: Address | None = None,
    ) -> None:
        """Write a turn's opening entries and claim its inbound messages; a person's turn
        is activity at `active_at`, and its reply goes to `address`."""

    async def record_model_call(
        self,
        entry: Entry,
        usage: Usage,
        *,
        context_tokens: int,
        cost_usd: float,
        model: str,
    ) -> None:
        """Append an assistant entry and add its usage to the session."""

    async def finish_turn(
        self,
        session_id: str,
        inbound_ids: list[int],
        status: InboundStatus,
        *,
        turns: int = 0,
        errors: int = 0,
    ) -> None:
        """Mark a turn's inbound messages done (or failed) and count it."""


class TurnTables:
    db: Db

    async def begin_turn(
        self,
        entries: list[Entry],
        inbound_ids: list[int],
        turn_id: str,
        *,
        active_at: float | None = None,
        address: Address | None = None,
    ) -> None:
        async with self.db.transaction() as tx:
            await append_rows(tx, entries)
            await set_inbound_rows(tx, inbound_ids, InboundStatus.PROCESSING, turn_id)
            if entries and (active_at is not None or address is not None):
                await tx.execute(
                    "UPDATE sessions SET last_activity_at = COALESCE(?, last_activity_at),"
                    " address = COALESCE(?, address), updated_at = ? WHERE session_id = ?",
                    active_at,
                    address.to_json() if address else None,
                    time.time(),
                    entries[0].session_id,
                )

    async def record_model_call(
        self,
        entry: Entry,
        usage: Usage,
        *,
        context_tokens: int,
        cost_usd: float,
        model: str,
    ) -> None:
        async with self.db.transaction() as tx:
            await append_rows(tx, [entry])
            await tx.execute(
                ADD_USAGE,
                *usage_args(entry.session_id, usage, context_tokens, cost_usd, entry.created_at),
            )
            await tx.execute(
                "UPDATE sessions SET model = ? WHERE session_id = ? AND model != ?",
                model,
                entry.session_id,
                model,
            )

    async def finish_turn(
        self,
        session_id: str,
        inbound_ids: list[int],
        status: InboundStatus,
        *,
        turns: int = 0,
        errors: int = 0,
    ) -> None:
        async with self.db.transaction() as tx:
            await set_inbound_rows(tx, inbound_ids, status)
            await tx.execute(
                "UPDATE sessions SET turns = turns + ?, errors = errors + ?, updated_at = ?"
                " WHERE session_id = ?",
                turns,
                errors,
                time.time(),
                session_id,
            )
