"""Databases made by the releases with two stores upgrade in place: every row of every
table is still there after the upgrade, each record reads back as it was written, new rows
follow the old ones, and the schema is the one a new database gets.

The fixtures in tests/fixtures/ were made by those releases' own store code, with rows in
every table: `store-sqlite-v13.db.gz` and `store-postgres-v1.sql` (a `pg_dump --inserts`)
by the release before #27, `store-sqlite-v14.db.gz` and `store-postgres-v2.sql` by the one
with #27's context columns (the window's model, the compaction breaker, the context plan)
and the outbox's maybe-sent rows, which the one migration list numbers differently.
"""

from __future__ import annotations

import gzip
import sqlite3
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from bot.store.base import InboundStatus, PairingStatus, ReminderStatus, Store, VisiblePaths
from bot.store.dialects import POSTGRES, SQLITE
from bot.store.migrations import LATEST
from bot.store.postgres import PostgresStore
from bot.store.sqlite import SQLiteStore
from bot.transcript import EntryKind
from bot.types import Address, ChatType, SessionOrigin
from tests.postgres import PostgresCluster
from tests.schema import postgres_schema, sqlite_schema

FIXTURES = Path(__file__).parent / "fixtures"
T0 = 1_760_000_000.0
DM = "agent:main:telegram:direct:42"
THREAD = "agent:main:slack:channel:c1:thread:17.5"
GROUP = "agent:main:telegram:group:-100"
Rows = dict[str, list[dict[str, Any]]]


def sqlite_rows(path: Path) -> Rows:
    """Every row of every table, as column -> value."""
    db = sqlite3.connect(path)
    db.row_factory = sqlite3.Row
    try:
        tables = [
            name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        ]
        return {t: [dict(r) for r in db.execute(f'SELECT * FROM "{t}"')] for t in tables}
    finally:
        db.close()


async def postgres_rows(url: str) -> Rows:
    db = await asyncpg.connect(url)
    try:
        tables = await db.fetch(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
        )
        return {
            t["table_name"]: [dict(r) for r in await db.fetch(f'SELECT * FROM "{t["table_name"]}"')]
            for t in tables
        }
    finally:
        await db.close()


def assert_kept(before: Rows, after: Rows) -> None:
    """Each row before the upgrade is in its table after it, with every value it had
    (columns the upgrade added may hold anything)."""
    assert set(before) <= set(after), set(before) - set(after)
    for table, rows in before.items():
        assert rows, f"the fixture has no {table} rows"
        kept = [{k: row[k] for k in rows[0]} for row in after[table]]
        for row in rows:
            assert row in kept, (table, row)


async def assert_records(store: Store, *, with_context: bool) -> None:
    """The records the fixture's release wrote, read through today's store;
    `with_context`: a release with #27's columns wrote them too."""
    assert await store.schema_version() == LATEST
    dm_sessions = await store.sessions_for_key(DM)
    assert [s.is_current for s in dm_sessions] == [False, True]
    old, dm = dm_sessions
    assert old.chosen_model == dm.chosen_model == "claude-haiku-4-5"
    assert dm.origin == SessionOrigin("telegram", ChatType.DIRECT, "42", peer_id="42")
    assert dm.address == Address("telegram", "42", reply_to="2")
    assert (dm.input_tokens, dm.output_tokens, dm.cache_read_tokens) == (101, 22, 303)
    assert (dm.turns, dm.errors, dm.compaction_count, dm.memory_flush_count) == (1, 1, 1, 2)
    assert (dm.context_window, dm.memory_flush_error, dm.model) == (
        150_000,
        "timed out",
        "claude-sonnet-4-5",
    )
    thread = await store.current_session(THREAD)
    assert thread is not None
    assert thread.address == Address("slack", "C1", "17.5", private_to="U9")

    transcript = await store.transcript(dm.session_id)
    assert [e.kind for e in transcript] == [
        EntryKind.PERSON_TURN,
        EntryKind.ASSISTANT_REPLY,
        EntryKind.TOOL_RESULTS,
        EntryKind.ASSISTANT_REPLY,
        EntryKind.INTERNAL_PROMPT,
        EntryKind.COMPACTION,
        EntryKind.MEMORY_FLUSH,
        EntryKind.COMMAND,
    ]
    assert [e.parent_id for e in transcript[1:]] == [e.id for e in transcript[:-1]]
    assert [e.kind for e in await store.transcript(old.session_id)] == [EntryKind.RESET]
    history = await store.load_history(dm.session_id)
    assert history[0].kind == EntryKind.COMPACTION and len(history) == 6
    assert len(await store.usage_since(0)) == 2

    unfinished = await store.unfinished_inbound()
    assert [(r.external_id, r.status, r.turn_id) for r in unfinished] == [
        ("42:1", InboundStatus.PENDING, None),
        ("42:2", InboundStatus.PROCESSING, "turn-1"),
    ]
    assert await store.count_inbound(InboundStatus.REFUSED) == 1
    assert await store.seen_inbound("telegram", "42:6")
    assert await store.buffer_count(GROUP) == 2

    assert [p.user_name for p in await store.pairing_pending("telegram")] == ["Eve"]
    approved = await store.pairing_get("slack", "U2")
    assert approved is not None and approved.status == PairingStatus.APPROVED

    assert await store.memory_stats() == (2, 3)
    everything = VisiblePaths(everything=True)
    found = await store.memory_match(["green"], ranked=True, limit=5, visible=everything)
    assert [(m.path, m.start_line) for m in found] == [("MEMORY.md", 1)]
    found = await store.memory_match(["星期三"], ranked=False, limit=5, visible=everything)
    assert [m.text for m in found] == ["会议在星期三 meeting"]

    assert await store.job_last_run("retention") == T0 + 20
    summary = await store.outbox_summary()
    assert (summary.pending, summary.dead) == (3, 1)
    assert summary.dead_chunks[0].reason == "Forbidden: blocked"
    assert await store.outbox_preview("turn-1") == "555"
    assert await store.outbox_claimants() == ["replica-b"]
    heads = await store.outbox_heads(["telegram", "slack"])
    assert {(r.turn_id, r.chunk_index, r.notice) for r in heads} == {
        ("turn-1", 2, "(a part is missing)\n"),
        ("turn-2", 0, ""),
        ("turn-3", 0, ""),
    }
    (file_row,) = [r for r in heads if r.file is not None]
    assert file_row.file is not None and file_row.file.name == "a.pdf"

    assert await store.lease_holder(DM, T0) == "replica-a"
    assert sorted(await store.lease_holders()) == ["replica-a", "replica-b"]
    reminders = await store.reminders()
    assert [(r.text, r.status) for r in reminders] == [
        ("tea", ReminderStatus.SENT),
        ("call 📞", ReminderStatus.CANCELLED),
        ("later", ReminderStatus.PENDING),
    ]
    assert reminders[1].address == Address("slack", "C1", "17.5")
    assert await store.state_get("slack:response_url", "C1", T0) == "https://hooks.example/x"
    use = await store.budget_use("turns", "telegram:42", T0)
    assert use is not None and use.used == 2

    if with_context:
        assert dm.context_window_model == "claude-sonnet-4-5"
        assert (dm.compaction_failures, dm.compaction_paused_until) == (2, T0 + 300)
        assert (
            await store.context_plan(dm.session_id) == '{"actions": {"t1": "trim"}, "version": 1}'
        )
        assert summary.maybe_sent == 1
        assert summary.maybe_sent_chunks[0].reason == "no answer in time"
    else:
        assert (dm.context_window_model, dm.compaction_failures) == ("", 0)
        assert dm.compaction_paused_until is None
        assert await store.context_plan(dm.session_id) is None
        assert summary.maybe_sent == 0

    # New rows follow the old ones: no identity the old rows hold is handed out again.
    new_id, _ = await store.accept_inbound("telegram", "42:99", DM, "{}")
    assert new_id is not None and new_id > max(r.id for r in unfinished)
    await store.append_entries([transcript[-1].__class__(dm.session_id, transcript[-1].payload)])
    assert len(await store.transcript(dm.session_id)) == len(transcript) + 1


# (SQLite fixture, PostgreSQL fixture, made with #27's context columns)
RELEASES = [
    pytest.param("store-sqlite-v13.db.gz", "store-postgres-v1.sql", False, id="before-27"),
    pytest.param("store-sqlite-v14.db.gz", "store-postgres-v2.sql", True, id="with-27"),
]


@pytest.mark.parametrize(("sqlite_fixture", "postgres_fixture", "with_context"), RELEASES)
async def test_a_sqlite_database_of_a_release_with_two_stores_upgrades_in_place(
    tmp_path: Path, sqlite_fixture: str, postgres_fixture: str, with_context: bool
) -> None:
    path = tmp_path / "krill.db"
    path.write_bytes(gzip.decompress((FIXTURES / sqlite_fixture).read_bytes()))
    before = sqlite_rows(path)
    store = SQLiteStore(path)
    await store.open()
    try:
        assert_kept(before, sqlite_rows(path))
        await assert_records(store, with_context=with_context)
    finally:
        await store.close()
    fresh = SQLiteStore(tmp_path / "fresh.db")
    await fresh.open()
    await fresh.close()
    owns = SQLITE.search.owns
    assert sqlite_schema(path, owns) == sqlite_schema(tmp_path / "fresh.db", owns)


@pytest.mark.parametrize(("sqlite_fixture", "postgres_fixture", "with_context"), RELEASES)
async def test_a_postgres_database_of_a_release_with_two_stores_upgrades_in_place(
    pg_url: str,
    pg_cluster: PostgresCluster,
    sqlite_fixture: str,
    postgres_fixture: str,
    with_context: bool,
) -> None:
    admin = await asyncpg.connect(pg_url)
    try:
        await admin.execute((FIXTURES / postgres_fixture).read_text())
    finally:
        await admin.close()
    before = await postgres_rows(pg_url)
    store = PostgresStore(pg_url, busy_wait=5.0, connect_wait=5.0)
    await store.open()
    try:
        assert_kept(before, await postgres_rows(pg_url))
        await assert_records(store, with_context=with_context)
    finally:
        await store.close()
    fresh = PostgresStore(pg_cluster.new_database(), busy_wait=5.0, connect_wait=5.0)
    await fresh.open()
    await fresh.close()
    owns = POSTGRES.search.owns
    assert await postgres_schema(pg_url, owns) == await postgres_schema(fresh.url, owns)
