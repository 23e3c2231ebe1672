"""DM pairing requests in PostgreSQL: the code a stranger was given and whether it was
approved or denied."""

from __future__ import annotations

from bot.store.base import Pairing, PairingStatus
from bot.store.mapping import PAIRING_COLUMNS, pairing_from_row, pairing_values
from bot.store.postgres.connection import Connection

_SELECT = f"SELECT {PAIRING_COLUMNS} FROM pairings"


class PairingTables(Connection):
    async def pairing_get(self, channel: str, user_id: str) -> Pairing | None:
        row = await self._fetchone(
            f"{_SELECT} WHERE channel = $1 AND user_id = $2", channel, user_id
        )
        return pairing_from_row(row) if row else None

    async def pairing_put(self, pairing: Pairing) -> None:
        await self._execute(
            f"INSERT INTO pairings({PAIRING_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6)"
            " ON CONFLICT (channel, user_id) DO UPDATE SET code = EXCLUDED.code,"
            " status = EXCLUDED.status, created_at = EXCLUDED.created_at,"
            " user_name = EXCLUDED.user_name",
            *pairing_values(pairing),
        )

    async def pairing_pending(self, channel: str) -> list[Pairing]:
        rows = await self._fetchall(
            f"{_SELECT} WHERE channel = $1 AND status = $2 ORDER BY created_at",
            channel,
            str(PairingStatus.PENDING),
        )
        return [pairing_from_row(r) for r in rows]

    async def pairing_delete(self, channel: str, user_id: str) -> None:
        await self._execute(
            "DELETE FROM pairings WHERE channel = $1 AND user_id = $2", channel, user_id
        )
