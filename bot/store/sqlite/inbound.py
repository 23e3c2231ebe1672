"""Inbound messages in SQLite: the durable queue with dedupe on (channel, message id), and
the group buffers of unaddressed chatter that a later mention takes as context."""

from __future__ import annotations

import time
from collections.abc import Callable

import aiosqlite

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
from bot.store.sqlite.connection import Connection

_INSERT = (
    "INSERT OR IGNORE INTO inbound(channel, external_id, session_key, status, payload,"
    " received_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)"
)


async def set_inbound_rows(
    db: aiosqlite.Connection, ids: list[int], status: InboundStatus, turn_id: str | None = None
) -> None:
    """Move inbound rows to `status` (and to `turn_id`, when given) inside a transaction."""
    if not ids:
        return
    marks = ",".join("?" * len(ids))
    await db.execute(
        f"UPDATE inbound SET status = ?, turn_id = COALESCE(?, turn_id), updated_at = ?"
        f" WHERE id IN ({marks})",
        (status, turn_id, time.time(), *ids),
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
        by `merge` and cleared in the same transaction, so buffered context is neither lost
        nor used twice."""
        now = time.time()
        async with self.transaction() as db:
            cur = await db.execute(
                _INSERT,
                (channel, external_id, session_key, InboundStatus.PENDING, payload, now, now),
            )
            if cur.rowcount == 0:
                return None, []
            inbound_id = cur.lastrowid
            lines: list[BufferedLine] = []
            if take_buffer:
                source = buffer_key or session_key
                rows = await self._fetchall(
                    f"SELECT {BUFFER_COLUMNS} FROM group_buffer WHERE session_key = ? ORDER BY id",
                    (source,),
                )
                lines = [buffered_line(r) for r in rows]
                if lines:
                    await db.execute("DELETE FROM group_buffer WHERE session_key = ?", (source,))
                    if merge is not None:
                        await db.execute(
                            "UPDATE inbound SET payload = ? WHERE id = ?",
                            (merge(payload, lines), inbound_id),
                        )
            return inbound_id, lines

    async def mark_seen(
        self, channel: str, external_id: str, session_key: str, status: InboundStatus
    ) -> bool:
        """Record a message that needs no turn (command, buffered, refused) for dedupe only."""
        now = time.time()
        async with self.transaction() as db:
            cur = await db.execute(
                _INSERT, (channel, external_id, session_key, status, "{}", now, now)
            )
            return cur.rowcount > 0

    async def seen_inbound(self, channel: str, external_id: str) -> bool:
        row = await self._fetchone(
            "SELECT 1 FROM inbound WHERE channel = ? AND external_id = ?", (channel, external_id)
        )
        return row is not None

    async def set_inbound_status(
        self, ids: list[int], status: InboundStatus, *, turn_id: str | None = None
    ) -> None:
        if not ids:
            return
        async with self.transaction() as db:
            await set_inbound_rows(db, ids, status, turn_id)

    async def unfinished_inbound(self) -> list[InboundRow]:
        rows = await self._fetchall(
            f"SELECT {INBOUND_COLUMNS} FROM inbound WHERE status IN (?, ?) ORDER BY id",
            UNFINISHED_INBOUND,
        )
        return [inbound_row(r) for r in rows]

    async def unfinished_in(self, session_key: str) -> list[InboundRow]:
        rows = await self._fetchall(
            f"SELECT {INBOUND_COLUMNS} FROM inbound WHERE session_key = ? AND status IN (?, ?)"
            " ORDER BY id",
            (session_key, *UNFINISHED_INBOUND),
        )
        return [inbound_row(r) for r in rows]

    async def count_inbound(self, status: InboundStatus) -> int:
        row = await self._fetchone("SELECT COUNT(*) FROM inbound WHERE status = ?", (status,))
        return int(row[0]) if row else 0

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
                _INSERT,
                (channel, external_id, session_key, InboundStatus.BUFFERED, "{}", now, now),
            )
            if cur.rowcount == 0:
                return False
            if line is None or limit <= 0:
                return True
            await db.execute(
                "INSERT INTO group_buffer(session_key, sender, text, created_at, attachments)"
                " VALUES (?, ?, ?, ?, ?)",
                (
                    session_key,
                    line.sender,
                    line.text,
                    line.created_at,
                    attachments_json(line.attachments),
                ),
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
