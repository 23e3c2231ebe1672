"""State several processes share in SQLite: small keyed values with an expiry (what a
channel adapter must find again on any replica) and per-sender budget counters. A budget
use is one conditional upsert, so two processes can never both take the last unit."""

from __future__ import annotations

from bot.store.shared_state import NO_LIMIT, BudgetUse, budget_use_of
from bot.store.sqlite.connection import Connection

# A budget row is kept a while after its window ended (at most one row per sender and budget).
_KEEP = 86_400.0
_PUT = (
    "INSERT INTO shared_state(scope, key, value, expires_at) VALUES (?, ?, ?, ?)"
    " ON CONFLICT(scope, key) DO UPDATE SET value = excluded.value,"
    " expires_at = excluded.expires_at"
)
# A window that has ended starts afresh at this use; an open one counts up unless full (then
# the WHERE makes the update a no-op and nothing is returned).
_TAKE = (
    "INSERT INTO budgets(budget, sender, used, resets_at) VALUES (?, ?, 1, ?)"
    " ON CONFLICT(budget, sender) DO UPDATE SET"
    " used = CASE WHEN budgets.resets_at <= ? THEN 1 ELSE budgets.used + 1 END,"
    " resets_at = CASE WHEN budgets.resets_at <= ? THEN excluded.resets_at"
    " ELSE budgets.resets_at END"
    " WHERE budgets.resets_at <= ? OR budgets.used < ?"
    " RETURNING used, resets_at"
)


class SharedStateTables(Connection):
    async def state_put(
        self, scope: str, key: str, value: str, expires_at: float, now: float
    ) -> None:
        async with self.transaction() as db:
            await db.execute(_PUT, (scope, key, value, expires_at))
            # What has expired is never read again: dropped here, so it cannot pile up.
            await db.execute("DELETE FROM shared_state WHERE expires_at <= ?", (now,))
            await db.execute("DELETE FROM budgets WHERE resets_at <= ?", (now - _KEEP,))

    async def state_get(self, scope: str, key: str, now: float) -> str | None:
        row = await self._fetchone(
            "SELECT value FROM shared_state WHERE scope = ? AND key = ? AND expires_at > ?",
            (scope, key, now),
        )
        return str(row[0]) if row else None

    async def budget_take(
        self, budget: str, sender: str, *, limit: int | None, window: float, now: float
    ) -> BudgetUse | None:
        cap = NO_LIMIT if limit is None else limit
        async with self.transaction() as db:
            cur = await db.execute(_TAKE, (budget, sender, now + window, now, now, now, cap))
            row = await cur.fetchone()
            await cur.close()
        return budget_use_of(row)

    async def budget_use(self, budget: str, sender: str, now: float) -> BudgetUse | None:
        row = await self._fetchone(
            "SELECT used, resets_at FROM budgets WHERE budget = ? AND sender = ? AND resets_at > ?",
            (budget, sender, now),
        )
        return budget_use_of(row)
