"""The outbox's typed rows: a chunk to write, a row as stored, its status, and the summary
`krill status` and `/status` show (dead and maybe-sent chunks included); and their mapping to
and from the outbox table's columns (bot/store/outbox.py runs the SQL)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from bot.store.db import Row
from bot.types import Address, OutboundFile, Source

# The columns `outbox_row` reads, in its order.
OUTBOX_COLUMNS = (
    "id, turn_id, chunk_index, chunk_count, kind, address, text, notice, edit_of, status,"
    " attempts, next_attempt_at, payload"
)
# The columns `outbox_summary_of` reads of each dead or maybe-sent row.
DEAD_COLUMNS = "id, turn_id, chunk_index, chunk_count, address, dead_reason, updated_at, status"
PREVIEW_INDEX = -1  # a turn's preview row sits before its chunk 0


class OutboxStatus(StrEnum):
    PENDING = "pending"  # waiting for its (next) attempt
    SENDING = "sending"  # handed to the platform; the outcome is not recorded yet
    # Its last send got no answer in time and may have gone out: looked up, or waited out,
    # before anything else goes to its chat.
    UNCONFIRMED = "unconfirmed"
    SENT = "sent"
    DEAD = "dead"  # refused for good; `dead_reason` says why
    # Never confirmed, and not sent again so as not to duplicate it; `dead_reason` says why.
    MAYBE_SENT = "maybe_sent"


UNFINISHED_OUTBOX = (OutboxStatus.PENDING, OutboxStatus.SENDING, OutboxStatus.UNCONFIRMED)
# Rows set aside with a reason, listed by `krill status`: refused, or maybe sent.
SET_ASIDE_OUTBOX = (OutboxStatus.DEAD, OutboxStatus.MAYBE_SENT)


class OutboxKind(StrEnum):
    TEXT = "text"  # one chunk of a reply
    PREVIEW = "preview"  # the streaming preview a reply's chunk 0 edits (already sent)
    FILE = "file"  # a file the model sent (tool `send_file`); `file` says which


@dataclass(frozen=True, slots=True)
class OutboxChunk:
    """One chunk of a reply to write to the outbox before anything is sent."""

    turn_id: str  # the turn (or other reply) it belongs to
    chunk_index: int
    chunk_count: int
    address: Address
    text: str
    edit_of: str | None = None  # a preview message this chunk replaces in place
    kind: OutboxKind = OutboxKind.TEXT
    file: OutboundFile | None = None  # what a FILE row sends
    sources: tuple[Source, ...] = ()  # the pages a reply cited, on its last chunk


@dataclass(frozen=True, slots=True)
class OutboxRow:
    """A chunk waiting in (or sent from) the outbox."""

    id: int
    turn_id: str
    chunk_index: int
    chunk_count: int
    kind: OutboxKind
    address: Address
    text: str
    notice: str  # said before `text`: earlier chunks of this reply that were refused
    edit_of: str | None
    status: OutboxStatus
    attempts: int
    next_attempt_at: float
    file: OutboundFile | None = None
    sources: tuple[Source, ...] = ()

    @property
    def chat_key(self) -> str:
        return outbox_chat_key(self.address)


def outbox_chat_key(address: Address) -> str:
    """Rows with the same key are delivered one after another, in order."""
    return f"{address.channel}:{address.chat_id}"


@dataclass(frozen=True, slots=True)
class DeadChunk:
    """A chunk set aside: refused for good, or (in `maybe_sent_chunks`) maybe sent."""

    id: int
    turn_id: str
    chunk_index: int
    chunk_count: int
    channel: str
    chat_id: str
    reason: str
    at: float


@dataclass(frozen=True, slots=True)
class OutboxSummary:
    pending: int
    dead: int
    dead_chunks: list[DeadChunk]  # the most recent ones
    maybe_sent: int = 0
    maybe_sent_chunks: list[DeadChunk] = dataclasses.field(default_factory=list)


def _payload(chunk: OutboxChunk) -> str:
    """The `payload` column: a FILE row's file, or the sources of a reply's last chunk."""
    if chunk.file is not None:
        return json.dumps(dataclasses.asdict(chunk.file))
    if chunk.sources:
        return json.dumps({"sources": [dataclasses.asdict(s) for s in chunk.sources]})
    return ""


def outbox_row(r: Row) -> OutboxRow:
    """An OutboxRow from the OUTBOX_COLUMNS of a stored row."""
    kind = OutboxKind(r[4])
    payload = json.loads(r[12]) if r[12] else {}
    is_file = kind is OutboxKind.FILE
    return OutboxRow(
        id=int(r[0]),
        turn_id=str(r[1]),
        chunk_index=int(r[2]),
        chunk_count=int(r[3]),
        kind=kind,
        address=Address.from_json(r[5]),
        text=str(r[6]),
        notice=str(r[7]),
        edit_of=r[8],
        status=OutboxStatus(r[9]),
        attempts=int(r[10]),
        next_attempt_at=float(r[11]),
        file=OutboundFile(**payload) if is_file and payload else None,
        sources=() if is_file else tuple(Source(**s) for s in payload.get("sources", ())),
    )


# The columns `chunk_values` fills.
CHUNK_COLUMNS = (
    "turn_id, chunk_index, chunk_count, kind, channel, chat_key, address, text, edit_of,"
    " payload, status, next_attempt_at, created_at, updated_at"
)


def chunk_values(chunk: OutboxChunk, now: float) -> tuple[Any, ...]:
    """A new row's values for CHUNK_COLUMNS."""
    return (
        chunk.turn_id,
        chunk.chunk_index,
        chunk.chunk_count,
        str(chunk.kind),
        chunk.address.channel,
        outbox_chat_key(chunk.address),
        chunk.address.to_json(),
        chunk.text,
        chunk.edit_of,
        _payload(chunk),
        str(OutboxStatus.PENDING),
        now,
        now,
        now,
    )


# The columns `preview_values` fills.
PREVIEW_COLUMNS = (
    "turn_id, chunk_index, chunk_count, kind, channel, chat_key, address, text, status,"
    " next_attempt_at, platform_id, created_at, updated_at"
)


def preview_values(turn_id: str, address: Address, platform_id: str, now: float) -> tuple[Any, ...]:
    """A turn's preview row (already sent) for PREVIEW_COLUMNS."""
    return (
        turn_id,
        PREVIEW_INDEX,
        0,
        str(OutboxKind.PREVIEW),
        address.channel,
        outbox_chat_key(address),
        address.to_json(),
        "",
        str(OutboxStatus.SENT),
        now,
        platform_id,
        now,
        now,
    )


def outbox_summary_of(counts: Mapping[str, int], dead: Iterable[Row]) -> OutboxSummary:
    """The summary from row counts by status and the DEAD_COLUMNS of the latest dead and
    maybe-sent rows."""
    chunks: dict[str, list[DeadChunk]] = {str(status): [] for status in SET_ASIDE_OUTBOX}
    for row_id, turn_id, index, count, address, reason, at, status in dead:
        where = Address.from_json(address)
        chunks[str(status)].append(
            DeadChunk(
                id=int(row_id),
                turn_id=str(turn_id),
                chunk_index=int(index),
                chunk_count=int(count),
                channel=where.channel,
                chat_id=where.chat_id,
                reason=str(reason or ""),
                at=float(at),
            )
        )
    return OutboxSummary(
        pending=sum(counts.get(status, 0) for status in UNFINISHED_OUTBOX),
        dead=counts.get(OutboxStatus.DEAD, 0),
        dead_chunks=chunks[OutboxStatus.DEAD],
        maybe_sent=counts.get(OutboxStatus.MAYBE_SENT, 0),
        maybe_sent_chunks=chunks[OutboxStatus.MAYBE_SENT],
    )
