"""How many wrong tokens the console and the web chat answer: a few per client address and
a few more from everyone together in each window, counted in the store so several
replicas allow them once in total. Beyond either, a wrong token gets 429 instead of "wrong".

Only wrong tokens are counted, and only after the comparison: the right token is accepted
whatever the counts say, so nobody can lock the operator out by guessing badly. What keeps
the token itself safe is its length (`admin.console_token` must be long); the limits keep
a flood of guesses from filling the log and the store, and tell a client to stop.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from bot.store.budgets import BudgetName, SenderBudget
from bot.store.shared_state import SharedStateStore

PER_ADDRESS = 5  # wrong tokens one client address may send a window
TOTAL = 20  # wrong tokens all clients together may send a window
WINDOW_SECONDS = 60.0
EVERYONE = "*"  # the sender the total is counted under (no address looks like it)


class WrongTokens:
    """One surface's wrong-token limits (`name` keeps the console's apart from the chat's)."""

    def __init__(
        self,
        store: SharedStateStore,
        name: BudgetName,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._per_address = SenderBudget(
            store, name, limit=PER_ADDRESS, window=WINDOW_SECONDS, clock=clock
        )
        self._total = SenderBudget(store, name, limit=TOTAL, window=WINDOW_SECONDS, clock=clock)

    async def count(self, address: str) -> float:
        """Count one wrong token from `address`. Returns 0 when it may be told the token is
        wrong, else the seconds until it may guess again (answer 429 with Retry-After)."""
        if not await self._per_address.take(address):
            return await self._wait(self._per_address, address)
        if not await self._total.take(EVERYONE):
            return await self._wait(self._total, EVERYONE)
        return 0.0

    @staticmethod
    async def _wait(budget: SenderBudget, sender: str) -> float:
        # At least a second: a window that ends as we read it still means "not now".
        return max(1.0, (await budget.standing([sender])).delay)
