"""Retention: pruning finished inbound rows, delivered outbox rows, stale group buffers and
old sessions' transcripts once they are older than `storage.retention_days`, and naming the
media files the rows that are left still refer to."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

from bot.store.db import Db
from bot.store.inbound import InboundStatus


@dataclass(frozen=True, slots=True)
class Pruned:
    """What one retention pass removed."""

    inbound: int = 0  # finished inbound rows and dedupe-only rows
    outbox: int = 0  # delivered reply chunks
    buffered: int = 0  # unaddressed group lines never picked up
    sessions: int = 0  # old (non-current) sessions...
    entries: int = 0  # ...and their transcript entries
    choices: int = 0  # answered or expired button choices (a late press: "expired")
    names: int = 0  # display names no stored session refers to any more

    @property
    def total(self) -> int:
        return (
            self.inbound
            + self.outbox
            + self.buffered
            + self.sessions
            + self.entries
            + self.choices
            + self.names
        )


class RetentionStore(Protocol):
    async def prune_before(self, cutoff: float) -> Pruned:
        """Remove what `storage.retention_days` lets go that was last touched before
        `cutoff` (unix seconds); unfinished work and current sessions always stay."""
        ...

    async def media_in_use(self) -> set[str]:
        """The hashes of every stored media file a row still refers to."""
        ...


# A media file is named by its SHA-256 wherever a row refers to it (attachments in inbound
# and group lines, image and document blocks in transcripts, files in the outbox). Any such
# string counts: a hash that only looks like a reference keeps a file, never loses one.
MEDIA_HASH = re.compile(r"[0-9a-f]{64}")
_REFERRING = (
    "SELECT payload FROM inbound",
    "SELECT payload FROM entries",
    "SELECT attachments FROM group_buffer",
    "SELECT payload FROM outbox",
)


# Each step with the cutoff as its one argument and named for the Pruned field it counts;
# entries go before the sessions they belong to. Inbound rows still needed to answer
# someone stay: recovery after a restart reads them.
_OLD_SESSIONS = "FROM sessions WHERE NOT is_current AND updated_at < ?"
_STEPS = (
    (
        "inbound",
        "DELETE FROM inbound WHERE updated_at < ?"
        f" AND status NOT IN ('{InboundStatus.PENDING}', '{InboundStatus.PROCESSING}')",
    ),
    ("outbox", "DELETE FROM outbox WHERE status = 'sent' AND updated_at < ?"),
    ("buffered", "DELETE FROM group_buffer WHERE created_at < ?"),
    ("entries", f"DELETE FROM entries WHERE session_id IN (SELECT session_id {_OLD_SESSIONS})"),
    ("sessions", f"DELETE {_OLD_SESSIONS}"),
    ("choices", "DELETE FROM choices WHERE status = 'done' AND done_at < ?"),
    # A name is personal data kept only beside a session: it goes with the last one stored
    # for its person, chat or topic (and is written again if they come back).
    (
        "names",
        "DELETE FROM display_names WHERE updated_at < ? AND NOT EXISTS (SELECT 1 FROM sessions s"
        " WHERE s.channel = display_names.channel AND CASE display_names.kind"
        " WHEN 'person' THEN s.peer_id = display_names.platform_id"
        " WHEN 'chat' THEN s.chat_id = display_names.platform_id"
        " ELSE s.chat_id || ':' || s.thread_id = display_names.platform_id END)",
    ),
)


class RetentionTables:
    db: Db

    async def prune_before(self, cutoff: float) -> Pruned:
        async with self.db.transaction() as tx:
            removed = {name: await tx.execute(sql, cutoff) for name, sql in _STEPS}
        return Pruned(**removed)

    async def media_in_use(self) -> set[str]:
        found: set[str] = set()
        for sql in _REFERRING:
            for row in await self.db.fetch(sql):
                found.update(MEDIA_HASH.findall(row[0] or ""))
        return found
