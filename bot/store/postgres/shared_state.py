"""State replicas share in PostgreSQL: small keyed values with an expiry (what a channel
adapter must find again on any replica) and per-sender budget counters. A budget use is one
conditional upsert: concurrent takes of one sender's budget queue on its row, and each sees
the count the one before it left, so the replicas never hand out more than the limit."""

from __future__ import annotations

from bot.store.postgres.connection import Connection
from bot.store.shared_state import NO_LIMIT, BudgetUse, budget_use_of

# A budget row is kept a while after its window ended (at most one row per sender and budget).
_KEEP = 86_400.0
_PUT = (
    "INSERT INTO shared_state(scope, key, value, expires_at) VALUES ($1, $2, $3, $4)"
    " ON CONFLICT (scope, key) DO UPDATE SET value = excluded.value,"
    " expires_at = excluded.expires_at"
)
_PURGE_STATE = (
    "DELETE FROM shared_state WHERE (scope, key) IN (SELECT scope, key FROM shared_state"
    " WHERE expires_at <= $1 LIMIT 100 FOR UPDATE SKIP LOCKED)"
)
_PURGE_BUDGETS = (
    "DELETE FROM budgets WHERE (budget, sender) IN (SELECT budget, sender FROM budgets"
    " WHERE resets_at <= $1 LIMIT 100 FOR UPDATE SKIP LOCKED)"
)
# A window that has ended starts afresh at this use; an open one counts up unless full (then
# the WHERE makes the update a no-op and nothing is returned).
_TAKE = (
    "INSERT INTO budgets(budget, sender, used, resets_at) VALUES ($1, $2, 1, $3)"
    " ON CONFLICT (budget, sender) DO UPDATE SET"
    " used = CASE WHEN budgets.resets_at <= $4 THEN 1 ELSE budgets.used + 1 END,"
    " resets_at = CASE WHEN budgets.resets_at <= $4 THEN excluded.resets_at"
    " ELSE budgets.resets_at END"
    " WHERE budgets.resets_at <= $4 OR budgets.used < $5"
    " RETURNING used, resets_at"
)


class SharedStateTables(Connection):
    async def state_put(
        self, scope: str, key: str, value: str, expires_at: float, now: float
    ) -> None:
        await self._execute(_PUT, scope, key, value, expires_at)
        # What has expired is never read again: dropped here, so it cannot pile up. Rows
        # another replica is dropping (or writing) are skipped, so replicas never wait here.
        await self._execute(_PURGE_STATE, now)
        await self._execute(_PURGE_BUDGETS, now - _KEEP)

    async def state_get(self, scope: str, key: str, now: float) -> str | None:
        return await self._fetchval(
            "SELECT value FROM shared_state WHERE scope = $1 AND key = $2 AND expires_at > $3",
            scope,
            key,
            now,
        )

    async def budget_take(
        self, budget: str, sender: str, *, limit: int | None, window: float, now: float
    ) -> BudgetUse | None:
        cap = NO_LIMIT if limit is None else limit
        row = await self._fetchone(_TAKE, budget, sender, now + window, now, cap)
        return budget_use_of(row)

    async def budget_use(self, budget: str, sender: str, now: float) -> BudgetUse | None:
        row = await self._fetchone(
            "SELECT used, resets_at FROM budgets WHERE budget = $1 AND sender = $2"
            " AND resets_at > $3",
            budget,
            sender,
            now,
        )
        return budget_use_of(row)
