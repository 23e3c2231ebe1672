"""The history a model request starts from, read the same way from either store: the SQL
is written with `?` placeholders and run through the store's own fetch functions."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from bot.store.mapping import ENTRY_COLUMNS, entry_from_row
from bot.store.stored_row import StoredRow
from bot.transcript import CONVERSATION_KINDS, Compaction, Entry, EntryKind

FetchOne = Callable[..., Awaitable[StoredRow | None]]
FetchAll = Callable[..., Awaitable[Sequence[StoredRow]]]

_KINDS = tuple(CONVERSATION_KINDS)
_KIND_MARKS = ", ".join("?" * len(_KINDS))


async def read_history(
    fetch_one: FetchOne, fetch_all: FetchAll, session_id: str, max_user_turns: int
) -> list[Entry]:
    """The entries the model should see: the latest compaction entry (if any) followed by
    the conversation from its first kept entry on, cut to the last `max_user_turns` person
    turns (Krill's own prompts, such as the heartbeat, do not use up the limit).

    Uses the (session_id, kind, seq) index, so cost grows with what is returned, not with
    the length of the whole transcript. `fetch_one(sql, *args)` and `fetch_all` run one
    query with `?` placeholders.
    """
    start_seq = 0
    compaction: Entry | None = None
    row = await fetch_one(
        f"SELECT {ENTRY_COLUMNS} FROM entries WHERE session_id = ? AND kind = ? "
        "ORDER BY seq DESC LIMIT 1",
        session_id,
        str(EntryKind.COMPACTION),
    )
    if row:
        compaction = entry_from_row(row)
        assert isinstance(compaction.payload, Compaction)
        kept = await fetch_one(
            "SELECT seq FROM entries WHERE id = ?", compaction.payload.first_kept_entry_id
        )
        start_seq = kept[0] if kept else compaction.seq
    if max_user_turns > 0:
        row = await fetch_one(
            "SELECT seq FROM entries WHERE session_id = ? AND kind = ? "
            "ORDER BY seq DESC LIMIT 1 OFFSET ?",
            session_id,
            str(EntryKind.PERSON_TURN),
            max_user_turns - 1,
        )
        if row:
            start_seq = max(start_seq, row[0])
    rows = await fetch_all(
        f"SELECT {ENTRY_COLUMNS} FROM entries WHERE session_id = ? AND seq >= ? "
        f"AND kind IN ({_KIND_MARKS}) ORDER BY seq",
        session_id,
        start_seq,
        *(str(kind) for kind in _KINDS),
    )
    history = [entry_from_row(r) for r in rows]
    return [compaction, *history] if compaction else history
