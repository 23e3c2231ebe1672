"""State several processes share in SQLite: small keyed values with an expiry (what a
channel adapter must find again on any replica) and per-sender budget counters. A budget
use is one conditional upsert, so two processes can never both take the last unit."""

from __future__ import annotations

from bot.store.shared_state import BudgetUse, budget_use_of
from bot.store.sqlite.connection import Connection
from bot.store.statements import (
    BUDGET_KEPT_SECONDS,
    BUDGET_USE,
    GET_STATE,
    PUT_STATE,
    TAKE_BUDGET,
    take_budget_args,
)


class SharedStateTables(Connection):
    async def state_put(
        self, scope: str, key: str, value: str, expires_at: float, now: float
    ) -> None:
        async with self.transaction() as db:
            await db.execute(PUT_STATE, (scope, key, value, expires_at))
            # What has expired is never read again: dropped here, so it cannot pile up.
            await db.execute("DELETE FROM shared_state WHERE expires_at <= ?", (now,))
            await db.execute(
                "DELETE FROM budgets WHERE resets_at <= ?", (now - BUDGET_KEPT_SECONDS,)
            )

    async def state_get(self, scope: str, key: str, now: float) -> str | None:
        row = await self._fetchone(GET_STATE, (scope, key, now))
        return str(row[0]) if row else None

    async def budget_take(
        self, budget: str, sender: str, *, limit: int | None, window: float, now: float
    ) -> BudgetUse | None:
        async with self.transaction() as db:
            cur = await db.execute(
                TAKE_BUDGET, take_budget_args(budget, sender, limit, window, now)
            )
            row = await cur.fetchone()
            await cur.close()
        return budget_use_of(row)

    async def budget_use(self, budget: str, sender: str, now: float) -> BudgetUse | None:
        return budget_use_of(await self._fetchone(BUDGET_USE, (budget, sender, now)))
