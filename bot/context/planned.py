"""A session's requests as its stored context plan shapes them. The pipeline reads and
extends the plan before every model call; the memory flush and warm compaction read it
without deciding anything, so their requests repeat the prefix the turns wrote to the
prompt cache, on whichever replica they run.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from anthropic.types import MessageParam

from bot.context.fallback import cut_messages
from bot.context.media import MediaReader, resolve_media
from bot.context.messages import build_messages
from bot.context.plan import ContextPlan
from bot.context.pruning import apply_pruning
from bot.context.truncation import cap_tool_results, result_char_limit
from bot.sessions.window import session_limits
from bot.store.base import SessionRow
from bot.transcript import Entry, EntryKind

if TYPE_CHECKING:
    from bot.config import Config
    from bot.store.base import ContextPlanStore


class PlannedRequests:
    def __init__(
        self, *, config: Config, store: ContextPlanStore, media: MediaReader | None = None
    ) -> None:
        self.config = config
        self.store = store
        self.media = media

    async def plan(self, session_id: str, history: list[Entry]) -> ContextPlan:
        """The session's stored plan, or a new one once a compaction replaced what it
        covered (`history` starts with the latest compaction entry, if any)."""
        compaction_id = (
            history[0].id if history and history[0].kind == EntryKind.COMPACTION else None
        )
        plan = ContextPlan.from_json(await self.store.context_plan(session_id))
        return plan if plan.compaction_id == compaction_id else ContextPlan(compaction_id)

    async def keep(self, session_id: str, plan: ContextPlan, stored: str) -> None:
        """Store `plan` if it differs from `stored` (its JSON when it was read)."""
        if plan.to_json() != stored:
            await self.store.put_context_plan(session_id, plan.to_json())

    def render(
        self, plan: ContextPlan, history: list[Entry], messages: list[MessageParam], limit: int
    ) -> list[MessageParam]:
        """`messages` (built from `history`) with the plan's cut and the single-result cap;
        pruning comes after any new decision."""
        if plan.cut_entry_id is not None:
            cut = cut_messages(history, plan.cut_entry_id, self.config.agent.timezone)
            if cut is not None:
                messages = cut
            else:  # the turn's history limit left the cut out already
                plan.cut_entry_id = None
        return cap_tool_results(messages, limit)

    async def finish(self, plan: ContextPlan, messages: list[MessageParam]) -> list[MessageParam]:
        """Pruning applied and stored media read in (old images as placeholders)."""
        messages = apply_pruning(messages, plan, self.config.context)
        return await asyncio.to_thread(resolve_media, messages, self.media, plan.placeholders)

    async def request_messages(
        self, session: SessionRow, history: list[Entry]
    ) -> list[MessageParam]:
        """What the session's requests carry for `history` under its plan as it stands."""
        plan = await self.plan(session.session_id, history)
        window = session_limits(self.config, session).window
        limit = result_char_limit(window, self.config.context)
        built = build_messages(history, self.config.agent.timezone)
        return await self.finish(plan, self.render(plan, history, built, limit))
