"""The one model⇄tools loop: call the model, run the tools it asks for, repeat until it
answers without tools or the tool-round limit is reached. While tools run, the turn gives
its global turn slot back (`bot.sessions.slots`), and each call holds a tool slot instead.

Person turns, heartbeats and memory flushes all run through it. What differs is given per
run: where the messages come from and where each step goes (a `Conversation`: the session's
transcript, or an ephemeral list that only the usage accountant hears of), the request
pieces (an `Exchange`), and which tools may actually run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from anthropic.types import (
    MessageParam,
    TextBlockParam,
    ToolResultBlockParam,
    ToolUnionParam,
    ToolUseBlockParam,
)

from bot.agent.cache_breaks import CacheWatch
from bot.agent.model import WHY, ModelClient, failure_kind
from bot.agent.sources import cited_sources
from bot.context.messages import build_messages, clean_block
from bot.context.overflow import MAX_OVERFLOW_RECOVERIES
from bot.errors import ContextOverflow, ModelError
from bot.providers.base import PAUSE_TURN, ModelReply
from bot.sessions.slots import TurnSlots
from bot.tools.registry import ToolContext, ToolRegistry, ToolResult
from bot.transcript import AssistantReply, Entry, ToolResults
from bot.types import CostKind, Payer, Source, Usage

if TYPE_CHECKING:
    from bot.agent.accounting import UsageAccountant
    from bot.agent.delivery import ReplyStream
    from bot.store.base import SessionRow, Store
    from bot.tools.policy import ToolPolicy

log = logging.getLogger(__name__)

TOOL_LIMIT_NOTE = "(I stopped after {n} tool calls in one turn; ask me to continue if needed.)"
LIMIT_RESULT = "Not run: the tool-call limit for this turn was reached."
FALLBACK_NOTE = "ℹ️ {model} wrote this answer: {primary} is {why} right now."
# A model reply that broke off mid-stream (which no retry covers) is asked for again
# this often per run, after a short pause, but only while none of its text was shown.
STREAM_RETRIES = 1
STREAM_RETRY_DELAY = 1.0

Messages = list[MessageParam]
# Makes room after "prompt is too long" (attempt 1, 2, ...) and says whether to retry.
Recover = Callable[[ContextOverflow, int], Awaitable[bool]]
# Says why a tool may not run in this exchange, or None when it may.
ToolGate = Callable[[str], str | None]


class Conversation(Protocol):
    """Where an exchange's messages come from (shaped for the window of the model they go
    to) and where its steps are kept."""

    async def messages(self, model: str) -> Messages: ...
    async def add_reply(self, reply: ModelReply) -> None: ...
    async def add_results(self, blocks: list[ToolResultBlockParam]) -> None: ...


@dataclass(slots=True)
class Exchange:
    """The request pieces of one run besides its messages."""

    system: list[TextBlockParam]
    tools: list[ToolUnionParam]
    policy: ToolPolicy
    context: ToolContext
    max_tool_rounds: int
    gate: ToolGate | None = None
    stream: ReplyStream | None = None  # where text shows as it arrives; None: nowhere
    recover: Recover | None = None  # None: an overflow reaches the caller
    model: str | None = None  # the session's /model choice; None: agent.model
    watch_cache: bool = False  # report prompt-cache breaks of the context's session
    notice: bool = False  # say under the reply when a fallback model wrote it


@dataclass(slots=True)
class LoopOutcome:
    model_calls: int = 0
    texts: list[str] = field(default_factory=list)  # each reply's text, in order
    ran: list[tuple[str, ToolResult]] = field(default_factory=list)  # (tool name, result)
    hit_limit: bool = False
    sources: list[Source] = field(default_factory=list)  # pages the replies cited, in order
    usage: Usage = field(default_factory=Usage)  # every call's, added up
    answered_by: str = ""  # the model of the last reply


class AgentLoop:
    def __init__(
        self,
        *,
        model: ModelClient,
        tools: ToolRegistry,
        cache_watch: CacheWatch,
        slots: TurnSlots,
    ) -> None:
        self.model = model
        self.tools = tools
        self.cache_watch = cache_watch
        self.slots = slots

    async def run(self, conversation: Conversation, exchange: Exchange) -> LoopOutcome:
        outcome = LoopOutcome()
        stream = exchange.stream
        rounds = 0
        overflows = 0  # bounded by MAX_OVERFLOW_RECOVERIES, so the model calls are too
        stream_retries = 0  # bounded by STREAM_RETRIES
        primary = exchange.model or self.model.config.agent.model
        model = await self.model.serving(primary)
        why = WHY["unavailable"] if model == primary else await self.model.cooling(primary)
        failed: list[str] = []  # models of the current call that failed and fell back
        while True:
            messages = await conversation.messages(model)
            mark = stream.mark() if stream else None
            try:
                reply = await self.model.call(
                    model=model,
                    system=exchange.system,
                    messages=messages,
                    tools=exchange.tools,
                    on_text=stream.on_text if stream else None,
                    on_tool_start=stream.on_tool_start if stream else None,
                    fallback_left=self.model.has_next(primary, [*failed, model]),
                )
            except ContextOverflow as exc:
                overflows += 1
                if (
                    exchange.recover is None
                    or overflows > MAX_OVERFLOW_RECOVERIES
                    or not await exchange.recover(exc, overflows)
                ):
                    raise
                continue
            except ModelError as exc:
                shown = stream is not None and mark is not None and stream.shown_since(mark)
                if shown:
                    raise
                if exc.retryable and stream_retries < STREAM_RETRIES:
                    stream_retries += 1
                    if stream is not None and mark is not None:
                        stream.rewind(mark)  # nothing of it was shown: the retry starts clean
                    log.warning("model reply broke off (%s); asking again", exc)
                    await asyncio.sleep(STREAM_RETRY_DELAY)
                    continue
                if not exc.falls_back:
                    raise
                failed.append(model)
                following = await self.model.next_model(primary, failed)
                await self.model.failed(model, exc, following)
                if following is None:
                    raise
                if stream is not None and mark is not None:
                    stream.rewind(mark)
                if model == primary:
                    why = WHY[failure_kind(exc)]
                model = following
                continue
            outcome.model_calls += 1
            outcome.usage += reply.usage
            outcome.answered_by = reply.model
            failed = []
            if exchange.watch_cache and model == primary:  # another model has its own cache
                self.cache_watch.observe(
                    exchange.context.session_id,
                    exchange.context.session_key,
                    system=exchange.system,
                    tools=exchange.tools,
                    messages=messages,
                    usage=reply.usage,
                )
            await conversation.add_reply(reply)
            if reply.text.strip():
                outcome.texts.append(reply.text)
            outcome.sources += cited_sources(reply.content)
            if not reply.tool_uses:
                if reply.stop_reason != PAUSE_TURN or rounds >= exchange.max_tool_rounds:
                    await self._notice(outcome, exchange, primary, why)
                    return outcome
                # The provider paused a long run of its own tools (web search) half-way;
                # the reply, sent back as the last message, lets it go on where it stopped.
                rounds += 1
                if stream is not None:
                    stream.next_iteration()
                model = await self.model.serving(primary)
                continue
            if rounds >= exchange.max_tool_rounds:
                log.warning("tool-call limit (%d) reached", exchange.max_tool_rounds)
                outcome.hit_limit = True
                if stream is not None:
                    await stream.on_text(TOOL_LIMIT_NOTE.format(n=exchange.max_tool_rounds))
                await conversation.add_results([_not_run(call) for call in reply.tool_uses])
                await self._notice(outcome, exchange, primary, why)
                return outcome
            # Tools wait on the outside world: the turn's slot serves other sessions meanwhile.
            async with self.slots.away():
                results = await asyncio.gather(*(self._tool(c, exchange) for c in reply.tool_uses))
            outcome.ran += [(c["name"], r) for c, r in zip(reply.tool_uses, results, strict=True)]
            await conversation.add_results([r.block() for r in results])
            rounds += 1
            if stream is not None:
                stream.next_iteration()
            model = await self.model.serving(primary)

    async def _notice(
        self, outcome: LoopOutcome, exchange: Exchange, primary: str, why: str | None
    ) -> None:
        """A line under a reply that a fallback model wrote, saying so (not under a silent
        one: there is nothing to say it of)."""
        stream = exchange.stream
        if not exchange.notice or stream is None or not stream.text.strip():
            return
        if outcome.answered_by in ("", primary):
            return
        note = FALLBACK_NOTE.format(
            model=outcome.answered_by, primary=primary, why=why or WHY["unavailable"]
        )
        stream.next_iteration()
        await stream.on_text(note)

    async def _tool(self, call: ToolUseBlockParam, exchange: Exchange) -> ToolResult:
        refusal = exchange.gate(call["name"]) if exchange.gate else None
        if refusal is not None:
            return ToolResult(call["id"], refusal, True)
        async with self.slots.tool():
            return await self.tools.run(call, exchange.context, policy=exchange.policy)


def _not_run(call: ToolUseBlockParam) -> ToolResultBlockParam:
    return {
        "type": "tool_result",
        "tool_use_id": call["id"],
        "content": LIMIT_RESULT,
        "is_error": True,
    }


# --------------------------------------------------------------------------- conversations

# Rewrites the request messages (pruning, compaction) before each model call.
# The model the messages go to is named: its window is the one they must fit.
Prepare = Callable[["SessionRow", list[Entry], Messages, str], Awaitable[Messages]]


@dataclass(slots=True)
class TranscriptConversation:
    """A turn's exchange: read from the session's transcript before every call (so pruning
    and compaction see it whole), every step appended to it as it happens."""

    store: Store
    accountant: UsageAccountant
    session: SessionRow
    turn_id: str
    timezone: str
    clock: Callable[[], float]
    payer: Payer
    kind: CostKind  # of the first call; a person's turn's later calls are tool follow-ups
    history_limit: int = 0
    prepare: Prepare | None = None

    async def messages(self, model: str) -> Messages:
        history = await self.store.load_history(
            self.session.session_id, max_user_turns=self.history_limit
        )
        messages = build_messages(history, self.timezone)
        if self.prepare is not None:
            messages = await self.prepare(self.session, history, messages, model)
        return messages

    async def add_reply(self, reply: ModelReply) -> None:
        entry = Entry(
            self.session.session_id,
            AssistantReply(reply.content, reply.stop_reason, reply.model),
            turn_id=self.turn_id,
            usage=reply.usage,
            created_at=self.clock(),
        )
        await self.accountant.record_reply(
            entry, reply.usage, reply.model, reply.latency, kind=self.kind, payer=self.payer
        )
        if self.kind == CostKind.TURN:
            self.kind = CostKind.TOOL_FOLLOWUP
        self.session.model = reply.model

    async def add_results(self, blocks: list[ToolResultBlockParam]) -> None:
        entry = Entry(self.session.session_id, ToolResults(blocks), turn_id=self.turn_id)
        await self.store.append_entries([entry])


@dataclass(slots=True)
class EphemeralConversation:
    """An exchange kept only in memory (a memory flush): its calls are still paid for, and
    they read the conversation's prompt cache, but nothing is added to the transcript."""

    accountant: UsageAccountant
    session: SessionRow
    history: Messages

    async def messages(self, model: str) -> Messages:
        return self.history

    async def add_reply(self, reply: ModelReply) -> None:
        await self.accountant.charge(
            self.session,
            reply.usage,
            reply.model,
            kind=CostKind.FLUSH,
            latency=reply.latency,
            read_cache=True,
        )
        content = [clean_block(b) for b in reply.content]
        self.history = [*self.history, {"role": "assistant", "content": content}]

    async def add_results(self, blocks: list[ToolResultBlockParam]) -> None:
        self.history = [*self.history, {"role": "user", "content": list(blocks)}]
