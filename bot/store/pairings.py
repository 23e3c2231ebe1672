"""DM pairing requests: the code a stranger was given and whether an operator approved or
denied it."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from bot.store.db import Db, Row


class PairingStatus(StrEnum):
    PENDING = "pending"  # a code was issued; an operator has not approved it yet
    APPROVED = "approved"
    DENIED = "denied"  # an operator said no; no new code until the pairing TTL has passed


@dataclass(slots=True)
class Pairing:
    channel: str
    user_id: str
    code: str
    status: PairingStatus
    created_at: float
    user_name: str = ""


class PairingStore(Protocol):
    async def pairing_get(self, channel: str, user_id: str) -> Pairing | None: ...
    async def pairing_put(self, pairing: Pairing) -> None: ...
    async def pairing_pending(self, channel: str) -> list[Pairing]: ...
    async def pairing_delete(self, channel: str, user_id: str) -> None: ...


_SELECT = "SELECT channel, user_id, code, status, created_at, user_name FROM pairings"


def _pairing(row: Row) -> Pairing:
    channel, user_id, code, status, created_at, user_name = row
    return Pairing(channel, user_id, code, PairingStatus(status), created_at, user_name)


class PairingTables:
    db: Db

    async def pairing_get(self, channel: str, user_id: str) -> Pairing | None:
        row = await self.db.fetchrow(
            f"{_SELECT} WHERE channel = ? AND user_id = ?", channel, user_id
        )
        return _pairing(row) if row else None

    async def pairing_put(self, pairing: Pairing) -> None:
        p = pairing
        await self.db.execute(
            "INSERT INTO pairings(channel, user_id, code, status, created_at, user_name)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (channel, user_id) DO UPDATE SET"
            " code = excluded.code, status = excluded.status,"
            " created_at = excluded.created_at, user_name = excluded.user_name",
            *(p.channel, p.user_id, p.code, str(p.status), p.created_at, p.user_name),
        )

    async def pairing_pending(self, channel: str) -> list[Pairing]:
        rows = await self.db.fetch(
            f"{_SELECT} WHERE channel = ? AND status = ? ORDER BY created_at",
            channel,
            str(PairingStatus.PENDING),
        )
        return [_pairing(r) for r in rows]

    async def pairing_delete(self, channel: str, user_id: str) -> None:
        await self.db.execute(
            "DELETE FROM pairings WHERE channel = ? AND user_id = ?", channel, user_id
        )
