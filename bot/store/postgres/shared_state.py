"""State replicas share in PostgreSQL: small keyed values with an expiry (what a channel
adapter must find again on any replica) and per-sender budget counters. A budget use is one
conditional upsert: concurrent takes of one sender's budget queue on its row, and each sees
the count the one before it left, so the replicas never hand out more than the limit."""

from __future__ import annotations

from bot.store.postgres.connection import Connection
from bot.store.postgres.placeholders import numbered
from bot.store.shared_state import BudgetUse, budget_use_of
from bot.store.statements import (
    BUDGET_KEPT_SECONDS,
    BUDGET_USE,
    GET_STATE,
    PUT_STATE,
    TAKE_BUDGET,
    take_budget_args,
)

_PURGE_STATE = (
    "DELETE FROM shared_state WHERE (scope, key) IN (SELECT scope, key FROM shared_state"
    " WHERE expires_at <= $1 LIMIT 100 FOR UPDATE SKIP LOCKED)"
)
_PURGE_BUDGETS = (
    "DELETE FROM budgets WHERE (budget, sender) IN (SELECT budget, sender FROM budgets"
    " WHERE resets_at <= $1 LIMIT 100 FOR UPDATE SKIP LOCKED)"
)


class SharedStateTables(Connection):
    async def state_put(
        self, scope: str, key: str, value: str, expires_at: float, now: float
    ) -> None:
        await self._execute(numbered(PUT_STATE), scope, key, value, expires_at)
        # What has expired is never read again: dropped here, so it cannot pile up. Rows
        # another replica is dropping (or writing) are skipped, so replicas never wait here.
        await self._execute(_PURGE_STATE, now)
        await self._execute(_PURGE_BUDGETS, now - BUDGET_KEPT_SECONDS)

    async def state_get(self, scope: str, key: str, now: float) -> str | None:
        return await self._fetchval(numbered(GET_STATE), scope, key, now)

    async def budget_take(
        self, budget: str, sender: str, *, limit: int | None, window: float, now: float
    ) -> BudgetUse | None:
        args = take_budget_args(budget, sender, limit, window, now)
        return budget_use_of(await self._fetchone(numbered(TAKE_BUDGET), *args))

    async def budget_use(self, budget: str, sender: str, now: float) -> BudgetUse | None:
        return budget_use_of(await self._fetchone(numbered(BUDGET_USE), budget, sender, now))
