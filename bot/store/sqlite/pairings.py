"""DM pairing requests in SQLite: the code a stranger was given and whether it was approved
or denied."""

from __future__ import annotations

import aiosqlite

from bot.store.base import Pairing, PairingStatus
from bot.store.sqlite.connection import Connection

_SELECT = "SELECT channel, user_id, code, status, created_at, user_name FROM pairings"


def _pairing_from_row(row: aiosqlite.Row) -> Pairing:
    channel, user_id, code, status, created_at, user_name = row
    return Pairing(channel, user_id, code, PairingStatus(status), created_at, user_name)


class PairingTables(Connection):
    async def pairing_get(self, channel: str, user_id: str) -> Pairing | None:
        row = await self._fetchone(
            f"{_SELECT} WHERE channel = ? AND user_id = ?", (channel, user_id)
        )
        return _pairing_from_row(row) if row else None

    async def pairing_put(self, pairing: Pairing) -> None:
        async with self.transaction() as db:
            await db.execute(
                "INSERT OR REPLACE INTO pairings(channel, user_id, code, status, created_at,"
                " user_name) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    pairing.channel,
                    pairing.user_id,
                    pairing.code,
                    pairing.status,
                    pairing.created_at,
                    pairing.user_name,
                ),
            )

    async def pairing_pending(self, channel: str) -> list[Pairing]:
        rows = await self._fetchall(
            f"{_SELECT} WHERE channel = ? AND status = ? ORDER BY created_at",
            (channel, PairingStatus.PENDING),
        )
        return [_pairing_from_row(r) for r in rows]

    async def pairing_delete(self, channel: str, user_id: str) -> None:
        async with self.transaction() as db:
            await db.execute(
                "DELETE FROM pairings WHERE channel = ? AND user_id = ?", (channel, user_id)
            )
