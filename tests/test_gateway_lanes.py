"""The session lanes: the turn budget per sender (`agent.sender_turns_per_minute`: a flood of
one person's messages waits and merges into few turns; nothing is dropped), and the session
leases that keep one turn at a time per session key across processes sharing a store."""

from __future__ import annotations

import asyncio
import socket
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.agent.job import TurnJob
from bot.config import Config
from bot.config.sections import AgentConfig
from bot.gateway.lanes import Lanes, MessageWork
from bot.gateway.leases import SessionLeases, new_holder_id
from bot.metrics import Metrics
from bot.sessions.slots import TurnSlots
from bot.spending.guard import SpendingGuard
from bot.store.base import InboundStatus
from bot.store.sqlite import SQLiteStore
from bot.types import Address
from tests.app_harness import message
from tests.log_sentinel import log_sentinel

WINDOW = 0.5  # stands in for the minute


class RecordingRunner:
    """Records each turn's messages and marks them answered in `answers`, as the real
    runner does; the first turn waits until `release` is set."""

    def __init__(self, answers: SQLiteStore) -> None:
        self.answers = answers
        self.turns: list[tuple[float, list[str]]] = []
        self.resumed: list[str] = []  # turn ids run again after their process stopped
        self.release = asyncio.Event()
        self.started = asyncio.Event()
        self.running = 0
        self.most_running = 0  # shared by runners of several "processes"

    async def run(self, job: TurnJob) -> None:
        self.turns.append((time.monotonic(), [m.text for m in job.messages]))
        if job.resume:
            self.resumed.append(job.turn_id)
        self.running += 1
        self.most_running = max(self.most_running, self.running)
        self.started.set()
        try:
            if len(self.turns) == 1:
                await self.release.wait()
            await self.answers.set_inbound_status(job.inbound_ids, InboundStatus.DONE)
        finally:
            self.running -= 1


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    s = SQLiteStore(tmp_path / "krill.db")
    await s.open()
    yield s
    await s.close()


def lanes(
    runner: RecordingRunner,
    per_minute: int,
    store: SQLiteStore,
    holder: str = "this process",
    lease_seconds: float = 15.0,
) -> Lanes:
    config = Config(agent=AgentConfig(sender_turns_per_minute=per_minute))
    leases = SessionLeases(store, holder=holder, seconds=lease_seconds)
    return Lanes(
        config=config,
        runner=runner,  # type: ignore[arg-type]
        leases=leases,
        inbound=store,
        budgets=store,
        channels={"local"},
        metrics=Metrics(),
        slots=TurnSlots(turns=8, tools=8),
        spending=SpendingGuard(
            config=config, store=store, replies=Nowhere(), holder=holder, clock=time.time
        ),
        turn_window=WINDOW,
    )


class Nowhere:
    channels = ("local",)

    async def send_text(self, address: Address, text: str) -> None:
        raise AssertionError(f"no cap is set, yet {text!r} was sent to {address}")


async def accepted(store: SQLiteStore, text: str) -> MessageWork:
    """`text` as an accepted (recorded, unanswered) message of alice's session."""
    msg = message(text)
    row_id, _ = await store.accept_inbound("local", msg.message_id, "key:alice", msg.to_json())
    assert row_id is not None
    return MessageWork(row_id, msg)


async def submit(lane: Lanes, store: SQLiteStore, *texts: str, user: str = "alice") -> None:
    """Accept each text as a recorded message (turns run only for unanswered rows), then
    queue it in `user`'s lane."""
    for text in texts:
        msg = message(text, user=user)
        key = f"key:{user}"
        row_id, _ = await store.accept_inbound("local", msg.message_id, key, msg.to_json())
        assert row_id is not None
        lane.submit(key, MessageWork(row_id, msg))


async def test_a_senders_last_turn_of_the_window_takes_every_waiting_message(
    store: SQLiteStore,
) -> None:
    runner = RecordingRunner(answers=store)
    lane = lanes(runner, per_minute=2, store=store)
    await submit(lane, store, "m1")
    await asyncio.sleep(0)
    await submit(lane, store, *(f"m{n}" for n in range(2, 60)))  # more than agent.queue_cap
    runner.release.set()
    await lane.wait_idle()
    # Two turns (the allowance): the first takes what waited when it got its slot (the
    # queue cap at most), the last of the window every message left, past the cap.
    first, last = (texts for _, texts in runner.turns)
    assert first + last == [f"m{n}" for n in range(1, 60)]
    assert len(last) > lane.config.agent.queue_cap

    # Over the budget: the next messages wait for the window, then go in one turn.
    await submit(lane, store, "late 1")
    await asyncio.sleep(WINDOW / 5)
    await submit(lane, store, "late 2", "late 3")
    await lane.wait_idle()
    started, texts = runner.turns[-1]
    assert texts == ["late 1", "late 2", "late 3"]
    assert started - runner.turns[0][0] >= WINDOW * 0.9
    await lane.close()


async def test_without_a_cap_batches_keep_the_queue_cap(store: SQLiteStore) -> None:
    runner = RecordingRunner(answers=store)
    lane = lanes(runner, per_minute=0, store=store)
    await submit(lane, store, "m1")
    await asyncio.sleep(0)
    await submit(lane, store, *(f"m{n}" for n in range(2, 30)))
    runner.release.set()
    await lane.wait_idle()
    assert [len(texts) for _, texts in runner.turns] == [1, 20, 8]
    await lane.close()


async def test_two_processes_sharing_a_store_take_turns_in_one_session(
    tmp_path: Path, store: SQLiteStore
) -> None:
    """Two lanes, each with its own connection and holder id as two `krill run` processes
    on one database would have: the second one's turn waits for the first one's lease."""
    other_store = SQLiteStore(tmp_path / "krill.db")
    await other_store.open()
    runner = RecordingRunner(answers=store)
    first = lanes(runner, per_minute=0, store=store, holder="process 1")
    second = lanes(runner, per_minute=0, store=other_store, holder="process 2")
    try:
        first.submit("key:alice", await accepted(store, "to process 1"))
        await runner.started.wait()
        with log_sentinel("bot.gateway.leases", "is leased to process 1; waiting") as seen:
            second.submit("key:alice", await accepted(store, "to process 2"))
            await asyncio.wait_for(seen.wait(), 5)
        runner.release.set()
        await second.wait_idle()
    finally:
        await first.close()
        await second.close()
        await other_store.close()
    assert [texts for _, texts in runner.turns] == [["to process 1"], ["to process 2"]]
    assert runner.most_running == 1


async def test_a_dead_holders_session_is_taken_over_when_its_lease_expires(
    store: SQLiteStore,
) -> None:
    """The dead holder had begun a turn for an older message: once its lease expired, that
    turn is resumed here first, then this process's own message is answered."""
    begun = await accepted(store, "begun by the process that died")
    await store.set_inbound_status([begun.inbound_id], InboundStatus.PROCESSING, turn_id="t-1")
    now, claimed_at = time.time(), time.monotonic()
    assert await store.claim_lease("key:alice", "a process that died", now + 0.5, now)
    runner = RecordingRunner(answers=store)
    runner.release.set()
    lane = lanes(runner, per_minute=0, store=store, holder="the next process")
    lane.submit("key:alice", await accepted(store, "answered after the takeover"))
    await asyncio.wait_for(lane.wait_idle(), 10)
    await lane.close()
    assert [texts for _, texts in runner.turns] == [
        ["begun by the process that died"],
        ["answered after the takeover"],
    ]
    assert runner.resumed == ["t-1"]
    assert runner.turns[0][0] >= claimed_at + 0.45  # not before the dead lease expired
    assert await store.lease_holder("key:alice", time.time()) is None  # released after it
    assert await store.unfinished_in("key:alice") == []


async def test_leases_of_a_process_gone_from_this_host_are_let_go_at_start(
    store: SQLiteStore,
) -> None:
    """A restart after kill -9 need not wait for the dead process's leases to expire."""
    dead = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
    await dead.wait()
    gone = f"{socket.gethostname()}:{dead.pid}:0000"
    elsewhere = "another-host:1:0000"
    now = time.time()
    assert await store.claim_lease("key:alice", gone, now + 60, now)
    assert await store.claim_lease("key:bob", elsewhere, now + 60, now)
    leases = SessionLeases(store, holder=new_holder_id(), seconds=15)
    await leases.release_dead()
    assert await store.lease_holder("key:alice", now) is None
    assert await store.lease_holder("key:bob", now) == elsewhere  # not ours to judge


async def test_a_message_another_process_answered_while_it_held_the_lease_is_not_answered_again(
    tmp_path: Path, store: SQLiteStore
) -> None:
    """Both processes queued the same recorded message (as each one's start-up recovery
    would): the one that waited for the lease finds it answered and leaves it."""
    other_store = SQLiteStore(tmp_path / "krill.db")
    await other_store.open()
    runner = RecordingRunner(answers=store)
    first = lanes(runner, per_minute=0, store=store, holder="process 1")
    second = lanes(runner, per_minute=0, store=other_store, holder="process 2")
    try:
        work = await accepted(store, "asked once")
        first.submit("key:alice", work)
        await runner.started.wait()
        with log_sentinel("bot.gateway.lanes", "was answered by another process") as skipped:
            second.submit("key:alice", work)
            runner.release.set()
            await asyncio.wait_for(skipped.wait(), 5)
        await second.wait_idle()
    finally:
        await first.close()
        await second.close()
        await other_store.close()
    assert [texts for _, texts in runner.turns] == [["asked once"]]


async def test_a_turn_takes_the_older_messages_another_process_accepted_first(
    tmp_path: Path, store: SQLiteStore
) -> None:
    """A message another replica accepted (and has not answered: it died, or its lane waits
    for the lease) goes into this lane's turn ahead of this lane's own, newer, message; a
    newer message of the other replica is left to it."""
    other_store = SQLiteStore(tmp_path / "krill.db")
    await other_store.open()
    runner = RecordingRunner(answers=store)
    runner.release.set()
    lane = lanes(runner, per_minute=0, store=store)
    try:
        await accepted(other_store, "first, via the other replica")
        mine = await accepted(store, "second, via this one")
        later = await accepted(other_store, "third, via the other replica")
        lane.submit("key:alice", mine)
        await asyncio.wait_for(lane.wait_idle(), 10)
        (row,) = await store.unfinished_in("key:alice")
    finally:
        await lane.close()
        await other_store.close()
    assert [texts for _, texts in runner.turns] == [
        ["first, via the other replica", "second, via this one"]
    ]
    assert row.id == later.inbound_id
