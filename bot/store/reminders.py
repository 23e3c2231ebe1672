"""Reminder rows: added by reminder_create, read back by the scheduler at start-up and by
`krill reminders list`, and moved out of pending exactly once, whichever process fires
them."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from bot.store.db import Db, Row
from bot.types import Address


class ReminderStatus(StrEnum):
    PENDING = "pending"
    SENT = "sent"  # its turn ran (the reply went out, or the turn failed and said so)
    CANCELLED = "cancelled"


@dataclass(slots=True)
class Reminder:
    id: int
    session_key: str
    address: Address  # where the reminder's reply goes (chat, thread or topic)
    creator: str  # principal, "<channel>:<user_id>"
    due_at: float
    text: str
    status: ReminderStatus
    created_at: float
    fired_at: float | None = None


class ReminderStore(Protocol):
    """Reminders set with reminder_create: rows the scheduler rebuilds its jobs from."""

    async def reminder_add(
        self,
        *,
        session_key: str,
        address: Address,
        creator: str,
        due_at: float,
        text: str,
        created_at: float,
    ) -> Reminder: ...
    async def reminder_get(self, reminder_id: int) -> Reminder | None: ...
    async def reminders(
        self, *, status: ReminderStatus | None = None, creator: str | None = None
    ) -> list[Reminder]:
        """Ordered by due time; None filters nothing."""
        ...

    async def reminder_finish(self, reminder_id: int, status: ReminderStatus, *, at: float) -> bool:
        """Move a pending reminder to `status`; False when it was no longer pending."""
        ...


COLUMNS = "id, session_key, address, creator, due_at, text, status, created_at, fired_at"


def _reminder(row: Row) -> Reminder:
    rid, key, address, creator, due_at, text, status, created_at, fired_at = row
    return Reminder(
        id=int(rid),
        session_key=key,
        address=Address.from_json(address),
        creator=creator,
        due_at=float(due_at),
        text=text,
        status=ReminderStatus(status),
        created_at=float(created_at),
        fired_at=fired_at,
    )


class ReminderTables:
    db: Db

    async def reminder_add(
        self,
        *,
        session_key: str,
        address: Address,
        creator: str,
        due_at: float,
        text: str,
        created_at: float,
    ) -> Reminder:
        row = await self.db.fetchrow(
            "INSERT INTO reminders(session_key, address, creator, due_at, text, status,"
            f" created_at) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING {COLUMNS}",
            session_key,
            address.to_json(),
            creator,
            due_at,
            text,
            str(ReminderStatus.PENDING),
            created_at,
        )
        assert row is not None
        return _reminder(row)

    async def reminder_get(self, reminder_id: int) -> Reminder | None:
        row = await self.db.fetchrow(f"SELECT {COLUMNS} FROM reminders WHERE id = ?", reminder_id)
        return _reminder(row) if row else None

    async def reminders(
        self, *, status: ReminderStatus | None = None, creator: str | None = None
    ) -> list[Reminder]:
        where, args = ["TRUE"], list[Any]()
        if status is not None:
            where.append("status = ?")
            args.append(str(status))
        if creator is not None:
            where.append("creator = ?")
            args.append(creator)
        rows = await self.db.fetch(
            f"SELECT {COLUMNS} FROM reminders WHERE {' AND '.join(where)} ORDER BY due_at, id",
            *args,
        )
        return [_reminder(r) for r in rows]

    async def reminder_finish(self, reminder_id: int, status: ReminderStatus, *, at: float) -> bool:
        finished = await self.db.execute(
            "UPDATE reminders SET status = ?, fired_at = ? WHERE id = ? AND status = ?",
            str(status),
            at,
            reminder_id,
            str(ReminderStatus.PENDING),
        )
        return finished == 1
