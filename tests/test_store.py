"""The SQLite store: migrations, transcript loading, dedupe, ledger, buffers."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from bot.store.base import BufferedLine, Entry, EntryType, InboundStatus, Role
from bot.store.sqlite import SQLiteStore


@pytest.fixture
async def store(tmp_path: Path):
    s = SQLiteStore(tmp_path / "db" / "krill.db")
    await s.open()
    yield s
    await s.close()


def user(session_id: str, text: str) -> Entry:
    return Entry(session_id, EntryType.MESSAGE, {"messages": [{"text": text}]}, role=Role.USER)


def assistant(session_id: str, text: str) -> Entry:
    content = [{"type": "text", "text": text}]
    return Entry(session_id, EntryType.MESSAGE, {"content": content}, role=Role.ASSISTANT)


async def test_migrations_are_idempotent_and_wal(tmp_path: Path, store: SQLiteStore) -> None:
    version = await store.schema_version()
    await store.close()
    again = SQLiteStore(tmp_path / "db" / "krill.db")
    await again.open()
    assert await again.schema_version() == version >= 1
    async with again.db.execute("PRAGMA journal_mode") as cur:
        assert (await cur.fetchone())[0] == "wal"
    assert await again.integrity_check() == "ok"
    await again.close()


async def test_entries_chain_and_history_turn_limit(store: SQLiteStore) -> None:
    s = await store.get_or_create_session("k", "local")
    for i in range(5):
        await store.append_entries([user(s.session_id, f"u{i}"), assistant(s.session_id, f"a{i}")])
    everything = await store.transcript(s.session_id)
    assert [e.parent_id for e in everything[1:]] == [e.id for e in everything[:-1]]
    last_two = await store.load_history(s.session_id, max_user_turns=2)
    assert [
        e.payload.get("messages", [{}])[0].get("text") for e in last_two if e.role == "user"
    ] == [
        "u3",
        "u4",
    ]
    assert last_two[0].role == Role.USER
    assert len(await store.load_history(s.session_id)) == 10
    assert len(await store.load_history(s.session_id, max_user_turns=50)) == 10


async def test_history_starts_at_the_latest_compaction(store: SQLiteStore) -> None:
    s = await store.get_or_create_session("k", "local")
    old = [user(s.session_id, "old"), assistant(s.session_id, "old reply")]
    kept = [user(s.session_id, "kept"), assistant(s.session_id, "kept reply")]
    await store.append_entries(old + kept)
    summary = Entry(
        s.session_id,
        EntryType.COMPACTION,
        {"summary": "## Decisions\n- none", "first_kept_entry_id": kept[0].id},
    )
    await store.append_entries([summary, user(s.session_id, "new")])
    history = await store.load_history(s.session_id)
    assert history[0].type == EntryType.COMPACTION
    texts = [
        e.payload.get("messages", [{}])[0].get("text") for e in history[1:] if e.role == "user"
    ]
    assert texts == ["kept", "new"]


async def test_new_session_keeps_the_old_transcript(store: SQLiteStore) -> None:
    first = await store.get_or_create_session("k", "local")
    await store.append_entries([user(first.session_id, "hello")])
    second = await store.start_new_session("k", "local", "/reset")
    assert second.session_id != first.session_id
    assert (await store.current_session("k")).session_id == second.session_id
    old = await store.transcript(first.session_id)
    assert old[-1].type == EntryType.RESET and old[-1].payload["next"] == second.session_id
    assert len(await store.sessions_for_key("k")) == 2
    assert await store.load_history(second.session_id) == []


async def test_inbound_dedupe_and_recovery_queue(store: SQLiteStore) -> None:
    first, _ = await store.accept_inbound("telegram", "1:5", "k", "{}")
    again, _ = await store.accept_inbound("telegram", "1:5", "k", "{}")
    other, _ = await store.accept_inbound("slack", "1:5", "k", "{}")
    assert first is not None and again is None and other is not None
    assert not await store.mark_seen("telegram", "1:5", "k", "command")
    assert await store.seen_inbound("telegram", "1:5")
    s = await store.get_or_create_session("k", "telegram")
    await store.begin_turn([user(s.session_id, "x")], [first], "turn-1")
    rows = await store.unfinished_inbound()
    assert [(r.id, r.status, r.turn_id) for r in rows] == [
        (first, InboundStatus.PROCESSING, "turn-1"),
        (other, InboundStatus.PENDING, None),
    ]
    await store.set_inbound_status([first, other], InboundStatus.DONE)
    assert await store.unfinished_inbound() == []


async def test_group_buffer_is_capped_and_handed_over_once(store: SQLiteStore) -> None:
    for i in range(5):
        line = BufferedLine(f"user{i}", f"msg {i}", time.time())
        assert await store.buffer_message("telegram", f"m{i}", "g", line, limit=3)
    assert not await store.buffer_message("telegram", "m1", "g", line, limit=3)  # seen
    assert await store.buffer_count("g") == 3

    def merge(payload: str, lines: list[BufferedLine]) -> str:
        return "|".join(line.text for line in lines)

    _inbound_id, lines = await store.accept_inbound(
        "t", "m", "g", "{}", take_buffer=True, merge=merge
    )
    assert [line.text for line in lines] == ["msg 2", "msg 3", "msg 4"]
    assert await store.buffer_count("g") == 0
    (row,) = await store.unfinished_inbound()
    assert row.payload == "msg 2|msg 3|msg 4"


async def test_ledger_and_usage(store: SQLiteStore) -> None:
    await store.ledger_put("t1", 0, "100")
    await store.ledger_put("t1", 1, "101")
    assert await store.ledger_for_turn("t1") == {0: "100", 1: "101"}
    s = await store.get_or_create_session("k", "local")
    usage = {
        "input_tokens": 10,
        "output_tokens": 5,
        "cache_read_tokens": 90,
        "cache_write_tokens": 0,
    }
    await store.add_usage(s.session_id, usage, context_tokens=105, cost_usd=0.01, at=time.time())
    row = await store.get_session(s.session_id)
    assert row.cache_hit_ratio == pytest.approx(0.9)
    assert row.context_tokens == 105
    with pytest.raises(ValueError):
        await store.update_session(s.session_id, session_key="hijack")


async def test_a_cancelled_write_does_not_jam_the_store(store: SQLiteStore) -> None:
    """/stop, shutdown and timeouts cancel tasks mid-write; later writes must still work."""
    import asyncio

    session = await store.get_or_create_session("k", "local")
    for _ in range(20):
        task = asyncio.create_task(store.append_entries([user(session.session_id, "x")]))
        await asyncio.sleep(0)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    await store.append_entries([user(session.session_id, "after")])
    await store.update_session(session.session_id, turns=1)
    history = await store.load_history(session.session_id)
    assert history[-1].payload["messages"][0]["text"] == "after"
    assert await store.integrity_check() == "ok"


def test_sqlite_store_implements_the_whole_store_interface() -> None:
    """The core is written against `Store`; a second implementation must offer the same."""
    import inspect

    from bot.store.base import Store

    wanted = {n for n, _ in inspect.getmembers(Store, inspect.isfunction) if not n.startswith("_")}
    missing = {n for n in wanted if not callable(getattr(SQLiteStore, n, None))}
    assert not missing


async def test_internal_prompts_do_not_use_up_the_turn_limit(store: SQLiteStore) -> None:
    s = await store.get_or_create_session("k", "local")
    heartbeat = Entry(s.session_id, EntryType.MESSAGE, {"text": "check the list"}, role=Role.USER)
    await store.append_entries([user(s.session_id, "u0"), assistant(s.session_id, "a0")])
    await store.append_entries([heartbeat, assistant(s.session_id, "HEARTBEAT_OK")])
    await store.append_entries([user(s.session_id, "u1"), assistant(s.session_id, "a1")])
    history = await store.load_history(s.session_id, max_user_turns=2)
    assert history[0].payload["messages"][0]["text"] == "u0"
    assert len(history) == 6
