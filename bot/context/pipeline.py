"""The context pipeline the runner applies before every model call, in this order:
history turn limit (done by the store when loading) -> single tool-result cap -> the
session's context plan (cache-TTL pruning, repeated reads, image placeholders, a cut) ->
compaction at the threshold, or when compaction cannot run, the fallbacks that keep the
request under the window; plus overflow recovery and `/compact`.

It is the runner's `ContextManager` and the gateway's compactor (`bot.app` wires both).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from anthropic.types import MessageParam

from bot.context.compaction import (
    FOCUS_MAX_CHARS,
    CompactionReason,
    CompactionResult,
    compact_session,
    needs_compaction,
    overhead_chars,
)
from bot.context.compaction.service import KEPT_MAX_SHARE
from bot.context.fallback import cut_point
from bot.context.guarded import FailureCounter, guarded_compaction
from bot.context.host import (
    BeforeCompaction,
    CachedPrefix,
    SummaryModel,
    UsageCharger,
    WorkspaceFiles,
)
from bot.context.media import image_placeholders
from bot.context.messages import build_messages
from bot.context.overflow import (
    OVERFLOW_COMPACTION_ATTEMPTS,
    OverflowState,
    truncation_branch,
)
from bot.context.plan import ContextPlan
from bot.context.planned import PlannedRequests
from bot.context.pruning import cache_is_cold, plan_pruning, prunable_results
from bot.context.rereads import superseded_reads
from bot.context.size import context_tokens
from bot.context.tokens import (
    CHARS_PER_TOKEN,
    SAFETY_MARGIN,
    plain_tokens_for_chars,
    tokens_for_chars,
)
from bot.context.truncation import cap_tool_results, result_char_limit
from bot.errors import ContextOverflow
from bot.sessions.window import session_limits
from bot.store.base import SessionRow
from bot.transcript import CONVERSATION_KINDS, Compaction, Entry

if TYPE_CHECKING:
    from bot.config import Config
    from bot.store.base import Store
    from bot.tools.registry import ToolRegistry

log = logging.getLogger(__name__)


class ContextPipeline:
    """Applies each session's context plan (kept in the store, so every replica builds the
    same request) and holds the overflow state of the turns it runs; everything else is
    pure functions in the sibling modules. It is also the `ContextHost` compaction runs
    with."""

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
        requests: PlannedRequests,
        failures: FailureCounter | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.model = model
        self.workspace = workspace
        self.tools = tools
        self.accountant = accountant
        self.before_compaction = tuple(before_compaction)
        self.requests = requests
        # The runner's clock, so a benchmark's simulated time drives TTL decisions too.
        self.clock = clock
        self.failures = failures
        self._overflow: dict[str, OverflowState] = {}

    def now(self) -> float:
        return self.clock()

    async def _compact(
        self, session: SessionRow, reason: CompactionReason, **options: object
    ) -> CompactionResult:
        if options.get("model") is None:
            # While the session's model cools down its summaries go to a fallback model,
            # whose window is the one they must fit.
            own = session_limits(self.config, session).model
            options["model"] = await self.model.serving(own)
        return await guarded_compaction(
            self, session, reason=reason, now=self.now(), failures=self.failures, **options
        )

    async def prepare(
        self,
        session: SessionRow,
        history: list[Entry],
        messages: list[MessageParam],
        model: str | None = None,
    ) -> list[MessageParam]:
        """The messages to send for this model call (`ContextManager.prepare`), shaped for
        the window of `model` (default: the session's), with stored media read in last
        (estimates above count images by their size instead)."""
        plan = await self.requests.plan(session.session_id, history)
        stored = plan.to_json()
        messages = await self._shape(session, history, messages, plan, model)
        await self.requests.keep(session.session_id, plan, stored)
        return await self.requests.finish(plan, messages)

    async def _shape(
        self,
        session: SessionRow,
        history: list[Entry],
        messages: list[MessageParam],
        plan: ContextPlan,
        model: str | None,
    ) -> list[MessageParam]:
        config = self.config
        fresh = await self.store.get_session(session.session_id) or session
        cfg, tz = config.context, config.agent.timezone
        window = session_limits(config, fresh, model).window
        limit = result_char_limit(window, cfg)
        messages = self.requests.render(plan, history, messages, limit)
        overhead = overhead_chars(self)
        tokens = context_tokens(
            history, messages, tz=tz, overhead_chars=overhead, result_limit=limit
        )
        if cache_is_cold(fresh.last_model_call_at, self.now(), config.cache_ttl_seconds):
            tokens -= self._prune(session, plan, messages, tokens, window)
            plan.placeholders |= image_placeholders(messages, config.media.keep_images_turns)
        if not needs_compaction(tokens, window, cfg.reserve):
            return messages
        result = await self._compact(
            fresh, "threshold", history=history, tokens_before=tokens, model=model
        )
        if result.entry is not None and isinstance(result.entry.payload, Compaction):
            # Rebuild from the turn's own history (it honours the turn's history limit).
            first_kept = result.entry.payload.first_kept_entry_id
            start = next(e.seq for e in history if e.id == first_kept)
            kept = [e for e in history if e.kind in CONVERSATION_KINDS and e.seq >= start]
            plan.start_over(result.entry.id)
            return cap_tool_results(build_messages([result.entry, *kept], tz), limit)
        return self._fall_back(session, plan, history, messages, tokens, window)

    def _prune(
        self,
        session: SessionRow,
        plan: ContextPlan,
        messages: list[MessageParam],
        tokens: int,
        window: int,
    ) -> int:
        """Extend the plan's pruning (older copies of repeated reads, then old results by
        size); returns the tokens it removed."""
        cfg = self.config.context
        eligible = {b["tool_use_id"] for b in prunable_results(messages, cfg)}
        plan.superseded |= superseded_reads(messages, eligible)
        outcome = plan_pruning(
            messages,
            tokens=tokens,
            window=window,
            config=cfg,
            plan=plan.actions,
            skip=plan.superseded,
        )
        if outcome.removed_chars:
            log.info(
                "pruned old tool results of %s: %d chars (%d results planned)",
                session.session_key,
                outcome.removed_chars,
                len(outcome.plan),
            )
        plan.actions = outcome.plan
        return plain_tokens_for_chars(outcome.removed_chars)

    def _fall_back(
        self,
        session: SessionRow,
        plan: ContextPlan,
        history: list[Entry],
        messages: list[MessageParam],
        tokens: int,
        window: int,
    ) -> list[MessageParam]:
        """Compaction did not run: shorten old tool results whatever the cache's state, then
        leave the oldest turns out, so the request stays under the window."""
        cfg = self.config.context
        tokens -= self._prune(session, plan, messages, tokens, window)
        if needs_compaction(tokens, window, cfg.reserve):
            cut = self._cut(plan, history, window)
            if cut is not None and cut != plan.cut_entry_id:
                log.warning(
                    "%s: compaction did not run; older turns are left out of its requests",
                    session.session_key,
                )
                plan.cut_entry_id = cut
                tz, limit = self.config.agent.timezone, result_char_limit(window, cfg)
                messages = self.requests.render(plan, history, build_messages(history, tz), limit)
        return messages

    def _cut(self, plan: ContextPlan, history: list[Entry], window: int) -> str | None:
        """Where requests should start so the kept turns fill at most half the room."""
        cfg = self.config.context
        room = int((window - cfg.reserve) * KEPT_MAX_SHARE)
        return cut_point(
            history,
            current=plan.cut_entry_id,
            keep_turns=cfg.keep_recent_user_turns,
            budget_tokens=room - tokens_for_chars(overhead_chars(self)),
            tz=self.config.agent.timezone,
            result_limit=result_char_limit(window, cfg),
        )

    async def recover_overflow(
        self, session: SessionRow, error: ContextOverflow, attempt: int
    ) -> bool:
        """Make room and return True to retry, or return False to give up (the person is
        told to /reset)."""
        if attempt == 1:
            self._overflow[session.session_id] = OverflowState()
        state = self._overflow.setdefault(session.session_id, OverflowState())
        cfg = self.config.context
        model = error.model or None  # the model that refused: its window is what counts
        session = await self._learn_window(session, error)
        if state.compactions < OVERFLOW_COMPACTION_ATTEMPTS and not state.compaction_exhausted:
            state.compactions += 1
            # Each further attempt keeps one turn fewer, so attempts differ.
            keep = max(1, cfg.keep_recent_user_turns - (state.compactions - 1))
            result = await self._compact(
                session, "overflow", tokens_before=error.tokens, max_keep_turns=keep, model=model
            )
            if result.compacted:
                return True
            state.compaction_exhausted = True
        if not state.cut:
            state.cut = True
            if await self._cut_after_overflow(session, model):
                return True
        if not state.truncated:
            state.truncated = True
            return await self._truncate(session, error, model)
        self._overflow.pop(session.session_id, None)
        return False

    async def _learn_window(self, session: SessionRow, error: ContextOverflow) -> SessionRow:
        """The provider named its real window ("N tokens > M maximum"): when it is smaller
        than the one assumed, it becomes the session's window for every later step."""
        limits = session_limits(self.config, session, error.model or None)
        if error.limit is None or error.limit >= limits.window:
            return session
        log.warning(
            "%s: the window of %s is %d tokens, not %d; using it from now on",
            session.session_key,
            limits.model,
            error.limit,
            limits.window,
        )
        await self.store.learn_context_window(session.session_id, error.limit, limits.model)
        return await self.store.get_session(session.session_id) or session

    async def _cut_after_overflow(self, session: SessionRow, model: str | None) -> bool:
        """Compaction could not make room: leave the oldest turns out of the retry."""
        history = await self.store.load_history(session.session_id)
        plan = await self.requests.plan(session.session_id, history)
        stored = plan.to_json()
        window = session_limits(self.config, session, model).window
        cut = self._cut(plan, history, window)
        if cut is None or cut == plan.cut_entry_id:
            return False
        plan.cut_entry_id = cut
        await self.requests.keep(session.session_id, plan, stored)
        log.warning("overflow in %s: older turns are left out of the retry", session.session_key)
        return True

    async def _truncate(
        self, session: SessionRow, error: ContextOverflow, model: str | None
    ) -> bool:
        config = self.config
        window = session_limits(config, session, model).window
        reserve = config.context.reserve
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
        result = await self._compact(session, "manual", focus=focus[:FOCUS_MAX_CHARS])
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
        result = await self._compact(
            session, "idle", prefix=prefix, only_if_cheaper=only_if_cheaper
        )
        return result.message


__all__ = [
    "CompactionResult",
    "ContextPipeline",
    "compact_session",
    "needs_compaction",
]
