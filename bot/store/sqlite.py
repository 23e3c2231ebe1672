"""SQLite implementation of the store: one aiosqlite connection in WAL mode, explicit transactions.

Writes go through one connection guarded by a lock, so every multi-statement change is one
transaction; readers in other processes (the CLI) see committed data thanks to WAL.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import aiosqlite

from bot.store.base import (
    BufferedLine,
    Entry,
    EntryType,
    InboundRow,
    InboundStatus,
    Pairing,
    Role,
    SessionRow,
    new_id,
)
from bot.store.migrations import MIGRATIONS

log = logging.getLogger(__name__)

_SESSION_COLUMNS = [
    "session_id", "session_key", "is_current", "created_at", "updated_at", "channel", "address",
    "model", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
    "context_tokens", "turns", "compaction_count", "memory_flush_at",
    "memory_flush_compaction_count", "memory_flush_count", "memory_flush_error",
    "last_model_call_at", "last_activity_at", "cost_usd", "errors",
]  # fmt: skip
_UPDATABLE = set(_SESSION_COLUMNS) - {"session_id", "session_key", "is_current", "created_at"}
_ENTRY_COLUMNS = "seq, id, session_id, parent_id, type, role, turn_id, payload, usage, created_at"


def _session_from_row(row: aiosqlite.Row) -> SessionRow:
    data = dict(zip(_SESSION_COLUMNS, row, strict=True))
    data["is_current"] = bool(data["is_current"])
    data["address"] = json.loads(data["address"]) if data["address"] else None
    return SessionRow(**data)


def _entry_from_row(row: aiosqlite.Row) -> Entry:
    seq, id_, session_id, parent_id, type_, role, turn_id, payload, usage, created_at = row
    return Entry(
        session_id=session_id,
        type=type_,
        payload=json.loads(payload),
        role=role,
        turn_id=turn_id,
        usage=json.loads(usage) if usage else None,
        id=id_,
        parent_id=parent_id,
        created_at=created_at,
        seq=seq,
    )


class SQLiteStore:
    """The embedded store. `path` may be ":memory:" for tests."""

    def __init__(self, path: Path | str, *, synchronous: Literal["normal", "full"] = "normal"):
        self.path = path
        self.synchronous = synchronous
        self._db: aiosqlite.Connection | None = None
        self._lock = asyncio.Lock()

    @property
    def db(self) -> aiosqlite.Connection:
        if self._db is None:
            raise RuntimeError("store is not open")
        return self._db

    async def open(self) -> None:
        if str(self.path) != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._db = await aiosqlite.connect(str(self.path), isolation_level=None)
        for pragma in (
            "PRAGMA journal_mode=WAL",
            f"PRAGMA synchronous={self.synchronous.upper()}",
            "PRAGMA busy_timeout=5000",
            "PRAGMA foreign_keys=ON",
        ):
            await self.db.execute(pragma)
        await self._migrate()

    async def close(self) -> None:
        if self._db is not None:
            await self._db.close()
            self._db = None

    async def _migrate(self) -> None:
        await self.db.execute(
            "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)"
        )
        async with self.db.execute("SELECT MAX(version) FROM schema_version") as cur:
            row = await cur.fetchone()
        current = (row[0] if row else None) or 0
        for version, sql in MIGRATIONS:
            if version <= current:
                continue
            log.info("store: applying schema migration %d", version)
            async with self.transaction() as db:
                for statement in _split_sql(sql):
                    await db.execute(statement)
                await db.execute("INSERT INTO schema_version(version) VALUES (?)", (version,))

    async def schema_version(self) -> int:
        async with self.db.execute("SELECT MAX(version) FROM schema_version") as cur:
            row = await cur.fetchone()
        return int(row[0] or 0) if row else 0

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[aiosqlite.Connection]:
        async with self._lock, write_transaction(self.db) as db:
            yield db

    # One round trip to the database thread each: execute + fetch + close would be three.
    async def _fetchone(self, sql: str, params: Iterable[Any] = ()) -> aiosqlite.Row | None:
        rows = await self.db.execute_fetchall(sql, tuple(params))
        return next(iter(rows), None)

    async def _fetchall(self, sql: str, params: Iterable[Any] = ()) -> list[aiosqlite.Row]:
        return list(await self.db.execute_fetchall(sql, tuple(params)))

    async def integrity_check(self) -> str:
        row = await self._fetchone("PRAGMA integrity_check")
        return str(row[0]) if row else "unknown"

    # --- sessions -------------------------------------------------------------------------

    async def current_session(self, session_key: str) -> SessionRow | None:
        row = await self._fetchone(
            f"SELECT {', '.join(_SESSION_COLUMNS)} FROM sessions "
            "WHERE session_key = ? AND is_current = 1",
            (session_key,),
        )
        return _session_from_row(row) if row else None

    async def get_session(self, session_id: str) -> SessionRow | None:
        row = await self._fetchone(
            f"SELECT {', '.join(_SESSION_COLUMNS)} FROM sessions WHERE session_id = ?",
            (session_id,),
        )
        return _session_from_row(row) if row else None

    async def get_or_create_session(self, session_key: str, channel: str) -> SessionRow:
        existing = await self.current_session(session_key)
        if existing:
            return existing
        now = time.time()
        async with self.transaction() as db:
            await db.execute(
                "INSERT OR IGNORE INTO sessions(session_id, session_key, is_current, created_at,"
                " updated_at, channel) VALUES (?, ?, 1, ?, ?, ?)",
                (new_id(), session_key, now, now, channel),
            )
        created = await self.current_session(session_key)
        assert created is not None
        return created

    async def start_new_session(self, session_key: str, channel: str, reason: str) -> SessionRow:
        now = time.time()
        new_session_id = new_id()
        async with self.transaction() as db:
            row = await self._fetchone(
                "SELECT session_id FROM sessions WHERE session_key = ? AND is_current = 1",
                (session_key,),
            )
            if row:
                old_id = row[0]
                await self._append(
                    db,
                    [Entry(old_id, EntryType.RESET, {"reason": reason, "next": new_session_id})],
                )
                await db.execute(
                    "UPDATE sessions SET is_current = 0, updated_at = ? WHERE session_id = ?",
                    (now, old_id),
                )
            await db.execute(
                "INSERT INTO sessions(session_id, session_key, is_current, created_at, updated_at,"
                " channel) VALUES (?, ?, 1, ?, ?, ?)",
                (new_session_id, session_key, now, now, channel),
            )
        created = await self.get_session(new_session_id)
        assert created is not None
        return created

    async def session_of_turn(self, turn_id: str) -> SessionRow | None:
        """The session holding a turn's entries (it may no longer be its key's current one)."""
        row = await self._fetchone(
            "SELECT session_id FROM entries WHERE turn_id = ? LIMIT 1", (turn_id,)
        )
        return await self.get_session(row[0]) if row else None

    async def list_sessions(self, *, current_only: bool = True) -> list[SessionRow]:
        where = "WHERE is_current = 1" if current_only else ""
        rows = await self._fetchall(
            f"SELECT {', '.join(_SESSION_COLUMNS)} FROM sessions {where} ORDER BY updated_at DESC"
        )
        return [_session_from_row(r) for r in rows]

    async def sessions_for_key(self, session_key: str) -> list[SessionRow]:
        rows = await self._fetchall(
            f"SELECT {', '.join(_SESSION_COLUMNS)} FROM sessions WHERE session_key = ? "
            "ORDER BY created_at",
            (session_key,),
        )
        return [_session_from_row(r) for r in rows]

    async def update_session(self, session_id: str, **fields: Any) -> None:
        async with self.transaction() as db:
            await self._update_session(db, session_id, fields)

    async def _update_session(
        self, db: aiosqlite.Connection, session_id: str, fields: dict[str, Any]
    ) -> None:
        unknown = set(fields) - _UPDATABLE
        if unknown:
            raise ValueError(f"not updatable session fields: {sorted(unknown)}")
        fields = dict(fields)
        if "address" in fields and fields["address"] is not None:
            fields["address"] = json.dumps(fields["address"])
        fields.setdefault("updated_at", time.time())
        assignments = ", ".join(f"{k} = ?" for k in fields)
        await db.execute(
            f"UPDATE sessions SET {assignments} WHERE session_id = ?",
            (*fields.values(), session_id),
        )

    async def add_usage(
        self,
        session_id: str,
        usage: dict[str, int],
        *,
        context_tokens: int | None,
        cost_usd: float,
        at: float | None,
    ) -> None:
        async with self.transaction() as db:
            await self._add_usage(db, session_id, usage, context_tokens, cost_usd, at)

    async def _add_usage(
        self,
        db: aiosqlite.Connection,
        session_id: str,
        usage: dict[str, int],
        context_tokens: int | None,
        cost_usd: float,
        at: float | None,
    ) -> None:
        # None leaves the context size or the last model call time as they are: one
        # statement, so concurrent callers never lose each other's increments.
        await db.execute(
            "UPDATE sessions SET input_tokens = input_tokens + ?,"
            " output_tokens = output_tokens + ?, cache_read_tokens = cache_read_tokens + ?,"
            " cache_write_tokens = cache_write_tokens + ?,"
            " context_tokens = COALESCE(?, context_tokens), cost_usd = cost_usd + ?,"
            " last_model_call_at = COALESCE(?, last_model_call_at), updated_at = ?"
            " WHERE session_id = ?",
            (
                usage.get("input_tokens", 0),
                usage.get("output_tokens", 0),
                usage.get("cache_read_tokens", 0),
                usage.get("cache_write_tokens", 0),
                context_tokens,
                cost_usd,
                at,
                time.time() if at is None else at,
                session_id,
            ),
        )

    async def increment_session(self, session_id: str, **deltas: int) -> None:
        unknown = set(deltas) - {"turns", "errors", "compaction_count", "memory_flush_count"}
        if unknown:
            raise ValueError(f"not countable session fields: {sorted(unknown)}")
        assignments = ", ".join(f"{k} = {k} + ?" for k in deltas)
        async with self.transaction() as db:
            await db.execute(
                f"UPDATE sessions SET {assignments}, updated_at = ? WHERE session_id = ?",
                (*deltas.values(), time.time(), session_id),
            )

    # --- transcript -----------------------------------------------------------------------

    async def _append(self, db: aiosqlite.Connection, entries: list[Entry]) -> None:
        if not entries:
            return
        session_id = entries[0].session_id
        row = await self._fetchone(
            "SELECT id FROM entries WHERE session_id = ? ORDER BY seq DESC LIMIT 1", (session_id,)
        )
        parent = row[0] if row else None
        for entry in entries:
            if entry.session_id != session_id:
                raise ValueError("append_entries takes entries of one session")
            if entry.parent_id is None:
                entry.parent_id = parent
            cur = await db.execute(
                "INSERT INTO entries(id, session_id, parent_id, type, role, turn_id, payload,"
                " usage, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    entry.id,
                    entry.session_id,
                    entry.parent_id,
                    entry.type,
                    entry.role,
                    entry.turn_id,
                    json.dumps(entry.payload, ensure_ascii=False),
                    json.dumps(entry.usage) if entry.usage else None,
                    entry.created_at,
                ),
            )
            entry.seq = cur.lastrowid or 0
            parent = entry.id

    async def append_entries(self, entries: list[Entry]) -> None:
        async with self.transaction() as db:
            await self._append(db, entries)

    async def begin_turn(
        self,
        entries: list[Entry],
        inbound_ids: list[int],
        turn_id: str,
        *,
        session_fields: dict[str, Any] | None = None,
    ) -> None:
        """Write a turn's opening entries, claim its inbound messages and update the session
        row in one transaction, so a crash leaves either an untouched pending message or a
        resumable turn."""
        async with self.transaction() as db:
            await self._append(db, entries)
            if inbound_ids:
                marks = ",".join("?" * len(inbound_ids))
                await db.execute(
                    "UPDATE inbound SET status = ?, turn_id = ?, updated_at = ?"
                    f" WHERE id IN ({marks})",
                    (InboundStatus.PROCESSING, turn_id, time.time(), *inbound_ids),
                )
            if session_fields and entries:
                await self._update_session(db, entries[0].session_id, session_fields)

    async def record_model_call(
        self,
        entry: Entry,
        usage: dict[str, int],
        *,
        context_tokens: int,
        cost_usd: float,
        model: str,
    ) -> None:
        """Append an assistant entry and add its usage to the session in one transaction."""
        async with self.transaction() as db:
            await self._append(db, [entry])
            await self._add_usage(
                db, entry.session_id, usage, context_tokens, cost_usd, entry.created_at
            )
            await db.execute(
                "UPDATE sessions SET model = ? WHERE session_id = ? AND model != ?",
                (model, entry.session_id, model),
            )

    async def finish_turn(
        self,
        session_id: str,
        inbound_ids: list[int],
        status: str,
        *,
        turns: int = 0,
        errors: int = 0,
    ) -> None:
        """Mark a turn's inbound messages done (or failed) and count it, in one transaction."""
        async with self.transaction() as db:
            if inbound_ids:
                marks = ",".join("?" * len(inbound_ids))
                await db.execute(
                    f"UPDATE inbound SET status = ?, updated_at = ? WHERE id IN ({marks})",
                    (status, time.time(), *inbound_ids),
                )
            await db.execute(
                "UPDATE sessions SET turns = turns + ?, errors = errors + ?, updated_at = ?"
                " WHERE session_id = ?",
                (turns, errors, time.time(), session_id),
            )

    async def load_history(self, session_id: str, *, max_user_turns: int = 0) -> list[Entry]:
        """The entries the model should see: the latest compaction entry (if any) followed by
        everything from its first kept entry on, cut to the last `max_user_turns` user turns.

        Uses the (session_id, type|role, seq) indexes, so cost grows with what is returned,
        not with the length of the whole transcript.
        """
        start_seq = 0
        compaction: Entry | None = None
        row = await self._fetchone(
            f"SELECT {_ENTRY_COLUMNS} FROM entries WHERE session_id = ? AND type = ? "
            "ORDER BY seq DESC LIMIT 1",
            (session_id, EntryType.COMPACTION),
        )
        if row:
            compaction = _entry_from_row(row)
            first_kept = compaction.payload.get("first_kept_entry_id")
            kept = (
                await self._fetchone("SELECT seq FROM entries WHERE id = ?", (first_kept,))
                if first_kept
                else None
            )
            start_seq = kept[0] if kept else compaction.seq
        if max_user_turns > 0:
            # Only a person's turns count (entries carrying "messages"); Krill's own prompts
            # such as the heartbeat do not use up the limit.
            row = await self._fetchone(
                "SELECT seq FROM entries WHERE session_id = ? AND role = ? AND type = ? "
                "AND json_extract(payload, '$.messages') IS NOT NULL "
                "ORDER BY seq DESC LIMIT 1 OFFSET ?",
                (session_id, Role.USER, EntryType.MESSAGE, max_user_turns - 1),
            )
            if row:
                start_seq = max(start_seq, row[0])
        rows = await self._fetchall(
            f"SELECT {_ENTRY_COLUMNS} FROM entries WHERE session_id = ? AND seq >= ? "
            "AND type = ? ORDER BY seq",
            (session_id, start_seq, EntryType.MESSAGE),
        )
        history = [_entry_from_row(r) for r in rows]
        return [compaction, *history] if compaction else history

    async def transcript(self, session_id: str) -> list[Entry]:
        rows = await self._fetchall(
            f"SELECT {_ENTRY_COLUMNS} FROM entries WHERE session_id = ? ORDER BY seq",
            (session_id,),
        )
        return [_entry_from_row(r) for r in rows]

    # --- inbound queue + dedupe -----------------------------------------------------------

    async def accept_inbound(
        self,
        channel: str,
        external_id: str,
        session_key: str,
        payload: str,
        *,
        take_buffer: bool = False,
        merge: Callable[[str, list[BufferedLine]], str] | None = None,
        buffer_key: str | None = None,
    ) -> tuple[int | None, list[BufferedLine]]:
        """Insert one accepted message (None if it was seen before). With take_buffer, the
        group buffer of `buffer_key` (default: the session's own) is folded into the payload
        by `merge` and cleared in the same transaction, so buffered context is neither lost
        nor used twice."""
        now = time.time()
        async with self.transaction() as db:
            cur = await db.execute(
                "INSERT OR IGNORE INTO inbound(channel, external_id, session_key, status, payload,"
                " received_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (channel, external_id, session_key, InboundStatus.PENDING, payload, now, now),
            )
            if cur.rowcount == 0:
                return None, []
            inbound_id = cur.lastrowid
            lines: list[BufferedLine] = []
            if take_buffer:
                source = buffer_key or session_key
                rows = await self._fetchall(
                    "SELECT sender, text, created_at FROM group_buffer WHERE session_key = ?"
                    " ORDER BY id",
                    (source,),
                )
                lines = [BufferedLine(*r) for r in rows]
                if lines:
                    await db.execute("DELETE FROM group_buffer WHERE session_key = ?", (source,))
                    if merge is not None:
                        await db.execute(
                            "UPDATE inbound SET payload = ? WHERE id = ?",
                            (merge(payload, lines), inbound_id),
                        )
            return inbound_id, lines

    async def mark_seen(
        self, channel: str, external_id: str, session_key: str, status: str
    ) -> bool:
        """Record a message that needs no turn (command, buffered, refused) for dedupe only."""
        now = time.time()
        async with self.transaction() as db:
            cur = await db.execute(
                "INSERT OR IGNORE INTO inbound(channel, external_id, session_key, status, payload,"
                " received_at, updated_at) VALUES (?, ?, ?, ?, '{}', ?, ?)",
                (channel, external_id, session_key, status, now, now),
            )
            return cur.rowcount > 0

    async def seen_inbound(self, channel: str, external_id: str) -> bool:
        row = await self._fetchone(
            "SELECT 1 FROM inbound WHERE channel = ? AND external_id = ?", (channel, external_id)
        )
        return row is not None

    async def set_inbound_status(
        self, ids: list[int], status: str, *, turn_id: str | None = None
    ) -> None:
        if not ids:
            return
        marks = ",".join("?" * len(ids))
        async with self.transaction() as db:
            await db.execute(
                f"UPDATE inbound SET status = ?, turn_id = COALESCE(?, turn_id), updated_at = ?"
                f" WHERE id IN ({marks})",
                (status, turn_id, time.time(), *ids),
            )

    async def unfinished_inbound(self) -> list[InboundRow]:
        rows = await self._fetchall(
            "SELECT id, channel, external_id, session_key, status, payload, received_at, turn_id"
            " FROM inbound WHERE status IN (?, ?) ORDER BY id",
            (InboundStatus.PENDING, InboundStatus.PROCESSING),
        )
        return [InboundRow(*r) for r in rows]

    async def count_inbound(self, status: str) -> int:
        row = await self._fetchone("SELECT COUNT(*) FROM inbound WHERE status = ?", (status,))
        return int(row[0]) if row else 0

    # --- outbound ledger ------------------------------------------------------------------

    async def ledger_for_turn(self, turn_id: str) -> dict[int, str]:
        rows = await self._fetchall(
            "SELECT chunk_index, platform_id FROM outbound WHERE turn_id = ?", (turn_id,)
        )
        return {int(i): str(p) for i, p in rows}

    async def ledger_put(self, turn_id: str, chunk_index: int, platform_id: str) -> None:
        async with self.transaction() as db:
            await db.execute(
                "INSERT OR REPLACE INTO outbound(turn_id, chunk_index, platform_id, created_at)"
                " VALUES (?, ?, ?, ?)",
                (turn_id, chunk_index, platform_id, time.time()),
            )

    # --- group buffers --------------------------------------------------------------------

    async def buffer_message(
        self,
        channel: str,
        external_id: str,
        session_key: str,
        line: BufferedLine | None,
        *,
        limit: int,
    ) -> bool:
        """Record an unaddressed group message (False if seen before) and keep its line in
        the session's buffer, trimmed to `limit`, in one transaction so a crash cannot
        leave it marked seen yet missing from the buffer."""
        now = time.time()
        async with self.transaction() as db:
            cur = await db.execute(
                "INSERT OR IGNORE INTO inbound(channel, external_id, session_key, status, payload,"
                " received_at, updated_at) VALUES (?, ?, ?, 'buffered', '{}', ?, ?)",
                (channel, external_id, session_key, now, now),
            )
            if cur.rowcount == 0:
                return False
            if line is None or limit <= 0:
                return True
            await db.execute(
                "INSERT INTO group_buffer(session_key, sender, text, created_at)"
                " VALUES (?, ?, ?, ?)",
                (session_key, line.sender, line.text, line.created_at),
            )
            await db.execute(
                "DELETE FROM group_buffer WHERE session_key = ? AND id NOT IN ("
                "SELECT id FROM group_buffer WHERE session_key = ? ORDER BY id DESC LIMIT ?)",
                (session_key, session_key, limit),
            )
            return True

    async def buffer_count(self, session_key: str) -> int:
        row = await self._fetchone(
            "SELECT COUNT(*) FROM group_buffer WHERE session_key = ?", (session_key,)
        )
        return int(row[0]) if row else 0

    # --- pairing --------------------------------------------------------------------------

    async def pairing_get(self, channel: str, user_id: str) -> Pairing | None:
        row = await self._fetchone(
            "SELECT channel, user_id, code, status, created_at, user_name FROM pairings"
            " WHERE channel = ? AND user_id = ?",
            (channel, user_id),
        )
        return Pairing(*row) if row else None

    async def pairing_put(self, pairing: Pairing) -> None:
        async with self.transaction() as db:
            await db.execute(
                "INSERT OR REPLACE INTO pairings(channel, user_id, code, status, created_at,"
                " user_name) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    pairing.channel,
                    pairing.user_id,
                    pairing.code,
                    pairing.status,
                    pairing.created_at,
                    pairing.user_name,
                ),
            )

    async def pairing_pending(self, channel: str) -> list[Pairing]:
        rows = await self._fetchall(
            "SELECT channel, user_id, code, status, created_at, user_name FROM pairings"
            " WHERE channel = ? AND status = 'pending' ORDER BY created_at",
            (channel,),
        )
        return [Pairing(*r) for r in rows]

    # --- scheduler bookkeeping ------------------------------------------------------------

    async def job_last_run(self, job: str) -> float | None:
        """When the named periodic job (e.g. the heartbeat) last ran; restarts keep its pace."""
        row = await self._fetchone("SELECT last_run_at FROM scheduler_runs WHERE job = ?", (job,))
        return float(row[0]) if row else None

    async def job_record_run(self, job: str, at: float) -> None:
        async with self.transaction() as db:
            await db.execute(
                "INSERT OR REPLACE INTO scheduler_runs(job, last_run_at) VALUES (?, ?)", (job, at)
            )


@asynccontextmanager
async def write_transaction(db: aiosqlite.Connection) -> AsyncIterator[aiosqlite.Connection]:
    """One write transaction, safe under cancellation: aiosqlite runs statements in order
    even when the awaiting task is cancelled, so a BEGIN may still happen and must be paired
    with a ROLLBACK, or every later write on the connection fails."""
    try:
        await db.execute("BEGIN IMMEDIATE")
        yield db
        await asyncio.shield(db.execute("COMMIT"))
    except BaseException:
        await asyncio.shield(_rollback_quietly(db))
        raise


async def _rollback_quietly(db: aiosqlite.Connection) -> None:
    try:
        await db.execute("ROLLBACK")
    except sqlite3.OperationalError:
        pass  # no transaction was open: BEGIN failed, or COMMIT already went through


def _split_sql(script: str) -> list[str]:
    return [s.strip() for s in script.split(";") if s.strip()]
