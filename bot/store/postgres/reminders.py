"""Reminder rows in PostgreSQL: added by reminder_create, read back by the scheduler at
start-up and by `krill reminders list`, and moved out of pending exactly once, whichever
replica fires them."""

from __future__ import annotations

import json
from typing import Any

from bot.store.base import Reminder, ReminderStatus
from bot.store.mapping import REMINDER_COLUMNS, reminder_from_row
from bot.store.postgres.connection import Connection
from bot.store.postgres.placeholders import numbered, rowcount
from bot.store.statements import FINISH_REMINDER


class ReminderTables(Connection):
    async def reminder_add(
        self,
        *,
        session_key: str,
        address: dict[str, Any],
        creator: str,
        due_at: float,
        text: str,
        created_at: float,
    ) -> Reminder:
        row = await self._fetchone(
            "INSERT INTO reminders(session_key, address, creator, due_at, text, status,"
            f" created_at) VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING {REMINDER_COLUMNS}",
            session_key,
            json.dumps(address),
            creator,
            due_at,
            text,
            str(ReminderStatus.PENDING),
            created_at,
        )
        assert row is not None
        return reminder_from_row(row)

    async def reminder_get(self, reminder_id: int) -> Reminder | None:
        row = await self._fetchone(
            f"SELECT {REMINDER_COLUMNS} FROM reminders WHERE id = $1", reminder_id
        )
        return reminder_from_row(row) if row else None

    async def reminders(
        self, *, status: ReminderStatus | None = None, creator: str | None = None
    ) -> list[Reminder]:
        # NULL filters nothing: one statement whatever is given.
        rows = await self._fetchall(
            f"SELECT {REMINDER_COLUMNS} FROM reminders"
            " WHERE ($1::text IS NULL OR status = $1) AND ($2::text IS NULL OR creator = $2)"
            " ORDER BY due_at, id",
            None if status is None else str(status),
            creator,
        )
        return [reminder_from_row(r) for r in rows]

    async def reminder_finish(self, reminder_id: int, status: ReminderStatus, *, at: float) -> bool:
        status_line = await self._execute(
            numbered(FINISH_REMINDER),
            str(status),
            at,
            reminder_id,
            str(ReminderStatus.PENDING),
        )
        return rowcount(status_line) == 1
