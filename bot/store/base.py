"""The one narrow interface the core uses for persistence, and the records it passes.

SQLite is the first implementation; nothing outside `bot/store/` may depend on it, so a
server database can take its place for several replicas sharing one store.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol


def new_id() -> str:
    return uuid.uuid4().hex


class EntryType:
    MESSAGE = "message"
    COMPACTION = "compaction"
    MEMORY_FLUSH = "memory_flush"
    COMMAND = "command"
    RESET = "reset"


class Role:
    USER = "user"  # a person's message (counts as a user turn)
    ASSISTANT = "assistant"
    TOOL = "tool"  # tool results, sent to the model as a user-role message


@dataclass(slots=True)
class Entry:
    """One append-only transcript record."""

    session_id: str
    type: str
    payload: dict[str, Any]
    role: str | None = None
    turn_id: str | None = None
    usage: dict[str, int] | None = None
    id: str = field(default_factory=new_id)
    parent_id: str | None = None
    created_at: float = field(default_factory=time.time)
    seq: int = 0  # assigned by the store; orders entries within a session


@dataclass(slots=True)
class SessionRow:
    session_id: str
    session_key: str
    is_current: bool
    created_at: float
    updated_at: float
    channel: str = ""
    address: dict[str, Any] | None = None  # where the last reply went; for scheduled turns
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

    @property
    def cache_hit_ratio(self) -> float:
        prompt = self.input_tokens + self.cache_read_tokens + self.cache_write_tokens
        return self.cache_read_tokens / prompt if prompt else 0.0


@dataclass(slots=True)
class InboundRow:
    id: int
    channel: str
    external_id: str
    session_key: str
    status: str  # pending | processing | done | cancelled | failed
    payload: str  # InboundMessage JSON
    received_at: float
    turn_id: str | None = None


class InboundStatus:
    PENDING = "pending"
    PROCESSING = "processing"
    DONE = "done"
    CANCELLED = "cancelled"
    FAILED = "failed"


@dataclass(slots=True)
class BufferedLine:
    sender: str
    text: str
    created_at: float


@dataclass(slots=True)
class Pairing:
    channel: str
    user_id: str
    code: str
    status: str  # pending | approved
    created_at: float
    user_name: str = ""


class Store(Protocol):
    async def open(self) -> None: ...
    async def close(self) -> None: ...
    async def schema_version(self) -> int: ...
    async def integrity_check(self) -> str: ...

    # sessions
    async def current_session(self, session_key: str) -> SessionRow | None: ...
    async def get_or_create_session(self, session_key: str, channel: str) -> SessionRow: ...
    async def get_session(self, session_id: str) -> SessionRow | None: ...
    async def start_new_session(
        self, session_key: str, channel: str, reason: str
    ) -> SessionRow: ...
    async def list_sessions(self, *, current_only: bool = True) -> list[SessionRow]: ...
    async def sessions_for_key(self, session_key: str) -> list[SessionRow]: ...
    async def session_of_turn(self, turn_id: str) -> SessionRow | None: ...
    async def update_session(self, session_id: str, **fields: Any) -> None: ...
    async def increment_session(self, session_id: str, **deltas: int) -> None: ...
    async def add_usage(
        self,
        session_id: str,
        usage: dict[str, int],
        *,
        context_tokens: int | None,
        cost_usd: float,
        at: float | None,
    ) -> None:
        """Add `usage` to the counters atomically; None keeps context size / call time."""

    # transcript and turns
    async def append_entries(self, entries: list[Entry]) -> None: ...
    async def begin_turn(
        self,
        entries: list[Entry],
        inbound_ids: list[int],
        turn_id: str,
        *,
        session_fields: dict[str, Any] | None = None,
    ) -> None: ...
    async def record_model_call(
        self,
        entry: Entry,
        usage: dict[str, int],
        *,
        context_tokens: int,
        cost_usd: float,
        model: str,
    ) -> None: ...
    async def finish_turn(
        self,
        session_id: str,
        inbound_ids: list[int],
        status: str,
        *,
        turns: int = 0,
        errors: int = 0,
    ) -> None: ...
    async def load_history(self, session_id: str, *, max_user_turns: int = 0) -> list[Entry]: ...
    async def transcript(self, session_id: str) -> list[Entry]: ...

    # inbound queue + dedupe
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
    ) -> tuple[int | None, list[BufferedLine]]: ...
    async def set_inbound_status(
        self, ids: list[int], status: str, *, turn_id: str | None = None
    ) -> None: ...
    async def unfinished_inbound(self) -> list[InboundRow]: ...
    async def seen_inbound(self, channel: str, external_id: str) -> bool: ...
    async def mark_seen(
        self, channel: str, external_id: str, session_key: str, status: str
    ) -> bool: ...
    async def count_inbound(self, status: str) -> int: ...

    # outbound ledger
    async def ledger_for_turn(self, turn_id: str) -> dict[int, str]: ...
    async def ledger_put(self, turn_id: str, chunk_index: int, platform_id: str) -> None: ...

    # group buffers
    async def buffer_message(
        self,
        channel: str,
        external_id: str,
        session_key: str,
        line: BufferedLine | None,
        *,
        limit: int,
    ) -> bool: ...
    async def buffer_count(self, session_key: str) -> int: ...

    # pairing
    async def pairing_get(self, channel: str, user_id: str) -> Pairing | None: ...
    async def pairing_put(self, pairing: Pairing) -> None: ...
    async def pairing_pending(self, channel: str) -> list[Pairing]: ...

    # scheduler bookkeeping
    async def job_last_run(self, job: str) -> float | None: ...
    async def job_record_run(self, job: str, at: float) -> None: ...
