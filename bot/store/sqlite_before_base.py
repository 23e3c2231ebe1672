"""SQLite's schema history from the releases before the two stores were written once, up to
BASE_VERSION (bot/store/schema.py), as it shipped: the steps an old SQLite file still has to
take. A PostgreSQL database of those releases is at its version 1, which already held all
of it. Never edit a step here; bot/store/migrations.py holds every step after BASE."""

from __future__ import annotations

from bot.sessions.keys import conversation_of_key
from bot.store.db import Db
from bot.store.schema import Migration


async def _backfill_session_origins(db: Db) -> None:
    """Parse each existing session's key once; keys that do not parse stay without origin."""
    for session_id, key, channel in await db.fetch(
        "SELECT session_id, session_key, channel FROM sessions"
    ):
        try:
            origin = conversation_of_key(key, channel)
        except ValueError:
            continue
        await db.execute(
            "UPDATE sessions SET channel = ?, chat_type = ?, chat_id = ?, thread_id = ?,"
            " peer_id = ? WHERE session_id = ?",
            origin.channel,
            origin.chat_type,
            origin.chat_id,
            origin.thread_id,
            origin.peer_id,
            session_id,
        )


# SQLite's path from the releases before the two stores were written once to BASE_VERSION,
# as it shipped (step 1 made the tables these change). A PostgreSQL database of those
# releases is at its version 1, which already held all of it.
SQLITE_BEFORE_BASE: list[Migration] = [
    Migration(
        2,
        # The memory index (bot/memory/index.py) and the scheduler's run bookkeeping. The FTS
        # table is external-content over memory_chunks, kept in step by hand (no triggers).
        """
        CREATE TABLE memory_files (
            path TEXT PRIMARY KEY,
            mtime_ns INTEGER NOT NULL,
            size INTEGER NOT NULL,
            hash TEXT NOT NULL,
            chunking TEXT NOT NULL,
            indexed_at REAL NOT NULL
        );

        CREATE TABLE memory_chunks (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            path TEXT NOT NULL,
            start_line INTEGER NOT NULL,
            end_line INTEGER NOT NULL,
            text TEXT NOT NULL
        );
        CREATE INDEX memory_chunks_path ON memory_chunks(path);

        CREATE VIRTUAL TABLE memory_fts USING fts5(
            text, content='memory_chunks', content_rowid='id', tokenize='trigram'
        );

        CREATE TABLE scheduler_runs (
            job TEXT PRIMARY KEY,
            last_run_at REAL NOT NULL
        );
        """,
    ),
    Migration(
        3,
        # Typed transcript entries (bot/transcript.py): the kind becomes a column, derived
        # once from the old type/role pair (and, for user-role rows, whether the payload
        # carried chat messages); old payload shapes are rewritten to the typed ones.
        """
        ALTER TABLE entries ADD COLUMN kind TEXT NOT NULL DEFAULT '';
        UPDATE entries SET kind = CASE
            WHEN type = 'message' AND role = 'user'
                AND json_extract(payload, '$.messages') IS NOT NULL THEN 'person_turn'
            WHEN type = 'message' AND role = 'user' THEN 'internal_prompt'
            WHEN type = 'message' AND role = 'assistant' THEN 'assistant_reply'
            WHEN type = 'message' AND role = 'tool' THEN 'tool_results'
            ELSE type
        END;
        UPDATE entries
            SET payload = json_object(
                'results', json(COALESCE(json_extract(payload, '$.content'), '[]')))
            WHERE kind = 'tool_results';
        UPDATE entries
            SET payload = json_object(
                'text', COALESCE(json_extract(payload, '$.text'), ''),
                'purpose', CASE WHEN json_extract(payload, '$.kind') = 'flush' THEN 'flush'
                    ELSE 'heartbeat' END)
            WHERE kind = 'internal_prompt';
        UPDATE entries
            SET payload = json_object(
                'reason', COALESCE(json_extract(payload, '$.reason'), ''),
                'next_session_id', COALESCE(json_extract(payload, '$.next'), ''))
            WHERE kind = 'reset';
        DROP INDEX entries_session_type;
        DROP INDEX entries_session_role;
        ALTER TABLE entries DROP COLUMN type;
        ALTER TABLE entries DROP COLUMN role;
        CREATE INDEX entries_session_kind ON entries(session_id, kind, seq);
        """,
    ),
    Migration(
        4,
        # The conversation a session belongs to (bot.types.SessionOrigin).
        """
        ALTER TABLE sessions ADD COLUMN chat_type TEXT;
        ALTER TABLE sessions ADD COLUMN chat_id TEXT NOT NULL DEFAULT '';
        ALTER TABLE sessions ADD COLUMN thread_id TEXT;
        ALTER TABLE sessions ADD COLUMN peer_id TEXT
        """,
        backfill=_backfill_session_origins,
    ),
    Migration(
        5,
        # The outbox (docs/contracts.md section 5): every reply chunk is a row before it is sent.
        # It replaces the outbound ledger; the ledger's rows were all delivered.
        """
        CREATE TABLE outbox (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
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
            status TEXT NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            next_attempt_at REAL NOT NULL,
            platform_id TEXT,
            dead_reason TEXT,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            UNIQUE (turn_id, chunk_index)
        );
        CREATE INDEX outbox_unfinished ON outbox(chat_key, id)
            WHERE status IN ('pending', 'sending');
        CREATE INDEX outbox_dead ON outbox(status) WHERE status = 'dead';
        INSERT INTO outbox(turn_id, chunk_index, chunk_count, kind, channel, chat_key, address,
            text, status, next_attempt_at, platform_id, created_at, updated_at)
            SELECT turn_id, chunk_index, 0, CASE WHEN chunk_index < 0 THEN 'preview'
                ELSE 'text' END, '', '', '{}', '', 'sent', created_at, platform_id,
                created_at, created_at
            FROM outbound;
        DROP TABLE outbound
        """,
    ),
    Migration(
        6,
        """
        CREATE TABLE session_leases (
            session_key TEXT PRIMARY KEY,
            holder TEXT NOT NULL,
            expires_at REAL NOT NULL
        )
        """,
    ),
    Migration(
        7,
        # The model /model chose for a session ('' = agent.model), and reminders: where a
        # due reminder's turn runs and replies (session key and address), who set it.
        """
        ALTER TABLE sessions ADD COLUMN chosen_model TEXT NOT NULL DEFAULT '';
        CREATE TABLE reminders (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_key TEXT NOT NULL,
            address TEXT NOT NULL,
            creator TEXT NOT NULL,
            due_at REAL NOT NULL,
            text TEXT NOT NULL,
            status TEXT NOT NULL DEFAULT 'pending',
            created_at REAL NOT NULL,
            fired_at REAL
        );
        CREATE INDEX reminders_status_due ON reminders(status, due_at);
        CREATE INDEX reminders_creator ON reminders(creator, status)
        """,
    ),
    Migration(
        8,
        # The window the provider named in a "prompt is too long" error (NULL: the configured
        # agent.context_window holds).
        "ALTER TABLE sessions ADD COLUMN context_window INTEGER",
    ),
    Migration(
        9,
        # What a `file` row sends (tool `send_file`): the file's path, name, type and caption
        # as JSON ('' for text rows).
        "ALTER TABLE outbox ADD COLUMN payload TEXT NOT NULL DEFAULT ''",
    ),
    Migration(
        10,
        # The photos of an unaddressed group message (their attachment records as a JSON
        # list, bytes stored by hash; '' for none), attached when the bot is next addressed.
        "ALTER TABLE group_buffer ADD COLUMN attachments TEXT NOT NULL DEFAULT ''",
    ),
    Migration(
        11,
        # A lane answers its session's unanswered messages, whichever process took them in.
        """
        CREATE INDEX inbound_unfinished_key ON inbound(session_key, id)
            WHERE status IN ('pending', 'processing')
        """,
    ),
    Migration(
        12,
        # Which sender (a process's holder id) is sending an outbox row, and until when its
        # claim holds unless renewed: several processes can share one outbox.
        """
        ALTER TABLE outbox ADD COLUMN claimed_by TEXT;
        ALTER TABLE outbox ADD COLUMN claimed_until REAL;
        CREATE INDEX outbox_claimed ON outbox(claimed_by) WHERE claimed_by IS NOT NULL
        """,
    ),
    Migration(
        13,
        # What replicas share beyond sessions: small values a channel adapter keeps (the
        # threads the bot is in, slash commands' response_urls, open streams) until they
        # expire, and per-sender budget counters (a window's count and when it ends).
        """
        CREATE TABLE shared_state (
            scope TEXT NOT NULL,
            key TEXT NOT NULL,
            value TEXT NOT NULL,
            expires_at REAL NOT NULL,
            PRIMARY KEY (scope, key)
        );
        CREATE INDEX shared_state_expiry ON shared_state(expires_at);
        CREATE TABLE budgets (
            budget TEXT NOT NULL,
            sender TEXT NOT NULL,
            used INTEGER NOT NULL,
            resets_at REAL NOT NULL,
            PRIMARY KEY (budget, sender)
        );
        CREATE INDEX budgets_resets ON budgets(resets_at)
        """,
    ),
    Migration(
        15,
        # SQLite catches up with PostgreSQL's version 1: the index the console's charts read
        # usage by, and each memory file's chunk count and folded length (BM25's corpus
        # statistics on PostgreSQL; the index's size on both).
        """
        CREATE INDEX entries_created ON entries(created_at);
        ALTER TABLE memory_files ADD COLUMN chunks INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE memory_files ADD COLUMN chars INTEGER NOT NULL DEFAULT 0;
        UPDATE memory_files SET
            chunks = (SELECT COUNT(*) FROM memory_chunks c WHERE c.path = memory_files.path),
            chars = (SELECT COALESCE(SUM(LENGTH(c.text)), 0) FROM memory_chunks c
                WHERE c.path = memory_files.path)
        """,
    ),
]
