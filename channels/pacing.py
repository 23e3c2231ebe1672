"""Outbound pacing shared by the platform adapters: at most N calls per window for each key
(a chat, a group, the whole bot), so Krill never provokes a platform's flood control.

A slot is freed only `period` seconds after the call that used it *returned*. The platform
counts calls when they arrive, and every arrival lies before its own response, so two calls
that share a slot reach the platform more than `period` apart however long each spent in
flight. A leaky bucket counted at acquire time (aiolimiter, PTB's AIORateLimiter) cannot
promise that: a call that is slow to arrive can land inside the next one's window.

Final replies wait for their slot, in arrival order. Previews never wait: they go out only
when a slot is free at once and, in shared windows, when more than half of the window is
still free, so previews never push a final reply back; otherwise `PreviewSkipped` says the
preview was left out (the next one, or the final reply, shows the text).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Hashable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from bot.errors import PreviewSkipped

log = logging.getLogger(__name__)

SWEEP_ABOVE = 1_000  # keys kept before idle ones are forgotten


@dataclass(frozen=True, slots=True)
class Limit:
    """At most `count` calls in any `period` seconds."""

    count: int
    period: float


@dataclass(slots=True)
class _Key:
    in_flight: int = 0
    cooling: deque[float] = field(default_factory=deque)  # when each used slot frees up
    queue: asyncio.Lock = field(default_factory=asyncio.Lock)  # FIFO among waiting calls
    freed: asyncio.Event = field(default_factory=asyncio.Event)


class Window:
    """One `Limit`, kept separately for each key."""

    def __init__(self, limit: Limit, clock: Callable[[], float] = time.monotonic):
        self.limit = limit
        self._clock = clock
        self._keys: dict[Hashable, _Key] = {}

    def _state(self, key: Hashable) -> _Key:
        state = self._keys.get(key)
        if state is None:
            if len(self._keys) >= SWEEP_ABOVE:
                self._sweep()
            state = self._keys[key] = _Key()
        return state

    def _free(self, state: _Key) -> int:
        now = self._clock()
        while state.cooling and state.cooling[0] <= now:
            state.cooling.popleft()
        return self.limit.count - state.in_flight - len(state.cooling)

    def _sweep(self) -> None:
        for key, state in list(self._keys.items()):
            if self._free(state) == self.limit.count and not state.queue.locked():
                del self._keys[key]

    def can_take_now(self, key: Hashable, reserve: int) -> bool:
        """Whether a call could start at once leaving more than `reserve` slots free, with
        nobody waiting ahead of it."""
        state = self._state(key)
        return not state.queue.locked() and self._free(state) > reserve

    def take_now(self, key: Hashable) -> None:
        self._state(key).in_flight += 1

    async def take(self, key: Hashable) -> None:
        """Wait, behind earlier callers, until a slot for `key` is free, and hold it."""
        state = self._state(key)
        async with state.queue:
            while self._free(state) <= 0:
                state.freed.clear()
                wait = state.cooling[0] - self._clock() if state.cooling else None
                try:
                    await asyncio.wait_for(state.freed.wait(), wait)
                except TimeoutError:
                    pass  # the oldest used slot has cooled down
            state.in_flight += 1

    def give_back(self, key: Hashable) -> None:
        """The call holding a slot returned: the slot frees up `period` seconds from now."""
        state = self._state(key)
        state.in_flight -= 1
        state.cooling.append(self._clock() + self.limit.period)
        state.freed.set()


@asynccontextmanager
async def paced(windows: Sequence[tuple[Window, Hashable]], *, wait: bool) -> AsyncIterator[None]:
    """Hold a slot in every `(window, key)` for the duration of one platform call.

    With `wait=False` (a preview) nothing is waited for: either every slot is free at once
    and within the headroom kept for final replies, or `PreviewSkipped` is raised.
    """
    taken: list[tuple[Window, Hashable]] = []
    try:
        if wait:
            asked = time.monotonic()
            # Always the same order (chat, group, overall), so waiters cannot deadlock.
            for window, key in windows:
                await window.take(key)
                taken.append((window, key))
            if windows:  # bench/reliability.py reads this line too
                log.debug("slot for %s after %.3fs", windows[0][1], time.monotonic() - asked)
        else:
            if not all(w.can_take_now(k, w.limit.count // 2) for w, k in windows):
                raise PreviewSkipped("the platform's rate limits leave no room for a preview")
            for window, key in windows:
                window.take_now(key)
                taken.append((window, key))
        yield
    finally:
        for window, key in taken:
            window.give_back(key)
