"""State replicas share through the store: values with an expiry (what a channel adapter
must find again on any replica) and per-sender budgets that count once across replicas."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.store.base import Store
from bot.store.budgets import BudgetName, SenderBudget, Standing
from bot.store.postgres import PostgresStore
from bot.store.shared_state import BudgetUse
from bot.store.sqlite import SQLiteStore


@pytest.fixture(params=["sqlite", "postgres"])
async def replicas(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[list[Store]]:
    """Two opened stores of one kind on the same database, as two replicas have."""
    stores: list[Store] = []
    for _ in range(2):
        if request.param == "sqlite":
            stores.append(SQLiteStore(tmp_path / "krill.db"))
        else:
            url = request.getfixturevalue("pg_url")
            stores.append(PostgresStore(url, busy_wait=5.0, connect_wait=5.0))  # type: ignore[arg-type]
        await stores[-1].open()
    yield stores
    for store in stores:
        await store.close()


@pytest.fixture
def store(replicas: list[Store]) -> Store:
    return replicas[0]


@pytest.fixture
def other_replica(replicas: list[Store]) -> Store:
    return replicas[1]


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


async def test_a_value_is_found_by_another_replica_until_it_expires(
    store: Store, other_replica: Store
) -> None:
    await store.state_put("slack", "thread:C1:1.0", "1.5", expires_at=100.0, now=0.0)
    assert await other_replica.state_get("slack", "thread:C1:1.0", now=50.0) == "1.5"
    assert await other_replica.state_get("telegram", "thread:C1:1.0", now=50.0) is None
    assert await other_replica.state_get("slack", "thread:C1:1.0", now=100.0) is None
    await other_replica.state_put("slack", "thread:C1:1.0", "2.5", expires_at=200.0, now=0.0)
    assert await store.state_get("slack", "thread:C1:1.0", now=150.0) == "2.5"


async def test_expired_state_is_dropped_when_a_value_is_kept(store: Store) -> None:
    await store.state_put("slack", "old", "x", expires_at=10.0, now=0.0)
    await store.budget_take("commands", "slack:U1", limit=1, window=5.0, now=0.0)
    await store.state_put("slack", "new", "y", expires_at=1e12, now=100_000.0)
    assert await store.state_get("slack", "new", now=50.0) == "y"
    assert await store.state_get("slack", "old", now=5.0) is None  # gone, not just expired
    assert await store.budget_use("commands", "slack:U1", now=1.0) is None


async def test_a_budget_counts_uses_per_window_and_refuses_beyond_its_limit(
    store: Store, other_replica: Store
) -> None:
    takes = [
        await s.budget_take("refusals", "slack:U1", limit=3, window=600.0, now=10.0)
        for s in (store, other_replica, store, other_replica)
    ]
    assert takes == [BudgetUse(1, 610.0), BudgetUse(2, 610.0), BudgetUse(3, 610.0), None]
    assert await store.budget_take("refusals", "slack:U2", limit=3, window=600.0, now=10.0)
    assert await store.budget_take("commands", "slack:U1", limit=3, window=600.0, now=10.0)
    # Without a limit a use always counts (a merged turn that had to run anyway).
    beyond = await store.budget_take("refusals", "slack:U1", limit=None, window=600.0, now=20.0)
    assert beyond == BudgetUse(4, 610.0)
    assert await other_replica.budget_use("refusals", "slack:U1", now=609.0) == BudgetUse(4, 610.0)
    # The window ended: a fresh one starts with this use.
    fresh = await other_replica.budget_take(
        "refusals", "slack:U1", limit=3, window=600.0, now=610.0
    )
    assert fresh == BudgetUse(1, 1210.0)


async def test_concurrent_takes_on_two_replicas_never_exceed_the_limit(
    store: Store, other_replica: Store
) -> None:
    async def take(s: Store) -> bool:
        use = await s.budget_take("turns", "slack:U1", limit=5, window=60.0, now=1.0)
        return use is not None

    results = await asyncio.gather(*(take(s) for _ in range(10) for s in (store, other_replica)))
    assert results.count(True) == 5


async def test_a_sender_budget_says_how_long_a_sender_waits_and_counts_merged_turns(
    store: Store, other_replica: Store
) -> None:
    clock = Clock()
    here = SenderBudget(store, BudgetName.TURNS, limit=2, window=60, clock=clock)
    there = SenderBudget(other_replica, BudgetName.TURNS, limit=2, window=60, clock=clock)
    assert await here.left("a") == 2 and (await here.standing(["a"])).delay == 0
    await here.record(["a"])
    clock.now += 10
    await there.record(["a", "b"])
    assert await here.left("a") == 0 and await here.left("b") == 1
    assert await there.standing(["b"]) == Standing(delay=0, fewest_left=1)
    both = await there.standing(["a", "b"])
    assert both.delay == 50  # until a's window, begun at its first turn, ends
    assert both.fewest_left == 0
    await here.record(["a"])  # a merged turn that ran anyway still counts
    assert await there.left("a") == 0
    clock.now += 50
    assert (await here.standing(["a"])).delay == 0 and await here.left("a") == 2


async def test_a_refusal_budget_is_shared_by_every_replica(
    store: Store, other_replica: Store
) -> None:
    clock = Clock()
    replicas = [
        SenderBudget(s, BudgetName.REFUSALS, limit=3, window=600, clock=clock)
        for s in (store, other_replica)
    ]
    taken = [await replicas[i % 2].take("telegram:1") for i in range(5)]
    assert taken == [True, True, True, False, False]
    assert await replicas[0].take("telegram:2")  # others keep their own budget
    clock.now += 599
    assert not await replicas[1].take("telegram:1")
    clock.now += 1  # the window has ended
    assert await replicas[1].take("telegram:1")
