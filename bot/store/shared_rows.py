"""The typed row of a per-sender budget, shared by every store implementation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
