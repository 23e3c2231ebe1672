"""The memory flush: a silent model call that asks the agent to write durable facts down with
memory_append before they fall out of context, plus the bookkeeping that decides when.

It runs (a) before compaction: when a person's turn would take the context past
window - reserve - soft threshold, and from the compaction hooks (also on the overflow
path), at most once per compaction cycle; (b) from the scheduler, shortly before an idle
session's prompt cache expires; (c) before `/reset` and `/new`.

The flush is out of band: it sends the session's history plus the flush prompt with the same
system prompt and tools as a normal turn (so it reads the warm prompt cache), runs only the
memory tools, and writes nothing to the conversation, only a `memory_flush` record. That is
what lets it run from inside a turn that is compacting without splicing entries into it.
Whatever text the model answers is kept in that record and never sent. Failures are
recorded on the session row and never reach the person.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from anthropic.types import MessageParam, ToolUseBlockParam

from bot.agent.silent import is_silent, strip_silent
from bot.context.blocks import content_blocks, make_message, text_block
from bot.context.messages import build_messages, clean_block
from bot.context.tokens import plain_tokens_for_chars
from bot.context.truncation import cap_tool_results, result_char_limit
from bot.errors import ContextOverflow, ModelError
from bot.memory.notes import daily_note_path
from bot.pricing import estimate_cost
from bot.sessions.keys import conversation_of_key, is_direct_key
from bot.sessions.limits import history_limit_for_key
from bot.store.base import Entry, EntryType, Role, SessionRow, new_id
from bot.tools.policy import ToolPolicy, policy_for_messages
from bot.tools.registry import ToolContext, ToolRegistry, ToolResult
from bot.types import Address, InboundMessage

if TYPE_CHECKING:
    from bot.agent.model import ModelClient
    from bot.agent.runner import TurnJob
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


class Reason:
    THRESHOLD = "threshold"  # a person's turn is about to cross the compaction threshold
    COMPACTION = "compaction"  # compaction (or overflow recovery) is about to run
    IDLE = "idle"  # the scheduler, before an idle session's cache expires
    RESET = "reset"  # /reset or /new


# Flushes that belong to a compaction cycle and mark it done.
CYCLE_REASONS = frozenset({Reason.THRESHOLD, Reason.COMPACTION})

WHY = {
    Reason.THRESHOLD: "This conversation is close to being compacted; older details will be "
    "replaced by a summary.",
    Reason.COMPACTION: "This conversation is being compacted now; older details will be "
    "replaced by a summary.",
    Reason.IDLE: "The conversation has gone quiet; its details will soon leave your context.",
    Reason.RESET: "This session is being reset; its history will no longer be in context.",
}

FLUSH_PROMPT = (
    "[Memory flush: a housekeeping turn, nobody sees your reply] {why} Store what is worth "
    "keeping from this conversation with memory_append: facts, preferences, decisions, "
    'promises and open to-dos that are not in memory yet. Use file="daily" (today\'s note, '
    "{note}) for what happened{curated}. Append only what is new, never store secrets, and "
    "do not answer earlier messages here. Then reply with exactly NO_REPLY.\n"
    "Current time: {now}"
)
CURATED_DM = ' and file="MEMORY.md" for lasting facts about the people you help'
CURATED_GROUP = "; MEMORY.md is not available in group chats"
NOT_IN_FLUSH = "Error: only the memory tools can run during a memory flush; nothing was done."


# --- decisions (pure) -------------------------------------------------------------------------


def flush_threshold(context_window: int, reserve_tokens: int, soft_threshold: int) -> int:
    """Context size at which the pre-compaction flush runs."""
    return max(0, context_window - reserve_tokens - soft_threshold)


def flushed_this_cycle(session: SessionRow) -> bool:
    """A flush already ran for the current compaction cycle.

    `memory_flush_compaction_count` is None until the first cycle flush, so a new session
    (compaction_count 0) is never mistaken for a flushed one.
    """
    done = session.memory_flush_compaction_count
    return done is not None and done == session.compaction_count


def has_unflushed_conversation(session: SessionRow) -> bool:
    """Someone talked in this session after its last successful flush."""
    if session.turns == 0 or session.last_activity_at is None:
        return False
    return session.memory_flush_at is None or session.memory_flush_at < session.last_activity_at


def threshold_flush_due(session: SessionRow, projected_tokens: int, threshold: int) -> bool:
    return projected_tokens >= threshold and not flushed_this_cycle(session)


def compaction_flush_due(session: SessionRow) -> bool:
    return not flushed_this_cycle(session) and has_unflushed_conversation(session)


def idle_flush_at(session: SessionRow, ttl_seconds: float, lead_seconds: float) -> float | None:
    """When the scheduler should flush this session: `lead` before its cache expires, or
    None when there is nothing to flush."""
    if not has_unflushed_conversation(session) or session.last_model_call_at is None:
        return None
    return session.last_model_call_at + max(0.0, ttl_seconds - lead_seconds)


def flush_prompt(reason: str, now: dt.datetime, *, is_direct: bool) -> str:
    return FLUSH_PROMPT.format(
        why=WHY[reason],
        note=daily_note_path(now),
        curated=CURATED_DM if is_direct else CURATED_GROUP,
        now=now.strftime("%Y-%m-%d %H:%M %Z"),
    )


def turn_senders(history: list[Entry], key: str) -> list[InboundMessage]:
    """Stand-ins for the messages of the session's latest person turn, so the flush gets
    the tool policy (and tool list, part of the cached prefix) that turn had."""
    latest = next(
        (e for e in reversed(history) if e.role == Role.USER and e.payload.get("messages")),
        None,
    )
    if latest is None:
        return []
    conversation = conversation_of_key(key)
    senders = []
    for m in latest.payload["messages"]:
        user_id = str(m.get("user_id", ""))
        chat_id = conversation.chat_id or user_id
        channel = str(m.get("channel", ""))
        senders.append(
            InboundMessage(
                channel=channel,
                message_id=str(m.get("message_id", "")),
                chat_type=conversation.chat_type,
                chat_id=chat_id,
                user_id=user_id,
                text="",
                address=Address(channel, chat_id),
            )
        )
    return senders


def with_flush_prompt(messages: list[MessageParam], prompt: str) -> list[MessageParam]:
    """The history's messages with the flush prompt as the final user content."""
    block = text_block(prompt)
    if messages and messages[-1]["role"] == "user":
        last = messages[-1]
        return [*messages[:-1], make_message("user", [*content_blocks(last), block])]
    return [*messages, make_message("user", [block])]


# --- running it -------------------------------------------------------------------------------


@dataclass(slots=True)
class FlushOutcome:
    ok: bool
    error: str | None = None
    reply: str = ""  # text the model wrote anyway; recorded, never sent
    appended: int = 0  # successful memory_append calls
    model_calls: int = 0


class Flusher:
    """Runs flushes and owns their bookkeeping: the runner's `BeforeTurn`, compaction's
    `BeforeCompaction`, and the flush the gateway runs before a reset."""

    def __init__(
        self,
        *,
        config: Config,
        store: Store,
        model: ModelClient,
        tools: ToolRegistry,
        workspace: Workspace,
        clock: Callable[[], float],
    ) -> None:
        self.config = config
        self.store = store
        self.model = model
        self.tools = tools
        self.workspace = workspace
        self.clock = clock  # the runner's clock: benchmarks may simulate it
        self.zone = ZoneInfo(config.agent.timezone)
        self.threshold = flush_threshold(
            config.agent.context_window,
            config.context.reserve_tokens,
            config.memory.flush.soft_threshold_tokens,
        )
        self._active: set[str] = set()  # session ids being flushed; guards re-entry

    # --- hooks --------------------------------------------------------------------------------

    async def before_turn(self, job: TurnJob, session: SessionRow) -> None:
        """Runner hook: flush before a person's turn that would cross the threshold."""
        fresh = await self.store.get_session(session.session_id) or session
        incoming = sum(plain_tokens_for_chars(len(m.text)) for m in job.messages)
        if threshold_flush_due(fresh, fresh.context_tokens + incoming, self.threshold):
            await self.flush(fresh, reason=Reason.THRESHOLD, history_limit=job.history_limit)

    async def before_compaction(self, session: SessionRow) -> None:
        """Runner hook, awaited by compaction and overflow recovery (already in the lane)."""
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

    # --- entry points -------------------------------------------------------------------------

    async def flush(
        self, session: SessionRow, *, reason: str, history_limit: int | None = None
    ) -> FlushOutcome:
        """Run one flush now; the caller holds the session's lane. Never raises."""
        if session.session_id in self._active:
            return FlushOutcome(ok=False, error="a flush is already running for this session")
        self._active.add(session.session_id)
        started = self.clock()
        try:
            limit = (
                history_limit_for_key(self.config, session.session_key)
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

    async def _run(self, session: SessionRow, reason: str, history_limit: int) -> FlushOutcome:
        try:
            return await self._converse(session, reason, history_limit)
        except ContextOverflow:
            if history_limit and history_limit <= OVERFLOW_HISTORY_TURNS:
                raise
            log.info(
                "memory flush of %s overflowed; retrying with recent turns", session.session_key
            )
            return await self._converse(session, reason, OVERFLOW_HISTORY_TURNS)

    async def _converse(self, session: SessionRow, reason: str, history_limit: int) -> FlushOutcome:
        direct = is_direct_key(session.session_key)
        now = dt.datetime.fromtimestamp(self.clock(), self.zone)
        history = await self.store.load_history(session.session_id, max_user_turns=history_limit)
        config = self.config
        # Rendered and capped as the context pipeline does for every turn; pruning of old
        # tool results is left out (it lives in the pipeline), which costs a cache write at
        # most and never a wrong answer.
        rendered = cap_tool_results(
            build_messages(history, config.agent.timezone),
            result_char_limit(config.agent.context_window, config.context),
        )
        messages = with_flush_prompt(rendered, flush_prompt(reason, now, is_direct=direct))
        # Same system prompt and tools as the session's turns: the cached prefix.
        system = self.workspace.system_blocks(is_direct=direct)
        policy = policy_for_messages(config, turn_senders(history, session.session_key))
        tools = self.tools.definitions(policy=policy)
        ctx = ToolContext(
            session_key=session.session_key,
            session_id=session.session_id,
            principal="system",
            is_direct=direct,
            workspace=self.workspace.path,
            turn_id=f"flush-{new_id()}",
        )
        outcome = FlushOutcome(ok=True)
        texts: list[str] = []
        for _round in range(MAX_TOOL_ROUNDS + 1):
            reply = await self.model.complete(system=system, messages=messages, tools=tools)
            outcome.model_calls += 1
            await self._account(session, reply.usage, reply.model)
            if reply.text.strip():
                texts.append(reply.text)
            if not reply.tool_uses:
                break
            results = [await self._tool(call, ctx, policy) for call in reply.tool_uses]
            outcome.appended += sum(
                1
                for c, r in zip(reply.tool_uses, results, strict=True)
                if c.get("name") == "memory_append" and not r.is_error
            )
            messages = [
                *messages,
                {"role": "assistant", "content": [clean_block(b) for b in reply.content]},
                {"role": "user", "content": [r.block() for r in results]},
            ]
        text = "\n\n".join(texts).strip()
        outcome.reply = "" if is_silent(text) else strip_silent(text)
        return outcome

    async def _tool(
        self, call: ToolUseBlockParam, ctx: ToolContext, policy: ToolPolicy
    ) -> ToolResult:
        if not str(call.get("name", "")).startswith(MEMORY_TOOL_PREFIX):
            return ToolResult(call.get("id", ""), NOT_IN_FLUSH, True)
        return await self.tools.run(call, ctx, policy=policy)

    async def _account(self, session: SessionRow, usage: Any, model: str) -> None:
        # The flush touched the cache (that is the point), so last_model_call_at moves; the
        # context size stays that of the conversation, which the flush did not change.
        current = await self.store.get_session(session.session_id) or session
        await self.store.add_usage(
            session.session_id,
            usage.to_dict(),
            context_tokens=current.context_tokens,
            cost_usd=estimate_cost(model, usage, self.config.anthropic.cache_ttl),
            at=self.clock(),
        )

    async def _record(
        self, session: SessionRow, reason: str, outcome: FlushOutcome, started: float
    ) -> None:
        fields: dict[str, Any] = {}
        if outcome.ok:
            fields["memory_flush_at"] = self.clock()
            fields["memory_flush_error"] = None
        else:
            fields["memory_flush_error"] = (outcome.error or "failed")[:MAX_ERROR_CHARS]
        if reason in CYCLE_REASONS:
            # Failed attempts close the cycle too: retrying before every turn would make
            # each reply wait for a flush that keeps failing.
            fields["memory_flush_compaction_count"] = session.compaction_count
        await self.store.update_session(session.session_id, **fields)
        await self.store.increment_session(session.session_id, memory_flush_count=1)
        record = {
            "reason": reason,
            "ok": outcome.ok,
            "error": outcome.error,
            "appended": outcome.appended,
            "model_calls": outcome.model_calls,
            "reply": outcome.reply[:MAX_KEPT_REPLY_CHARS],
            "seconds": round(self.clock() - started, 3),
        }
        await self.store.append_entries([Entry(session.session_id, EntryType.MEMORY_FLUSH, record)])
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
