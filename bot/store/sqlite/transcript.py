"""Transcript entries in SQLite: append-only rows with their kind in a column, and the
history a model request starts from."""

from __future__ import annotations

import json

import aiosqlite

from bot.store.base import UsagePoint
from bot.store.sqlite.connection import Connection, fetchone
from bot.transcript import (
    CONVERSATION_KINDS,
    AssistantReply,
    Compaction,
    Entry,
    EntryKind,
    payload_from,
    to_payload,
)
from bot.types import Usage

_COLUMNS = "seq, id, session_id, parent_id, kind, turn_id, payload, usage, created_at"
_CONVERSATION_MARKS = ", ".join("?" * len(CONVERSATION_KINDS))


def _entry_from_row(row: aiosqlite.Row) -> Entry:
    seq, id_, session_id, parent_id, kind, turn_id, payload, usage, created_at = row
    return Entry(
        session_id=session_id,
        payload=payload_from(kind, json.loads(payload)),
        turn_id=turn_id,
        usage=Usage(**json.loads(usage)) if usage else None,
        id=id_,
        parent_id=parent_id,
        created_at=created_at,
        seq=seq,
    )


async def append_rows(db: aiosqlite.Connection, entries: list[Entry]) -> None:
    """Append entries of one session, chaining each to the one before (inside a transaction)."""
    if not entries:
        return
    session_id = entries[0].session_id
    row = await fetchone(
        db, "SELECT id FROM entries WHERE session_id = ? ORDER BY seq DESC LIMIT 1", (session_id,)
    )
    parent = row[0] if row else None
    for entry in entries:
        if entry.session_id != session_id:
            raise ValueError("append_entries takes entries of one session")
        if entry.parent_id is None:
            entry.parent_id = parent
        cur = await db.execute(
            "INSERT INTO entries(id, session_id, parent_id, kind, turn_id, payload, usage,"
            " created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                entry.id,
                entry.session_id,
                entry.parent_id,
                entry.kind,
                entry.turn_id,
                json.dumps(to_payload(entry.payload), ensure_ascii=False),
                json.dumps(entry.usage.to_dict()) if entry.usage else None,
                entry.created_at,
            ),
        )
        entry.seq = cur.lastrowid or 0
        parent = entry.id


class TranscriptTables(Connection):
    async def append_entries(self, entries: list[Entry]) -> None:
        async with self.transaction() as db:
            await append_rows(db, entries)

    async def load_history(self, session_id: str, *, max_user_turns: int = 0) -> list[Entry]:
        """The entries the model should see: the latest compaction entry (if any) followed by
        the conversation from its first kept entry on, cut to the last `max_user_turns`
        person turns (Krill's own prompts, such as the heartbeat, do not use up the limit).

        Uses the (session_id, kind, seq) index, so cost grows with what is returned, not
        with the length of the whole transcript.
        """
        start_seq = 0
        compaction: Entry | None = None
        row = await self._fetchone(
            f"SELECT {_COLUMNS} FROM entries WHERE session_id = ? AND kind = ? "
            "ORDER BY seq DESC LIMIT 1",
            (session_id, EntryKind.COMPACTION),
        )
        if row:
            compaction = _entry_from_row(row)
            assert isinstance(compaction.payload, Compaction)
            kept = await self._fetchone(
                "SELECT seq FROM entries WHERE id = ?", (compaction.payload.first_kept_entry_id,)
            )
            start_seq = kept[0] if kept else compaction.seq
        if max_user_turns > 0:
            row = await self._fetchone(
                "SELECT seq FROM entries WHERE session_id = ? AND kind = ? "
                "ORDER BY seq DESC LIMIT 1 OFFSET ?",
                (session_id, EntryKind.PERSON_TURN, max_user_turns - 1),
            )
            if row:
                start_seq = max(start_seq, row[0])
        rows = await self._fetchall(
            f"SELECT {_COLUMNS} FROM entries WHERE session_id = ? AND seq >= ? "
            f"AND kind IN ({_CONVERSATION_MARKS}) ORDER BY seq",
            (session_id, start_seq, *CONVERSATION_KINDS),
        )
        history = [_entry_from_row(r) for r in rows]
        return [compaction, *history] if compaction else history

    async def transcript(self, session_id: str) -> list[Entry]:
        rows = await self._fetchall(
            f"SELECT {_COLUMNS} FROM entries WHERE session_id = ? ORDER BY seq", (session_id,)
        )
        return [_entry_from_row(r) for r in rows]

    async def usage_since(self, since: float) -> list[UsagePoint]:
        rows = await self._fetchall(
            "SELECT e.session_id, s.channel, s.model, e.payload, e.usage, e.created_at "
            "FROM entries e JOIN sessions s ON s.session_id = e.session_id "
            "WHERE e.kind = ? AND e.created_at >= ? AND e.usage IS NOT NULL "
            "ORDER BY e.created_at",
            (EntryKind.ASSISTANT_REPLY, since),
        )
        points = []
        for session_id, channel, session_model, payload, usage, created_at in rows:
            reply = payload_from(EntryKind.ASSISTANT_REPLY, json.loads(payload))
            model = reply.model if isinstance(reply, AssistantReply) else ""
            points.append(
                UsagePoint(
                    session_id,
                    channel,
                    model or session_model,
                    created_at,
                    Usage(**json.loads(usage)),
                )
            )
        return points
