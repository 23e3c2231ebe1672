"""The global turn slots: how many turns work at once across all sessions, and how many tool
calls wait on the outside world at once.

A turn slot (`agent.max_concurrent_turns`) bounds the work a turn does itself: building
requests, calling the model, writing the transcript. That is what costs memory, CPU and
API rate limit. A tool call is a wait on something else (a web page, an MCP server, an
upload), so while its tools run a turn gives its slot back (`TurnSlots.away`) and takes one
again before its next model call; other sessions' turns use the slot meanwhile, and a slow
tool cannot starve them. Tool calls have their own cap (`agent.max_concurrent_tools`, taken
per call with `TurnSlots.tool`) so a flood of slow fetches cannot hold unbounded memory.

Which task holds a turn slot is recorded here, so `away` gives back only a slot its task
really holds (a flush run outside a lane holds none) and a slot is never returned twice,
also when the turn is cancelled while away.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator


class TurnSlots:
    def __init__(self, turns: int, tools: int) -> None:
        self._turns = asyncio.Semaphore(turns)
        self._tools = asyncio.Semaphore(tools)
        # Tasks holding a turn slot: True while it is theirs, False while they are away.
        self._holders: dict[asyncio.Task[object], bool] = {}

    @contextlib.asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """Hold a turn slot for the body (the session queue wraps each batch in this)."""
        task = asyncio.current_task()
        assert task is not None
        await self._turns.acquire()
        self._holders[task] = True
        try:
            yield
        finally:
            if self._holders.pop(task, False):
                self._turns.release()

    @contextlib.asynccontextmanager
    async def away(self) -> AsyncIterator[None]:
        """Give the current task's turn slot back for the body (its tools' wait), and take
        one again after it; a task that holds none just runs the body. A turn cancelled
        while away (/stop, shutdown) ends without taking one again."""
        task = asyncio.current_task()
        if task is None or not self._holders.get(task):
            yield
            return
        self._holders[task] = False
        self._turns.release()
        try:
            yield
        except asyncio.CancelledError:
            raise
        except BaseException:
            await self._take_back(task)
            raise
        await self._take_back(task)

    async def _take_back(self, task: asyncio.Task[object]) -> None:
        await self._turns.acquire()
        self._holders[task] = True

    @contextlib.asynccontextmanager
    async def tool(self) -> AsyncIterator[None]:
        """Hold a tool slot for one tool call."""
        async with self._tools:
            yield
