"""Reply budgets for people Krill refuses: each sender gets a few answers (a refusal or their
pairing code) per window, then silence, so spamming the bot with DMs cannot make it spam
back, nor hammer the store for pairing codes.

State lives in memory: a restart (or another replica) grants a fresh budget, which costs at
most a few more replies, never access.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

from cachetools import TTLCache

REFUSAL_REPLIES = 3  # answers per sender and window
REFUSAL_WINDOW_SECONDS = 600.0
MAX_TRACKED_SENDERS = 10_000  # oldest senders are forgotten beyond this


class ReplyBudget:
    """A sliding-window count of replies per sender."""

    def __init__(
        self,
        *,
        replies: int = REFUSAL_REPLIES,
        window: float = REFUSAL_WINDOW_SECONDS,
        max_senders: int = MAX_TRACKED_SENDERS,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.replies = replies
        self.window = window
        self.clock = clock
        # A sender's entry expires a window after its last reply, when all of it is stale;
        # beyond max_senders the least recently seen are forgotten.
        self._sent: TTLCache[str, deque[float]] = TTLCache(max_senders, window, timer=clock)

    def take(self, sender: str) -> bool:
        """Use one reply of `sender`'s budget; False when it is used up for now."""
        now = self.clock()
        times = self._sent.get(sender) or deque()
        while times and now - times[0] >= self.window:
            times.popleft()
        allowed = len(times) < self.replies
        if allowed:
            times.append(now)
        self._sent[sender] = times
        return allowed
