"""The store's schema history: one list of versioned steps for both databases. A new
database starts from `BASE` (bot/store/schema.py, version 15); the steps after it run once
each, in order, in one transaction with the others still to run (on PostgreSQL under an
advisory lock, so replicas starting together migrate once).

A step is written once and runs on both, in types both read the same (see
bot/store/schema.py; `{key}` is the dialect's generated key); tests/test_store_schema.py
fails when the two schemas drift apart. Append new steps to MIGRATIONS; never edit a step
that has shipped. A step whose data cannot be rewritten in SQL alone also has a backfill,
run after its SQL.

Databases of the releases with two stores carry those stores' own numbers (SQLite up to 14,
PostgreSQL up to 2); BASE is numbered past both so that no version means two schemas, and
`_from_two_stores` says which of the one list's versions each of them holds.
"""

from __future__ import annotations

import logging

from bot.store.db import SCHEMA_LOCK, Db
from bot.store.schema import BASE, BASE_VERSION, Migration
from bot.store.sqlite_before_base import SQLITE_BEFORE_BASE

log = logging.getLogger(__name__)


# Every step after BASE_VERSION, for both databases.
MIGRATIONS: list[Migration] = [
    Migration(
        16,
        # Context management that every replica sees alike: the model a learned window was
        # learned on (it holds for that model only; '' for windows learned before), the
        # compaction breaker (failures in a row, and until when compaction is paused), and
        # the context plan (what pruning, placeholders and cuts decided, as JSON; NULL: none).
        """
        ALTER TABLE sessions ADD COLUMN context_window_model TEXT NOT NULL DEFAULT '';
        ALTER TABLE sessions ADD COLUMN compaction_failures BIGINT NOT NULL DEFAULT 0;
        ALTER TABLE sessions ADD COLUMN compaction_paused_until DOUBLE PRECISION;
        ALTER TABLE sessions ADD COLUMN context_plan TEXT
        """,
    ),
    Migration(
        17,
        # Choices offered with buttons (bot/store/choices.py): one row per message with
        # buttons; `option_index` is the option pressed (-1: nobody answered in time).
        """
        CREATE TABLE choices (
            id TEXT PRIMARY KEY,
            kind TEXT NOT NULL,
            session_key TEXT NOT NULL,
            address TEXT NOT NULL,
            owner TEXT NOT NULL,
            owner_name TEXT NOT NULL DEFAULT '',
            text TEXT NOT NULL,
            options TEXT NOT NULL,
            payload TEXT NOT NULL,
            reply_id TEXT NOT NULL,
            status TEXT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            expires_at DOUBLE PRECISION NOT NULL,
            option_index INTEGER,
            pressed_by TEXT NOT NULL DEFAULT '',
            pressed_name TEXT NOT NULL DEFAULT '',
            press_id TEXT NOT NULL DEFAULT '',
            message_id TEXT NOT NULL DEFAULT '',
            pressed_at DOUBLE PRECISION,
            outcome TEXT NOT NULL DEFAULT '',
            done_at DOUBLE PRECISION
        );
        CREATE INDEX choices_unfinished ON choices(status, expires_at)
        """,
    ),
    Migration(
        18,
        # Spending (bot/store/costs.py): the ledger, one row per model call; the sums the
        # caps are checked against, per scope and period; and the holds running turns take.
        """
        CREATE TABLE costs (
            id {key},
            at DOUBLE PRECISION NOT NULL,
            day TEXT NOT NULL,
            kind TEXT NOT NULL,
            channel TEXT NOT NULL,
            chat TEXT NOT NULL,
            person TEXT NOT NULL,
            session_id TEXT NOT NULL,
            turn_id TEXT NOT NULL,
            model TEXT NOT NULL,
            cost_usd DOUBLE PRECISION NOT NULL
        );
        CREATE INDEX costs_day ON costs(day);
        CREATE INDEX costs_session ON costs(session_id, day);
        CREATE INDEX costs_turn ON costs(turn_id);
        CREATE TABLE spend (
            scope TEXT NOT NULL,
            period TEXT NOT NULL,
            used_usd DOUBLE PRECISION NOT NULL,
            peak_usd DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (scope, period)
        );
        CREATE TABLE spend_holds (
            turn_id TEXT NOT NULL,
            scope TEXT NOT NULL,
            period TEXT NOT NULL,
            session_key TEXT NOT NULL,
            holder TEXT NOT NULL,
            PRIMARY KEY (turn_id, scope, period)
        );
        CREATE INDEX spend_holds_scope ON spend_holds(scope, period)
        """,
    ),
    Migration(
        19,
        # Scheduled jobs (bot/store/schedules.py): where each posts (the address, with its
        # channel and chat apart for the per-chat limit), who set it up, its cron line and
        # zone, its task, its state, the due time of its next run, and how its runs went.
        """
        CREATE TABLE scheduled_jobs (
            id {key},
            session_key TEXT NOT NULL,
            address TEXT NOT NULL,
            channel TEXT NOT NULL,
            chat_id TEXT NOT NULL,
            creator TEXT NOT NULL,
            creator_name TEXT NOT NULL DEFAULT '',
            name TEXT NOT NULL DEFAULT '',
            task TEXT NOT NULL,
            cron TEXT NOT NULL,
            timezone TEXT NOT NULL,
            state TEXT NOT NULL,
            next_run_at DOUBLE PRECISION NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            last_run_at DOUBLE PRECISION,
            last_outcome TEXT NOT NULL DEFAULT '',
            failures BIGINT NOT NULL DEFAULT 0,
            runs BIGINT NOT NULL DEFAULT 0,
            cost_usd DOUBLE PRECISION NOT NULL DEFAULT 0,
            last_cost_usd DOUBLE PRECISION NOT NULL DEFAULT 0,
            paused_reason TEXT NOT NULL DEFAULT ''
        );
        CREATE INDEX scheduled_jobs_state ON scheduled_jobs(state, next_run_at);
        CREATE INDEX scheduled_jobs_chat ON scheduled_jobs(channel, chat_id);
        CREATE INDEX scheduled_jobs_creator ON scheduled_jobs(creator)
        """,
    ),
    Migration(
        20,
        # Display names beside session keys (bot/store/names.py): a direct chat's person, a
        # group's or channel's title, a forum topic's name, as last seen.
        """
        CREATE TABLE display_names (
            channel TEXT NOT NULL,
            kind TEXT NOT NULL,
            platform_id TEXT NOT NULL,
            name TEXT NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (channel, kind, platform_id)
        )
        """,
    ),
]

LATEST = max([BASE_VERSION, *(step.version for step in MIGRATIONS)])

# Steps of MIGRATIONS the last release with two stores had already taken, by the version
# each store gave them there: step 16 shipped as SQLite's 14 and PostgreSQL's 2.
_TAKEN_BY_TWO_STORES = {16: {"sqlite": 14, "postgresql": 2}}


def _from_two_stores(dialect: str, version: int) -> list[Migration]:
    """The steps that bring a database at `version` of the two stores' numbering to the
    one list's: SQLite along its shipped path to BASE (PostgreSQL's version 1 is BASE
    already), then the record of the later steps it took under its own number."""
    if dialect == "sqlite":
        path = [step for step in SQLITE_BEFORE_BASE if step.version > version]
    else:
        path = [Migration(BASE_VERSION, "")]
    taken = [v for v, numbers in _TAKEN_BY_TWO_STORES.items() if version >= numbers[dialect]]
    return path + [Migration(v, "") for v in taken]


async def schema_version(db: Db) -> int:
    return int(await db.fetchval("SELECT COALESCE(MAX(version), 0) FROM schema_version") or 0)


async def migrate(db: Db) -> None:
    """Bring the schema up to LATEST: a new database from BASE, one of the two stores'
    releases along `_from_two_stores`, then every step after its version."""
    dialect = db.dialect
    async with db.transaction() as tx:
        await dialect.lock_key(tx, SCHEMA_LOCK, "schema")
        await tx.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        current = await schema_version(tx)
        if current == 0:
            steps = [Migration(BASE_VERSION, f"{BASE};{dialect.search.schema}")]
        elif current < BASE_VERSION:
            steps = _from_two_stores(dialect.name, current)
        else:
            steps = []
        reached = max([current, *(step.version for step in steps)])
        steps += [step for step in MIGRATIONS if step.version > reached]
        doing = "creating the schema" if current == 0 else "upgrading the schema"
        for step in steps:
            await _apply(tx, step, doing)


async def _apply(tx: Db, step: Migration, doing: str) -> None:
    log.info("store: %s to version %d (%s)", doing, step.version, tx.dialect.name)
    script = step.sql.replace("{key}", tx.dialect.generated_key)
    for statement in (s.strip() for s in script.split(";")):
        if statement:
            await tx.execute(statement)
    if step.backfill is not None:
        await step.backfill(tx)
    await tx.execute("INSERT INTO schema_version(version) VALUES (?)", step.version)
