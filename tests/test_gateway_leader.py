"""Leader locks (Telegram long polling in exactly one replica): two replicas on one store
never both lead; the leader renews its lock, gives it up on a graceful stop, and counts
itself as no longer leading before the lock can pass to another replica."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.gateway.leader import Leader, leader_key
from bot.store.base import Store
from tests.replica_storage import STORES, opened_store

LOCK = "telegram:123456"
SECONDS = 1.0  # the lock's life without renewal, short for the tests
RENEW = 0.2


@pytest.fixture(params=STORES)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    async with opened_store(request, tmp_path) as opened:
        yield opened


class Clock:
    """The wall clock moved by hand: a replica whose view of time runs ahead."""

    def __init__(self, ahead: float = 0.0) -> None:
        self.ahead = ahead

    def __call__(self) -> float:
        return time.time() + self.ahead


class StoreThatStopsAnswering:
    """The store, until `down` is set: then a claim hangs, as on a dropped connection."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.down = False

    async def claim_lease(self, key: str, holder: str, until: float, now: float) -> bool:
        if self.down:
            await asyncio.Event().wait()
        return await self.store.claim_lease(key, holder, until, now)

    def __getattr__(self, name: str) -> object:
        return getattr(self.store, name)


def replica(store: object, holder: str, clock: Clock | None = None) -> Leader:
    return Leader(
        store,  # type: ignore[arg-type]
        LOCK,
        holder=holder,
        seconds=SECONDS,
        renew_every=RENEW,
        clock=clock or Clock(),
    )


async def test_one_replica_leads_and_the_next_takes_over_at_once_when_it_releases(
    store: Store,
) -> None:
    a, b = replica(store, "replica-a"), replica(store, "replica-b")
    assert await a.try_acquire() and a.leading
    assert not await b.try_acquire() and not b.leading
    assert await store.lease_holder(leader_key(LOCK), time.time()) == "replica-a"

    waiting = asyncio.create_task(b.acquire())
    await a.release()
    released_at = time.monotonic()
    await asyncio.wait_for(waiting, SECONDS)
    # Taken at b's next try, not after the released lock's expiry.
    assert time.monotonic() - released_at < RENEW * 2
    assert b.leading and not a.leading
    assert await store.lease_holder(leader_key(LOCK), time.time()) == "replica-b"
    await b.release()
    assert await store.lease_holder(leader_key(LOCK), time.time()) is None


async def test_the_leader_renews_its_lock_past_its_first_expiry(store: Store) -> None:
    a = replica(store, "replica-a")
    assert await a.try_acquire()
    first_expiry = time.time() + SECONDS
    async with asyncio.timeout(SECONDS):  # renewed before it could run out
        # A row in the store has no change event to await.
        while await store.lease_holder(leader_key(LOCK), first_expiry) != "replica-a":  # noqa: ASYNC110
            await asyncio.sleep(0.02)
    # Another replica, its clock already past the first expiry, still finds it held.
    late = replica(store, "replica-b", Clock(ahead=first_expiry - time.time() + 0.01))
    assert not await late.try_acquire()
    await a.release()


async def test_a_leader_whose_lock_was_taken_over_stops_leading_at_its_next_renewal(
    store: Store,
) -> None:
    """A leader that stalled past its lock (as another replica sees it) finds out when it
    next renews, and must stop: `lost` returns."""
    a = replica(store, "replica-a")
    assert await a.try_acquire()
    b = replica(store, "replica-b", Clock(ahead=SECONDS * 2))
    assert await b.try_acquire()
    await asyncio.wait_for(a.lost(), RENEW * 3)
    assert not a.leading and b.leading
    await a.release()  # the lock is b's now: releasing must not take it from b
    assert await store.lease_holder(leader_key(LOCK), time.time() + SECONDS * 2) == "replica-b"
    await b.release()


async def test_a_leader_that_cannot_renew_stops_before_its_lock_can_pass_on(
    store: Store,
) -> None:
    """The store stops answering the leader: it gives up leading while its row is still
    valid, so whoever takes the lock next never overlaps with it."""
    flaky = StoreThatStopsAnswering(store)
    a = replica(flaky, "replica-a")
    assert await a.try_acquire()
    flaky.down = True
    await asyncio.wait_for(a.lost(), SECONDS * 2)
    # Its row is still valid at this moment: no replica could have taken the lock yet.
    assert await store.lease_holder(leader_key(LOCK), time.time()) == "replica-a"
    assert not a.leading

    b = replica(store, "replica-b")
    await asyncio.wait_for(b.acquire(), SECONDS * 2)  # once a's row has expired
    await b.release()
    await a.release()


def test_a_lock_must_be_renewable_twice_before_it_expires(store: Store) -> None:
    with pytest.raises(ValueError, match="renewable at least twice"):
        Leader(store, LOCK, holder="x", seconds=1.0, renew_every=0.6)
