"""Running a memory flush (`bot.memory.flush_policy` decides when one is due).

The flush is out of band: it sends the session's history plus the flush prompt with the same
system prompt and tools as a normal turn (so it reads the warm prompt cache), through the
agent loop with only the memory tools allowed to run, and writes nothing to the
conversation, only a `memory_flush` record. That is what lets it run from inside a turn
that is compacting without splicing entries into it. Whatever text the model answers is
kept in that record and never sent. Failures are recorded on the session row and never
reach the person.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from bot.agent.loop import EphemeralConversation, Exchange
from bot.agent.silent import is_silent, strip_silent
from bot.context.tokens import plain_tokens_for_chars, text_units
from bot.errors import ContextOverflow, ModelError
from bot.memory.flush_policy import (
    CYCLE_REASONS,
    Reason,
    compaction_flush_due,
    flush_prompt,
    has_unflushed_conversation,
    session_flush_threshold,
    threshold_flush_due,
    with_flush_prompt,
)
from bot.memory.scopes import scope_of
from bot.sessions.access import is_admin
from bot.sessions.limits import history_limit_for
from bot.store.base import SessionRow
from bot.tools.registry import ToolContext
from bot.transcript import Entry, MemoryFlushRecord, new_id

if TYPE_CHECKING:
    from bot.agent.accounting import UsageAccountant
    from bot.agent.job import TurnJob
    from bot.agent.loop import AgentLoop
    from bot.agent.prefix import RequestPrefixes
    from bot.agent.workspace import Workspace
    from bot.config import Config
    from bot.store.base import Store

log = logging.getLogger(__name__)

MEMORY_TOOL_PREFIX = "memory_"
MAX_TOOL_ROUNDS = 4  # a flush appends a few entries; more rounds mean it is wandering
# On "prompt is too long" the flush retries with only this many recent user turns.
OVERFLOW_HISTORY_TURNS = 4
MAX_ERROR_CHARS = 500
MAX_KEPT_REPLY_CHARS = 2_000
NOT_IN_FLUSH = "Error: only the memory tools can run during a memory flush; nothing was done."


def memory_tools_only(name: str) -> str | None:
    """The flush's tool gate: every tool is offered (the cached prefix), memory tools run."""
    return None if name.startswith(MEMORY_TOOL_PREFIX) else NOT_IN_FLUSH


@dataclass(slots=True)
class FlushOutcome:
    ok: bool
    error: str | None = None
    reply: str = ""  # text the model wrote anyway; recorded, never sent
    appended: int = 0  # successful memory_append calls
    model_calls: int = 0


class FlushService:
    """Runs flushes and owns their bookkeeping. The runner calls `before_turn`, compaction
    `before_compaction`, and /reset `before_reset`; the scheduler calls `flush`."""

    def __init__(
        self,
        *,
        config: Config,
        store: Store,
        loop: AgentLoop,
        accountant: UsageAccountant,
        workspace: Workspace,
        prefixes: RequestPrefixes,
        clock: Callable[[], float],
    ) -> None:
        self.config = config
        self.store = store
        self.loop = loop
        self.accountant = accountant
        self.workspace = workspace
        self.prefixes = prefixes
        self.clock = clock
        self.zone = ZoneInfo(config.agent.timezone)
        self._active: set[str] = set()  # session ids being flushed; guards re-entry

    # --- when others call -------------------------------------------------------------------

    async def before_turn(self, job: TurnJob, session: SessionRow) -> None:
        """Flush before a person's turn that would cross the threshold."""
        fresh = await self.store.get_session(session.session_id) or session
        incoming = sum(plain_tokens_for_chars(text_units(m.text)) for m in job.messages)
        threshold = session_flush_threshold(self.config, fresh)
        if threshold_flush_due(fresh, fresh.context_tokens + incoming, threshold):
            await self.flush(fresh, reason=Reason.THRESHOLD, history_limit=job.history_limit)

    async def before_compaction(self, session: SessionRow) -> None:
        """Awaited by compaction and overflow recovery (already in the session's lane)."""
        fresh = await self.store.get_session(session.session_id) or session
        if compaction_flush_due(fresh):
            await self.flush(fresh, reason=Reason.COMPACTION)

    async def before_reset(self, key: str) -> None:
        """Flush the old session before /reset, /new or `krill reset` starts a new one (the
        gateway runs those in the session's lane, so the flush runs directly)."""
        session = await self.store.current_session(key)
        if session is None or not has_unflushed_conversation(session):
            return
        await self.flush(session, reason=Reason.RESET)

    async def flush(
        self, session: SessionRow, *, reason: Reason, history_limit: int | None = None
    ) -> FlushOutcome:
        """Run one flush now; the caller holds the session's lane. Never raises."""
        if session.session_id in self._active:
            return FlushOutcome(ok=False, error="a flush is already running for this session")
        self._active.add(session.session_id)
        started = self.clock()
        try:
            limit = (
                history_limit_for(self.config, session.origin)
                if history_limit is None
                else history_limit
            )
            outcome = await asyncio.wait_for(
                self._run(session, reason, limit), self.config.memory.flush.timeout_seconds
            )
        except TimeoutError:
            outcome = FlushOutcome(ok=False, error="timed out")
        except ModelError as exc:
            outcome = FlushOutcome(ok=False, error=f"{type(exc).__name__}: {exc}")
        except Exception as exc:
            log.exception("memory flush failed for %s", session.session_key)
            outcome = FlushOutcome(ok=False, error=f"{type(exc).__name__}: {exc}")
        finally:
            self._active.discard(session.session_id)
        try:
            await self._record(session, reason, outcome, started)
        except Exception:
            log.exception("could not record the memory flush of %s", session.session_key)
        return outcome

    # --- internals ----------------------------------------------------------------------------

    async def _run(self, session: SessionRow, reason: Reason, history_limit: int) -> FlushOutcome:
        try:
            return await self._converse(session, reason, history_limit)
        except ContextOverflow:
            if history_limit and history_limit <= OVERFLOW_HISTORY_TURNS:
                raise
            log.info(
                "memory flush of %s overflowed; retrying with recent turns", session.session_key
            )
            return await self._converse(session, reason, OVERFLOW_HISTORY_TURNS)

    async def _converse(
        self, session: SessionRow, reason: Reason, history_limit: int
    ) -> FlushOutcome:
        scope = scope_of(session.origin, session.session_key)
        direct = session.is_direct
        admin = direct and self._peer_is_admin(session)
        now = dt.datetime.fromtimestamp(self.clock(), self.zone)
        history = await self.store.load_history(session.session_id, max_user_turns=history_limit)
        prefix, policy = await self.prefixes.build(session, history)
        prompt = flush_prompt(reason, now, note=scope.daily_note(now), curated=admin)
        messages = with_flush_prompt(prefix.messages, prompt)
        exchange = Exchange(
            system=prefix.system,
            tools=prefix.tools,
            policy=policy,
            context=ToolContext(
                session_key=session.session_key,
                session_id=session.session_id,
                principal="system",
                is_direct=direct,
                workspace=self.workspace.path,
                turn_id=f"flush-{new_id()}",
                origin=session.origin,
                admin=admin,
            ),
            max_tool_rounds=MAX_TOOL_ROUNDS,
            gate=memory_tools_only,
            # The session's model holds its cache.
            model=prefix.model,
        )
        conversation = EphemeralConversation(self.accountant, session.session_id, messages)
        result = await self.loop.run(conversation, exchange)
        text = "\n\n".join(result.texts).strip()
        return FlushOutcome(
            ok=True,
            reply="" if is_silent(text) else strip_silent(text),
            appended=sum(1 for name, r in result.ran if name == "memory_append" and not r.is_error),
            model_calls=result.model_calls,
        )

    def _peer_is_admin(self, session: SessionRow) -> bool:
        """Whether the person of a DM session is an admin (the flush speaks for them)."""
        origin = session.origin
        if origin is None or origin.peer_id is None:
            return False
        return is_admin(f"{origin.channel}:{origin.peer_id}", self.config.admin)

    async def _record(
        self, session: SessionRow, reason: Reason, outcome: FlushOutcome, started: float
    ) -> None:
        error = None if outcome.ok else (outcome.error or "failed")[:MAX_ERROR_CHARS]
        # Failed attempts close the cycle too: retrying before every turn would make each
        # reply wait for a flush that keeps failing.
        cycle = session.compaction_count if reason in CYCLE_REASONS else None
        await self.store.record_memory_flush(
            session.session_id, error=error, at=self.clock(), compaction_count=cycle
        )
        record = MemoryFlushRecord(
            reason=str(reason),
            ok=outcome.ok,
            error=outcome.error,
            appended=outcome.appended,
            model_calls=outcome.model_calls,
            reply=outcome.reply[:MAX_KEPT_REPLY_CHARS],
            seconds=round(self.clock() - started, 3),
        )
        await self.store.append_entries([Entry(session.session_id, record)])
        if outcome.ok:
            log.info(
                "memory flush (%s) of %s: %d entr%s written%s",
                reason,
                session.session_key,
                outcome.appended,
                "y" if outcome.appended == 1 else "ies",
                "; the model's text was kept, not sent" if outcome.reply else "",
            )
        else:
            log.warning(
                "memory flush (%s) of %s failed: %s", reason, session.session_key, outcome.error
            )
