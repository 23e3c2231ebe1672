"""Per-turn recall: search memory with the incoming message and hand the best snippets to the
runner, which stores them in the person's turn after the cached prompt prefix.

It searches only what the session's scope may see (`bot.memory.scopes`), so a fact said in
one person's DM never reaches a group or another person, whatever words they use.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from bot.config import AdminConfig, MemorySearchConfig
from bot.memory.index import MemoryIndex, SearchHit
from bot.memory.scopes import scope_of, visible_scopes
from bot.memory.tools import format_hits
from bot.sessions.access import all_admins

if TYPE_CHECKING:
    from bot.agent.job import TurnJob
    from bot.store.base import SessionRow

log = logging.getLogger(__name__)


def fit_budget(hits: list[SearchHit], max_chars: int) -> list[SearchHit]:
    """The best hits whose formatted text fits `max_chars` together (the first always does)."""
    kept: list[SearchHit] = []
    for hit in hits:
        if kept and len(format_hits([*kept, hit])) > max_chars:
            break
        kept.append(hit)
    return kept


class Recall:
    """The runner's memory recall (`bot.agent.hooks.TurnRecall`)."""

    def __init__(self, index: MemoryIndex, config: MemorySearchConfig, admin: AdminConfig) -> None:
        self.index = index
        self.config = config
        self.admin = admin

    async def recall(self, job: TurnJob, session: SessionRow) -> str | None:
        query = "\n".join(m.text for m in job.messages)
        try:
            scope = scope_of(session.origin, session.session_key)
            visible = visible_scopes(scope, admin=all_admins(job.messages, self.admin))
            hits = await self.index.search(query, visible)
        except Exception:  # a broken index must never cost a person their reply
            log.exception("memory recall failed for %s", job.session_key)
            return None
        hits = fit_budget(hits, self.config.recall_max_chars)
        return format_hits(hits) if hits else None
