"""What replicas share beyond sessions, as every store offers it: small values kept per
scope until they expire, and per-sender budget counters (`SharedStateStore`), with the
typed budget row both implementations map their rows to."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

# `budget_take` without a limit: count the use whatever the count already is.
NO_LIMIT = 2**62


@dataclass(frozen=True, slots=True)
class BudgetUse:
    """How much of a budget a sender has used in the current window, and when it ends."""

    used: int
    resets_at: float


def budget_use_of(row: Any) -> BudgetUse | None:
    """A `(used, resets_at)` row of either store as a `BudgetUse` (None: no row)."""
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
