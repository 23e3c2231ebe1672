"""One agent turn: record the person's message, run the agent loop over the session's
transcript (every step persisted as it happens), and deliver the reply.

A turn is resumable: after a crash it is run again from what the store holds, continuing
the model loop or just writing an already-written reply to the outbox again, which keeps
its chunks from going out twice. The turn is done once its reply is in the outbox; the
outbox's sender delivers it. A store that stays locked past its patience
(`StoreUnavailable`) leaves the turn unanswered: the person is told, and the message is
answered later.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bot.agent.delivery import ReplyStream
from bot.agent.job import TurnJob
from bot.agent.loop import AgentLoop, Exchange, LoopOutcome, TranscriptConversation
from bot.agent.pricing import PriceList
from bot.agent.silent import is_silent
from bot.agent.sources import cited_sources, reply_sources
from bot.agent.workspace import Workspace
from bot.config import Config
from bot.errors import ContextOverflow, ModelError, StoreUnavailable
from bot.log_context import Content, turn_context
from bot.providers.base import PAUSE_TURN
from bot.sessions.access import all_admins
from bot.sessions.models import session_model
from bot.spending.caps import payer_for
from bot.store.base import InboundStatus, SessionRow
from bot.tools.policy import policy_for_messages
from bot.tools.registry import ToolContext, ToolRegistry
from bot.transcript import (
    AssistantReply,
    ChatLine,
    Entry,
    InternalPrompt,
    Payload,
    PersonTurn,
    PromptPurpose,
)
from bot.types import Address, SessionOrigin, Source, Usage

if TYPE_CHECKING:
    from bot.agent.accounting import UsageAccountant
    from bot.agent.hooks import BeforeTurn, ContextManager, SessionStart, TurnRecall
    from bot.channel_contract import Channel
    from bot.media.prepare import MediaPreparer
    from bot.metrics import Metrics
    from bot.outbox.writer import Outbox
    from bot.store.base import Store

log = logging.getLogger(__name__)

INTERNAL_ERROR_REPLY = "Sorry, something went wrong on my side while answering. Please try again."
MODEL_DROPPED_NOTE = (
    "ℹ️ This conversation's model {dropped} is no longer offered here, so it now uses "
    "{model}. /model lists the models you can switch to."
)

# Sends a short notice without touching the store (which may be what is failing).
Notify = Callable[[Address, str], Awaitable[None]]


@dataclass(slots=True)
class TurnOutcome:
    text: str = ""
    silent: bool = False
    error: ModelError | None = None
    model_calls: int = 0
    delivered: bool = False  # the reply (or the failure note) reached the channel
    sources: tuple[Source, ...] = ()  # the web pages the reply cited
    usage: Usage = field(default_factory=Usage)  # every model call of the turn, added up
    model: str = ""  # the model that answered ("" when none did)


class AgentRunner:
    def __init__(
        self,
        *,
        config: Config,
        store: Store,
        loop: AgentLoop,
        accountant: UsageAccountant,
        workspace: Workspace,
        tools: ToolRegistry,
        channels: dict[str, Channel],
        outbox: Outbox,
        metrics: Metrics,
        recall: TurnRecall | None = None,
        before_turn: Sequence[BeforeTurn] = (),
        context: ContextManager | None = None,
        media: MediaPreparer | None = None,
        session_start: SessionStart | None = None,
        notify: Notify | None = None,
        clock: Callable[[], float] = time.time,
    ):
        self.config = config
        self.store = store
        self.loop = loop
        self.accountant = accountant
        self.workspace = workspace
        self.tools = tools
        self.channels = channels
        self.outbox = outbox
        self.metrics = metrics
        self.recall = recall
        self.before_turn = tuple(before_turn)
        self.context = context
        self.media = media
        self.session_start = session_start
        self.notify = notify
        # Time of model calls (and so of prompt-cache expiry); a benchmark may simulate it.
        self.clock = clock

    async def _user_entry(self, job: TurnJob, session: SessionRow, recall: str | None) -> Entry:
        payload: Payload
        if job.prompt is not None:
            payload = InternalPrompt(job.prompt, PromptPurpose(job.kind))
        else:
            context: list[str] = []
            for msg in job.messages:
                context.extend(msg.context_lines)
            # Images were prepared when the message was accepted; voice notes are
            # transcribed and text files read once, here: the entry keeps the result, so a
            # resumed turn or a later request never redoes it.
            lines = [
                ChatLine(
                    message_id=m.message_id,
                    channel=m.channel,
                    user_id=m.user_id,
                    user_name=m.user_name,
                    text=m.text,
                    timestamp=m.timestamp or time.time(),
                    chat_title=m.chat_title,
                    media=await self.media.refs(m.attachments)
                    if self.media is not None and m.attachments
                    else (),
                )
                for m in job.messages
            ]
            payload = PersonTurn(lines, context, recall)
        return Entry(session.session_id, payload, turn_id=job.turn_id)

    async def _session(self, job: TurnJob) -> SessionRow:
        # A resumed turn continues in the session that holds it, even if /reset or
        # `krill reset` started a newer one meanwhile.
        session = await self.store.session_of_turn(job.turn_id) if job.resume else None
        if session is None and job.first is not None:
            session = await self.store.get_or_create_session(
                job.session_key, SessionOrigin.of(job.first)
            )
        elif session is None:  # internal turns (heartbeat) run in a session that exists
            session = await self.store.current_session(job.session_key)
        if session is None:
            raise LookupError(f"no session {job.session_key!r} for internal turn {job.turn_id}")
        return session

    async def run(self, job: TurnJob) -> TurnOutcome:
        with turn_context(job.turn_id, job.session_key):
            outcome = TurnOutcome()
            started = time.monotonic()
            try:
                await self._run(job, outcome)
            except StoreUnavailable as exc:
                await self._store_gave_up(job, outcome, exc)
            self._log_turn(job, outcome, time.monotonic() - started)
            return outcome

    def _log_turn(self, job: TurnJob, outcome: TurnOutcome, seconds: float) -> None:
        """One line per turn for operators: what it cost and how long it took, never what
        was said."""
        usage = outcome.usage
        cost = PriceList.of(self.config).cost(outcome.model, usage)
        log.info(
            "turn %s (%s) %s in %.1fs: session %s, model %s, %d call(s), tokens %d in "
            "(cache read %d, write %d), %d out, cost $%.4f",
            job.turn_id,
            job.kind,
            "failed" if outcome.error else "silent" if outcome.silent else "answered",
            seconds,
            job.session_key,
            outcome.model or "none",
            outcome.model_calls,
            usage.prompt_tokens,
            usage.cache_read_tokens,
            usage.cache_write_tokens,
            usage.output_tokens,
            cost,
        )

    async def _store_gave_up(
        self, job: TurnJob, outcome: TurnOutcome, exc: StoreUnavailable
    ) -> None:
        """The store would not take a write: its inbound rows stay unanswered (pending, or
        a resumable turn), so the next start answers them once; the person hears why now,
        unless the reply itself already went out."""
        log.error("turn %s in %s stopped: %s", job.turn_id, job.session_key, exc)
        self.metrics.errors.labels(type(exc).__name__).inc()
        self.metrics.turns.labels(job.kind, "error").inc()
        outcome.error = ModelError(str(exc))
        if outcome.delivered or job.prompt is not None or job.address is None:
            return
        if self.notify is not None:
            await self.notify(job.address, exc.user_message)

    def _timed(self, started: float, *, failed: bool) -> None:
        took = time.monotonic() - started
        self.metrics.recent_turns.record(time.time(), took, failed=failed)

    async def _run(self, job: TurnJob, outcome: TurnOutcome) -> None:
        started = time.monotonic()
        session = await self._session(job)
        channel = self.channels.get(job.address.channel) if job.address else None
        stream = ReplyStream(
            channel=channel,
            address=job.address,
            turn_id=job.turn_id,
            outbox=self.outbox,
            visible=job.prompt is None,
            typing_on_tools=session.is_direct,
            resumed=job.resume,
        )
        try:
            if job.prompt is None and not job.resume and self.session_start is not None:
                session, notice = await self.session_start.session_for(job, session)
                if notice:  # shown once, ahead of the reply, which keeps its own silent gate
                    await stream.on_text(notice)
                    stream.next_iteration()
            if job.prompt is None and not job.resume:
                await self._drop_retired_model(session, stream)
                for work in self.before_turn:
                    try:
                        await work.before_turn(job, session)
                    except Exception:  # housekeeping must never block a person's turn
                        log.exception("before-turn work failed for %s", job.session_key)
            if not job.resume:
                log.debug("turn %s: %s", job.kind, Content("\n".join(m.text for m in job.messages)))
                recall = (
                    await self.recall.recall(job, session)
                    if self.recall is not None and job.messages
                    else None
                )
                entry = await self._user_entry(job, session, recall)
                # Only a person's turn is activity: a reminder or heartbeat turn must not
                # hold off an idle reset, nor make the session due for another flush.
                await self.store.begin_turn(
                    [entry],
                    job.inbound_ids,
                    job.turn_id,
                    active_at=self.clock() if job.prompt is None else None,
                    address=job.address,
                )
            written = await self._replay_written_reply(job, session, stream)
            if written is None:
                loop_outcome = await self._converse(job, session, stream)
                outcome.model_calls = loop_outcome.model_calls
                outcome.usage, outcome.model = loop_outcome.usage, loop_outcome.answered_by
                written = loop_outcome.sources
            outcome.sources = reply_sources(written)
            text = stream.finish_text()
            log.debug("turn %s: reply %s", job.kind, Content(text))
            outcome.silent = not text or is_silent(text)
            outcome.text = "" if outcome.silent else text
            if not outcome.silent:
                await stream.deliver(outcome.text, outcome.sources)
                outcome.delivered = True
            await self.store.finish_turn(
                session.session_id, job.inbound_ids, InboundStatus.DONE, turns=1
            )
            self.metrics.turns.labels(job.kind, "silent" if outcome.silent else "ok").inc()
            self._timed(started, failed=False)
        except ModelError as exc:
            outcome.error = exc
            log.warning("turn %s in %s failed: %s", job.turn_id, job.session_key, exc)
            self.metrics.errors.labels(type(exc).__name__).inc()
            self.metrics.turns.labels(job.kind, "error").inc()
            self._timed(started, failed=True)
            await self.store.finish_turn(
                session.session_id, job.inbound_ids, InboundStatus.FAILED, errors=1
            )
            if job.prompt is None:
                await stream.deliver(_failure_reply(stream, exc))
                outcome.delivered = True
        except StoreUnavailable:
            raise  # not a failed turn: an unfinished one, for the next start
        except Exception as exc:
            # A bug, a store failure or a platform refusing the reply: never leave the message
            # "processing" (it would be retried at every restart) and tell the person if we can.
            outcome.error = ModelError(str(exc))
            log.exception("turn %s in %s failed", job.turn_id, job.session_key)
            self.metrics.errors.labels(type(exc).__name__).inc()
            self.metrics.turns.labels(job.kind, "error").inc()
            self._timed(started, failed=True)
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

    async def _drop_retired_model(self, session: SessionRow, stream: ReplyStream) -> None:
        """A /model choice the operator took out of agent.models: the session goes back to
        agent.model for good (the choice is cleared), and the person is told once, ahead of
        the reply. Requests use the fallback from the moment the choice is gone."""
        choice = session_model(self.config, session.chosen_model)
        if not choice.dropped:
            return
        log.warning(
            "session %s chose model %s, which agent.models no longer offers; it uses %s now",
            session.session_key,
            choice.dropped,
            choice.model,
        )
        await self.store.choose_model(session.session_id, "")
        session.chosen_model = ""
        await stream.on_text(MODEL_DROPPED_NOTE.format(dropped=choice.dropped, model=choice.model))
        stream.next_iteration()

    async def _replay_written_reply(
        self, job: TurnJob, session: SessionRow, stream: ReplyStream
    ) -> list[Source] | None:
        """A turn resumed after its reply was written: feed that text to the stream for
        delivery (the outbox keeps the rows it already has) instead of calling the model,
        and return the sources it cited; None when the model still has to answer."""
        if not job.resume:
            return None
        history = await self.store.load_history(
            session.session_id, max_user_turns=job.history_limit
        )
        if not _reply_written(history, job.turn_id):
            return None
        sources: list[Source] = []
        for entry in history:
            if entry.turn_id == job.turn_id and isinstance(entry.payload, AssistantReply):
                await stream.on_text(entry.payload.text)
                stream.next_iteration()
                sources += cited_sources(entry.payload.content)
        return sources

    async def _converse(
        self, job: TurnJob, session: SessionRow, stream: ReplyStream
    ) -> LoopOutcome:
        behalf = job.on_behalf
        if behalf is not None:
            policy, principal, name, admin = (
                behalf.policy, behalf.principal, behalf.name, behalf.admin
            )  # fmt: skip
        else:
            policy = policy_for_messages(self.config, job.messages)
            principal = job.first.principal if job.first else "system"
            name = job.first.user_name if job.first else ""
            admin = all_admins(job.messages, self.config.admin)
        context = ToolContext(
            session_key=job.session_key,
            session_id=session.session_id,
            principal=principal,
            principal_name=name,
            is_direct=session.is_direct,
            workspace=self.workspace.path,
            turn_id=job.turn_id,
            origin=session.origin,
            admin=admin,
            address=job.address,
        )
        context_manager = self.context

        async def recover(error: ContextOverflow, attempt: int) -> bool:
            assert context_manager is not None
            return await context_manager.recover_overflow(session, error, attempt)

        conversation = TranscriptConversation(
            store=self.store,
            accountant=self.accountant,
            session=session,
            turn_id=job.turn_id,
            timezone=self.config.agent.timezone,
            clock=self.clock,
            payer=payer_for(
                self.config,
                session_id=session.session_id,
                origin=session.origin,
                principal=job.first.principal if job.first else "",
                turn_id=job.turn_id,
            ),
            kind=job.cost_kind,
            history_limit=job.history_limit,
            prepare=self.context.prepare if self.context is not None else None,
        )
        exchange = Exchange(
            system=self.workspace.system_blocks(
                is_direct=session.is_direct, origin=session.origin, policy=policy
            ),
            tools=self.tools.definitions(policy=policy),
            policy=policy,
            context=context,
            max_tool_rounds=self.config.agent.max_tool_iterations,
            stream=stream,
            recover=recover if context_manager is not None else None,
            model=session_model(self.config, session.chosen_model).model,
            watch_cache=True,
            notice=self.config.agent.fallback_notice and job.prompt is None,
        )
        return await self.loop.run(conversation, exchange)


def _failure_reply(stream: ReplyStream, exc: ModelError) -> str:
    """What the person gets when a turn fails: the error, after whatever a streaming preview
    already showed of the reply, so the message they watched ends with a clear note instead
    of vanishing or being left half-finished."""
    shown = stream.finish_text() if stream.previewed else ""
    return f"{shown}\n\n⚠️ {exc.user_message}" if shown else exc.user_message


def _reply_written(history: list[Entry], turn_id: str) -> bool:
    """True when this turn already ended in a final assistant message (no tool calls)."""
    if not history:
        return False
    last = history[-1]
    return (
        last.turn_id == turn_id
        and isinstance(last.payload, AssistantReply)
        and not last.payload.calls_tools
        and last.payload.stop_reason != PAUSE_TURN
    )
