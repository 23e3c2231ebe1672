"""The store contract (sessions, transcript, usage) on SQLite and PostgreSQL; dedupe,
outbox and buffers; SQLite's own migrations and locking."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

import pytest

from bot.errors import StoreUnavailable
from bot.store.base import BufferedLine, InboundStatus, Store
from bot.store.outbox_rows import OutboxChunk
from bot.store.sqlite import SQLiteStore
from bot.transcript import Compaction, Entry, EntryKind, PersonTurn, Reset
from bot.types import Address, Attachment, ChatType, MediaKind, SessionOrigin, Usage
from tests import entries

LOCAL = SessionOrigin("local", ChatType.DIRECT, "alice", peer_id="alice")


@pytest.fixture
async def store(tmp_path: Path):
    s = SQLiteStore(tmp_path / "db" / "krill.db")
    await s.open()
    yield s
    await s.close()


def user(session_id: str, text: str) -> Entry:
    return entries.person(text, session_id)


def assistant(session_id: str, text: str) -> Entry:
    return entries.reply(entries.text(text), session_id=session_id)


def person_texts(history: list[Entry]) -> list[str]:
    return [e.payload.messages[0].text for e in history if isinstance(e.payload, PersonTurn)]


async def test_migrations_are_idempotent_and_wal(tmp_path: Path, store: SQLiteStore) -> None:
    version = await store.schema_version()
    await store.close()
    again = SQLiteStore(tmp_path / "db" / "krill.db")
    await again.open()
    assert await again.schema_version() == version >= 1
    assert await again.db.fetchval("PRAGMA journal_mode") == "wal"
    assert await again.integrity_check() == "ok"
    await again.close()


async def test_entries_chain_and_history_turn_limit(any_store: Store) -> None:
    s = await any_store.get_or_create_session("k", LOCAL)
    for i in range(5):
        await any_store.append_entries(
            [user(s.session_id, f"u{i}"), assistant(s.session_id, f"a{i}")]
        )
    everything = await any_store.transcript(s.session_id)
    assert [e.parent_id for e in everything[1:]] == [e.id for e in everything[:-1]]
    last_two = await any_store.load_history(s.session_id, max_user_turns=2)
    assert person_texts(last_two) == ["u3", "u4"]
    assert last_two[0].kind == EntryKind.PERSON_TURN
    assert len(await any_store.load_history(s.session_id)) == 10
    assert len(await any_store.load_history(s.session_id, max_user_turns=50)) == 10


async def test_history_starts_at_the_latest_compaction(any_store: Store) -> None:
    s = await any_store.get_or_create_session("k", LOCAL)
    old = [user(s.session_id, "old"), assistant(s.session_id, "old reply")]
    kept = [user(s.session_id, "kept"), assistant(s.session_id, "kept reply")]
    await any_store.append_entries(old + kept)
    summary = entries.summary("## Decisions\n- none", kept[0].id, s.session_id)
    await any_store.append_entries([summary, user(s.session_id, "new")])
    history = await any_store.load_history(s.session_id)
    assert history[0].kind == EntryKind.COMPACTION
    assert person_texts(history[1:]) == ["kept", "new"]


async def test_new_session_keeps_the_old_transcript(any_store: Store) -> None:
    first = await any_store.get_or_create_session("k", LOCAL)
    await any_store.append_entries([user(first.session_id, "hello")])
    second = await any_store.start_new_session("k", LOCAL, "/reset")
    assert second.session_id != first.session_id
    assert (await any_store.current_session("k")).session_id == second.session_id
    old = await any_store.transcript(first.session_id)
    assert old[-1].payload == Reset("/reset", second.session_id)
    assert len(await any_store.sessions_for_key("k")) == 2
    assert await any_store.load_history(second.session_id) == []


async def test_inbound_dedupe_and_recovery_queue(store: SQLiteStore) -> None:
    first, _ = await store.accept_inbound("telegram", "1:5", "k", "{}")
    again, _ = await store.accept_inbound("telegram", "1:5", "k", "{}")
    other, _ = await store.accept_inbound("slack", "1:5", "k", "{}")
    assert first is not None and again is None and other is not None
    assert not await store.mark_seen("telegram", "1:5", "k", InboundStatus.COMMAND)
    assert await store.seen_inbound("telegram", "1:5")
    s = await store.get_or_create_session("k", LOCAL)
    await store.begin_turn([user(s.session_id, "x")], [first], "turn-1")
    rows = await store.unfinished_inbound()
    assert [(r.id, r.status, r.turn_id) for r in rows] == [
        (first, InboundStatus.PROCESSING, "turn-1"),
        (other, InboundStatus.PENDING, None),
    ]
    elsewhere, _ = await store.accept_inbound("telegram", "2:1", "another key", "{}")
    assert [r.id for r in await store.unfinished_in("k")] == [first, other]
    await store.set_inbound_status([first], InboundStatus.DONE)
    assert [r.id for r in await store.unfinished_in("k")] == [other]
    await store.set_inbound_status([other, elsewhere], InboundStatus.DONE)
    assert await store.unfinished_inbound() == []
    assert await store.unfinished_in("k") == []


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


async def test_a_buffered_photo_is_handed_over_with_its_line(store: SQLiteStore) -> None:
    photo = Attachment(MediaKind.IMAGE, "photo.jpg", "image/jpeg", 3, sha256="ab" * 32)
    line = BufferedLine("Alice", "[photo from Alice: office]", time.time(), [photo])
    assert await store.buffer_message("telegram", "p1", "g", line, limit=5)
    _inbound_id, lines = await store.accept_inbound("t", "m", "g", "{}", take_buffer=True)
    assert lines == [line]


async def test_outbox_rows_keep_order_and_a_rewritten_reply_changes_nothing(
    store: SQLiteStore,
) -> None:
    here, there = Address("local", "a"), Address("local", "b")
    chunks = [OutboxChunk("t1", i, 2, here, f"part {i}") for i in range(2)]
    await store.outbox_add([*chunks, OutboxChunk("t2", 0, 1, there, "other")], 1.0)
    await store.outbox_add([OutboxChunk("t1", 0, 2, here, "rewritten")], 2.0)
    heads = await store.outbox_heads(["local"])
    assert [(r.turn_id, r.chunk_index, r.text) for r in heads] == [
        ("t1", 0, "part 0"),
        ("t2", 0, "other"),
    ]
    assert await store.outbox_claim(["local"], "me", 3.0, 10.0, 1) == heads[:1]
    assert await store.outbox_mark_sending(heads[0].id, "me", 3.0)
    await store.outbox_mark_dead(heads[0].id, "blocked", "Part 1 of 2 failed. ", 3.0)
    (nxt,) = [r for r in await store.outbox_heads(["local"]) if r.turn_id == "t1"]
    assert (nxt.chunk_index, nxt.notice) == (1, "Part 1 of 2 failed. ")
    await store.outbox_mark_sent(nxt.id, "m2", 4.0)
    summary = await store.outbox_summary()
    assert (summary.pending, summary.dead) == (1, 1)
    assert summary.dead_chunks[0].reason == "blocked"
    assert await store.outbox_heads(["telegram"]) == []


async def test_usage(any_store: Store) -> None:
    s = await any_store.get_or_create_session("k", LOCAL)
    usage = Usage(input_tokens=10, output_tokens=5, cache_read_tokens=90)
    await any_store.add_usage(
        s.session_id,
        usage,
        context_tokens=105,
        cost=entries.cost(s.session_id, 0.01),
        at=time.time(),
    )
    row = await any_store.get_session(s.session_id)
    assert row.cache_hit_ratio == pytest.approx(0.9)
    assert row.context_tokens == 105


async def test_a_cancelled_write_does_not_jam_the_store(any_store: Store) -> None:
    """/stop, shutdown and timeouts cancel tasks mid-write; later writes must still work."""
    import asyncio

    session = await any_store.get_or_create_session("k", LOCAL)
    for _ in range(20):
        task = asyncio.create_task(any_store.append_entries([user(session.session_id, "x")]))
        await asyncio.sleep(0)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    await any_store.append_entries([user(session.session_id, "after")])
    await any_store.count_compaction(session.session_id)
    history = await any_store.load_history(session.session_id)
    assert person_texts(history[-1:]) == ["after"]
    assert await any_store.integrity_check() == "ok"


def test_sqlite_store_implements_the_whole_store_interface() -> None:
    """The core is written against `Store`; a second implementation must offer the same."""
    import inspect

    from bot.store.base import Store

    wanted = {n for n, _ in inspect.getmembers(Store, inspect.isfunction) if not n.startswith("_")}
    missing = {n for n in wanted if not callable(getattr(SQLiteStore, n, None))}
    assert not missing


async def test_internal_prompts_do_not_use_up_the_turn_limit(any_store: Store) -> None:
    s = await any_store.get_or_create_session("k", LOCAL)
    heartbeat = entries.prompt("check the list", s.session_id)
    await any_store.append_entries([user(s.session_id, "u0"), assistant(s.session_id, "a0")])
    await any_store.append_entries([heartbeat, assistant(s.session_id, "HEARTBEAT_OK")])
    await any_store.append_entries([user(s.session_id, "u1"), assistant(s.session_id, "a1")])
    history = await any_store.load_history(s.session_id, max_user_turns=2)
    assert person_texts(history[:1]) == ["u0"]
    assert len(history) == 6


def _version_2_database(path: Path) -> None:
    """A database as Krill left it before entries had a kind column, with old-style rows."""
    import json
    import sqlite3

    from bot.store.sqlite_before_base import SQLITE_BEFORE_BASE

    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    version_1 = (Path(__file__).parent / "fixtures" / "sqlite-schema-v1.sql").read_text()
    for version, sql in [(1, version_1), (2, SQLITE_BEFORE_BASE[0].sql)]:
        db.executescript(sql)
        db.execute("INSERT INTO schema_version(version) VALUES (?)", (version,))
    for session_id, key, channel in [
        ("s1", "agent:main:telegram:group:-100:topic:7", "telegram"),
        ("s2", "agent:main:slack:channel:c1:thread:17.5", "slack"),
        ("s3", "agent:main:direct:alice", "slack"),
        ("s4", "not a key", "local"),
    ]:
        db.execute(
            "INSERT INTO sessions(session_id, session_key, created_at, updated_at, channel)"
            " VALUES (?, ?, 1, 1, ?)",
            (session_id, key, channel),
        )
    msg = {
        "message_id": "7", "channel": "telegram", "user_id": "42", "user_name": "Ann",
        "text": "hello", "timestamp": 5.0, "chat_title": "Team",
    }  # fmt: skip
    call = {"type": "tool_use", "id": "t1", "name": "echo", "input": {}}
    result = {"type": "tool_result", "tool_use_id": "t1", "content": "ok"}
    usage = {"input_tokens": 3, "output_tokens": 2, "cache_read_tokens": 0, "cache_write_tokens": 0}
    rows = [
        ("message", "user", {"messages": [msg], "context_lines": ["Bob: hi"], "recall": None}),
        ("message", "assistant", {"content": [call], "stop_reason": "tool_use", "model": "m"}),
        ("message", "tool", {"content": [result]}),
        ("message", "user", {"text": "check the list", "kind": "heartbeat"}),
        ("message", "user", {"text": "write memories", "kind": "flush"}),
        ("compaction", None, {"summary": "## Decisions", "first_kept_entry_id": "e0",
                              "tokens_before": 9, "reason": "manual"}),
        ("memory_flush", None, {"reason": "reset", "ok": True, "error": None, "appended": 1,
                                "model_calls": 1, "reply": "", "seconds": 0.5}),
        ("reset", None, {"reason": "/reset", "next": "s2"}),
    ]  # fmt: skip
    for i, (type_, role, payload) in enumerate(rows):
        db.execute(
            "INSERT INTO entries(id, session_id, type, role, turn_id, payload, usage, created_at)"
            " VALUES (?, 's1', ?, ?, 't', ?, ?, ?)",
            (f"e{i}", type_, role, json.dumps(payload), json.dumps(usage) if i == 1 else None, i),
        )
    db.commit()
    db.close()


async def test_migration_types_the_entries_of_an_older_database(tmp_path: Path) -> None:
    from bot.transcript import (
        AssistantReply,
        ChatLine,
        InternalPrompt,
        MemoryFlushRecord,
        PromptPurpose,
        ToolResults,
    )

    path = tmp_path / "db" / "krill.db"
    _version_2_database(path)
    store = SQLiteStore(path)
    await store.open()
    try:
        transcript = await store.transcript("s1")
        columns = [r[1] for r in await store.db.fetch("PRAGMA table_info(entries)")]
        history = await store.load_history("s1")
        origins = [(await store.get_session(f"s{i}")).origin for i in range(1, 5)]
    finally:
        await store.close()
    line = ChatLine("7", "telegram", "42", "hello", 5.0, user_name="Ann", chat_title="Team")
    call = {"type": "tool_use", "id": "t1", "name": "echo", "input": {}}
    assert [e.payload for e in transcript] == [
        PersonTurn([line], ["Bob: hi"]),
        AssistantReply([call], "tool_use", "m"),
        ToolResults([{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]),
        InternalPrompt("check the list", PromptPurpose.HEARTBEAT),
        InternalPrompt("write memories", PromptPurpose.FLUSH),
        Compaction("## Decisions", "e0", "manual", tokens_before=9),
        MemoryFlushRecord("reset", True, appended=1, model_calls=1, seconds=0.5),
        Reset("/reset", "s2"),
    ]
    assert transcript[1].usage == Usage(input_tokens=3, output_tokens=2)
    assert "kind" in columns and "type" not in columns and "role" not in columns
    # History reads by kind: the compaction first, then the conversation from its kept entry.
    assert [e.kind for e in history] == [
        EntryKind.COMPACTION,
        EntryKind.PERSON_TURN,
        EntryKind.ASSISTANT_REPLY,
        EntryKind.TOOL_RESULTS,
        EntryKind.INTERNAL_PROMPT,
        EntryKind.INTERNAL_PROMPT,
    ]
    # Each session's conversation, parsed once from its key.
    assert origins == [
        SessionOrigin("telegram", ChatType.GROUP, "-100", thread_id="7"),
        SessionOrigin("slack", ChatType.CHANNEL, "c1", thread_id="17.5"),
        SessionOrigin("slack", ChatType.DIRECT, "", peer_id="alice"),
        None,
    ]


async def test_every_payload_kind_round_trips(any_store: Store) -> None:
    from bot.transcript import Command, MemoryFlushRecord

    s = await any_store.get_or_create_session("k", LOCAL)
    written = [
        user(s.session_id, "hi"),
        entries.prompt("beat", s.session_id),
        entries.reply(entries.text("yo"), session_id=s.session_id, usage=Usage(1, 2, 3, 4)),
        entries.results({"type": "tool_result", "tool_use_id": "x", "content": "r"}),
        entries.summary("sum", "first", s.session_id),
        Entry(s.session_id, MemoryFlushRecord("idle", False, error="boom")),
        Entry(s.session_id, Command("status", "", "local:alice")),
    ]
    written[3].session_id = s.session_id
    await any_store.append_entries(written)
    read = await any_store.transcript(s.session_id)
    assert [(e.id, e.kind, e.payload, e.usage) for e in read] == [
        (e.id, e.kind, e.payload, e.usage) for e in written
    ]


async def test_a_session_records_the_conversation_it_belongs_to(any_store: Store) -> None:
    topic = SessionOrigin("telegram", ChatType.GROUP, "-100", thread_id="7")
    first = await any_store.get_or_create_session("agent:main:telegram:group:-100:topic:7", topic)
    assert first.origin == topic and first.channel == "telegram"
    again = await any_store.get_or_create_session("agent:main:telegram:group:-100:topic:7", LOCAL)
    assert again.session_id == first.session_id and again.origin == topic
    fresh = await any_store.start_new_session(
        "agent:main:telegram:group:-100:topic:7", topic, "/new"
    )
    assert fresh.origin == topic


async def test_a_session_lease_is_held_by_one_holder_until_released_or_expired(
    store: SQLiteStore,
) -> None:
    key = "agent:main:local:direct:alice"
    assert await store.claim_lease(key, "a", until=110.0, now=100.0)
    assert not await store.claim_lease(key, "b", until=115.0, now=105.0)
    assert await store.lease_holder(key, now=105.0) == "a"
    assert await store.claim_lease(key, "a", until=120.0, now=109.0)  # a renewal
    assert not await store.claim_lease(key, "b", until=125.0, now=115.0)
    await store.release_lease(key, "b")  # not b's to release
    assert await store.lease_holder(key, now=115.0) == "a"
    # a stops renewing (it died): once its lease has expired, b takes the session over.
    assert await store.lease_holder(key, now=120.0) is None
    assert await store.claim_lease(key, "b", until=130.0, now=120.0)
    assert not await store.claim_lease(key, "a", until=131.0, now=121.0)
    await store.release_lease(key, "b")
    assert await store.claim_lease(key, "a", until=132.0, now=122.0)
    assert await store.claim_lease("another key", "b", until=132.0, now=122.0)


async def test_a_due_job_run_is_claimed_once(any_store: Store) -> None:
    """Several replicas fire the same due moment: one claim wins, the next interval's too."""
    assert await any_store.job_last_run("heartbeat") is None
    assert await any_store.job_claim("heartbeat", due_before=40.0, at=100.0)  # never ran
    assert not await any_store.job_claim("heartbeat", due_before=41.0, at=101.0)  # another replica
    assert await any_store.job_last_run("heartbeat") == 100.0
    assert await any_store.job_claim("heartbeat", due_before=130.0, at=160.0)  # the next interval
    assert await any_store.job_claim("retention", due_before=0.0, at=160.0)  # jobs are separate
    assert await any_store.job_last_run("heartbeat") == 160.0


async def test_a_write_waits_out_another_process_lock_within_its_patience(
    tmp_path: Path,
) -> None:
    path = tmp_path / "krill.db"
    patient = SQLiteStore(path, busy_wait=30)
    impatient = SQLiteStore(path, busy_wait=0.5)
    await patient.open()
    await impatient.open()
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        with pytest.raises(StoreUnavailable):
            await impatient.job_claim("flush", 0.0, 1.0)
        waiting = asyncio.create_task(patient.job_claim("flush", 0.0, 2.0))
        await asyncio.sleep(1.5)  # longer than SQLite's own busy timeout
        assert not waiting.done()  # still waiting, not failed
        other.execute("ROLLBACK")
        await asyncio.wait_for(waiting, 10)
        assert await impatient.job_last_run("flush") == 2.0
    finally:
        other.close()
        await patient.close()
        await impatient.close()
