"""The outbox: every reply chunk as a row before it is sent, its status (pending, sending,
unconfirmed, sent, dead, maybe sent), its attempts and when the next one is due
(bot/store/outbox_rows.py maps the rows). Rows of one chat go out in `id` order; a chat's
first unfinished row is its head. A sender claims a head (one conditional UPDATE …
RETURNING) before it sends it: a head another process is claiming right now is passed over
rather than waited for, and one it has claimed (a live `claimed_until`) is not claimable,
nor is any row of its chat, so senders of several processes sharing the store never send
one row twice."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from bot.store.db import Db
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
from bot.types import Address


class OutboxStore(Protocol):
    """Reply chunks written before they are sent, and what became of each."""

    async def outbox_add(self, chunks: Sequence[OutboxChunk], now: float) -> None:
        """Write `chunks`; a chunk of a turn already in the outbox is left as it is."""

    async def outbox_preview(self, turn_id: str) -> str | None:
        """The platform id of the streaming preview of `turn_id`, if one was shown."""
        ...

    async def outbox_sent_id(self, turn_id: str) -> str | None:
        """The platform id of the last message of reply `turn_id` that went out (where a
        reply's buttons are), if any did."""
        ...

    async def outbox_put_preview(
        self, turn_id: str, address: Address, platform_id: str, now: float
    ) -> None: ...
    async def outbox_heads(self, channels: Sequence[str]) -> list[OutboxRow]:
        """The first unfinished row of each chat on `channels`: what may be sent next."""
        ...

    async def outbox_claim(
        self, channels: Sequence[str], holder: str, now: float, until: float, limit: int
    ) -> list[OutboxRow]:
        """Claim for `holder` until `until` (at most `limit`) the heads due at `now` of chats
        on `channels` with no row under a live claim; atomic across processes. Any outcome
        recorded for a row ends its claim."""
        ...

    async def outbox_next_due(self, channels: Sequence[str], now: float) -> float | None:
        """When the earliest head on `channels` not due at `now` will be."""
        ...

    async def outbox_extend_claims(
        self, holder: str, row_ids: Sequence[int], until: float
    ) -> None: ...
    async def outbox_claimants(self) -> list[str]: ...
    async def outbox_release_claims(self, holder: str) -> None: ...
    async def outbox_mark_sending(self, row_id: int, holder: str, now: float) -> bool:
        """Count an attempt and mark it in flight, if `holder` still holds the claim."""
        ...

    async def outbox_mark_sent(self, row_id: int, platform_id: str, now: float) -> None:
        """Record the send; a row re-split because it was too long goes on with the rest."""

    async def outbox_split(self, row_id: int, text: str, overflow: str, now: float) -> None:
        """Send `text` now and `overflow` (as a new message) once that went out."""

    async def outbox_retry_at(
        self, row_id: int, at: float, reason: str, now: float, *, unknown: bool = False
    ) -> None:
        """Try the row again at `at`; `unknown`: its last send may have gone out, so it is
        left `unconfirmed` (looked up or waited out before anything else is sent)."""

    async def outbox_mark_dead(
        self, row_id: int, reason: str, notice: str, now: float, *, maybe_sent: bool = False
    ) -> None:
        """Mark the row dead (`maybe_sent`: maybe sent, not to be sent again); `notice` is
        said before the next chunk of its reply."""

    async def outbox_retry_dead(self, row_id: int, now: float) -> bool:
        """Put dead row `row_id` back in line, due now (False: no such dead row)."""
        ...

    async def outbox_summary(self, dead_limit: int = 20) -> OutboxSummary: ...


# An outcome ends the claim: the chat's next row (or this one again) may be claimed.
_UNCLAIM = "claimed_by = NULL, claimed_until = NULL"


def _status_in(statuses: Sequence[OutboxStatus]) -> str:
    """`status` is one of `statuses`, the values written out: only then do SQLite and
    PostgreSQL use the partial indexes over unfinished and set-aside rows (a bound parameter
    hides the values from the planner, which then reads every row the outbox keeps)."""
    return "status IN (" + ", ".join(f"'{s}'" for s in statuses) + ")"


UNFINISHED = _status_in(UNFINISHED_OUTBOX)
SET_ASIDE = _status_in(SET_ASIDE_OUTBOX)


def _heads(db: Db, channels: Sequence[str]) -> tuple[str, tuple[Any, ...]]:
    """The heads of the chats on `channels` (GROUP BY chat_key, to add a HAVING to)."""
    channel, names = db.dialect.one_of("channel", channels)
    return f"SELECT MIN(id) FROM outbox WHERE {UNFINISHED} AND {channel} GROUP BY chat_key", names


class OutboxTables:
    db: Db

    async def outbox_add(self, chunks: Sequence[OutboxChunk], now: float) -> None:
        await self.db.executemany(
            f"INSERT INTO outbox({CHUNK_COLUMNS}) VALUES ({', '.join('?' * 14)})"
            " ON CONFLICT (turn_id, chunk_index) DO NOTHING",
            [chunk_values(c, now) for c in chunks],
        )

    async def outbox_preview(self, turn_id: str) -> str | None:
        found = await self.db.fetchval(
            "SELECT platform_id FROM outbox WHERE turn_id = ? AND chunk_index = ?",
            turn_id,
            PREVIEW_INDEX,
        )
        return str(found) if found is not None else None

    async def outbox_sent_id(self, turn_id: str) -> str | None:
        found = await self.db.fetchval(
            "SELECT platform_id FROM outbox WHERE turn_id = ? AND chunk_index >= 0"
            " AND status = ? AND platform_id IS NOT NULL ORDER BY chunk_index DESC LIMIT 1",
            turn_id,
            str(OutboxStatus.SENT),
        )
        return str(found) if found is not None else None

    async def outbox_put_preview(
        self, turn_id: str, address: Address, platform_id: str, now: float
    ) -> None:
        await self.db.execute(
            f"INSERT INTO outbox({PREVIEW_COLUMNS}) VALUES ({', '.join('?' * 13)})"
            " ON CONFLICT (turn_id, chunk_index) DO UPDATE SET address = excluded.address,"
            " platform_id = excluded.platform_id, updated_at = excluded.updated_at",
            *preview_values(turn_id, address, platform_id, now),
        )

    async def outbox_heads(self, channels: Sequence[str]) -> list[OutboxRow]:
        if not channels:
            return []
        heads, args = _heads(self.db, channels)
        rows = await self.db.fetch(
            f"SELECT {OUTBOX_COLUMNS} FROM outbox WHERE id IN ({heads}) ORDER BY id", *args
        )
        return [outbox_row(r) for r in rows]

    async def outbox_claim(
        self, channels: Sequence[str], holder: str, now: float, until: float, limit: int
    ) -> list[OutboxRow]:
        if not channels or limit <= 0:
            return []
        heads, args = _heads(self.db, channels)
        # The row conditions are checked again on the row itself: a row another process
        # claimed (or sent) since this statement's snapshot is left out.
        free = (
            f"SELECT id FROM outbox WHERE id IN ({heads}"
            " HAVING COALESCE(MAX(claimed_until), 0) <= ?) AND next_attempt_at <= ?"
            f" AND {UNFINISHED} AND COALESCE(claimed_until, 0) <= ? ORDER BY id LIMIT ?"
        )
        free_args = (*args, now, now, now, limit)
        # A read first, so an idle poll writes nothing.
        if not await self.db.fetchrow(free, *free_args):
            return []
        # Choosing and claiming are one statement, so no other process can claim a head
        # between the two.
        rows = await self.db.fetch(
            f"WITH free AS ({free} {self.db.dialect.skip_locked}) UPDATE outbox SET"
            " claimed_by = ?, claimed_until = ? WHERE id IN (SELECT id FROM free)"
            f" RETURNING {OUTBOX_COLUMNS}",
            *free_args,
            holder,
            until,
        )
        return sorted((outbox_row(r) for r in rows), key=lambda row: row.id)

    async def outbox_next_due(self, channels: Sequence[str], now: float) -> float | None:
        if not channels:
            return None
        heads, args = _heads(self.db, channels)
        due = await self.db.fetchval(
            f"SELECT MIN(next_attempt_at) FROM outbox WHERE id IN ({heads})"
            " AND next_attempt_at > ?",
            *args,
            now,
        )
        return float(due) if due is not None else None

    async def outbox_extend_claims(self, holder: str, row_ids: Sequence[int], until: float) -> None:
        if row_ids:
            among, ids = self.db.dialect.one_of("id", row_ids)
            await self.db.execute(
                f"UPDATE outbox SET claimed_until = ? WHERE claimed_by = ? AND {among}",
                until,
                holder,
                *ids,
            )

    async def outbox_claimants(self) -> list[str]:
        rows = await self.db.fetch(
            "SELECT DISTINCT claimed_by FROM outbox WHERE claimed_by IS NOT NULL"
        )
        return [str(r[0]) for r in rows]

    async def outbox_release_claims(self, holder: str) -> None:
        await self.db.execute(f"UPDATE outbox SET {_UNCLAIM} WHERE claimed_by = ?", holder)

    async def outbox_mark_sending(self, row_id: int, holder: str, now: float) -> bool:
        marked = await self.db.execute(
            "UPDATE outbox SET status = ?, attempts = attempts + 1, updated_at = ?"
            " WHERE id = ? AND claimed_by = ?",
            str(OutboxStatus.SENDING),
            now,
            row_id,
            holder,
        )
        return marked == 1

    async def outbox_mark_sent(self, row_id: int, platform_id: str, now: float) -> None:
        # A re-split row stays first in its chat until its overflow went out too; the rest
        # is a message of its own, so it no longer edits a preview, nor repeats the notice.
        await self._update(
            "status = CASE WHEN overflow = '' THEN ? ELSE ? END,"
            " text = CASE WHEN overflow = '' THEN text ELSE overflow END, overflow = '',"
            " edit_of = NULL, notice = '', next_attempt_at = ?, platform_id = ?,"
            " dead_reason = NULL",
            (str(OutboxStatus.SENT), str(OutboxStatus.PENDING), now, platform_id),
            row_id,
            now,
        )

    async def outbox_split(self, row_id: int, text: str, overflow: str, now: float) -> None:
        await self._update(
            "status = ?, text = ?, notice = '', next_attempt_at = ?, overflow = ?"
            " || CASE WHEN overflow = '' THEN '' ELSE ? || overflow END",
            (str(OutboxStatus.PENDING), text, now, overflow, "\n"),
            row_id,
            now,
        )

    async def outbox_retry_at(
        self, row_id: int, at: float, reason: str, now: float, *, unknown: bool = False
    ) -> None:
        status = OutboxStatus.UNCONFIRMED if unknown else OutboxStatus.PENDING
        await self._update(
            "status = ?, next_attempt_at = ?, dead_reason = ?",
            (str(status), at, reason),
            row_id,
            now,
        )

    async def outbox_mark_dead(
        self, row_id: int, reason: str, notice: str, now: float, *, maybe_sent: bool = False
    ) -> None:
        set_aside = OutboxStatus.MAYBE_SENT if maybe_sent else OutboxStatus.DEAD
        async with self.db.transaction() as tx:
            found = await tx.fetchrow(
                "SELECT turn_id, chunk_index, notice FROM outbox WHERE id = ?", row_id
            )
            await tx.execute(
                f"UPDATE outbox SET status = ?, dead_reason = ?, updated_at = ?, {_UNCLAIM}"
                " WHERE id = ?",
                str(set_aside),
                reason,
                now,
                row_id,
            )
            if found is None:
                return
            turn_id, index, earlier = found
            # The next chunk of the same reply carries what this one (and any refused before
            # it) could not say, so the person learns that part of the reply is missing.
            await tx.execute(
                "UPDATE outbox SET notice = ? || notice, updated_at = ? WHERE id = (SELECT MIN(id)"
                f" FROM outbox WHERE turn_id = ? AND chunk_index > ? AND {UNFINISHED})",
                earlier + notice,
                now,
                turn_id,
                index,
            )

    async def outbox_retry_dead(self, row_id: int, now: float) -> bool:
        retried = await self.db.execute(
            "UPDATE outbox SET status = ?, attempts = 0, next_attempt_at = ?,"
            " dead_reason = NULL, notice = '', updated_at = ? WHERE id = ? AND status = ?",
            str(OutboxStatus.PENDING),
            now,
            now,
            row_id,
            str(OutboxStatus.DEAD),
        )
        return retried == 1

    async def outbox_summary(self, dead_limit: int = 20) -> OutboxSummary:
        # Two counts, each over its own index: sent rows (most of the outbox) are never read.
        counts = [
            *await self.db.fetch(
                f"SELECT status, COUNT(*) FROM outbox WHERE {UNFINISHED} GROUP BY status"
            ),
            *await self.db.fetch(
                f"SELECT status, COUNT(*) FROM outbox WHERE {SET_ASIDE} GROUP BY status"
            ),
        ]
        dead = await self.db.fetch(
            f"SELECT {DEAD_COLUMNS} FROM outbox WHERE {SET_ASIDE} ORDER BY id DESC LIMIT ?",
            dead_limit,
        )
        return outbox_summary_of({str(s): int(n) for s, n in counts}, dead)

    async def _update(self, fields: str, args: tuple[Any, ...], row_id: int, now: float) -> None:
        await self.db.execute(
            f"UPDATE outbox SET {fields}, {_UNCLAIM}, updated_at = ? WHERE id = ?",
            *args,
            now,
            row_id,
        )
