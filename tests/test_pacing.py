"""The pacing windows both platform adapters share: slots freed a period after the call
returned, final calls waiting in order, previews skipped rather than kept waiting."""

from __future__ import annotations

import asyncio

import pytest

from bot.errors import PreviewSkipped
from channels.pacing import Limit, Window, paced
from tests.fakes.flood import FloodControl, SlidingLimit

PERIOD = 0.2


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_a_slot_frees_one_period_after_the_call_returned() -> None:
    clock = Clock()
    window = Window(Limit(2, 10.0), clock)
    for _ in range(2):
        async with paced([(window, "chat")], wait=True):
            clock.now += 3.0  # a slow call: the period counts from its end
    assert not window.can_take_now("chat", 0)
    clock.now += 9.9
    assert window.can_take_now("chat", 0)  # the first call ended 10 s ago
    assert window.can_take_now("other chat", 0)  # windows are per key


async def test_previews_are_skipped_not_queued_and_keep_half_a_shared_window_free() -> None:
    clock = Clock()
    group = Window(Limit(4, 60.0), clock)
    chat = Window(Limit(1, 1.0), clock)
    async with paced([(chat, "a"), (group, "g")], wait=False):
        with pytest.raises(PreviewSkipped):  # chat "a" is busy
            async with paced([(chat, "a"), (group, "g")], wait=False):
                pass
    clock.now += 2.0
    async with paced([(chat, "b"), (group, "g")], wait=False):
        pass
    # Two of the group's four slots are used: a preview would leave only half free.
    with pytest.raises(PreviewSkipped):
        async with paced([(chat, "c"), (group, "g")], wait=False):
            pass
    async with paced([(chat, "c"), (group, "g")], wait=True):  # a final reply still goes
        pass


async def test_final_calls_wait_in_order_and_never_exceed_what_a_platform_counts() -> None:
    window = Window(Limit(1, PERIOD))
    flood = FloodControl({"chat": SlidingLimit(1, PERIOD)})
    order: list[int] = []

    async def send(n: int) -> None:
        async with paced([(window, "chat")], wait=True):
            await asyncio.sleep(0.01 * (n % 3))  # calls that spend varying time in flight
            assert flood.admit({"chat": "chat"}) is None
            order.append(n)

    await asyncio.gather(*(send(n) for n in range(5)))
    assert order == list(range(5))
    assert flood.refused == 0 and flood.accepted == 5


async def test_a_cancelled_waiter_takes_no_slot() -> None:
    window = Window(Limit(1, 60.0))
    async with paced([(window, "chat")], wait=True):
        waiter = asyncio.create_task(window.take("chat"))
        await asyncio.sleep(0.01)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
    assert window.can_take_now("other", 0)
    assert not window.can_take_now("chat", 0)  # cooling from the call above, not held twice
