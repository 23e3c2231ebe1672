"""The one backoff policy of every reconnect and restart loop (Telegram polling and start-up,
Slack sign-in and Socket Mode, MCP servers): the wait doubles with each consecutive failure,
from a first delay up to a cap, and starts over after a success."""

from __future__ import annotations

# Beyond this many doublings every realistic cap is reached; it keeps 2**n small.
_MAX_DOUBLINGS = 32


def backoff_delay(failures: int, first: float, cap: float) -> float:
    """Seconds to wait after `failures` (>= 1) consecutive failures: first, 2*first, ... cap."""
    return min(cap, first * 2 ** min(max(failures - 1, 0), _MAX_DOUBLINGS))


class Backoff:
    """Counts consecutive failures of one loop and says how long to wait after each."""

    def __init__(self, first: float, cap: float):
        self.first = first
        self.cap = cap
        self.failures = 0

    def next(self) -> float:
        """Record one more failure; returns the seconds to wait before trying again."""
        self.failures += 1
        return backoff_delay(self.failures, self.first, self.cap)

    def reset(self) -> None:
        """The loop succeeded: the next failure waits `first` again."""
        self.failures = 0
