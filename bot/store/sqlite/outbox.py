"""The outbox in SQLite: every reply chunk as a row before it is sent, its status (pending,
sending, sent, dead), its attempts and when the next one is due. Rows of one chat go out in
`id` order; a chat's first unfinished row is its head."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from bot.store.outbox_rows import (
    DeadChunk,
    OutboxChunk,
    OutboxKind,
    OutboxRow,
    OutboxStatus,
    OutboxSummary,
    outbox_chat_key,
)
from bot.store.sqlite.connection import Connection
from bot.types import Address, OutboundFile

_PREVIEW_INDEX = -1  # a turn's preview row sits before its chunk 0
_UNFINISHED = (OutboxStatus.PENDING, OutboxStatus.SENDING)
_ROW = (
    "id, turn_id, chunk_index, chunk_count, kind, address, text, notice, edit_of, status,"
    " attempts, next_attempt_at, payload"
)


def _row(r: Any) -> OutboxRow:
    return OutboxRow(
        id=int(r[0]),
        turn_id=str(r[1]),
        chunk_index=int(r[2]),
        chunk_count=int(r[3]),
        kind=OutboxKind(r[4]),
        address=Address.from_dict(json.loads(r[5])),
        text=str(r[6]),
        notice=str(r[7]),
        edit_of=r[8],
        status=OutboxStatus(r[9]),
        attempts=int(r[10]),
        next_attempt_at=float(r[11]),
        file=OutboundFile(**json.loads(r[12])) if r[12] else None,
    )


def _payload(chunk: OutboxChunk) -> str:
    return json.dumps(dataclasses.asdict(chunk.file)) if chunk.file is not None else ""


class OutboxTables(Connection):
    async def outbox_add(self, chunks: Sequence[OutboxChunk], now: float) -> None:
        async with self.transaction() as db:
            await db.executemany(
                "INSERT OR IGNORE INTO outbox(turn_id, chunk_index, chunk_count, kind, channel,"
                " chat_key, address, text, edit_of, payload, status, next_attempt_at,"
                " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        c.turn_id,
                        c.chunk_index,
                        c.chunk_count,
                        c.kind,
                        c.address.channel,
                        outbox_chat_key(c.address),
                        json.dumps(c.address.to_dict()),
                        c.text,
                        c.edit_of,
                        _payload(c),
                        OutboxStatus.PENDING,
                        now,
                        now,
                        now,
                    )
                    for c in chunks
                ],
            )

    async def outbox_preview(self, turn_id: str) -> str | None:
        row = await self._fetchone(
            "SELECT platform_id FROM outbox WHERE turn_id = ? AND chunk_index = ?",
            (turn_id, _PREVIEW_INDEX),
        )
        return str(row[0]) if row is not None and row[0] is not None else None

    async def outbox_put_preview(
        self, turn_id: str, address: Address, platform_id: str, now: float
    ) -> None:
        async with self.transaction() as db:
            await db.execute(
                "INSERT OR REPLACE INTO outbox(turn_id, chunk_index, chunk_count, kind, channel,"
                " chat_key, address, text, status, next_attempt_at, platform_id, created_at,"
                " updated_at) VALUES (?, ?, 0, ?, ?, ?, ?, '', ?, ?, ?, ?, ?)",
                (
                    turn_id,
                    _PREVIEW_INDEX,
                    OutboxKind.PREVIEW,
                    address.channel,
                    outbox_chat_key(address),
                    json.dumps(address.to_dict()),
                    OutboxStatus.SENT,
                    now,
                    platform_id,
                    now,
                    now,
                ),
            )

    async def outbox_heads(self, channels: Sequence[str]) -> list[OutboxRow]:
        if not channels:
            return []
        marks = ", ".join("?" for _ in channels)
        rows = await self._fetchall(
            f"SELECT {_ROW} FROM outbox WHERE id IN (SELECT MIN(id) FROM outbox"
            f" WHERE status IN (?, ?) AND channel IN ({marks}) GROUP BY chat_key) ORDER BY id",
            (*_UNFINISHED, *channels),
        )
        return [_row(r) for r in rows]

    async def outbox_mark_sending(self, row_id: int, now: float) -> None:
        await self._update(
            "status = ?, attempts = attempts + 1", (OutboxStatus.SENDING,), row_id, now
        )

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
        status = OutboxStatus.SENDING if unknown else OutboxStatus.PENDING
        await self._update(
            "status = ?, next_attempt_at = ?, dead_reason = ?",
            (status, at, reason),
            row_id,
            now,
        )

    async def outbox_mark_dead(self, row_id: int, reason: str, notice: str, now: float) -> None:
        async with self.transaction() as db:
            cursor = await db.execute(
                "SELECT turn_id, chunk_index, notice FROM outbox WHERE id = ?", (row_id,)
            )
            found = await cursor.fetchone()
            await db.execute(
                "UPDATE outbox SET status = ?, dead_reason = ?, updated_at = ? WHERE id = ?",
                (OutboxStatus.DEAD, reason, now, row_id),
            )
            if found is None:
                return
            turn_id, index, earlier = found
            # The next chunk of the same reply carries what this one (and any refused before
            # it) could not say, so the person learns that part of the reply is missing.
            await db.execute(
                "UPDATE outbox SET notice = ? || notice, updated_at = ? WHERE id = (SELECT MIN(id)"
                " FROM outbox WHERE turn_id = ? AND chunk_index > ? AND status IN (?, ?))",
                (earlier + notice, now, turn_id, index, *_UNFINISHED),
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
        counts = dict(
            (str(status), int(n))
            for status, n in await self._fetchall(
                "SELECT status, COUNT(*) FROM outbox WHERE status IN (?, ?, ?) GROUP BY status",
                (*_UNFINISHED, OutboxStatus.DEAD),
            )
        )
        dead = await self._fetchall(
            "SELECT id, turn_id, chunk_index, chunk_count, address, dead_reason, updated_at"
            " FROM outbox WHERE status = ? ORDER BY id DESC LIMIT ?",
            (OutboxStatus.DEAD, dead_limit),
        )
        chunks = []
        for row_id, turn_id, index, count, address, reason, at in dead:
            where = Address.from_dict(json.loads(address))
            chunks.append(
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
            pending=counts.get(OutboxStatus.PENDING, 0) + counts.get(OutboxStatus.SENDING, 0),
            dead=counts.get(OutboxStatus.DEAD, 0),
            dead_chunks=chunks,
        )

    async def _update(self, fields: str, params: tuple[Any, ...], row_id: int, now: float) -> None:
        async with self.transaction() as db:
            await db.execute(
                f"UPDATE outbox SET {fields}, updated_at = ? WHERE id = ?", (*params, now, row_id)
            )
