"""DM pairing requests in SQLite: the code a stranger was given and whether it was approved
or denied."""

from __future__ import annotations

from bot.store.base import Pairing, PairingStatus
from bot.store.mapping import PAIRING_COLUMNS, pairing_from_row, pairing_values
from bot.store.sqlite.connection import Connection

_SELECT = f"SELECT {PAIRING_COLUMNS} FROM pairings"


class PairingTables(Connection):
    async def pairing_get(self, channel: str, user_id: str) -> Pairing | None:
        row = await self._fetchone(
            f"{_SELECT} WHERE channel = ? AND user_id = ?", (channel, user_id)
        )
        return pairing_from_row(row) if row else None

    async def pairing_put(self, pairing: Pairing) -> None:
        async with self.transaction() as db:
            await db.execute(
                f"INSERT OR REPLACE INTO pairings({PAIRING_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
                pairing_values(pairing),
            )

    async def pairing_pending(self, channel: str) -> list[Pairing]:
        rows = await self._fetchall(
            f"{_SELECT} WHERE channel = ? AND status = ? ORDER BY created_at",
            (channel, PairingStatus.PENDING),
        )
        return [pairing_from_row(r) for r in rows]

    async def pairing_delete(self, channel: str, user_id: str) -> None:
        async with self.transaction() as db:
            await db.execute(
                "DELETE FROM pairings WHERE channel = ? AND user_id = ?", (channel, user_id)
            )
