"""The outbox in PostgreSQL: the same rows as in SQLite (bot/store/outbox_rows.py maps
them). Replicas claim heads with `FOR UPDATE SKIP LOCKED`: a head another replica is
claiming right now is skipped rather than waited for, and one it has claimed (a live
`claimed_until`) is not claimable, nor is any row of its chat."""

from __future__ import annotations

from collections.abc import Sequence

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
from bot.store.postgres.connection import Connection
from bot.types import Address

_UNFINISHED = [str(s) for s in UNFINISHED_OUTBOX]
_SET_ASIDE = [str(s) for s in SET_ASIDE_OUTBOX]
# The heads of the chats on channels $1 with no row under a live claim at $2.
_FREE_HEADS = (
    "SELECT MIN(id) FROM outbox WHERE status = ANY($3::text[]) AND channel = ANY($1::text[])"
    " GROUP BY chat_key HAVING COALESCE(MAX(claimed_until), 0) <= $2"
)
# The row conditions are repeated on the locked row: a row another replica claimed (or
# sent) since this statement's snapshot is re-checked in its latest version and left out.
_CLAIM = (
    f"WITH free AS (SELECT id AS free_id FROM outbox WHERE id IN ({_FREE_HEADS})"
    " AND next_attempt_at <= $2 AND status = ANY($3::text[])"
    " AND COALESCE(claimed_until, 0) <= $2 ORDER BY id LIMIT $6 FOR UPDATE SKIP LOCKED)"
    " UPDATE outbox SET claimed_by = $4, claimed_until = $5 FROM free WHERE id = free_id"
    f" RETURNING {OUTBOX_COLUMNS}"
)
_NEXT_DUE = (
    "SELECT MIN(next_attempt_at) FROM outbox WHERE id IN (SELECT MIN(id) FROM outbox"
    " WHERE status = ANY($3::text[]) AND channel = ANY($1::text[]) GROUP BY chat_key)"
    " AND next_attempt_at > $2"
)
# An outcome ends the claim: the chat's next row (or this one again) may be claimed.
_UNCLAIM = "claimed_by = NULL, claimed_until = NULL"
_CHUNK_MARKS = ", ".join(f"${i}" for i in range(1, 15))
_PREVIEW_MARKS = ", ".join(f"${i}" for i in range(1, 14))
# Marking a row dead (or maybe sent), and prefixing its notice (what this and earlier
# refused chunks could not say) to the next unfinished chunk of the same reply, in one
# statement.
_DEAD = (
    f"WITH dead AS (UPDATE outbox SET status = $2, dead_reason = $3, updated_at = $5, {_UNCLAIM}"
    " WHERE id = $1 RETURNING turn_id, chunk_index, notice)"
    " UPDATE outbox SET notice = dead.notice || $4 || outbox.notice, updated_at = $5 FROM dead"
    " WHERE outbox.id = (SELECT MIN(o.id) FROM outbox o WHERE o.turn_id = dead.turn_id"
    " AND o.chunk_index > dead.chunk_index AND o.status = ANY($6::text[]))"
)


class OutboxTables(Connection):
    async def outbox_add(self, chunks: Sequence[OutboxChunk], now: float) -> None:
        async with self.transaction() as db:
            await db.executemany(
                f"INSERT INTO outbox({CHUNK_COLUMNS}) VALUES ({_CHUNK_MARKS})"
                " ON CONFLICT (turn_id, chunk_index) DO NOTHING",
                [chunk_values(c, now) for c in chunks],
            )

    async def outbox_preview(self, turn_id: str) -> str | None:
        found = await self._fetchval(
            "SELECT platform_id FROM outbox WHERE turn_id = $1 AND chunk_index = $2",
            turn_id,
            PREVIEW_INDEX,
        )
        return str(found) if found is not None else None

    async def outbox_put_preview(
        self, turn_id: str, address: Address, platform_id: str, now: float
    ) -> None:
        await self._execute(
            f"INSERT INTO outbox({PREVIEW_COLUMNS}) VALUES ({_PREVIEW_MARKS})"
            " ON CONFLICT (turn_id, chunk_index) DO UPDATE SET address = EXCLUDED.address,"
            " platform_id = EXCLUDED.platform_id, updated_at = EXCLUDED.updated_at",
            *preview_values(turn_id, address, platform_id, now),
        )

    async def outbox_heads(self, channels: Sequence[str]) -> list[OutboxRow]:
        rows = await self._fetchall(
            f"SELECT {OUTBOX_COLUMNS} FROM outbox WHERE id IN (SELECT MIN(id) FROM outbox"
            " WHERE status = ANY($2::text[]) AND channel = ANY($1::text[]) GROUP BY chat_key)"
            " ORDER BY id",
            list(channels),
            _UNFINISHED,
        )
        return [outbox_row(r) for r in rows]

    async def outbox_claim(
        self, channels: Sequence[str], holder: str, now: float, until: float, limit: int
    ) -> list[OutboxRow]:
        if not channels or limit <= 0:
            return []
        args = (list(channels), now, _UNFINISHED, holder, until, limit)
        rows = await self._fetchall(_CLAIM, *args)
        return sorted((outbox_row(r) for r in rows), key=lambda row: row.id)

    async def outbox_next_due(self, channels: Sequence[str], now: float) -> float | None:
        due = await self._fetchval(_NEXT_DUE, list(channels), now, _UNFINISHED)
        return float(due) if due is not None else None

    async def outbox_extend_claims(self, holder: str, row_ids: Sequence[int], until: float) -> None:
        await self._execute(
            "UPDATE outbox SET claimed_until = $1 WHERE claimed_by = $2 AND id = ANY($3::bigint[])",
            until,
            holder,
            list(row_ids),
        )

    async def outbox_claimants(self) -> list[str]:
        rows = await self._fetchall(
            "SELECT DISTINCT claimed_by FROM outbox WHERE claimed_by IS NOT NULL"
        )
        return [str(r[0]) for r in rows]

    async def outbox_release_claims(self, holder: str) -> None:
        await self._execute(f"UPDATE outbox SET {_UNCLAIM} WHERE claimed_by = $1", holder)

    async def outbox_mark_sending(self, row_id: int, holder: str, now: float) -> bool:
        marked = await self._fetchval(
            "UPDATE outbox SET status = $1, attempts = attempts + 1, updated_at = $2"
            " WHERE id = $3 AND claimed_by = $4 RETURNING id",
            str(OutboxStatus.SENDING),
            now,
            row_id,
            holder,
        )
        return marked is not None

    async def outbox_mark_sent(self, row_id: int, platform_id: str, now: float) -> None:
        # A re-split row stays first in its chat until its overflow went out too; the rest
        # is a message of its own, so it no longer edits a preview, nor repeats the notice.
        await self._execute(
            "UPDATE outbox SET status = CASE WHEN overflow = '' THEN $1 ELSE $2 END,"
            " text = CASE WHEN overflow = '' THEN text ELSE overflow END, overflow = '',"
            " edit_of = NULL, notice = '', next_attempt_at = $3, platform_id = $4,"
            f" dead_reason = NULL, {_UNCLAIM}, updated_at = $3 WHERE id = $5",
            str(OutboxStatus.SENT),
            str(OutboxStatus.PENDING),
            now,
            platform_id,
            row_id,
        )

    async def outbox_split(self, row_id: int, text: str, overflow: str, now: float) -> None:
        await self._execute(
            "UPDATE outbox SET status = $1, text = $2, notice = '', next_attempt_at = $3,"
            " overflow = $4 || CASE WHEN overflow = '' THEN '' ELSE chr(10) || overflow END,"
            f" {_UNCLAIM}, updated_at = $3 WHERE id = $5",
            str(OutboxStatus.PENDING),
            text,
            now,
            overflow,
            row_id,
        )

    async def outbox_retry_at(
        self, row_id: int, at: float, reason: str, now: float, *, unknown: bool = False
    ) -> None:
        status = OutboxStatus.UNCONFIRMED if unknown else OutboxStatus.PENDING
        await self._execute(
            "UPDATE outbox SET status = $1, next_attempt_at = $2, dead_reason = $3,"
            f" {_UNCLAIM}, updated_at = $4 WHERE id = $5",
            str(status),
            at,
            reason,
            now,
            row_id,
        )

    async def outbox_mark_dead(
        self, row_id: int, reason: str, notice: str, now: float, *, maybe_sent: bool = False
    ) -> None:
        status = str(OutboxStatus.MAYBE_SENT if maybe_sent else OutboxStatus.DEAD)
        await self._execute(_DEAD, row_id, status, reason, notice, now, _UNFINISHED)

    async def outbox_retry_dead(self, row_id: int, now: float) -> bool:
        retried = await self._fetchval(
            "UPDATE outbox SET status = $1, attempts = 0, next_attempt_at = $2,"
            " dead_reason = NULL, notice = '', updated_at = $2 WHERE id = $3 AND status = $4"
            " RETURNING id",
            str(OutboxStatus.PENDING),
            now,
            row_id,
            str(OutboxStatus.DEAD),
        )
        return retried is not None

    async def outbox_summary(self, dead_limit: int = 20) -> OutboxSummary:
        rows = await self._fetchall(
            "SELECT status, COUNT(*) FROM outbox WHERE status = ANY($1::text[]) GROUP BY status",
            [*_UNFINISHED, *_SET_ASIDE],
        )
        dead = await self._fetchall(
            f"SELECT {DEAD_COLUMNS} FROM outbox WHERE status = ANY($1::text[])"
            " ORDER BY id DESC LIMIT $2",
            _SET_ASIDE,
            dead_limit,
        )
        return outbox_summary_of({str(s): int(n) for s, n in rows}, dead)
