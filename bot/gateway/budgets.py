"""Per-sender budgets: how many refusals, pairing codes and command answers a sender gets
per window (then silence, so spamming the bot cannot make it spam back), and how many model
turns a sender may start per minute (then their messages wait and merge).

The counts live in the store, so every replica draws on one budget: a sender limited to N
per window gets N in total, however many replicas their messages reach. A window starts
with a sender's first use after the previous window ended; taking one is one conditional
upsert, so two replicas can never both take the last.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from enum import StrEnum

from bot.store.base import SharedStateStore

REFUSAL_REPLIES = 3  # answers to refused messages per sender and window
REFUSAL_WINDOW_SECONDS = 600.0
COMMAND_REPLIES = 10  # chat commands (and their refusals) per sender and window
COMMAND_WINDOW_SECONDS = 60.0
TURN_WINDOW_SECONDS = 60.0  # the minute of agent.sender_turns_per_minute


class BudgetName(StrEnum):
    """Which budget a count belongs to (the store keeps each apart)."""

    REFUSALS = "refusals"
    COMMANDS = "commands"
    TURNS = "turns"


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
        use = await self.store.budget_use(self.name, sender, self.clock())
        return max(0, self.limit - use.used) if use is not None else self.limit

    async def wait(self, senders: Iterable[str]) -> float:
        """Seconds until every one of `senders` may take one again (0: now)."""
        now = self.clock()
        longest = 0.0
        for sender in senders:
            use = await self.store.budget_use(self.name, sender, now)
            if use is not None and use.used >= self.limit:
                longest = max(longest, use.resets_at - now)
        return longest

    async def record(self, senders: Iterable[str]) -> None:
        """Count one for each of `senders`, even beyond the budget (a merged turn that had
        to run anyway)."""
        for sender in senders:
            await self.store.budget_take(
                self.name, sender, limit=None, window=self.window, now=self.clock()
            )
