"""bot.sessions.slots: a turn gives its global slot back while its tools run and takes one
again after; only a slot a task holds is given back, never twice, also when cancelled."""

from __future__ import annotations

import asyncio

from bot.sessions.slots import TurnSlots


async def turn_with_tools(
    slots: TurnSlots, away: asyncio.Event, tools_done: asyncio.Event, order: list[str]
) -> None:
    """A turn whose tools run until `tools_done`; then it goes on to its next model call."""
    async with slots.turn():
        async with slots.away():
            away.set()
            await tools_done.wait()
        order.append("the turn with tools goes on")


async def test_a_turn_away_on_its_tools_lets_another_turn_run() -> None:
    slots = TurnSlots(turns=1, tools=4)
    away, tools_done, other_ran = asyncio.Event(), asyncio.Event(), asyncio.Event()
    order: list[str] = []

    async def other_turn() -> None:
        async with slots.turn():
            order.append("other turn")
            other_ran.set()

    slow = asyncio.create_task(turn_with_tools(slots, away, tools_done, order))
    await away.wait()
    other = asyncio.create_task(other_turn())
    await asyncio.wait_for(other_ran.wait(), 5)  # would wait forever with the slot held
    tools_done.set()
    await asyncio.wait_for(asyncio.gather(slow, other), 5)
    assert order == ["other turn", "the turn with tools goes on"]


async def test_the_slot_is_taken_back_before_the_turn_goes_on() -> None:
    slots = TurnSlots(turns=1, tools=4)
    away, tools_done, busy, free = (asyncio.Event() for _ in range(4))
    order: list[str] = []

    async def busy_turn() -> None:
        async with slots.turn():
            busy.set()
            await free.wait()
            order.append("busy turn ends")

    slow = asyncio.create_task(turn_with_tools(slots, away, tools_done, order))
    await away.wait()
    other = asyncio.create_task(busy_turn())
    await busy.wait()
    tools_done.set()  # the tools are done but the only slot is taken
    free.set()
    await asyncio.wait_for(asyncio.gather(slow, other), 5)
    assert order == ["busy turn ends", "the turn with tools goes on"]


async def test_no_slot_is_given_back_that_was_not_held_nor_twice() -> None:
    slots = TurnSlots(turns=1, tools=4)
    async with slots.away():  # a flush run outside a lane holds no slot: nothing to give
        pass
    entered, never = asyncio.Event(), asyncio.Event()

    async def stopped_while_away() -> None:
        async with slots.turn(), slots.away():
            entered.set()
            await never.wait()

    task = asyncio.create_task(stopped_while_away())
    await entered.wait()
    task.cancel()  # /stop while the tools run
    await asyncio.gather(task, return_exceptions=True)
    # Exactly one slot exists: a second turn gets it only when the first ends. (With a slot
    # given back twice it would take the spare one on its first step.)
    order: list[str] = []

    async def second_turn() -> None:
        async with slots.turn():
            order.append("second turn")

    async with slots.turn():
        second = asyncio.create_task(second_turn())
        for _ in range(3):
            await asyncio.sleep(0)  # let it run as far as it can get
        order.append("first turn ends")
    await asyncio.wait_for(second, 5)
    assert order == ["first turn ends", "second turn"]


async def test_tool_calls_have_their_own_cap() -> None:
    slots = TurnSlots(turns=1, tools=2)
    inside, release = asyncio.Event(), asyncio.Event()
    running = 0
    peak = 0

    async def call() -> None:
        nonlocal running, peak
        async with slots.tool():
            running += 1
            peak = max(peak, running)
            if running == 2:
                inside.set()
            await release.wait()
            running -= 1

    calls = [asyncio.create_task(call()) for _ in range(5)]
    await inside.wait()
    release.set()
    await asyncio.wait_for(asyncio.gather(*calls), 5)
    assert peak == 2
