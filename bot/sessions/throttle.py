"""Reply budgets for people Krill refuses: each sender gets a few answers (a refusal or their
pairing code) per window, then silence, so spamming the bot with DMs cannot make it spam
back, nor hammer the store for pairing codes.

State lives in memory: a restart (or another replica) grants a fresh budget, which costs at
most a few more replies, never access.
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable

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
        self.max_senders = max_senders
        self.clock = clock
        self._sent: OrderedDict[str, deque[float]] = OrderedDict()

    def take(self, sender: str) -> bool:
        """Use one reply of `sender`'s budget; False when it is used up for now."""
        now = self.clock()
        times = self._sent.pop(sender, None) or deque()
        while times and now - times[0] >= self.window:
            times.popleft()
        allowed = len(times) < self.replies
        if allowed:
            times.append(now)
        self._sent[sender] = times  # re-inserted last: the most recently seen sender
        while len(self._sent) > self.max_senders:
            self._sent.popitem(last=False)
        return allowed
