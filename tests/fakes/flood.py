"""Flood control for the fake platforms: sliding windows over request arrival times, as a
platform counts them. Off unless a test turns it on; then a request over any window is
refused with 429 (and how long to wait), and counted, so a test can assert Krill provoked
none."""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SlidingLimit:
    """At most `count` accepted requests in any `period` seconds, per key."""

    count: int
    period: float


# Telegram's published limits (telegram.constants.FloodLimit) and Slack's chat.postMessage.
TELEGRAM_CHAT = SlidingLimit(1, 1.0)
TELEGRAM_GROUP = SlidingLimit(20, 60.0)
TELEGRAM_OVERALL = SlidingLimit(30, 1.0)
SLACK_CHANNEL = SlidingLimit(1, 1.0)


class FloodControl:
    """Windows keyed by scope (`"chat"`, `"group"`, `"overall"`, ...) and a key within it."""

    def __init__(
        self, limits: dict[str, SlidingLimit], clock: Callable[[], float] = time.monotonic
    ):
        self.limits = limits
        self.clock = clock
        self.refused = 0  # 429s answered: requests the client sent too fast
        self.accepted = 0
        self._arrivals: dict[tuple[str, Hashable], deque[float]] = {}

    def admit(self, keys: dict[str, Hashable]) -> float | None:
        """Record one request counted under `{scope: key}`; None if every window has room,
        else the seconds until the fullest one does (the request is then not recorded)."""
        now = self.clock()
        wait = 0.0
        for scope, key in keys.items():
            limit = self.limits.get(scope)
            if limit is None:
                continue
            arrivals = self._arrivals.setdefault((scope, key), deque())
            while arrivals and arrivals[0] <= now - limit.period:
                arrivals.popleft()
            if len(arrivals) >= limit.count:
                wait = max(wait, arrivals[0] + limit.period - now)
        if wait > 0:
            self.refused += 1
            return wait
        for scope, key in keys.items():
            if scope in self.limits:
                self._arrivals[(scope, key)].append(now)
        self.accepted += 1
        return None


def retry_after_seconds(wait: float) -> int:
    """Whole seconds, as Telegram's `retry_after` and Slack's `Retry-After` give them."""
    return max(1, math.ceil(wait))
