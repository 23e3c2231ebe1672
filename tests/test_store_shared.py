"""The store contract where several processes share one store (replicas on PostgreSQL, or
processes on one SQLite file): racing session creation and resets, counters, reminders
fired once, pairings, scheduler runs and retention — each on both stores."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.store.base import (
    InboundStatus,
    Pairing,
    PairingStatus,
    ReminderStatus,
    Store,
)
from bot.store.postgres import PostgresStore
from bot.store.sqlite import SQLiteStore
from bot.types import Address, ChatType, SessionOrigin, Usage
from tests import entries
from tests.replica_storage import STORES, opened_store

KEY = "agent:main:telegram:direct:42"
ORIGIN = SessionOrigin("telegram", ChatType.DIRECT, "42", peer_id="42")
DAY = 86_400.0


@pytest.fixture(params=STORES)
async def whole_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """A store of each kind that holds the inbound queue too (PostgreSQL joins STORES once
    its inbound tables are merged)."""
    async with opened_store(request, tmp_path) as store:
        yield store


@pytest.fixture
async def twin(any_store: Store) -> AsyncIterator[Store]:
    """A second process's store on the same database."""
    other: Store
    if isinstance(any_store, SQLiteStore):
        other = SQLiteStore(any_store.path)
    else:
        assert isinstance(any_store, PostgresStore)
        other = PostgresStore(any_store.url, busy_wait=5.0, connect_wait=5.0)  # type: ignore[assignment]
    await other.open()
    yield other
    await other.close()


async def test_replicas_creating_a_session_at_once_get_the_same_one(
    any_store: Store, twin: Store
) -> None:
    made = await asyncio.gather(
        *(s.get_or_create_session(KEY, ORIGIN) for s in [any_store, twin] * 5)
    )
    assert len({row.session_id for row in made}) == 1
    assert [s.session_id for s in await any_store.sessions_for_key(KEY)] == [made[0].session_id]


async def test_replicas_resetting_at_once_leave_one_current_session(
    any_store: Store, twin: Store
) -> None:
    first = await any_store.get_or_create_session(KEY, ORIGIN)
    await any_store.choose_model(first.session_id, "claude-haiku-4-5")
    fresh = await asyncio.gather(
        any_store.start_new_session(KEY, ORIGIN, "/reset"),
        twin.start_new_session(KEY, ORIGIN, "/new"),
    )
    sessions = await any_store.sessions_for_key(KEY)
    assert len(sessions) == 3
    assert [s.session_id for s in sessions if s.is_current] == [
        (await any_store.current_session(KEY)).session_id  # type: ignore[union-attr]
    ]
    assert {s.session_id for s in fresh} <= {s.session_id for s in sessions}
    # Each old session ends with one reset entry naming the session that replaced it.
    ends = [(await any_store.transcript(s.session_id))[-1:] for s in sessions if not s.is_current]
    assert sorted(e[0].payload.next_session_id for e in ends) == sorted(  # type: ignore[union-attr]
        s.session_id for s in sessions if s.session_id != first.session_id
    )
    assert all(s.chosen_model == "claude-haiku-4-5" for s in fresh)


async def test_a_first_message_racing_a_reset_leaves_one_current_session(
    any_store: Store, twin: Store
) -> None:
    keys = [f"agent:main:telegram:direct:{n}" for n in range(10)]
    await asyncio.gather(
        *(any_store.get_or_create_session(key, ORIGIN) for key in keys),
        *(twin.start_new_session(key, ORIGIN, "/reset") for key in keys),
    )
    for key in keys:
        sessions = await any_store.sessions_for_key(key)
        assert [s.is_current for s in sessions].count(True) == 1, sessions


async def test_counters_from_two_processes_are_all_counted(any_store: Store, twin: Store) -> None:
    session = await any_store.get_or_create_session(KEY, ORIGIN)
    sid = session.session_id
    usage = Usage(input_tokens=3, output_tokens=5, cache_read_tokens=7, cache_write_tokens=11)
    reply = entries.reply(entries.text("hi"), session_id=sid, usage=usage)

    async def charge(store: Store, i: int) -> None:
        await store.add_usage(sid, usage, context_tokens=None, cost_usd=0.5, at=None)
        await store.count_compaction(sid)
        for _ in range(2):
            await store.record_memory_flush(sid, error=None, at=float(i), compaction_count=None)
        await store.finish_turn(sid, [], InboundStatus.DONE, turns=1, errors=i % 2)

    await asyncio.gather(*(charge(s, i) for i, s in enumerate([any_store, twin] * 10)))
    await twin.record_model_call(reply, usage, context_tokens=42, cost_usd=1.0, model="m2")
    row = await any_store.get_session(sid)
    assert row is not None
    assert (row.input_tokens, row.output_tokens) == (63, 105)
    assert (row.cache_read_tokens, row.cache_write_tokens) == (147, 231)
    assert row.cost_usd == pytest.approx(11.0)
    assert (row.compaction_count, row.memory_flush_count) == (20, 40)
    assert (row.turns, row.errors) == (20, 10)
    assert (row.context_tokens, row.model) == (42, "m2")
    assert row.last_model_call_at == reply.created_at


async def test_context_state_one_process_writes_is_what_another_reads(
    any_store: Store, twin: Store
) -> None:
    """The context plan, the compaction breaker and a learned window, as replicas share them."""
    session = await any_store.get_or_create_session(KEY, ORIGIN)
    sid = session.session_id
    assert await twin.context_plan(sid) is None
    plan = '{"actions": {"toolu_1": "trim"}, "version": 1}'
    await any_store.put_context_plan(sid, plan)
    assert await twin.context_plan(sid) == plan
    await twin.set_compaction_breaker(sid, failures=3, paused_until=1_800_000_300.5)
    await twin.learn_context_window(sid, 90_000, "claude-haiku-4-5")
    row = await any_store.get_session(sid)
    assert row is not None
    assert (row.compaction_failures, row.compaction_paused_until) == (3, 1_800_000_300.5)
    assert (row.context_window, row.context_window_model) == (90_000, "claude-haiku-4-5")
    await any_store.set_compaction_breaker(sid, failures=0, paused_until=None)
    row = await twin.get_session(sid)
    assert row is not None and (row.compaction_failures, row.compaction_paused_until) == (0, None)
    assert await twin.context_plan(sid) == plan  # the breaker leaves the plan alone
    # A new session of the key starts with neither plan nor breaker.
    fresh = await twin.start_new_session(KEY, ORIGIN, "/reset")
    assert await any_store.context_plan(fresh.session_id) is None
    assert (fresh.compaction_failures, fresh.compaction_paused_until) == (0, None)


async def test_a_turn_claims_its_messages_and_updates_its_session_at_once(
    whole_store: Store,
) -> None:
    inbound_id, _ = await whole_store.accept_inbound("telegram", "42:1", KEY, "{}")
    assert inbound_id is not None
    session = await whole_store.get_or_create_session(KEY, ORIGIN)
    opening = entries.person("hello", session.session_id, turn_id="turn-1")
    address = Address("telegram", "42", reply_to="7")
    await whole_store.begin_turn([opening], [inbound_id], "turn-1", address=address)
    (row,) = await whole_store.unfinished_inbound()
    assert (row.status, row.turn_id) == (InboundStatus.PROCESSING, "turn-1")
    assert (await whole_store.session_of_turn("turn-1")).address == address  # type: ignore[union-attr]
    await whole_store.finish_turn(session.session_id, [inbound_id], InboundStatus.DONE, turns=1)
    assert await whole_store.unfinished_inbound() == []


async def test_a_reminder_fires_once_whichever_process_fires_it(
    any_store: Store, twin: Store
) -> None:
    address = Address("telegram", "42")
    added = await any_store.reminder_add(
        session_key=KEY, address=address, creator="telegram:42", due_at=200.0, text="tea",
        created_at=100.0,
    )  # fmt: skip
    later = await twin.reminder_add(
        session_key=KEY, address=address, creator="slack:U1", due_at=300.0, text="call",
        created_at=100.0,
    )  # fmt: skip
    assert (added.address, added.status, added.fired_at) == (address, ReminderStatus.PENDING, None)
    fired = await asyncio.gather(
        any_store.reminder_finish(added.id, ReminderStatus.SENT, at=201.0),
        twin.reminder_finish(added.id, ReminderStatus.SENT, at=202.0),
    )
    assert sorted(fired) == [False, True]
    assert not await any_store.reminder_finish(added.id, ReminderStatus.CANCELLED, at=203.0)
    assert (await twin.reminder_get(added.id)).status == ReminderStatus.SENT  # type: ignore[union-attr]
    assert await any_store.reminder_get(10_000) is None
    assert [r.id for r in await any_store.reminders()] == [added.id, later.id]
    pending = await twin.reminders(status=ReminderStatus.PENDING)
    assert [r.text for r in pending] == ["call"]
    assert [r.text for r in await twin.reminders(creator="telegram:42")] == ["tea"]
    assert await twin.reminders(status=ReminderStatus.PENDING, creator="telegram:42") == []


async def test_pairings_and_job_runs_are_shared(any_store: Store, twin: Store) -> None:
    asked = Pairing("telegram", "42", "ABCD", PairingStatus.PENDING, 100.0, "Ann")
    await any_store.pairing_put(asked)
    await any_store.pairing_put(Pairing("slack", "U1", "EFGH", PairingStatus.PENDING, 90.0))
    assert await twin.pairing_get("telegram", "42") == asked
    assert [p.user_id for p in await twin.pairing_pending("telegram")] == ["42"]
    approved = Pairing("telegram", "42", "ABCD", PairingStatus.APPROVED, 100.0, "Ann")
    await twin.pairing_put(approved)  # replaces the request
    assert await any_store.pairing_get("telegram", "42") == approved
    assert await any_store.pairing_pending("telegram") == []
    await any_store.pairing_delete("telegram", "42")
    assert await twin.pairing_get("telegram", "42") is None

    assert await any_store.job_last_run("flush") is None
    claims = await asyncio.gather(
        *(store.job_claim("flush", due_before=5.0, at=10.5) for store in [any_store, twin] * 3)
    )
    assert sorted(claims) == [False] * 5 + [True]
    assert await twin.job_last_run("flush") == 10.5


async def test_retention_prunes_old_sessions_and_keeps_current_ones(any_store: Store) -> None:
    now = time.time()
    old = await any_store.get_or_create_session(KEY, ORIGIN)
    await any_store.append_entries([entries.person("old", old.session_id)])
    current = await any_store.start_new_session(KEY, ORIGIN, "/reset")
    await any_store.append_entries([entries.person("new", current.session_id)])
    assert (await any_store.prune_before(now - DAY)).total == 0
    pruned = await any_store.prune_before(now + DAY)
    assert (pruned.sessions, pruned.entries) == (1, 2)  # its text and the reset entry
    assert await any_store.transcript(old.session_id) == []
    assert [e.kind for e in await any_store.transcript(current.session_id)] != []
    assert [s.session_id for s in await any_store.sessions_for_key(KEY)] == [current.session_id]


async def test_retention_keeps_unanswered_messages(whole_store: Store) -> None:
    done, _ = await whole_store.accept_inbound("telegram", "42:1", KEY, "{}")
    waiting, _ = await whole_store.accept_inbound("telegram", "42:2", KEY, "{}")
    assert done is not None and waiting is not None
    await whole_store.set_inbound_status([done], InboundStatus.DONE)
    assert (await whole_store.prune_before(time.time() + DAY)).inbound == 1
    assert [r.id for r in await whole_store.unfinished_inbound()] == [waiting]
    assert not await whole_store.seen_inbound("telegram", "42:1")


def test_both_stores_implement_every_concern() -> None:
    import inspect

    wanted = {n for n, _ in inspect.getmembers(Store, inspect.isfunction) if not n.startswith("_")}
    assert "put_context_plan" in wanted
    for store in (SQLiteStore, PostgresStore):
        assert {n for n in wanted if not callable(getattr(store, n, None))} == set()


async def test_writes_go_on_after_the_server_drops_every_connection(
    pg_store: PostgresStore,
) -> None:
    """As after a server restart: the pool's idle connections are dead, the next
    transaction (and single statement) must not fail on one of them."""
    import asyncpg

    sessions = [await pg_store.get_or_create_session(KEY, ORIGIN)]
    for _ in range(3):  # the client may or may not have noticed the drop yet: try both
        admin = await asyncpg.connect(pg_store.url)
        try:
            await admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        finally:
            await admin.close()
        sessions.append(await pg_store.start_new_session(KEY, ORIGIN, "/reset"))
    await pg_store.append_entries([entries.person("still here", sessions[-1].session_id)])
    current = await pg_store.current_session(KEY)
    assert current is not None and current.session_id == sessions[-1].session_id
    assert len(await pg_store.sessions_for_key(KEY)) == 4
