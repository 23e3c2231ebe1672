"""A per-sender budget counted in the store: `limit` uses per sender and window, the same
budget for every replica. A window starts with a sender's first use after the previous one
ended; taking one is one conditional upsert, so two replicas can never both take the last.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum

from bot.store.shared_state import SharedStateStore


class BudgetName(StrEnum):
    """Which budget a count belongs to (the store keeps each apart)."""

    REFUSALS = "refusals"
    COMMANDS = "commands"
    TURNS = "turns"
    CONSOLE_LOGINS = "console_logins"  # wrong console tokens (bot/wrong_tokens.py)
    CHAT_TOKENS = "chat_tokens"  # wrong web-chat tokens (local.token)


@dataclass(frozen=True, slots=True)
class Standing:
    """Where a group of senders stands in a budget: the seconds until every one of them may
    take one again (0: now), and the fewest uses any of them has left."""

    delay: float
    fewest_left: int


class SenderBudget:
    """One budget: `limit` uses per sender and `window` seconds, counted in the store."""

    def __init__(
        self,
        store: SharedStateStore,
        name: BudgetName,
        *,
        limit: int,
        window: float,
        clock: Callable[[], float] = time.time,
    ):
        self.store = store
        self.name = name
        self.limit = limit
        self.window = window
        self.clock = clock  # wall-clock time: the replicas compare it

    async def take(self, sender: str) -> bool:
        """Use one of `sender`'s budget; False when it is used up for now."""
        use = await self.store.budget_take(
            self.name, sender, limit=self.limit, window=self.window, now=self.clock()
        )
        return use is not None

    async def left(self, sender: str) -> int:
        """How many `sender` may still take in the current window."""
        return (await self.standing([sender])).fewest_left

    async def standing(self, senders: Iterable[str]) -> Standing:
        """Where `senders` stand, from one read of each one's count."""
        now = self.clock()
        delay, fewest = 0.0, self.limit
        for sender in senders:
            use = await self.store.budget_use(self.name, sender, now)
            if use is None:
                continue
            fewest = min(fewest, max(0, self.limit - use.used))
            if use.used >= self.limit:
                delay = max(delay, use.resets_at - now)
        return Standing(delay, fewest)

    async def record(self, senders: Iterable[str]) -> None:
        """Count one for each of `senders`, even beyond the budget (a merged turn that had
        to run anyway)."""
        for sender in senders:
            await self.store.budget_take(
                self.name, sender, limit=None, window=self.window, now=self.clock()
            )
