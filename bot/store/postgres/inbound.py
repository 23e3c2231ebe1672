"""Inbound messages in PostgreSQL: the durable queue with dedupe on (channel, message id) by
the table's UNIQUE constraint (an update delivered to two replicas is accepted once), and
the group buffers, handed over once by DELETE … RETURNING."""

from __future__ import annotations

import time
from collections.abc import Callable

from bot.store.inbound_rows import (
    BUFFER_COLUMNS,
    INBOUND_COLUMNS,
    UNFINISHED_INBOUND,
    BufferedLine,
    InboundRow,
    InboundStatus,
    attachments_json,
    buffered_line,
    inbound_row,
)
from bot.store.postgres.connection import Connection, Db

# Returns the new row's id, or nothing when the message was seen before (by any replica).
_INSERT = (
    "INSERT INTO inbound(channel, external_id, session_key, status, payload, received_at,"
    " updated_at) VALUES ($1, $2, $3, $4, $5, $6, $6)"
    " ON CONFLICT (channel, external_id) DO NOTHING RETURNING id"
)
# Concurrent takers of one buffer: the second finds the rows gone once the first commits.
_TAKE_BUFFER = (
    "WITH taken AS (DELETE FROM group_buffer WHERE session_key = $1"
    f" RETURNING id, {BUFFER_COLUMNS}) SELECT {BUFFER_COLUMNS} FROM taken ORDER BY id"
)
_UNFINISHED = [str(s) for s in UNFINISHED_INBOUND]


async def set_inbound_rows(
    db: Db, ids: list[int], status: InboundStatus, turn_id: str | None = None
) -> None:
    """Move inbound rows to `status` (and to `turn_id`, when given) inside a transaction."""
    if ids:
        await db.execute(
            "UPDATE inbound SET status = $1, turn_id = COALESCE($2, turn_id), updated_at = $3"
            " WHERE id = ANY($4::bigint[])",
            str(status),
            turn_id,
            time.time(),
            ids,
        )


class InboundTables(Connection):
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
        by `merge` and cleared in the same transaction."""
        status = str(InboundStatus.PENDING)
        async with self.transaction() as db:
            args = (channel, external_id, session_key, status, payload, time.time())
            inbound_id = await db.fetchval(_INSERT, *args)
            if inbound_id is None or not take_buffer:
                return inbound_id, []
            lines = [
                buffered_line(r) for r in await db.fetch(_TAKE_BUFFER, buffer_key or session_key)
            ]
            if lines and merge is not None:
                await db.execute(
                    "UPDATE inbound SET payload = $1 WHERE id = $2",
                    merge(payload, lines),
                    inbound_id,
                )
            return int(inbound_id), lines

    async def mark_seen(
        self, channel: str, external_id: str, session_key: str, status: InboundStatus
    ) -> bool:
        """Record a message that needs no turn (command, buffered, refused) for dedupe only."""
        args = (channel, external_id, session_key, str(status), "{}", time.time())
        return await self._fetchval(_INSERT, *args) is not None

    async def seen_inbound(self, channel: str, external_id: str) -> bool:
        found = await self._fetchval(
            "SELECT 1 FROM inbound WHERE channel = $1 AND external_id = $2", channel, external_id
        )
        return found is not None

    async def set_inbound_status(
        self, ids: list[int], status: InboundStatus, *, turn_id: str | None = None
    ) -> None:
        if ids:
            async with self.transaction() as db:
                await set_inbound_rows(db, ids, status, turn_id)

    async def unfinished_inbound(self) -> list[InboundRow]:
        rows = await self._fetchall(
            f"SELECT {INBOUND_COLUMNS} FROM inbound WHERE status = ANY($1::text[]) ORDER BY id",
            _UNFINISHED,
        )
        return [inbound_row(r) for r in rows]

    async def unfinished_in(self, session_key: str) -> list[InboundRow]:
        rows = await self._fetchall(
            f"SELECT {INBOUND_COLUMNS} FROM inbound"
            " WHERE session_key = $1 AND status = ANY($2::text[]) ORDER BY id",
            session_key,
            _UNFINISHED,
        )
        return [inbound_row(r) for r in rows]

    async def count_inbound(self, status: InboundStatus) -> int:
        count = await self._fetchval("SELECT COUNT(*) FROM inbound WHERE status = $1", str(status))
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
        the session's buffer, trimmed to `limit`, in one transaction."""
        status = str(InboundStatus.BUFFERED)
        async with self.transaction() as db:
            args = (channel, external_id, session_key, status, "{}", time.time())
            if await db.fetchval(_INSERT, *args) is None:
                return False
            if line is None or limit <= 0:
                return True
            await db.execute(
                f"INSERT INTO group_buffer(session_key, {BUFFER_COLUMNS})"
                " VALUES ($1, $2, $3, $4, $5)",
                session_key,
                line.sender,
                line.text,
                line.created_at,
                attachments_json(line.attachments),
            )
            await db.execute(
                "DELETE FROM group_buffer WHERE session_key = $1 AND id NOT IN ("
                "SELECT id FROM group_buffer WHERE session_key = $1 ORDER BY id DESC LIMIT $2)",
                session_key,
                limit,
            )
            return True

    async def buffer_count(self, session_key: str) -> int:
        count = await self._fetchval(
            "SELECT COUNT(*) FROM group_buffer WHERE session_key = $1", session_key
        )
        return int(count or 0)
