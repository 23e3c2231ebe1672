"""Per-session lanes: FIFO, merging of waiting messages, global concurrency cap, /stop."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from bot.sessions.queue import SessionQueue
from bot.sessions.slots import TurnSlots


@dataclass
class WorkItem:
    kind: str  # "message" items merge; anything else runs alone
    data: Any


def queue(
    runner: Callable[[str, list[WorkItem]], Awaitable[None]], *, max_concurrent: int, batch_cap: int
) -> SessionQueue[WorkItem]:
    return SessionQueue(
        runner,
        mergeable=lambda item: item.kind == "message",
        slots=TurnSlots(max_concurrent, tools=max_concurrent),
        batch_cap=batch_cap,
    )


async def test_one_turn_at_a_time_and_waiting_messages_merge_in_order() -> None:
    seen: list[list[str]] = []
    gate = asyncio.Event()

    async def runner(key: str, items: list[WorkItem]) -> None:
        seen.append([i.data for i in items])
        if len(seen) == 1:
            await gate.wait()

    q = queue(runner, max_concurrent=4, batch_cap=20)
    q.submit("k", WorkItem("message", "a"))
    await asyncio.sleep(0)
    for text in ("b", "c", "d"):
        q.submit("k", WorkItem("message", text))
    assert q.depth("k") == 3 and q.busy("k")
    gate.set()
    await asyncio.wait_for(q.wait_idle("k"), 2)
    assert seen == [["a"], ["b", "c", "d"]]


async def test_messages_that_come_while_a_chat_waits_for_a_slot_join_its_turn() -> None:
    # Under load every slot is busy: a chat's messages that pile up meanwhile get one turn,
    # not a turn each (which would make the chat wait for a slot once per message).
    seen: list[list[str]] = []
    other_chat = asyncio.Event()

    async def runner(key: str, items: list[WorkItem]) -> None:
        seen.append([i.data for i in items])
        if key == "busy":
            await other_chat.wait()

    q = queue(runner, max_concurrent=1, batch_cap=20)
    q.submit("busy", WorkItem("message", "elsewhere"))
    await asyncio.sleep(0)
    q.submit("k", WorkItem("message", "a"))
    await asyncio.sleep(0)  # "a" is taken and waits for the one slot
    for text in ("b", "c"):
        q.submit("k", WorkItem("message", text))
    q.submit("k", WorkItem("call", "reset"))  # runs alone, after them
    other_chat.set()
    await asyncio.wait_for(q.wait_idle(), 2)
    assert seen == [["elsewhere"], ["a", "b", "c"], ["reset"]]


async def test_batch_cap_and_solo_items() -> None:
    seen: list[list[str]] = []
    gate = asyncio.Event()

    async def runner(key: str, items: list[WorkItem]) -> None:
        seen.append([i.data for i in items])
        await gate.wait()

    q = queue(runner, max_concurrent=4, batch_cap=2)
    q.submit("k", WorkItem("message", "a"))
    await asyncio.sleep(0)
    for item in ("b", "c", "d"):
        q.submit("k", WorkItem("message", item))
    q.submit("k", WorkItem("call", "reset"))
    q.submit("k", WorkItem("message", "e"))
    gate.set()
    await asyncio.wait_for(q.wait_idle(), 2)
    assert seen == [["a"], ["b", "c"], ["d"], ["reset"], ["e"]]


async def test_global_concurrency_cap() -> None:
    running = 0
    peak = 0

    async def runner(key: str, items: list[WorkItem]) -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.02)
        running -= 1

    q = queue(runner, max_concurrent=3, batch_cap=20)
    for i in range(10):
        q.submit(f"k{i}", WorkItem("message", i))
    await asyncio.wait_for(q.wait_idle(), 5)
    assert peak == 3


async def test_a_failing_turn_does_not_stop_the_lane() -> None:
    seen: list[str] = []

    async def runner(key: str, items: list[WorkItem]) -> None:
        seen.append(items[0].data)
        if items[0].data == "boom":
            raise RuntimeError("boom")

    q = queue(runner, max_concurrent=1, batch_cap=1)
    q.submit("k", WorkItem("message", "boom"))
    q.submit("k", WorkItem("message", "next"))
    await asyncio.wait_for(q.wait_idle(), 2)
    assert seen == ["boom", "next"]


async def test_stop_cancels_the_running_turn_and_returns_waiting_items() -> None:
    cancelled = asyncio.Event()

    async def runner(key: str, items: list[WorkItem]) -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    q = queue(runner, max_concurrent=1, batch_cap=1)
    q.submit("k", WorkItem("message", "long"))
    await asyncio.sleep(0.01)
    q.submit("k", WorkItem("message", "waiting"))
    running, waiting = q.stop("k")
    assert [i.data for i in running] == ["long"] and [i.data for i in waiting] == ["waiting"]
    await asyncio.wait_for(cancelled.wait(), 1)
    await asyncio.wait_for(q.wait_idle("k"), 1)
    q.submit("k", WorkItem("message", "after"))  # the lane still works after a stop
    await asyncio.sleep(0.01)
    assert q.busy("k")
    await q.close()
