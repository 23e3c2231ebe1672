"""Session rows: a key's current session, starting a new one, what a session counts, the
window a provider named for it, its compaction breaker, and its context plan.

The row's columns are `SessionRow`'s fields, in order. Replicas may race to create or
replace a key's session: creation and replacement take turns per key (`Dialect.lock_key`),
and the partial unique index on current sessions keeps a key to one current session
whatever happens. Counters are added in one UPDATE, so no process loses another's.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Protocol

from bot.store.db import SESSION_KEY_LOCK, Db, Row
from bot.store.transcript import append_rows
from bot.transcript import Entry, Reset, new_id
from bot.types import Address, ChatType, SessionOrigin, Usage


@dataclass(slots=True)
class SessionRow:
    session_id: str
    session_key: str
    is_current: bool
    created_at: float
    updated_at: float
    channel: str = ""
    address: Address | None = None  # where the last reply went; for scheduled turns
    model: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    context_tokens: int = 0  # prompt + output tokens of the last model call
    turns: int = 0
    compaction_count: int = 0
    memory_flush_at: float | None = None
    memory_flush_compaction_count: int | None = None
    memory_flush_count: int = 0
    memory_flush_error: str | None = None
    last_model_call_at: float | None = None
    last_activity_at: float | None = None
    cost_usd: float = 0.0
    errors: int = 0
    # The conversation (SessionOrigin) besides `channel`; chat_type is None only for rows
    # older than the origin whose key did not parse.
    chat_type: ChatType | None = None
    chat_id: str = ""
    thread_id: str | None = None
    peer_id: str | None = None
    chosen_model: str = ""  # what /model picked; "" = agent.model
    # The window the provider named when it refused a prompt as too long (None: the model's
    # own window holds), and the model it named it for ("": any, for rows from before).
    context_window: int | None = None
    context_window_model: str = ""
    # The compaction breaker: failed compactions in a row, and until when compaction is
    # paused (None: it is not).
    compaction_failures: int = 0
    compaction_paused_until: float | None = None

    @property
    def origin(self) -> SessionOrigin | None:
        if self.chat_type is None:
            return None
        return SessionOrigin(
            self.channel, self.chat_type, self.chat_id, self.thread_id, self.peer_id
        )

    @property
    def is_direct(self) -> bool:
        """A one-person conversation: the gate for private data such as MEMORY.md."""
        return self.chat_type == ChatType.DIRECT

    @property
    def cache_hit_ratio(self) -> float:
        prompt = self.input_tokens + self.cache_read_tokens + self.cache_write_tokens
        return self.cache_read_tokens / prompt if prompt else 0.0


COLUMNS = tuple(field.name for field in dataclasses.fields(SessionRow))
SELECT = f"SELECT {', '.join(COLUMNS)} FROM sessions"


def session_from_row(row: Row) -> SessionRow:
    data = dict(zip(COLUMNS, row, strict=True))
    data["is_current"] = bool(data["is_current"])
    data["address"] = Address.from_json(data["address"]) if data["address"] else None
    data["chat_type"] = ChatType(data["chat_type"]) if data["chat_type"] else None
    return SessionRow(**data)


class SessionStore(Protocol):
    """Session rows: a key's current session, new sessions, and their counters."""

    async def current_session(self, session_key: str) -> SessionRow | None: ...
    async def get_or_create_session(
        self, session_key: str, origin: SessionOrigin
    ) -> SessionRow: ...
    async def get_session(self, session_id: str) -> SessionRow | None: ...
    async def start_new_session(
        self, session_key: str, origin: SessionOrigin, reason: str
    ) -> SessionRow: ...
    async def list_sessions(self, *, current_only: bool = True) -> list[SessionRow]: ...
    async def sessions_for_key(self, session_key: str) -> list[SessionRow]: ...
    async def session_of_turn(self, turn_id: str) -> SessionRow | None: ...
    async def choose_model(self, session_id: str, model: str) -> None:
        """What /model picked ("" = agent.model); a new session of the key keeps it."""

    async def learn_context_window(self, session_id: str, tokens: int, model: str) -> None:
        """The window the provider named for `model` when it refused a prompt as too long."""

    async def count_compaction(self, session_id: str) -> None: ...
    async def set_compaction_breaker(
        self, session_id: str, *, failures: int, paused_until: float | None
    ) -> None:
        """The breaker after a compaction: failures in a row, and until when it is paused."""

    async def record_memory_flush(
        self, session_id: str, *, error: str | None, at: float, compaction_count: int | None
    ) -> None:
        """Count a flush: done at `at` (error None) or failed with `error` (the last done
        time stays); `compaction_count` closes the compaction cycle it ran for."""

    async def add_usage(
        self,
        session_id: str,
        usage: Usage,
        *,
        context_tokens: int | None,
        cost_usd: float,
        at: float | None,
    ) -> None:
        """Add `usage` to the counters atomically; None keeps context size / call time."""


class ContextPlanStore(Protocol):
    """A session's context plan: what pruning, image placeholders and cuts decided for its
    requests, as the JSON text `bot.context` writes, so every replica builds the same one."""

    async def context_plan(self, session_id: str) -> str | None: ...
    async def put_context_plan(self, session_id: str, plan: str) -> None: ...


# None leaves the context size or the last model call time as they are: one statement, so
# concurrent callers (in any process) never lose each other's increments.
ADD_USAGE = (
    "UPDATE sessions SET input_tokens = input_tokens + ?,"
    " output_tokens = output_tokens + ?, cache_read_tokens = cache_read_tokens + ?,"
    " cache_write_tokens = cache_write_tokens + ?,"
    " context_tokens = COALESCE(?, context_tokens), cost_usd = cost_usd + ?,"
    " last_model_call_at = COALESCE(?, last_model_call_at), updated_at = ?"
    " WHERE session_id = ?"
)
_INSERT = (
    "INSERT INTO sessions(session_id, session_key, is_current, created_at, updated_at,"
    " channel, chat_type, chat_id, thread_id, peer_id) VALUES (?, ?, TRUE, ?, ?, ?, ?, ?, ?, ?)"
)
_CHOOSE_MODEL = "UPDATE sessions SET chosen_model = ?, updated_at = ? WHERE session_id = ?"


def usage_args(
    session_id: str, usage: Usage, context_tokens: int | None, cost_usd: float, at: float | None
) -> tuple[object, ...]:
    """The arguments of ADD_USAGE."""
    return (
        usage.input_tokens,
        usage.output_tokens,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
        context_tokens,
        cost_usd,
        at,
        time.time() if at is None else at,
        session_id,
    )


def _insert_args(session_id: str, key: str, origin: SessionOrigin) -> tuple[object, ...]:
    now = time.time()
    o = origin
    return session_id, key, now, now, o.channel, o.chat_type, o.chat_id, o.thread_id, o.peer_id


class SessionTables:
    db: Db

    async def current_session(self, session_key: str) -> SessionRow | None:
        row = await self.db.fetchrow(f"{SELECT} WHERE session_key = ? AND is_current", session_key)
        return session_from_row(row) if row else None

    async def get_session(self, session_id: str) -> SessionRow | None:
        row = await self.db.fetchrow(f"{SELECT} WHERE session_id = ?", session_id)
        return session_from_row(row) if row else None

    async def get_or_create_session(self, session_key: str, origin: SessionOrigin) -> SessionRow:
        existing = await self.current_session(session_key)
        if existing:
            return existing
        async with self.db.transaction() as tx:
            await tx.dialect.lock_key(tx, SESSION_KEY_LOCK, session_key)
            # Another process may have made the key's current session since we looked: the
            # partial unique index refuses a second one, and this keeps the first.
            await tx.execute(
                f"{_INSERT} ON CONFLICT DO NOTHING", *_insert_args(new_id(), session_key, origin)
            )
        created = await self.current_session(session_key)
        assert created is not None
        return created

    async def start_new_session(
        self, session_key: str, origin: SessionOrigin, reason: str
    ) -> SessionRow:
        """Two resets at once run one after the other, as two in a row would, and a reset
        never meets a session created after it looked."""
        new_session_id = new_id()
        async with self.db.transaction() as tx:
            await tx.dialect.lock_key(tx, SESSION_KEY_LOCK, session_key)
            row = await tx.fetchrow(
                "SELECT session_id, chosen_model FROM sessions"
                " WHERE session_key = ? AND is_current",
                session_key,
            )
            if row:
                old_id = row[0]
                await append_rows(tx, [Entry(old_id, Reset(reason, new_session_id))])
                await tx.execute(
                    "UPDATE sessions SET is_current = FALSE, updated_at = ? WHERE session_id = ?",
                    time.time(),
                    old_id,
                )
            await tx.execute(_INSERT, *_insert_args(new_session_id, session_key, origin))
            if row and row[1]:  # the conversation keeps the model /model chose
                await tx.execute(_CHOOSE_MODEL, row[1], time.time(), new_session_id)
        created = await self.get_session(new_session_id)
        assert created is not None
        return created

    async def session_of_turn(self, turn_id: str) -> SessionRow | None:
        """The session holding a turn's entries (it may no longer be its key's current one)."""
        session_id = await self.db.fetchval(
            "SELECT session_id FROM entries WHERE turn_id = ? LIMIT 1", turn_id
        )
        return await self.get_session(session_id) if session_id else None

    async def list_sessions(self, *, current_only: bool = True) -> list[SessionRow]:
        where = "WHERE is_current" if current_only else ""
        rows = await self.db.fetch(f"{SELECT} {where} ORDER BY updated_at DESC")
        return [session_from_row(r) for r in rows]

    async def sessions_for_key(self, session_key: str) -> list[SessionRow]:
        rows = await self.db.fetch(
            f"{SELECT} WHERE session_key = ? ORDER BY created_at", session_key
        )
        return [session_from_row(r) for r in rows]

    async def choose_model(self, session_id: str, model: str) -> None:
        await self.db.execute(_CHOOSE_MODEL, model, time.time(), session_id)

    async def learn_context_window(self, session_id: str, tokens: int, model: str) -> None:
        await self.db.execute(
            "UPDATE sessions SET context_window = ?, context_window_model = ?, updated_at = ?"
            " WHERE session_id = ?",
            tokens,
            model,
            time.time(),
            session_id,
        )

    async def set_compaction_breaker(
        self, session_id: str, *, failures: int, paused_until: float | None
    ) -> None:
        await self.db.execute(
            "UPDATE sessions SET compaction_failures = ?, compaction_paused_until = ?,"
            " updated_at = ? WHERE session_id = ?",
            failures,
            paused_until,
            time.time(),
            session_id,
        )

    async def context_plan(self, session_id: str) -> str | None:
        plan = await self.db.fetchval(
            "SELECT context_plan FROM sessions WHERE session_id = ?", session_id
        )
        return None if plan is None else str(plan)

    async def put_context_plan(self, session_id: str, plan: str) -> None:
        await self.db.execute(
            "UPDATE sessions SET context_plan = ? WHERE session_id = ?", plan, session_id
        )

    async def count_compaction(self, session_id: str) -> None:
        await self.db.execute(
            "UPDATE sessions SET compaction_count = compaction_count + 1, updated_at = ?"
            " WHERE session_id = ?",
            time.time(),
            session_id,
        )

    async def record_memory_flush(
        self, session_id: str, *, error: str | None, at: float, compaction_count: int | None
    ) -> None:
        await self.db.execute(
            "UPDATE sessions SET memory_flush_count = memory_flush_count + 1,"
            " memory_flush_at = CASE WHEN CAST(? AS TEXT) IS NULL THEN ? ELSE memory_flush_at END,"
            " memory_flush_error = ?,"
            " memory_flush_compaction_count = COALESCE(?, memory_flush_compaction_count),"
            " updated_at = ? WHERE session_id = ?",
            error,
            at,
            error,
            compaction_count,
            time.time(),
            session_id,
        )

    async def add_usage(
        self,
        session_id: str,
        usage: Usage,
        *,
        context_tokens: int | None,
        cost_usd: float,
        at: float | None,
    ) -> None:
        await self.db.execute(
            ADD_USAGE, *usage_args(session_id, usage, context_tokens, cost_usd, at)
        )
