"""The outbox's typed rows: a chunk to write, a row as stored, its status, and the summary
`krill status` and `/status` show (dead chunks included)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from bot.types import Address, OutboundFile


class OutboxStatus(StrEnum):
    PENDING = "pending"  # waiting for its (next) attempt
    SENDING = "sending"  # handed to the platform; the outcome is not recorded yet
    SENT = "sent"
    DEAD = "dead"  # refused for good; `dead_reason` says why


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

    @property
    def chat_key(self) -> str:
        return outbox_chat_key(self.address)


def outbox_chat_key(address: Address) -> str:
    """Rows with the same key are delivered one after another, in order."""
    return f"{address.channel}:{address.chat_id}"


@dataclass(frozen=True, slots=True)
class DeadChunk:
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
