"""Per-sender budgets: how many refusals, pairing codes and command answers a sender gets
per window (then silence, so spamming the bot cannot make it spam back), and how many model
turns a sender may start per minute (then their messages wait and merge).

State lives in memory: a restart (or another replica) grants a fresh budget, which costs at
most a few more replies or turns, never access.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable

from cachetools import TTLCache

REFUSAL_REPLIES = 3  # answers to refused messages per sender and window
REFUSAL_WINDOW_SECONDS = 600.0
COMMAND_REPLIES = 10  # chat commands (and their refusals) per sender and window
COMMAND_WINDOW_SECONDS = 60.0
TURN_WINDOW_SECONDS = 60.0  # the minute of agent.sender_turns_per_minute
MAX_TRACKED_SENDERS = 10_000  # oldest senders are forgotten beyond this


class ReplyBudget:
    """A sliding-window count of events per sender."""

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
        # A sender's entry expires a window after its last event, when all of it is stale;
        # beyond max_senders the least recently seen are forgotten.
        self._sent: TTLCache[str, deque[float]] = TTLCache(max_senders, window, timer=clock)

    def _recent(self, sender: str) -> deque[float]:
        now = self.clock()
        times = self._sent.get(sender) or deque()
        while times and now - times[0] >= self.window:
            times.popleft()
        return times

    def take(self, sender: str) -> bool:
        """Use one of `sender`'s budget; False when it is used up for now."""
        times = self._recent(sender)
        allowed = len(times) < self.replies
        if allowed:
            times.append(self.clock())
        self._sent[sender] = times
        return allowed

    def left(self, sender: str) -> int:
        """How many `sender` may still take in the current window."""
        return max(0, self.replies - len(self._recent(sender)))

    def wait(self, senders: Iterable[str]) -> float:
        """Seconds until every one of `senders` may take one again (0: now)."""
        longest = 0.0
        for sender in senders:
            times = self._recent(sender)
            if len(times) >= self.replies:
                longest = max(longest, times[0] + self.window - self.clock())
        return longest

    def record(self, senders: Iterable[str]) -> None:
        """Count one for each of `senders`, even beyond the budget (a merged turn that had
        to run anyway)."""
        for sender in senders:
            times = self._recent(sender)
            times.append(self.clock())
            self._sent[sender] = times
