"""The schema a new database starts from, written once for both: version 15, where the
SQLite and PostgreSQL stores met when they were written once (bot/store/migrations.py
holds the steps before and after it). Never edit it: a change is a new migration step.

Types are ones both databases read the same: TEXT, INTEGER and BIGINT, DOUBLE PRECISION
(epoch seconds), BOOLEAN; JSON is kept as text. `{key}` is the dialect's generated
integer key, and the dialect's full-text search adds its own objects after these tables.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.store.db import Db

BASE_VERSION = 15

BASE = """
CREATE TABLE sessions (
    session_id TEXT PRIMARY KEY,
    session_key TEXT NOT NULL,
    is_current BOOLEAN NOT NULL DEFAULT TRUE,
    created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    channel TEXT NOT NULL DEFAULT '',
    address TEXT,
    model TEXT NOT NULL DEFAULT '',
    input_tokens BIGINT NOT NULL DEFAULT 0,
    output_tokens BIGINT NOT NULL DEFAULT 0,
    cache_read_tokens BIGINT NOT NULL DEFAULT 0,
    cache_write_tokens BIGINT NOT NULL DEFAULT 0,
    context_tokens BIGINT NOT NULL DEFAULT 0,
    turns BIGINT NOT NULL DEFAULT 0,
    compaction_count BIGINT NOT NULL DEFAULT 0,
    memory_flush_at DOUBLE PRECISION,
    memory_flush_compaction_count BIGINT,
    memory_flush_count BIGINT NOT NULL DEFAULT 0,
    memory_flush_error TEXT,
    last_model_call_at DOUBLE PRECISION,
    last_activity_at DOUBLE PRECISION,
    cost_usd DOUBLE PRECISION NOT NULL DEFAULT 0,
    errors BIGINT NOT NULL DEFAULT 0,
    chat_type TEXT,
    chat_id TEXT NOT NULL DEFAULT '',
    thread_id TEXT,
    peer_id TEXT,
    chosen_model TEXT NOT NULL DEFAULT '',
    context_window BIGINT
);
CREATE UNIQUE INDEX sessions_current_key ON sessions(session_key) WHERE is_current;
CREATE INDEX sessions_key ON sessions(session_key, created_at);

CREATE TABLE entries (
    seq {key},
    id TEXT NOT NULL UNIQUE,
    session_id TEXT NOT NULL,
    parent_id TEXT,
    turn_id TEXT,
    kind TEXT NOT NULL DEFAULT '',
    payload TEXT NOT NULL,
    usage TEXT,
    created_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX entries_session ON entries(session_id, seq);
CREATE INDEX entries_session_kind ON entries(session_id, kind, seq);
CREATE INDEX entries_created ON entries(created_at);

CREATE TABLE inbound (
    id {key},
    channel TEXT NOT NULL,
    external_id TEXT NOT NULL,
    session_key TEXT NOT NULL,
    status TEXT NOT NULL,
    payload TEXT NOT NULL,
    received_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    turn_id TEXT,
    UNIQUE (channel, external_id)
);
CREATE INDEX inbound_unfinished ON inbound(status, id)
    WHERE status IN ('pending', 'processing');
CREATE INDEX inbound_unfinished_key ON inbound(session_key, id)
    WHERE status IN ('pending', 'processing');

CREATE TABLE group_buffer (
    id {key},
    session_key TEXT NOT NULL,
    sender TEXT NOT NULL,
    text TEXT NOT NULL,
    attachments TEXT NOT NULL DEFAULT '',
    created_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX group_buffer_key ON group_buffer(session_key, id);

CREATE TABLE pairings (
    channel TEXT NOT NULL,
    user_id TEXT NOT NULL,
    code TEXT NOT NULL,
    status TEXT NOT NULL,
    user_name TEXT NOT NULL DEFAULT '',
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (channel, user_id)
);

CREATE TABLE memory_files (
    path TEXT PRIMARY KEY,
    mtime_ns BIGINT NOT NULL,
    size BIGINT NOT NULL,
    hash TEXT NOT NULL,
    chunking TEXT NOT NULL,
    indexed_at DOUBLE PRECISION NOT NULL,
    chunks INTEGER NOT NULL DEFAULT 0,
    chars BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE memory_chunks (
    id {key},
    path TEXT NOT NULL,
    start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL,
    text TEXT NOT NULL
);
CREATE INDEX memory_chunks_path ON memory_chunks(path);

CREATE TABLE scheduler_runs (
    job TEXT PRIMARY KEY,
    last_run_at DOUBLE PRECISION NOT NULL
);

CREATE TABLE outbox (
    id {key},
    turn_id TEXT NOT NULL,
    chunk_index INTEGER NOT NULL,
    chunk_count INTEGER NOT NULL,
    kind TEXT NOT NULL DEFAULT 'text',
    channel TEXT NOT NULL,
    chat_key TEXT NOT NULL,
    address TEXT NOT NULL,
    text TEXT NOT NULL,
    notice TEXT NOT NULL DEFAULT '',
    overflow TEXT NOT NULL DEFAULT '',
    edit_of TEXT,
    payload TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_at DOUBLE PRECISION NOT NULL,
    platform_id TEXT,
    dead_reason TEXT,
    created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    claimed_by TEXT,
    claimed_until DOUBLE PRECISION,
    UNIQUE (turn_id, chunk_index)
);
CREATE INDEX outbox_unfinished ON outbox(chat_key, id) WHERE status IN ('pending', 'sending');
CREATE INDEX outbox_dead ON outbox(status) WHERE status = 'dead';
CREATE INDEX outbox_claimed ON outbox(claimed_by) WHERE claimed_by IS NOT NULL;

CREATE TABLE session_leases (
    session_key TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL
);

CREATE TABLE reminders (
    id {key},
    session_key TEXT NOT NULL,
    address TEXT NOT NULL,
    creator TEXT NOT NULL,
    due_at DOUBLE PRECISION NOT NULL,
    text TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending',
    created_at DOUBLE PRECISION NOT NULL,
    fired_at DOUBLE PRECISION
);
CREATE INDEX reminders_status_due ON reminders(status, due_at);
CREATE INDEX reminders_creator ON reminders(creator, status);

CREATE TABLE shared_state (
    scope TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (scope, key)
);
CREATE INDEX shared_state_expiry ON shared_state(expires_at);

CREATE TABLE budgets (
    budget TEXT NOT NULL,
    sender TEXT NOT NULL,
    used BIGINT NOT NULL,
    resets_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (budget, sender)
);
CREATE INDEX budgets_resets ON budgets(resets_at)
"""


@dataclass(frozen=True, slots=True)
class Migration:
    """One step of the schema's history: its SQL, and a backfill for data SQL cannot rewrite."""

    version: int
    sql: str
    backfill: Callable[[Db], Awaitable[None]] | None = None
