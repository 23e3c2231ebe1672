"""One agent turn: record the person's message, call the model (with tools, in a bounded
loop), persist every step, and deliver the reply.

A turn is resumable: after a crash it is run again from what the store holds, continuing
the model loop or just delivering an already-written reply, and the ledger keeps sent
chunks from going out twice.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from anthropic.types import MessageParam, ToolResultBlockParam

from bot.agent.delivery import ReplyStream
from bot.agent.hooks import BeforeTurn, ContextManager, TurnRecall
from bot.agent.model import ModelClient, ModelReply
from bot.agent.silent import is_silent
from bot.agent.workspace import Workspace
from bot.config import Config
from bot.context.messages import build_messages
from bot.context.overflow import MAX_OVERFLOW_RECOVERIES
from bot.errors import ContextOverflow, ModelError
from bot.pricing import estimate_cost
from bot.sessions.keys import is_direct_key
from bot.store.base import Entry, EntryType, InboundStatus, Role, SessionRow, new_id
from bot.tools.policy import policy_for_messages
from bot.tools.registry import ToolContext, ToolRegistry
from bot.types import Address, ChatType, InboundMessage

if TYPE_CHECKING:
    from bot.channel_contract import Channel
    from bot.metrics import Metrics
    from bot.store.base import Store

log = logging.getLogger(__name__)

TOOL_LIMIT_NOTE = "(I stopped after {n} tool calls in one turn; ask me to continue if needed.)"
INTERNAL_ERROR_REPLY = "Sorry, something went wrong on my side while answering. Please try again."
# A model reply that broke off mid-stream (which the SDK does not retry) is asked for again
# this often per turn, after a short pause, but only while none of its text was shown.
STREAM_RETRIES = 1
STREAM_RETRY_DELAY = 1.0


@dataclass(slots=True)
class TurnJob:
    """Everything needed to run (or resume) one turn."""

    session_key: str
    turn_id: str
    messages: list[InboundMessage] = field(default_factory=list)
    inbound_ids: list[int] = field(default_factory=list)
    resume: bool = False
    # Silent turns (memory flush, heartbeat) carry an internal prompt and show nothing.
    prompt: str | None = None
    kind: str = "user"
    history_limit: int = 0

    @property
    def first(self) -> InboundMessage | None:
        return self.messages[0] if self.messages else None

    @property
    def address(self) -> Address | None:
        return self.messages[-1].address if self.messages else None

    @property
    def is_direct(self) -> bool:
        first = self.first
        if first is None:  # internal turns (heartbeat): private data only in a DM session
            return is_direct_key(self.session_key)
        return first.chat_type == ChatType.DIRECT


@dataclass(slots=True)
class TurnOutcome:
    text: str = ""
    silent: bool = False
    error: ModelError | None = None
    model_calls: int = 0


class AgentRunner:
    def __init__(
        self,
        *,
        config: Config,
        store: Store,
        model: ModelClient,
        workspace: Workspace,
        tools: ToolRegistry,
        channels: dict[str, Channel],
        metrics: Metrics,
        recall: TurnRecall | None = None,
        before_turn: Sequence[BeforeTurn] = (),
        context: ContextManager | None = None,
        clock: Callable[[], float] = time.time,
    ):
        self.config = config
        self.store = store
        self.model = model
        self.workspace = workspace
        self.tools = tools
        self.channels = channels
        self.metrics = metrics
        self.recall = recall
        self.before_turn = tuple(before_turn)
        self.context = context
        # Time of model calls (and so of prompt-cache expiry); a benchmark may simulate it.
        self.clock = clock

    def _user_entry(self, job: TurnJob, session: SessionRow, recall: str | None) -> Entry:
        if job.prompt is not None:
            payload: dict[str, Any] = {"text": job.prompt, "kind": job.kind}
        else:
            context: list[str] = []
            for msg in job.messages:
                context.extend(msg.context_lines)
            payload = {
                "messages": [
                    {
                        "message_id": m.message_id,
                        "channel": m.channel,
                        "user_id": m.user_id,
                        "user_name": m.user_name,
                        "text": m.text,
                        "timestamp": m.timestamp or time.time(),
                        "chat_title": m.chat_title,
                    }
                    for m in job.messages
                ],
                "context_lines": context,
                "recall": recall,
            }
        return Entry(
            session.session_id, EntryType.MESSAGE, payload, role=Role.USER, turn_id=job.turn_id
        )

    async def run(self, job: TurnJob) -> TurnOutcome:
        channel_name = job.first.channel if job.first else "local"
        # A resumed turn continues in the session that holds it, even if /reset or
        # `krill reset` started a newer one meanwhile.
        session = await self.store.session_of_turn(job.turn_id) if job.resume else None
        if session is None:
            session = await self.store.get_or_create_session(job.session_key, channel_name)
        channel = self.channels.get(job.address.channel) if job.address else None
        stream = ReplyStream(
            channel=channel,
            address=job.address,
            turn_id=job.turn_id,
            store=self.store,
            metrics=self.metrics,
            visible=job.prompt is None,
            typing_on_tools=job.is_direct,
        )
        outcome = TurnOutcome()
        try:
            if job.prompt is None and not job.resume:
                for hook in self.before_turn:
                    try:
                        await hook.before_turn(job, session)
                    except Exception:  # housekeeping must never block a person's turn
                        log.exception("before-turn hook failed for %s", job.session_key)
            if not job.resume:
                recall = (
                    await self.recall.recall(job, session) if self.recall and job.messages else None
                )
                entry = self._user_entry(job, session, recall)
                fields: dict[str, Any] = {"last_activity_at": self.clock()}
                if job.address:
                    fields["address"] = job.address.to_dict()
                await self.store.begin_turn(
                    [entry], job.inbound_ids, job.turn_id, session_fields=fields
                )
            outcome = await self._loop(job, session, stream)
            text = stream.finish_text()
            outcome.silent = not text or is_silent(text)
            outcome.text = "" if outcome.silent else text
            if not outcome.silent:
                await stream.deliver(outcome.text)
            await self.store.finish_turn(
                session.session_id, job.inbound_ids, InboundStatus.DONE, turns=1
            )
            self.metrics.turns.labels(job.kind, "silent" if outcome.silent else "ok").inc()
        except ModelError as exc:
            outcome.error = exc
            log.warning("turn %s in %s failed: %s", job.turn_id, job.session_key, exc)
            self.metrics.errors.labels(type(exc).__name__).inc()
            self.metrics.turns.labels(job.kind, "error").inc()
            await self.store.finish_turn(
                session.session_id, job.inbound_ids, InboundStatus.FAILED, errors=1
            )
            if job.prompt is None:
                await stream.deliver(_failure_reply(stream, exc))
        except Exception as exc:
            # A bug, a store failure or a platform refusing the reply: never leave the message
            # "processing" (it would be retried at every restart) and tell the person if we can.
            outcome.error = ModelError(str(exc))
            log.exception("turn %s in %s failed", job.turn_id, job.session_key)
            self.metrics.errors.labels(type(exc).__name__).inc()
            self.metrics.turns.labels(job.kind, "error").inc()
            try:
                await self.store.finish_turn(
                    session.session_id, job.inbound_ids, InboundStatus.FAILED, errors=1
                )
                if job.prompt is None:
                    await stream.deliver(INTERNAL_ERROR_REPLY)
            except Exception:
                log.exception("could not record or report the failure of turn %s", job.turn_id)
        finally:
            await stream.close()
        return outcome

    async def _loop(self, job: TurnJob, session: SessionRow, stream: ReplyStream) -> TurnOutcome:
        outcome = TurnOutcome()
        max_iterations = self.config.agent.max_tool_iterations
        ctx = ToolContext(
            session_key=job.session_key,
            session_id=session.session_id,
            principal=job.first.principal if job.first else "system",
            is_direct=job.is_direct,
            workspace=self.workspace.path,
            turn_id=job.turn_id,
        )
        tool_rounds = 0
        overflows = 0  # bounded by MAX_OVERFLOW_RECOVERIES, so a turn's model calls are too
        stream_retries = 0  # bounded by STREAM_RETRIES
        while True:
            history = await self.store.load_history(
                session.session_id, max_user_turns=job.history_limit
            )
            if _reply_written(history, job.turn_id):
                # Resumed after the reply was written: replay its text for delivery.
                mine = [e for e in history if e.turn_id == job.turn_id and e.role == Role.ASSISTANT]
                for entry in mine:
                    await stream.on_text(_entry_text(entry))
                    stream.next_iteration()
                return outcome
            messages = build_messages(history, self.config.agent.timezone)
            if self.context is not None:
                messages = await self.context.prepare(session, history, messages)
            mark = stream.mark()
            try:
                reply = await self._call_model(job, session, messages, stream)
            except ContextOverflow as exc:
                overflows += 1
                if not await self._recover_overflow(session, exc, overflows):
                    raise
                continue
            except ModelError as exc:
                shown = stream.shown_since(mark)
                if not exc.retryable or shown or stream_retries >= STREAM_RETRIES:
                    raise
                stream_retries += 1
                stream.rewind(mark)  # nothing of it was shown, so the retry starts clean
                log.warning("model reply in turn %s broke off (%s); asking again", job.turn_id, exc)
                await asyncio.sleep(STREAM_RETRY_DELAY)
                continue
            outcome.model_calls += 1
            if not reply.tool_uses:
                return outcome
            if tool_rounds >= max_iterations:
                log.warning("turn %s hit the tool-call limit (%d)", job.turn_id, max_iterations)
                await stream.on_text(TOOL_LIMIT_NOTE.format(n=max_iterations))
                await self._record_tool_results(job, session, reply, ctx, skip=True)
                return outcome
            await self._record_tool_results(job, session, reply, ctx)
            tool_rounds += 1
            stream.next_iteration()

    async def _recover_overflow(
        self, session: SessionRow, exc: ContextOverflow, attempt: int
    ) -> bool:
        if self.context is None or attempt > MAX_OVERFLOW_RECOVERIES:
            return False
        return await self.context.recover_overflow(session, exc, attempt)

    async def _call_model(
        self,
        job: TurnJob,
        session: SessionRow,
        messages: list[MessageParam],
        stream: ReplyStream,
    ) -> ModelReply:
        policy = policy_for_messages(self.config, job.messages)
        reply = await self.model.complete(
            system=self.workspace.system_blocks(is_direct=job.is_direct),
            messages=messages,
            tools=self.tools.definitions(policy=policy),
            on_text=stream.on_text,
            on_tool_start=stream.on_tool_start,
        )
        usage = reply.usage
        now = self.clock()
        self.metrics.model_latency.observe(reply.latency)
        for kind, value in usage.to_dict().items():
            self.metrics.tokens.labels(kind.removesuffix("_tokens")).inc(value)
        entry = Entry(
            session.session_id,
            EntryType.MESSAGE,
            {"content": reply.content, "stop_reason": reply.stop_reason, "model": reply.model},
            role=Role.ASSISTANT,
            turn_id=job.turn_id,
            usage=usage.to_dict(),
            created_at=now,
        )
        await self.store.record_model_call(
            entry,
            usage.to_dict(),
            context_tokens=usage.prompt_tokens + usage.output_tokens,
            cost_usd=estimate_cost(reply.model, usage, self.config.anthropic.cache_ttl),
            model=reply.model,
        )
        session.model = reply.model
        return reply

    async def _record_tool_results(
        self,
        job: TurnJob,
        session: SessionRow,
        reply: ModelReply,
        ctx: ToolContext,
        *,
        skip: bool = False,
    ) -> None:
        policy = policy_for_messages(self.config, job.messages)
        blocks: list[ToolResultBlockParam]
        if skip:
            blocks = [
                {
                    "type": "tool_result",
                    "tool_use_id": call["id"],
                    "content": "Not run: the tool-call limit for this turn was reached.",
                    "is_error": True,
                }
                for call in reply.tool_uses
            ]
        else:
            results = await asyncio.gather(
                *(self.tools.run(call, ctx, policy=policy) for call in reply.tool_uses)
            )
            blocks = [r.block() for r in results]
        await self.store.append_entries(
            [
                Entry(
                    session.session_id,
                    EntryType.MESSAGE,
                    {"content": blocks},
                    role=Role.TOOL,
                    turn_id=job.turn_id,
                )
            ]
        )


def _failure_reply(stream: ReplyStream, exc: ModelError) -> str:
    """What the person gets when a turn fails: the error, after whatever a streaming preview
    already showed of the reply, so the message they watched ends with a clear note instead
    of vanishing or being left half-finished."""
    shown = stream.finish_text() if stream.previewed else ""
    return f"{shown}\n\n⚠️ {exc.user_message}" if shown else exc.user_message


def _entry_text(entry: Entry) -> str:
    return "".join(
        b.get("text", "") for b in entry.payload.get("content", []) if b.get("type") == "text"
    )


def _reply_written(history: list[Entry], turn_id: str) -> bool:
    """True when this turn already ended in a final assistant message (no tool calls)."""
    if not history:
        return False
    last = history[-1]
    return (
        last.turn_id == turn_id
        and last.role == Role.ASSISTANT
        and not any(b.get("type") == "tool_use" for b in last.payload.get("content", []))
    )


def new_turn_id() -> str:
    return new_id()
