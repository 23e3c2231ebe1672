"""Transcript entries: append-only rows with their kind in a column (nothing decides what
an entry is by reading its JSON), each chained to the one before; the history a model
request starts from; and per-call usage over time for the console's charts. A session's
appends take turns (`Dialect.lock_key`), so its chain stays one line even when two
replicas write to one session.

A process keeps the history it last read per session (`HistoryCache`) and reads only the
rows appended since, so each row's JSON is decoded once, not once per turn. Rows are never
changed in place and are deleted only with their whole session, and a session's rows take
their `seq` under its append lock (in commit order), so "the rows after the last one read"
plus a count of the rows already held tells exactly whether anything changed, whichever
replica wrote.
"""

from __future__ import annotations

import json
from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Any, Protocol

from bot.store.db import TRANSCRIPT_LOCK, Db, Row
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

COLUMNS = "seq, id, session_id, parent_id, kind, turn_id, payload, usage, created_at"
_INSERT = (
    "INSERT INTO entries(id, session_id, parent_id, kind, turn_id, payload, usage, created_at)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq"
)
_KINDS = tuple(CONVERSATION_KINDS)
_IN_KINDS = f"kind IN ({', '.join('?' * len(_KINDS))})"
# Sessions whose history a process keeps decoded; the least recently read go first.
CACHED_SESSIONS = 256


@dataclass(frozen=True, slots=True)
class UsagePoint:
    """One model call's usage as the transcript recorded it, with where it happened."""

    session_id: str
    channel: str
    model: str
    created_at: float
    usage: Usage


class TranscriptStore(Protocol):
    """The append-only transcript and the history a model request starts from."""

    async def append_entries(self, entries: list[Entry]) -> None: ...
    async def load_history(self, session_id: str, *, max_user_turns: int = 0) -> list[Entry]: ...
    async def transcript(self, session_id: str) -> list[Entry]: ...


class UsageStore(Protocol):
    """Per-call usage over time, for the console's charts."""

    async def usage_since(self, since: float) -> list[UsagePoint]:
        """Every assistant reply with usage recorded at or after `since`, oldest first."""
        ...


def entry_from_row(row: Row) -> Entry:
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


def _values(entry: Entry) -> tuple[Any, ...]:
    return (
        entry.id,
        entry.session_id,
        entry.parent_id,
        entry.kind,
        entry.turn_id,
        json.dumps(to_payload(entry.payload), ensure_ascii=False),
        json.dumps(entry.usage.to_dict()) if entry.usage else None,
        entry.created_at,
    )


def _usage_point(row: Row) -> UsagePoint:
    """The reply's own model wins over the session's."""
    session_id, channel, session_model, payload, usage, created_at = row
    reply = payload_from(EntryKind.ASSISTANT_REPLY, json.loads(payload))
    model = reply.model if isinstance(reply, AssistantReply) else ""
    return UsagePoint(
        session_id, channel, model or session_model, created_at, Usage(**json.loads(usage))
    )


async def append_rows(tx: Db, entries: list[Entry]) -> None:
    """Append entries of one session inside transaction `tx`, linking each to the one
    before, the first to the session's latest stored entry (an entry that names its parent
    keeps it)."""
    if not entries:
        return
    session_id = entries[0].session_id
    await tx.dialect.lock_key(tx, TRANSCRIPT_LOCK, session_id)
    parent = await tx.fetchval(
        "SELECT id FROM entries WHERE session_id = ? ORDER BY seq DESC LIMIT 1", session_id
    )
    for entry in entries:
        if entry.session_id != session_id:
            raise ValueError("append_entries takes entries of one session")
        if entry.parent_id is None:
            entry.parent_id = parent
        parent = entry.id
        entry.seq = await tx.fetchval(_INSERT, *_values(entry))


@dataclass(slots=True)
class _Held:
    """A session's conversation entries from `start_seq` on, as last read."""

    start_seq: int
    entries: list[Entry] = field(default_factory=list)

    @property
    def last_seq(self) -> int:
        return self.entries[-1].seq if self.entries else self.start_seq - 1


class HistoryCache:
    """Decoded conversation entries per session, kept between turns (see the module's
    docstring for why the check is exact)."""

    def __init__(self, sessions: int = CACHED_SESSIONS) -> None:
        self.sessions = sessions
        self._held: dict[str, _Held] = {}
        self._compactions: dict[str, Entry] = {}  # by entry id: rows never change

    async def entries(self, db: Db, session_id: str, start_seq: int) -> list[Entry]:
        """The session's conversation entries with `seq >= start_seq`, in order."""
        held = self._held.pop(session_id, None)
        if held is None or held.start_seq > start_seq or not await _unchanged(db, session_id, held):
            held = _Held(start_seq)
        held.entries.extend(await _rows_after(db, session_id, held.last_seq))
        start = bisect_left(held.entries, start_seq, key=_seq)
        if start > len(held.entries) // 2:
            # A compaction moved the start on: what it replaced need not stay in memory.
            held.start_seq, held.entries = start_seq, held.entries[start:]
            start = 0
        self._held[session_id] = held  # most recently read last
        while len(self._held) > self.sessions:
            del self._held[next(iter(self._held))]
        return held.entries[start:]

    def compaction(self, row: Row) -> Entry:
        """The compaction entry stored in `row`, decoded once (the same object every turn,
        so the messages built after it can be kept too)."""
        entry = self._compactions.pop(row[1], None) or entry_from_row(row)
        self._compactions[entry.id] = entry
        while len(self._compactions) > self.sessions:
            del self._compactions[next(iter(self._compactions))]
        return entry


def _seq(entry: Entry) -> int:
    return entry.seq


async def _unchanged(db: Db, session_id: str, held: _Held) -> bool:
    """Whether the rows `held` covers are all still there (rows go only with their session)."""
    count = await db.fetchval(
        f"SELECT count(*) FROM entries WHERE session_id = ? AND seq >= ? AND seq <= ?"
        f" AND {_IN_KINDS}",
        session_id,
        held.start_seq,
        held.last_seq,
        *(str(kind) for kind in _KINDS),
    )
    return bool(count == len(held.entries))


async def _rows_after(db: Db, session_id: str, seq: int) -> list[Entry]:
    # A fixed list of kinds: one statement text whatever the session.
    rows = await db.fetch(
        f"SELECT {COLUMNS} FROM entries WHERE session_id = ? AND seq > ? AND {_IN_KINDS}"
        " ORDER BY seq",
        session_id,
        seq,
        *(str(kind) for kind in _KINDS),
    )
    return [entry_from_row(r) for r in rows]


async def read_history(
    db: Db, session_id: str, max_user_turns: int, cache: HistoryCache | None = None
) -> list[Entry]:
    """The entries the model should see: the latest compaction entry (if any) followed by
    the conversation from its first kept entry on, cut to the last `max_user_turns` person
    turns (Krill's own prompts, such as the heartbeat, do not use up the limit).

    Uses the (session_id, kind, seq) index, so cost grows with what is returned, not with
    the length of the whole transcript; with a `cache`, only rows new since the last read
    are decoded.
    """
    start_seq = 0
    compaction: Entry | None = None
    row = await db.fetchrow(
        f"SELECT {COLUMNS} FROM entries WHERE session_id = ? AND kind = ?"
        " ORDER BY seq DESC LIMIT 1",
        session_id,
        str(EntryKind.COMPACTION),
    )
    if row:
        compaction = entry_from_row(row) if cache is None else cache.compaction(row)
        assert isinstance(compaction.payload, Compaction)
        kept = await db.fetchval(
            "SELECT seq FROM entries WHERE id = ?", compaction.payload.first_kept_entry_id
        )
        start_seq = compaction.seq if kept is None else kept
    if max_user_turns > 0:
        seq = await db.fetchval(
            "SELECT seq FROM entries WHERE session_id = ? AND kind = ?"
            " ORDER BY seq DESC LIMIT 1 OFFSET ?",
            session_id,
            str(EntryKind.PERSON_TURN),
            max_user_turns - 1,
        )
        if seq is not None:
            start_seq = max(start_seq, seq)
    if cache is not None:
        history = await cache.entries(db, session_id, start_seq)
    else:
        history = await _rows_after(db, session_id, start_seq - 1)
    return [compaction, *history] if compaction else history


class TranscriptTables:
    db: Db
    histories: HistoryCache

    async def append_entries(self, entries: list[Entry]) -> None:
        async with self.db.transaction() as tx:
            await append_rows(tx, entries)

    async def load_history(self, session_id: str, *, max_user_turns: int = 0) -> list[Entry]:
        return await read_history(self.db, session_id, max_user_turns, self.histories)

    async def transcript(self, session_id: str) -> list[Entry]:
        rows = await self.db.fetch(
            f"SELECT {COLUMNS} FROM entries WHERE session_id = ? ORDER BY seq", session_id
        )
        return [entry_from_row(r) for r in rows]

    async def usage_since(self, since: float) -> list[UsagePoint]:
        rows = await self.db.fetch(
            "SELECT e.session_id, s.channel, s.model, e.payload, e.usage, e.created_at"
            " FROM entries e JOIN sessions s ON s.session_id = e.session_id"
            f" WHERE e.kind = '{EntryKind.ASSISTANT_REPLY}' AND e.created_at >= ?"
            " AND e.usage IS NOT NULL ORDER BY e.created_at",
            since,
        )
        return [_usage_point(r) for r in rows]
