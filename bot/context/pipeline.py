"""The context pipeline the runner applies before every model call, in this order:
history turn limit (done by the store when loading) -> single tool-result cap -> cache-TTL
pruning -> compaction at the threshold; plus overflow recovery and `/compact`.

It is the runner's `ContextManager` and the gateway's compactor (`bot.app` wires both).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from anthropic.types import MessageParam
from cachetools import LRUCache

from bot.context.compaction import (
    FOCUS_MAX_CHARS,
    CompactionResult,
    compact_session,
    needs_compaction,
    overhead_chars,
)
from bot.context.host import (
    BeforeCompaction,
    CachedPrefix,
    SummaryModel,
    UsageCharger,
    WorkspaceFiles,
)
from bot.context.media import MediaReader, image_placeholders, resolve_media
from bot.context.messages import build_messages
from bot.context.overflow import (
    OVERFLOW_COMPACTION_ATTEMPTS,
    OverflowState,
    truncation_branch,
)
from bot.context.pruning import PruneAction, apply_pruning, cache_is_cold, plan_pruning
from bot.context.size import context_tokens
from bot.context.tokens import CHARS_PER_TOKEN, SAFETY_MARGIN, plain_tokens_for_chars
from bot.context.truncation import cap_tool_results, result_char_limit
from bot.errors import ContextOverflow
from bot.store.base import SessionRow
from bot.transcript import CONVERSATION_KINDS, Compaction, Entry, EntryKind

if TYPE_CHECKING:
    from bot.config import Config
    from bot.store.base import Store
    from bot.tools.registry import ToolRegistry

log = logging.getLogger(__name__)

# Per-session pruning plans live in memory; the least recently used are forgotten first.
# A lost plan (eviction, restart) costs little: the next request sends the old results
# whole once, and the next cold pass plans again.
MAX_TRACKED_SESSIONS = 10_000


@dataclass(slots=True)
class _SessionState:
    compaction_id: str | None = None  # the plan belongs to the history after this entry
    plan: dict[str, PruneAction] = field(default_factory=dict)
    # Old images shown as `[image: ...]` text; decided, like the plan, only when cold.
    placeholders: set[str] = field(default_factory=set)


class ContextPipeline:
    """Holds the per-session pruning plans and overflow state; everything else is pure
    functions in the sibling modules. It is also the `ContextHost` compaction runs with."""

    def __init__(
        self,
        *,
        config: Config,
        store: Store,
        model: SummaryModel,
        workspace: WorkspaceFiles,
        tools: ToolRegistry,
        accountant: UsageCharger,
        before_compaction: Sequence[BeforeCompaction] = (),
        clock: Callable[[], float],
        media: MediaReader | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.model = model
        self.workspace = workspace
        self.tools = tools
        self.accountant = accountant
        self.before_compaction = tuple(before_compaction)
        self.media = media
        # The runner's clock, so a benchmark's simulated time drives TTL decisions too.
        self.clock = clock
        self._states: LRUCache[str, _SessionState] = LRUCache(MAX_TRACKED_SESSIONS)
        self._overflow: dict[str, OverflowState] = {}

    def now(self) -> float:
        return self.clock()

    def _state(self, session_id: str, history: list[Entry]) -> _SessionState:
        compaction_id = (
            history[0].id if history and history[0].kind == EntryKind.COMPACTION else None
        )
        state = self._states.get(session_id)
        if state is None or state.compaction_id != compaction_id:
            state = _SessionState(compaction_id)  # compaction replaced what the plan covered
            self._states[session_id] = state
        return state

    async def prepare(
        self, session: SessionRow, history: list[Entry], messages: list[MessageParam]
    ) -> list[MessageParam]:
        """The messages to send for this model call (`ContextManager.prepare`), with stored
        media read in last (estimates above count images by their size instead)."""
        messages = await self._shape(session, history, messages)
        state = self._states.get(session.session_id)
        placeholders = state.placeholders if state is not None else set()
        return await asyncio.to_thread(resolve_media, messages, self.media, placeholders)

    async def _shape(
        self, session: SessionRow, history: list[Entry], messages: list[MessageParam]
    ) -> list[MessageParam]:
        config = self.config
        fresh = await self.store.get_session(session.session_id) or session
        cfg, tz = config.context, config.agent.timezone
        window = fresh.window(config.agent.context_window)
        limit = result_char_limit(window, cfg)
        messages = cap_tool_results(messages, limit)
        state = self._state(session.session_id, history)
        tokens = context_tokens(
            history,
            messages,
            tz=tz,
            overhead_chars=overhead_chars(self),
            result_limit=limit,
        )
        if cache_is_cold(fresh.last_model_call_at, self.now(), config.cache_ttl_seconds):
            outcome = plan_pruning(
                messages, tokens=tokens, window=window, config=cfg, plan=state.plan
            )
            if outcome.removed_chars:
                log.info(
                    "pruned old tool results of %s: %d chars (%d results planned)",
                    session.session_key,
                    outcome.removed_chars,
                    len(outcome.plan),
                )
            state.plan = outcome.plan
            tokens -= plain_tokens_for_chars(outcome.removed_chars)
            state.placeholders |= image_placeholders(messages, config.media.keep_images_turns)
        messages = apply_pruning(messages, state.plan, cfg)
        if not needs_compaction(tokens, window, cfg.reserve_tokens):
            return messages
        result = await compact_session(
            self, fresh, reason="threshold", history=history, tokens_before=tokens
        )
        if result.entry is None or not isinstance(result.entry.payload, Compaction):
            return messages
        # Rebuild from the turn's own history (it honours the turn's history limit).
        first_kept = result.entry.payload.first_kept_entry_id
        start = next(e.seq for e in history if e.id == first_kept)
        kept = [e for e in history if e.kind in CONVERSATION_KINDS and e.seq >= start]
        self._state(session.session_id, [result.entry])
        return cap_tool_results(build_messages([result.entry, *kept], tz), limit)

    async def recover_overflow(
        self, session: SessionRow, error: ContextOverflow, attempt: int
    ) -> bool:
        """Make room and return True to retry, or return False to give up (the person is
        told to /reset)."""
        if attempt == 1:
            self._overflow[session.session_id] = OverflowState()
        state = self._overflow.setdefault(session.session_id, OverflowState())
        cfg = self.config.context
        session = await self._learn_window(session, error)
        if state.compactions < OVERFLOW_COMPACTION_ATTEMPTS and not state.compaction_exhausted:
            state.compactions += 1
            # Each further attempt keeps one turn fewer, so attempts differ.
            keep = max(1, cfg.keep_recent_user_turns - (state.compactions - 1))
            result = await compact_session(
                self,
                session,
                reason="overflow",
                tokens_before=error.tokens,
                max_keep_turns=keep,
            )
            if result.compacted:
                return True
            state.compaction_exhausted = True
        if not state.truncated:
            state.truncated = True
            return await self._truncate(session, error)
        self._overflow.pop(session.session_id, None)
        return False

    async def _learn_window(self, session: SessionRow, error: ContextOverflow) -> SessionRow:
        """The provider named its real window ("N tokens > M maximum"): when it is smaller
        than the one assumed, it becomes the session's window for every later step."""
        configured = self.config.agent.context_window
        if error.limit is None or error.limit >= session.window(configured):
            return session
        log.warning(
            "%s: the model's window is %d tokens, not %d; using it from now on",
            session.session_key,
            error.limit,
            session.window(configured),
        )
        await self.store.learn_context_window(session.session_id, error.limit)
        return await self.store.get_session(session.session_id) or session

    async def _truncate(self, session: SessionRow, error: ContextOverflow) -> bool:
        config = self.config
        window = session.window(config.agent.context_window)
        reserve = config.context.reserve_tokens
        history = await self.store.load_history(session.session_id)
        tokens = error.tokens or window
        # Real token counts convert back to characters with the margin, to cut enough.
        excess = int((tokens - (window - reserve)) * CHARS_PER_TOKEN * SAFETY_MARGIN)
        branch = truncation_branch(
            history,
            excess_chars=max(excess, 0),
            tokens_before=tokens,
            result_limit=result_char_limit(window, config.context),
        )
        if branch is None:
            log.warning("overflow in %s: no tool result left to shorten", session.session_key)
            return False
        await self.store.append_entries(branch)
        marker = branch[-1].payload
        log.warning(
            "overflow in %s: shortened tool results to %s chars in a new branch",
            session.session_key,
            marker.result_cap_chars if isinstance(marker, Compaction) else "?",
        )
        return True

    async def compact(self, session_key: str, focus: str) -> str:
        """Compact a session now, for `/compact [focus]` and idle compaction; the caller
        holds the session's lane. Raises on failures other than the model's."""
        session = await self.store.current_session(session_key)
        if session is None:
            return "Nothing to compact yet: this conversation has no history."
        result = await compact_session(
            self, session, focus=focus[:FOCUS_MAX_CHARS], reason="manual"
        )
        return result.message

    async def compact_idle(
        self, session_key: str, prefix: CachedPrefix | None, *, only_if_cheaper: bool = False
    ) -> str:
        """Compact an idle session for the scheduler (the caller holds its lane): over
        `prefix`, the request its turns send, while its prompt cache is still warm; with
        `only_if_cheaper`, only when that costs less than re-writing the history later."""
        session = await self.store.current_session(session_key)
        if session is None:
            return "no session"
        result = await compact_session(
            self, session, reason="idle", prefix=prefix, only_if_cheaper=only_if_cheaper
        )
        return result.message


__all__ = [
    "CompactionResult",
    "ContextPipeline",
    "compact_session",
    "needs_compaction",
]
