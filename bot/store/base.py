"""The one narrow interface the core uses for persistence, and the records it passes.

SQLite is the first implementation; nothing outside `bot/store/` may depend on it, so a
server database can take its place for several replicas sharing one store.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

from bot.store.inbound_rows import BufferedLine, InboundRow, InboundStatus
from bot.store.memory_rows import ChunkMatch, IndexedChunk, IndexedFile, VisiblePaths
from bot.store.outbox_rows import OutboxChunk, OutboxRow, OutboxSummary
from bot.store.shared_state import SharedStateStore
from bot.transcript import Entry
from bot.types import Address, ChatType, SessionOrigin, Usage


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


class PairingStatus(StrEnum):
    PENDING = "pending"  # a code was issued; an operator has not approved it yet
    APPROVED = "approved"
    DENIED = "denied"  # an operator said no; no new code until the pairing TTL has passed


@dataclass(slots=True)
class Pairing:
    channel: str
    user_id: str
    code: str
    status: PairingStatus
    created_at: float
    user_name: str = ""


@dataclass(frozen=True, slots=True)
class UsagePoint:
    """One model call's usage as the transcript recorded it, with where it happened."""

    session_id: str
    channel: str
    model: str
    created_at: float
    usage: Usage


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
    async def update_session(self, session_id: str, **fields: Any) -> None: ...
    async def increment_session(self, session_id: str, **deltas: int) -> None: ...
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


class TranscriptStore(Protocol):
    """The append-only transcript and the history a model request starts from."""

    async def append_entries(self, entries: list[Entry]) -> None: ...
    async def load_history(self, session_id: str, *, max_user_turns: int = 0) -> list[Entry]: ...
    async def transcript(self, session_id: str) -> list[Entry]: ...


class UsageStore(Protocol):
    """Per-call usage over time, for the console's charts."""

    async def usage_since(self, since: float) -> list[UsagePoint]:
        """Every assistant reply with usage recorded at or after `since`, oldest first."""
        ...


class TurnStore(Protocol):
    """A turn's writes, each one transaction across transcript, inbound rows and counters."""

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
        usage: Usage,
        *,
        context_tokens: int,
        cost_usd: float,
        model: str,
    ) -> None: ...
    async def finish_turn(
        self,
        session_id: str,
        inbound_ids: list[int],
        status: InboundStatus,
        *,
        turns: int = 0,
        errors: int = 0,
    ) -> None: ...


class InboundStore(Protocol):
    """The durable inbound queue with dedupe, and the group buffers."""

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
        self, ids: list[int], status: InboundStatus, *, turn_id: str | None = None
    ) -> None: ...
    async def unfinished_inbound(self) -> list[InboundRow]: ...
    async def unfinished_in(self, session_key: str) -> list[InboundRow]:
        """`session_key`'s messages still waiting for an answer, whichever process took
        them in, oldest first."""
        ...

    async def seen_inbound(self, channel: str, external_id: str) -> bool: ...
    async def mark_seen(
        self, channel: str, external_id: str, session_key: str, status: InboundStatus
    ) -> bool: ...
    async def count_inbound(self, status: InboundStatus) -> int: ...
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


class OutboxStore(Protocol):
    """Reply chunks written before they are sent, and what became of each."""

    async def outbox_add(self, chunks: Sequence[OutboxChunk], now: float) -> None:
        """Write `chunks`; a chunk of a turn already in the outbox is left as it is."""

    async def outbox_preview(self, turn_id: str) -> str | None:
        """The platform id of the streaming preview of `turn_id`, if one was shown."""
        ...

    async def outbox_put_preview(
        self, turn_id: str, address: Address, platform_id: str, now: float
    ) -> None: ...
    async def outbox_heads(self, channels: Sequence[str]) -> list[OutboxRow]:
        """The first unfinished row of each chat on `channels`: what may be sent next."""
        ...

    async def outbox_claim(
        self, channels: Sequence[str], holder: str, now: float, until: float, limit: int
    ) -> list[OutboxRow]:
        """Claim for `holder` until `until` (at most `limit`) the heads due at `now` of chats
        on `channels` with no row under a live claim; atomic across processes. Any outcome
        recorded for a row ends its claim."""
        ...

    async def outbox_next_due(self, channels: Sequence[str], now: float) -> float | None:
        """When the earliest head on `channels` not due at `now` will be."""
        ...

    async def outbox_extend_claims(
        self, holder: str, row_ids: Sequence[int], until: float
    ) -> None: ...
    async def outbox_claimants(self) -> list[str]: ...
    async def outbox_release_claims(self, holder: str) -> None: ...
    async def outbox_mark_sending(self, row_id: int, holder: str, now: float) -> bool:
        """Count an attempt and mark it in flight, if `holder` still holds the claim."""
        ...

    async def outbox_mark_sent(self, row_id: int, platform_id: str, now: float) -> None:
        """Record the send; a row re-split because it was too long goes on with the rest."""

    async def outbox_split(self, row_id: int, text: str, overflow: str, now: float) -> None:
        """Send `text` now and `overflow` (as a new message) once that went out."""

    async def outbox_retry_at(
        self, row_id: int, at: float, reason: str, now: float, *, unknown: bool = False
    ) -> None:
        """Try the row again at `at`; `unknown`: its last send may have gone out, so it is
        left `unconfirmed` (looked up or waited out before anything else is sent)."""

    async def outbox_mark_dead(
        self, row_id: int, reason: str, notice: str, now: float, *, maybe_sent: bool = False
    ) -> None:
        """Mark the row dead (`maybe_sent`: maybe sent, not to be sent again); `notice` is
        said before the next chunk of its reply."""

    async def outbox_retry_dead(self, row_id: int, now: float) -> bool:
        """Put dead row `row_id` back in line, due now (False: no such dead row)."""
        ...

    async def outbox_summary(self, dead_limit: int = 20) -> OutboxSummary: ...


class PairingStore(Protocol):
    async def pairing_get(self, channel: str, user_id: str) -> Pairing | None: ...
    async def pairing_put(self, pairing: Pairing) -> None: ...
    async def pairing_pending(self, channel: str) -> list[Pairing]: ...
    async def pairing_delete(self, channel: str, user_id: str) -> None: ...


@dataclass(frozen=True, slots=True)
class Pruned:
    """What one retention pass removed."""

    inbound: int = 0  # finished inbound rows and dedupe-only rows
    outbox: int = 0  # delivered reply chunks
    buffered: int = 0  # unaddressed group lines never picked up
    sessions: int = 0  # old (non-current) sessions...
    entries: int = 0  # ...and their transcript entries

    @property
    def total(self) -> int:
        return self.inbound + self.outbox + self.buffered + self.sessions + self.entries


class RetentionStore(Protocol):
    async def prune_before(self, cutoff: float) -> Pruned:
        """Remove what `storage.retention_days` lets go that was last touched before
        `cutoff` (unix seconds); unfinished work and current sessions always stay."""
        ...


class JobStore(Protocol):
    """When each periodic scheduler job last ran."""

    async def job_last_run(self, job: str) -> float | None: ...
    async def job_claim(self, job: str, due_before: float, at: float) -> bool:
        """Record a run of `job` at `at` unless one was recorded after `due_before`; whether
        this caller won the run (one conditional write, so one replica of many does)."""
        ...


class ReminderStatus(StrEnum):
    PENDING = "pending"
    SENT = "sent"  # its turn ran (the reply went out, or the turn failed and said so)
    CANCELLED = "cancelled"


@dataclass(slots=True)
class Reminder:
    id: int
    session_key: str
    address: dict[str, Any]  # where the reminder's reply goes (chat, thread or topic)
    creator: str  # principal, "<channel>:<user_id>"
    due_at: float
    text: str
    status: ReminderStatus
    created_at: float
    fired_at: float | None = None


class ReminderStore(Protocol):
    """Reminders set with reminder_create: rows the scheduler rebuilds its jobs from."""

    async def reminder_add(
        self,
        *,
        session_key: str,
        address: dict[str, Any],
        creator: str,
        due_at: float,
        text: str,
        created_at: float,
    ) -> Reminder: ...
    async def reminder_get(self, reminder_id: int) -> Reminder | None: ...
    async def reminders(
        self, *, status: ReminderStatus | None = None, creator: str | None = None
    ) -> list[Reminder]:
        """Ordered by due time; None filters nothing."""
        ...

    async def reminder_finish(self, reminder_id: int, status: ReminderStatus, *, at: float) -> bool:
        """Move a pending reminder to `status`; False when it was no longer pending."""
        ...


class LeaseStore(Protocol):
    """Session leases: one turn at a time per session key across every process. A claim is
    one atomic conditional write; an expired holder's lease may be taken over."""

    async def claim_lease(
        self, session_key: str, holder: str, until: float, now: float
    ) -> bool: ...
    async def release_lease(self, session_key: str, holder: str) -> None: ...
    async def lease_holder(self, session_key: str, now: float) -> str | None: ...
    async def lease_holders(self) -> list[str]: ...
    async def release_leases_of(self, holder: str) -> None: ...


class MemoryIndexStore(Protocol):
    """Storage of the memory index (bot/memory/index.py decides what to index and ranks):
    chunks of memory files under a full-text index that matches substrings (trigrams), so
    CJK text is searchable. Search terms are case-folded substrings of 3+ characters (the
    store turns them into its own query syntax); a term matches a chunk holding it in any
    case. A search returns only chunks of the files `visible` allows."""

    async def memory_files(self) -> list[IndexedFile]: ...
    async def memory_stats(self) -> tuple[int, int]: ...
    async def memory_put_file(
        self, file: IndexedFile, chunks: list[IndexedChunk] | None
    ) -> None: ...
    async def memory_remove_file(self, path: str) -> None: ...
    async def memory_term_counts(self, terms: Sequence[str], cap: int) -> list[int]: ...
    async def memory_match(
        self, terms: Sequence[str], *, ranked: bool, limit: int, visible: VisiblePaths
    ) -> list[ChunkMatch]: ...
    async def memory_substring(
        self, terms: tuple[str, ...], *, limit: int, visible: VisiblePaths
    ) -> list[ChunkMatch]: ...
    async def memory_recent(self, *, limit: int, visible: VisiblePaths) -> list[ChunkMatch]: ...


class Store(
    SessionStore,
    ContextPlanStore,
    TranscriptStore,
    UsageStore,
    TurnStore,
    InboundStore,
    OutboxStore,
    PairingStore,
    RetentionStore,
    JobStore,
    ReminderStore,
    LeaseStore,
    MemoryIndexStore,
    SharedStateStore,
    Protocol,
):
    """Everything the service persists; a consumer asks for the narrow part it uses."""

    async def open(self) -> None: ...
    async def close(self) -> None: ...
    async def schema_version(self) -> int: ...
    async def integrity_check(self) -> str: ...
    async def backup(self, target: Path, progress: Callable[[int, int], None] | None) -> None:
        """A consistent copy of everything at `target` while the store stays in use;
        `progress(done, total)` is called as it goes."""
