"""Reminder rows in SQLite: added by reminder_create, read back by the scheduler at start-up
and by `krill reminders list`, and moved out of pending exactly once."""

from __future__ import annotations

import json
from typing import Any

from bot.store.base import Reminder, ReminderStatus
from bot.store.mapping import REMINDER_COLUMNS, reminder_from_row
from bot.store.sqlite.connection import Connection
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
        async with self.transaction() as db:
            cur = await db.execute(
                "INSERT INTO reminders(session_key, address, creator, due_at, text, status,"
                " created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    session_key,
                    json.dumps(address),
                    creator,
                    due_at,
                    text,
                    ReminderStatus.PENDING,
                    created_at,
                ),
            )
            rid = cur.lastrowid
        added = await self.reminder_get(int(rid or 0))
        assert added is not None
        return added

    async def reminder_get(self, reminder_id: int) -> Reminder | None:
        row = await self._fetchone(
            f"SELECT {REMINDER_COLUMNS} FROM reminders WHERE id = ?", (reminder_id,)
        )
        return reminder_from_row(row) if row else None

    async def reminders(
        self, *, status: ReminderStatus | None = None, creator: str | None = None
    ) -> list[Reminder]:
        where, params = [], []
        if status is not None:
            where.append("status = ?")
            params.append(str(status))
        if creator is not None:
            where.append("creator = ?")
            params.append(creator)
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        rows = await self._fetchall(
            f"SELECT {REMINDER_COLUMNS} FROM reminders{clause} ORDER BY due_at, id", tuple(params)
        )
        return [reminder_from_row(r) for r in rows]

    async def reminder_finish(self, reminder_id: int, status: ReminderStatus, *, at: float) -> bool:
        async with self.transaction() as db:
            cur = await db.execute(
                FINISH_REMINDER,
                (str(status), at, reminder_id, ReminderStatus.PENDING),
            )
            return cur.rowcount == 1
