"""The outbound ledger in SQLite: which chunks of a turn's reply the platform accepted, so a
resumed turn never sends a chunk twice."""

from __future__ import annotations

import time

from bot.store.sqlite.connection import Connection


class LedgerTables(Connection):
    async def ledger_for_turn(self, turn_id: str) -> dict[int, str]:
        rows = await self._fetchall(
            "SELECT chunk_index, platform_id FROM outbound WHERE turn_id = ?", (turn_id,)
        )
        return {int(i): str(p) for i, p in rows}

    async def ledger_put(self, turn_id: str, chunk_index: int, platform_id: str) -> None:
        async with self.transaction() as db:
            await db.execute(
                "INSERT OR REPLACE INTO outbound(turn_id, chunk_index, platform_id, created_at)"
                " VALUES (?, ?, ?, ?)",
                (turn_id, chunk_index, platform_id, time.time()),
            )
