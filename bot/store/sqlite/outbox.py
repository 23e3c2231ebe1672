"""The outbox in SQLite: every reply chunk as a row before it is sent, its status (pending,
sending, unconfirmed, sent, dead, maybe sent), its attempts and when the next one is due.
Rows of one chat go out in `id` order; a chat's first unfinished row is its head. A sender
claims a head (one conditional UPDATE … RETURNING in the write transaction) before it sends
it, so senders of several processes sharing the file never send one row twice."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bot.store.outbox_rows import (
    CHUNK_COLUMNS,
    DEAD_COLUMNS,
    OUTBOX_COLUMNS,
    PREVIEW_COLUMNS,
    PREVIEW_INDEX,
    SET_ASIDE_OUTBOX,
    UNFINISHED_OUTBOX,
    OutboxChunk,
    OutboxRow,
    OutboxStatus,
    OutboxSummary,
    chunk_values,
    outbox_row,
    outbox_summary_of,
    preview_values,
)
from bot.store.sqlite.connection import Connection
from bot.types import Address


def _marks(values: Sequence[object]) -> str:
    return ", ".join("?" for _ in values)


# Placeholders for UNFINISHED_OUTBOX.
_UNFINISHED = _marks(UNFINISHED_OUTBOX)


def _heads(channels: Sequence[str]) -> str:
    """The heads of the chats on `channels`; `?` for the statuses, then the channels."""
    return (
        f"SELECT MIN(id) FROM outbox WHERE status IN ({_UNFINISHED})"
        f" AND channel IN ({_marks(channels)}) GROUP BY chat_key"
    )


# An outcome ends the claim: the chat's next row (or this one again) may be claimed.
_UNCLAIM = "claimed_by = NULL, claimed_until = NULL"


class OutboxTables(Connection):
    async def outbox_add(self, chunks: Sequence[OutboxChunk], now: float) -> None:
        async with self.transaction() as db:
            await db.executemany(
                f"INSERT OR IGNORE INTO outbox({CHUNK_COLUMNS})"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [chunk_values(c, now) for c in chunks],
            )

    async def outbox_preview(self, turn_id: str) -> str | None:
        row = await self._fetchone(
            "SELECT platform_id FROM outbox WHERE turn_id = ? AND chunk_index = ?",
            (turn_id, PREVIEW_INDEX),
        )
        return str(row[0]) if row is not None and row[0] is not None else None

    async def outbox_put_preview(
        self, turn_id: str, address: Address, platform_id: str, now: float
    ) -> None:
        async with self.transaction() as db:
            await db.execute(
                f"INSERT OR REPLACE INTO outbox({PREVIEW_COLUMNS})"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                preview_values(turn_id, address, platform_id, now),
            )

    async def outbox_heads(self, channels: Sequence[str]) -> list[OutboxRow]:
        if not channels:
            return []
        rows = await self._fetchall(
            f"SELECT {OUTBOX_COLUMNS} FROM outbox WHERE id IN ({_heads(channels)}) ORDER BY id",
            (*UNFINISHED_OUTBOX, *channels),
        )
        return [outbox_row(r) for r in rows]

    async def outbox_claim(
        self, channels: Sequence[str], holder: str, now: float, until: float, limit: int
    ) -> list[OutboxRow]:
        if not channels or limit <= 0:
            return []
        free = (
            f"SELECT id FROM outbox WHERE id IN ({_heads(channels)}"
            " HAVING COALESCE(MAX(claimed_until), 0) <= ?) AND next_attempt_at <= ?"
            " ORDER BY id LIMIT ?"
        )
        params = (*UNFINISHED_OUTBOX, *channels, now, now, limit)
        # A read first, so an idle poll never takes the write lock.
        if not await self._fetchone(free, params):
            return []
        # Choosing and claiming are one statement in the write transaction, so no other
        # process can claim a head between the two.
        async with self.transaction() as db:
            cursor = await db.execute(
                f"UPDATE outbox SET claimed_by = ?, claimed_until = ? WHERE id IN ({free})"
                f" RETURNING {OUTBOX_COLUMNS}",
                (holder, until, *params),
            )
            rows = await cursor.fetchall()
        return sorted((outbox_row(r) for r in rows), key=lambda row: row.id)

    async def outbox_next_due(self, channels: Sequence[str], now: float) -> float | None:
        if not channels:
            return None
        row = await self._fetchone(
            f"SELECT MIN(next_attempt_at) FROM outbox WHERE id IN ({_heads(channels)})"
            " AND next_attempt_at > ?",
            (*UNFINISHED_OUTBOX, *channels, now),
        )
        return float(row[0]) if row is not None and row[0] is not None else None

    async def outbox_extend_claims(self, holder: str, row_ids: Sequence[int], until: float) -> None:
        if not row_ids:
            return
        marks = ", ".join("?" for _ in row_ids)
        async with self.transaction() as db:
            await db.execute(
                f"UPDATE outbox SET claimed_until = ? WHERE claimed_by = ? AND id IN ({marks})",
                (until, holder, *row_ids),
            )

    async def outbox_claimants(self) -> list[str]:
        rows = await self._fetchall(
            "SELECT DISTINCT claimed_by FROM outbox WHERE claimed_by IS NOT NULL"
        )
        return [str(r[0]) for r in rows]

    async def outbox_release_claims(self, holder: str) -> None:
        async with self.transaction() as db:
            await db.execute(f"UPDATE outbox SET {_UNCLAIM} WHERE claimed_by = ?", (holder,))

    async def outbox_mark_sending(self, row_id: int, holder: str, now: float) -> bool:
        async with self.transaction() as db:
            cursor = await db.execute(
                "UPDATE outbox SET status = ?, attempts = attempts + 1, updated_at = ?"
                " WHERE id = ? AND claimed_by = ?",
                (OutboxStatus.SENDING, now, row_id, holder),
            )
            return cursor.rowcount == 1

    async def outbox_mark_sent(self, row_id: int, platform_id: str, now: float) -> None:
        # A re-split row stays first in its chat until its overflow went out too; the rest
        # is a message of its own, so it no longer edits a preview, nor repeats the notice.
        await self._update(
            "status = CASE WHEN overflow = '' THEN ? ELSE ? END,"
            " text = CASE WHEN overflow = '' THEN text ELSE overflow END, overflow = '',"
            " edit_of = NULL, notice = '', next_attempt_at = ?, platform_id = ?,"
            " dead_reason = NULL",
            (OutboxStatus.SENT, OutboxStatus.PENDING, now, platform_id),
            row_id,
            now,
        )

    async def outbox_split(self, row_id: int, text: str, overflow: str, now: float) -> None:
        await self._update(
            "status = ?, text = ?, notice = '', next_attempt_at = ?, overflow = ?"
            " || CASE WHEN overflow = '' THEN '' ELSE char(10) || overflow END",
            (OutboxStatus.PENDING, text, now, overflow),
            row_id,
            now,
        )

    async def outbox_retry_at(
        self, row_id: int, at: float, reason: str, now: float, *, unknown: bool = False
    ) -> None:
        status = OutboxStatus.UNCONFIRMED if unknown else OutboxStatus.PENDING
        await self._update(
            "status = ?, next_attempt_at = ?, dead_reason = ?",
            (status, at, reason),
            row_id,
            now,
        )

    async def outbox_mark_dead(
        self, row_id: int, reason: str, notice: str, now: float, *, maybe_sent: bool = False
    ) -> None:
        status = OutboxStatus.MAYBE_SENT if maybe_sent else OutboxStatus.DEAD
        async with self.transaction() as db:
            cursor = await db.execute(
                "SELECT turn_id, chunk_index, notice FROM outbox WHERE id = ?", (row_id,)
            )
            found = await cursor.fetchone()
            await db.execute(
                f"UPDATE outbox SET status = ?, dead_reason = ?, updated_at = ?, {_UNCLAIM}"
                " WHERE id = ?",
                (status, reason, now, row_id),
            )
            if found is None:
                return
            turn_id, index, earlier = found
            # The next chunk of the same reply carries what this one (and any refused before
            # it) could not say, so the person learns that part of the reply is missing.
            await db.execute(
                "UPDATE outbox SET notice = ? || notice, updated_at = ? WHERE id = (SELECT MIN(id)"
                " FROM outbox WHERE turn_id = ? AND chunk_index > ?"
                f" AND status IN ({_UNFINISHED}))",
                (earlier + notice, now, turn_id, index, *UNFINISHED_OUTBOX),
            )

    async def outbox_retry_dead(self, row_id: int, now: float) -> bool:
        async with self.transaction() as db:
            cursor = await db.execute(
                "UPDATE outbox SET status = ?, attempts = 0, next_attempt_at = ?,"
                " dead_reason = NULL, notice = '', updated_at = ? WHERE id = ? AND status = ?",
                (OutboxStatus.PENDING, now, now, row_id, OutboxStatus.DEAD),
            )
            return cursor.rowcount == 1

    async def outbox_summary(self, dead_limit: int = 20) -> OutboxSummary:
        counted = (*UNFINISHED_OUTBOX, *SET_ASIDE_OUTBOX)
        counts = {
            str(status): int(n)
            for status, n in await self._fetchall(
                f"SELECT status, COUNT(*) FROM outbox WHERE status IN ({_marks(counted)})"
                " GROUP BY status",
                counted,
            )
        }
        dead = await self._fetchall(
            f"SELECT {DEAD_COLUMNS} FROM outbox WHERE status IN ({_marks(SET_ASIDE_OUTBOX)})"
            " ORDER BY id DESC LIMIT ?",
            (*SET_ASIDE_OUTBOX, dead_limit),
        )
        return outbox_summary_of(counts, dead)

    async def _update(self, fields: str, params: tuple[Any, ...], row_id: int, now: float) -> None:
        async with self.transaction() as db:
            await db.execute(
                f"UPDATE outbox SET {fields}, {_UNCLAIM}, updated_at = ? WHERE id = ?",
                (*params, now, row_id),
            )
