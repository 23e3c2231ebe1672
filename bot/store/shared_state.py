"""What replicas share beyond sessions: small values kept per scope until they expire (what
a channel adapter must find again on any replica) and per-sender budget counters. Each
write is atomic: a budget use is one conditional upsert, so concurrent takes of one
sender's budget queue on its row and never hand out more than the limit."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from bot.store.db import Db, Row

# `budget_take` without a limit: count the use whatever the count already is.
NO_LIMIT = 2**62
# A budget row is kept this long after its window ended (at most one row per sender and
# budget).
BUDGET_KEPT_SECONDS = 86_400.0
# Expired rows dropped by a write: a bounded amount of work that keeps up with the writes.
PURGE_BATCH = 100
# Between purges that found less than a full batch, writes drop nothing: two DELETEs on every
# write cost more than the value itself (a Telegram acknowledgement writes per message).
PURGE_PAUSE_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class BudgetUse:
    """How much of a budget a sender has used in the current window, and when it ends."""

    used: int
    resets_at: float


def _budget_use(row: Row | None) -> BudgetUse | None:
    return BudgetUse(int(row[0]), float(row[1])) if row else None


class SharedStateStore(Protocol):
    """Scoped values until they expire (a value kept with `expires_at <= now` is forgotten),
    and per-sender budgets: a take beyond `limit` returns None, `limit=None` always counts.
    Each write is atomic, so replicas sharing the store never both take the last unit."""

    async def state_put(
        self, scope: str, key: str, value: str, expires_at: float, now: float
    ) -> None: ...
    async def state_get(self, scope: str, key: str, now: float) -> str | None: ...
    async def budget_take(
        self, budget: str, sender: str, *, limit: int | None, window: float, now: float
    ) -> BudgetUse | None: ...
    async def budget_use(self, budget: str, sender: str, now: float) -> BudgetUse | None: ...


# A window that has ended starts afresh at this use; an open one counts up unless full (then
# the WHERE makes the update a no-op and nothing is returned).
_TAKE_BUDGET = (
    "INSERT INTO budgets(budget, sender, used, resets_at) VALUES (?, ?, 1, ?)"
    " ON CONFLICT(budget, sender) DO UPDATE SET"
    " used = CASE WHEN budgets.resets_at <= ? THEN 1 ELSE budgets.used + 1 END,"
    " resets_at = CASE WHEN budgets.resets_at <= ? THEN excluded.resets_at"
    " ELSE budgets.resets_at END"
    " WHERE budgets.resets_at <= ? OR budgets.used < ?"
    " RETURNING used, resets_at"
)


class SharedStateTables:
    db: Db
    _purge_due = 0.0  # when a write next drops expired rows (per process)

    async def state_put(
        self, scope: str, key: str, value: str, expires_at: float, now: float
    ) -> None:
        skip = self.db.dialect.skip_locked
        async with self.db.transaction() as tx:
            await tx.execute(
                "INSERT INTO shared_state(scope, key, value, expires_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT(scope, key) DO UPDATE SET value = excluded.value,"
                " expires_at = excluded.expires_at",
                scope,
                key,
                value,
                expires_at,
            )
            if now < self._purge_due:
                return
            # What has expired is never read again: dropped here, so it cannot pile up. Rows
            # another replica is dropping (or writing) are skipped, so replicas never wait.
            states = await tx.execute(
                "DELETE FROM shared_state WHERE (scope, key) IN (SELECT scope, key FROM"
                f" shared_state WHERE expires_at <= ? LIMIT {PURGE_BATCH} {skip})",
                now,
            )
            budgets = await tx.execute(
                "DELETE FROM budgets WHERE (budget, sender) IN (SELECT budget, sender FROM"
                f" budgets WHERE resets_at <= ? LIMIT {PURGE_BATCH} {skip})",
                now - BUDGET_KEPT_SECONDS,
            )
            # A full batch may have left more behind: the next write goes on dropping.
            full = max(states, budgets) >= PURGE_BATCH
            self._purge_due = now if full else now + PURGE_PAUSE_SECONDS

    async def state_get(self, scope: str, key: str, now: float) -> str | None:
        value = await self.db.fetchval(
            "SELECT value FROM shared_state WHERE scope = ? AND key = ? AND expires_at > ?",
            scope,
            key,
            now,
        )
        return None if value is None else str(value)

    async def budget_take(
        self, budget: str, sender: str, *, limit: int | None, window: float, now: float
    ) -> BudgetUse | None:
        cap = NO_LIMIT if limit is None else limit
        row = await self.db.fetchrow(_TAKE_BUDGET, budget, sender, now + window, now, now, now, cap)
        return _budget_use(row)

    async def budget_use(self, budget: str, sender: str, now: float) -> BudgetUse | None:
        row = await self.db.fetchrow(
            "SELECT used, resets_at FROM budgets WHERE budget = ? AND sender = ? AND resets_at > ?",
            budget,
            sender,
            now,
        )
        return _budget_use(row)
