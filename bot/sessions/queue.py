"""Per-session FIFO lanes: one turn at a time per session key, a global cap across sessions
(the turn slots of `bot.sessions.slots`).

Messages that arrive while a session is busy wait in its lane and are handed to the next
turn together (up to `batch_cap`), in arrival order; nothing is dropped. Work items that
must run alone (commands such as /reset) are never merged with messages: `mergeable` says
which items may be. A `gate` may hold a batch back before it takes a concurrency slot (a
sender over their turn budget) and grow it meanwhile with `take_waiting`. The queue is
generic over the work item type (`bot.gateway.lanes` defines Krill's).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from bot.sessions.slots import TurnSlots

log = logging.getLogger(__name__)

W = TypeVar("W")


@dataclass(slots=True)
class _Lane(Generic[W]):
    items: deque[W] = field(default_factory=deque)
    task: asyncio.Task[None] | None = None
    running: list[W] = field(default_factory=list)


class SessionQueue(Generic[W]):
    def __init__(
        self,
        runner: Callable[[str, list[W]], Awaitable[None]],
        *,
        mergeable: Callable[[W], bool],
        slots: TurnSlots,
        batch_cap: int,
        gate: Callable[[str, list[W]], Awaitable[None]] | None = None,
    ):
        self._runner = runner
        self._mergeable = mergeable
        self._gate = gate
        self._slots = slots
        self._batch_cap = batch_cap
        self._lanes: dict[str, _Lane[W]] = {}
        self._idle = asyncio.Event()
        self._idle.set()
        self._waiters: dict[str, list[asyncio.Future[None]]] = {}
        self._closing = False

    def submit(self, key: str, item: W) -> None:
        lane = self._lanes.setdefault(key, _Lane[W]())
        lane.items.append(item)
        self._idle.clear()
        if lane.task is None or lane.task.done():
            lane.task = asyncio.create_task(self._drain(key, lane), name=f"lane:{key}")

    def depth(self, key: str) -> int:
        lane = self._lanes.get(key)
        return len(lane.items) if lane else 0

    def busy(self, key: str) -> bool:
        lane = self._lanes.get(key)
        return bool(lane and lane.running)

    def total_depth(self) -> int:
        return sum(len(lane.items) + len(lane.running) for lane in self._lanes.values())

    def _take_batch(self, lane: _Lane[W]) -> list[W]:
        batch = [lane.items.popleft()]
        self._grow(lane, batch)
        return batch

    def _grow(self, lane: _Lane[W], batch: list[W]) -> None:
        """Move the mergeable items waiting at the head of `lane` into `batch` (if it is a
        batch of mergeable items), up to `batch_cap`."""
        if not self._mergeable(batch[0]):
            return
        while lane.items and len(batch) < self._batch_cap and self._mergeable(lane.items[0]):
            batch.append(lane.items.popleft())

    def take_waiting(self, key: str) -> list[W]:
        """Remove and return the mergeable items waiting at the head of `key`'s lane, however
        many (a gate adds them to the batch it holds back)."""
        lane = self._lanes.get(key)
        taken: list[W] = []
        while lane and lane.items and self._mergeable(lane.items[0]):
            taken.append(lane.items.popleft())
        return taken

    async def _drain(self, key: str, lane: _Lane[W]) -> None:
        try:
            while lane.items:
                batch = self._take_batch(lane)
                lane.running = batch
                try:
                    if self._gate is not None:
                        await self._gate(key, batch)
                    async with self._slots.turn():
                        # Messages that came while the batch waited for a slot join it: under
                        # load a chat gets one turn for what piled up, not a turn per message.
                        self._grow(lane, batch)
                        # bench/reliability.py reads this line to tell where a delay goes.
                        log.debug("lane %s: %d item(s) start", key, len(batch))
                        await self._runner(key, batch)
                except asyncio.CancelledError:
                    # /stop cancels this task; shutdown cancels it too and must win.
                    log.info("turn for %s was stopped", key)
                    if self._closing:
                        raise
                except Exception:
                    log.exception("turn for %s failed", key)
                finally:
                    lane.running = []
        finally:
            if not lane.items and self._lanes.get(key) is lane:
                del self._lanes[key]
                for waiter in self._waiters.pop(key, []):
                    if not waiter.done():
                        waiter.set_result(None)
            if not self._lanes:
                self._idle.set()

    def stop(self, key: str) -> tuple[list[W], list[W]]:
        """Cancel the running turn of `key`; returns (the running items, the waiting ones)."""
        lane = self._lanes.get(key)
        if lane is None:
            return [], []
        running = list(lane.running)
        dropped = list(lane.items)
        lane.items.clear()
        if lane.task and not lane.task.done():
            lane.task.cancel()
        return running, dropped

    async def wait_idle(self, key: str | None = None) -> None:
        """Wait until `key` (or every lane) has nothing queued or running."""
        if key is None:
            await self._idle.wait()
            return
        if key not in self._lanes:
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(key, []).append(waiter)
        await waiter

    async def close(self) -> None:
        self._closing = True
        tasks = [lane.task for lane in self._lanes.values() if lane.task and not lane.task.done()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._lanes.clear()
        self._idle.set()
