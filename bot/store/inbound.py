"""Inbound messages: the durable queue with dedupe on (channel, message id) by the table's
UNIQUE constraint (an update delivered to two replicas is accepted once), and the group
buffers of unaddressed chatter that a later mention takes as context, handed over once by
DELETE … RETURNING."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from bot.store.db import Db, Row
from bot.types import Attachment

COLUMNS = "id, channel, external_id, session_key, status, payload, received_at, turn_id"
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


def _inbound_row(row: Row) -> InboundRow:
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


def _buffered_line(row: Row) -> BufferedLine:
    """A group_buffer row's `id, {BUFFER_COLUMNS}` as a line."""
    _, sender, text, created_at, attachments = row
    files = [Attachment.from_dict(a) for a in json.loads(attachments)] if attachments else []
    return BufferedLine(sender, text, float(created_at), files)


def _attachments_json(attachments: list[Attachment]) -> str:
    """What the `attachments` column keeps: '' for none."""
    return json.dumps([a.to_dict() for a in attachments], ensure_ascii=False) if attachments else ""


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


# Returns the new row's id, or nothing when the message was seen before (by any process).
_INSERT = (
    "INSERT INTO inbound(channel, external_id, session_key, status, payload, received_at,"
    " updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (channel, external_id) DO NOTHING RETURNING id"
)


async def _insert(
    db: Db, channel: str, external_id: str, key: str, status: str, payload: str
) -> int | None:
    now = time.time()
    return await db.fetchval(_INSERT, channel, external_id, key, status, payload, now, now)


async def set_inbound_rows(
    tx: Db, ids: Sequence[int], status: InboundStatus, turn_id: str | None = None
) -> None:
    """Move inbound rows to `status` (and to `turn_id`, when given)."""
    if ids:
        among, args = tx.dialect.one_of("id", ids)
        await tx.execute(
            "UPDATE inbound SET status = ?, turn_id = COALESCE(?, turn_id), updated_at = ?"
            f" WHERE {among}",
            str(status),
            turn_id,
            time.time(),
            *args,
        )


class InboundTables:
    db: Db

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
        nor used twice (a second taker finds the rows gone once the first commits)."""
        async with self.db.transaction() as tx:
            pending = str(InboundStatus.PENDING)
            inbound_id = await _insert(tx, channel, external_id, session_key, pending, payload)
            if inbound_id is None or not take_buffer:
                return inbound_id, []
            taken = await tx.fetch(
                f"DELETE FROM group_buffer WHERE session_key = ? RETURNING id, {BUFFER_COLUMNS}",
                buffer_key or session_key,
            )
            lines = [_buffered_line(r) for r in sorted(taken, key=lambda r: r[0])]
            if lines and merge is not None:
                await tx.execute(
                    "UPDATE inbound SET payload = ? WHERE id = ?", merge(payload, lines), inbound_id
                )
            return int(inbound_id), lines

    async def mark_seen(
        self, channel: str, external_id: str, session_key: str, status: InboundStatus
    ) -> bool:
        """Record a message that needs no turn (command, buffered, refused) for dedupe only."""
        return await _insert(self.db, channel, external_id, session_key, status, "{}") is not None

    async def seen_inbound(self, channel: str, external_id: str) -> bool:
        found = await self.db.fetchval(
            "SELECT 1 FROM inbound WHERE channel = ? AND external_id = ?", channel, external_id
        )
        return found is not None

    async def set_inbound_status(
        self, ids: list[int], status: InboundStatus, *, turn_id: str | None = None
    ) -> None:
        if ids:
            async with self.db.transaction() as tx:
                await set_inbound_rows(tx, ids, status, turn_id)

    async def unfinished_inbound(self) -> list[InboundRow]:
        return await self._unfinished("TRUE")

    async def unfinished_in(self, session_key: str) -> list[InboundRow]:
        return await self._unfinished("session_key = ?", session_key)

    async def _unfinished(self, condition: str, *args: object) -> list[InboundRow]:
        among, statuses = self.db.dialect.one_of("status", [str(s) for s in UNFINISHED_INBOUND])
        rows = await self.db.fetch(
            f"SELECT {COLUMNS} FROM inbound WHERE {condition} AND {among} ORDER BY id",
            *args,
            *statuses,
        )
        return [_inbound_row(r) for r in rows]

    async def count_inbound(self, status: InboundStatus) -> int:
        count = await self.db.fetchval("SELECT COUNT(*) FROM inbound WHERE status = ?", str(status))
        return int(count or 0)

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
        async with self.db.transaction() as tx:
            buffered = str(InboundStatus.BUFFERED)
            if await _insert(tx, channel, external_id, session_key, buffered, "{}") is None:
                return False
            if line is None or limit <= 0:
                return True
            await tx.execute(
                f"INSERT INTO group_buffer(session_key, {BUFFER_COLUMNS}) VALUES (?, ?, ?, ?, ?)",
                session_key,
                line.sender,
                line.text,
                line.created_at,
                _attachments_json(line.attachments),
            )
            await tx.execute(
                "DELETE FROM group_buffer WHERE session_key = ? AND id NOT IN ("
                "SELECT id FROM group_buffer WHERE session_key = ? ORDER BY id DESC LIMIT ?)",
                session_key,
                session_key,
                limit,
            )
            return True

    async def buffer_count(self, session_key: str) -> int:
        count = await self.db.fetchval(
            "SELECT COUNT(*) FROM group_buffer WHERE session_key = ?", session_key
        )
        return int(count or 0)
