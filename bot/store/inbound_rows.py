"""Inbound messages' typed rows (the durable queue with its dedupe status, and the group
buffer's lines), and their mapping to and from the columns both stores keep."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import StrEnum

from bot.store.stored_row import StoredRow
from bot.types import Attachment

# The columns `inbound_row` and `buffered_line` read, in their order.
INBOUND_COLUMNS = "id, channel, external_id, session_key, status, payload, received_at, turn_id"
BUFFER_COLUMNS = "sender, text, created_at, attachments"


class InboundStatus(StrEnum):
    """Where an accepted (or merely seen) inbound message stands."""

    PENDING = "pending"  # accepted, waiting for its turn
    PROCESSING = "processing"  # its turn has begun
    DONE = "done"
    CANCELLED = "cancelled"  # /stop dropped it
    FAILED = "failed"
    # Seen only for dedupe; no turn runs for these.
    COMMAND = "command"  # a chat command, answered without the model
    REFUSED = "refused"  # access policy said no
    BUFFERED = "buffered"  # unaddressed group chatter kept as context


UNFINISHED_INBOUND = (InboundStatus.PENDING, InboundStatus.PROCESSING)


@dataclass(slots=True)
class InboundRow:
    id: int
    channel: str
    external_id: str
    session_key: str
    status: InboundStatus
    payload: str  # InboundMessage JSON
    received_at: float
    turn_id: str | None = None


@dataclass(slots=True)
class BufferedLine:
    sender: str
    text: str
    created_at: float
    # Photos sent with the line, already stored by hash: they ride along with the next mention.
    attachments: list[Attachment] = field(default_factory=list)


def inbound_row(row: StoredRow) -> InboundRow:
    """An InboundRow from the INBOUND_COLUMNS of a stored row."""
    id_, channel, external_id, session_key, status, payload, received_at, turn_id = row
    return InboundRow(
        int(id_),
        channel,
        external_id,
        session_key,
        InboundStatus(status),
        payload,
        float(received_at),
        turn_id,
    )


def buffered_line(row: StoredRow) -> BufferedLine:
    """A BufferedLine from the BUFFER_COLUMNS of a stored row."""
    sender, text, created_at, attachments = row
    files = [Attachment.from_dict(a) for a in json.loads(attachments)] if attachments else []
    return BufferedLine(sender, text, float(created_at), files)


def attachments_json(attachments: list[Attachment]) -> str:
    """What the `attachments` column keeps: '' for none."""
    return json.dumps([a.to_dict() for a in attachments], ensure_ascii=False) if attachments else ""
