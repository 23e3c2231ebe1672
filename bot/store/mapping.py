"""Row mapping both stores share for sessions, transcript entries, usage points, pairings
and reminders: the columns they select, how a stored row becomes a record and how a record's
fields become stored values. SQLite and PostgreSQL hold the same values (epoch seconds, JSON
as text), so only the SQL around these differs."""

from __future__ import annotations

import json
import time
from typing import Any

from bot.store.base import Pairing, PairingStatus, Reminder, ReminderStatus, SessionRow, UsagePoint
from bot.store.stored_row import StoredRow
from bot.transcript import AssistantReply, Entry, EntryKind, payload_from, to_payload
from bot.types import ChatType, SessionOrigin, Usage

SESSION_COLUMNS = [
    "session_id", "session_key", "is_current", "created_at", "updated_at", "channel", "address",
    "model", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
    "context_tokens", "turns", "compaction_count", "memory_flush_at",
    "memory_flush_compaction_count", "memory_flush_count", "memory_flush_error",
    "last_model_call_at", "last_activity_at", "cost_usd", "errors",
    "chat_type", "chat_id", "thread_id", "peer_id", "chosen_model", "context_window",
    "context_window_model", "compaction_failures", "compaction_paused_until",
]  # fmt: skip
SELECT_SESSIONS = f"SELECT {', '.join(SESSION_COLUMNS)} FROM sessions"
# The conversation is fixed when the session is created.
_ORIGIN_COLUMNS = {"channel", "chat_type", "chat_id", "thread_id", "peer_id"}
_UPDATABLE = (
    set(SESSION_COLUMNS)
    - {"session_id", "session_key", "is_current", "created_at"}
    - _ORIGIN_COLUMNS
)
_COUNTERS = {"turns", "errors", "compaction_count", "memory_flush_count", "compaction_failures"}

ENTRY_COLUMNS = "seq, id, session_id, parent_id, kind, turn_id, payload, usage, created_at"
# The columns `entry_values` fills, in its order.
ENTRY_INSERT_COLUMNS = "id, session_id, parent_id, kind, turn_id, payload, usage, created_at"
# What `usage_point` reads, one row per assistant reply with usage.
USAGE_COLUMNS = "e.session_id, s.channel, s.model, e.payload, e.usage, e.created_at"

PAIRING_COLUMNS = "channel, user_id, code, status, created_at, user_name"
REMINDER_COLUMNS = "id, session_key, address, creator, due_at, text, status, created_at, fired_at"


def session_from_row(row: StoredRow) -> SessionRow:
    data = dict(zip(SESSION_COLUMNS, row, strict=True))
    data["is_current"] = bool(data["is_current"])
    data["address"] = json.loads(data["address"]) if data["address"] else None
    data["chat_type"] = ChatType(data["chat_type"]) if data["chat_type"] else None
    return SessionRow(**data)


def origin_values(origin: SessionOrigin) -> tuple[str, str, str, str | None, str | None]:
    """channel, chat_type, chat_id, thread_id, peer_id: the columns a new session fixes."""
    return origin.channel, origin.chat_type, origin.chat_id, origin.thread_id, origin.peer_id


def session_updates(fields: dict[str, Any]) -> dict[str, Any]:
    """The stored values of an update to a session row; `updated_at` defaults to now.
    Raises ValueError for a field that may not change (its identity or conversation)."""
    unknown = set(fields) - _UPDATABLE
    if unknown:
        raise ValueError(f"not updatable session fields: {sorted(unknown)}")
    values = dict(fields)
    if values.get("address") is not None:
        values["address"] = json.dumps(values["address"])
    values.setdefault("updated_at", time.time())
    return values


def counter_deltas(deltas: dict[str, int]) -> dict[str, int]:
    """`deltas` checked to name only session counters."""
    unknown = set(deltas) - _COUNTERS
    if unknown:
        raise ValueError(f"not countable session fields: {sorted(unknown)}")
    return deltas


def entry_from_row(row: StoredRow) -> Entry:
    seq, id_, session_id, parent_id, kind, turn_id, payload, usage, created_at = row
    return Entry(
        session_id=session_id,
        payload=payload_from(kind, json.loads(payload)),
        turn_id=turn_id,
        usage=Usage(**json.loads(usage)) if usage else None,
        id=id_,
        parent_id=parent_id,
        created_at=created_at,
        seq=seq,
    )


def chain(entries: list[Entry], last_id: str | None) -> None:
    """Link entries of one session each to the one before, the first to `last_id` (the
    session's latest stored entry); an entry that names its parent keeps it."""
    parent = last_id
    for entry in entries:
        if entry.session_id != entries[0].session_id:
            raise ValueError("append_entries takes entries of one session")
        if entry.parent_id is None:
            entry.parent_id = parent
        parent = entry.id


def entry_values(entry: Entry) -> tuple[Any, ...]:
    """The stored values of `entry`, in the order of ENTRY_INSERT_COLUMNS."""
    return (
        entry.id,
        entry.session_id,
        entry.parent_id,
        entry.kind,
        entry.turn_id,
        json.dumps(to_payload(entry.payload), ensure_ascii=False),
        json.dumps(entry.usage.to_dict()) if entry.usage else None,
        entry.created_at,
    )


def usage_point(row: StoredRow) -> UsagePoint:
    """A row of USAGE_COLUMNS: the reply's own model wins over the session's."""
    session_id, channel, session_model, payload, usage, created_at = row
    reply = payload_from(EntryKind.ASSISTANT_REPLY, json.loads(payload))
    model = reply.model if isinstance(reply, AssistantReply) else ""
    return UsagePoint(
        session_id, channel, model or session_model, created_at, Usage(**json.loads(usage))
    )


def pairing_from_row(row: StoredRow) -> Pairing:
    channel, user_id, code, status, created_at, user_name = row
    return Pairing(channel, user_id, code, PairingStatus(status), created_at, user_name)


def pairing_values(pairing: Pairing) -> tuple[Any, ...]:
    """The stored values of `pairing`, in the order of PAIRING_COLUMNS."""
    return (
        pairing.channel,
        pairing.user_id,
        pairing.code,
        str(pairing.status),
        pairing.created_at,
        pairing.user_name,
    )


def reminder_from_row(row: StoredRow) -> Reminder:
    rid, key, address, creator, due_at, text, status, created_at, fired_at = row
    return Reminder(
        id=int(rid),
        session_key=key,
        address=json.loads(address),
        creator=creator,
        due_at=float(due_at),
        text=text,
        status=ReminderStatus(status),
        created_at=float(created_at),
        fired_at=fired_at,
    )
