"""The core as channel adapters meet it: `accept` an inbound message, decide what it is
(duplicate, refused, command, buffered group chatter, or a message for the agent), record it
durably, and queue it on its session's lane.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from bot.agent.runner import AgentRunner, TurnJob, new_turn_id
from bot.channel_contract import AcceptResult
from bot.commands import HANDLERS, LANE_COMMANDS, REFUSAL, authorized, parse_command
from bot.config import ChannelPolicyConfig, Config
from bot.inbound import sanitize_inbound
from bot.sessions import access
from bot.sessions.keys import session_key
from bot.sessions.limits import requires_mention, resolve_history_limit
from bot.sessions.queue import SessionQueue, WorkItem
from bot.sessions.throttle import ReplyBudget
from bot.store.base import (
    BufferedLine,
    InboundRow,
    InboundStatus,
    Pairing,
    PairingStatus,
    SessionRow,
)
from bot.types import Address, ChatType, InboundMessage, SessionOrigin

if TYPE_CHECKING:
    from bot.agent.model import ModelClient
    from bot.channel_contract import Channel
    from bot.metrics import Metrics
    from bot.store.base import Store

log = logging.getLogger(__name__)

DM_REFUSAL = "Sorry, this assistant is private and you are not on its list of allowed users."
PAIRING_REPLY = (
    "Hi! This assistant needs the owner's approval first. Your pairing code is {code} "
    "(valid for 1 hour). Ask the owner to run: krill pairing approve {channel} {code}"
)
PAIRING_FULL = "Too many people are waiting for approval right now. Please try again later."


def _merge_buffer(payload: str, lines: list[BufferedLine]) -> str:
    data = json.loads(payload)
    data["context_lines"] = [f"{line.sender}: {line.text}" for line in lines] + data.get(
        "context_lines", []
    )
    return json.dumps(data, ensure_ascii=False)


class Core:
    """Implements `bot.channel_contract.Gateway` and owns the per-session queue."""

    def __init__(
        self,
        *,
        config: Config,
        store: Store,
        model: ModelClient,
        runner: AgentRunner,
        channels: dict[str, Channel],
        metrics: Metrics,
    ):
        self.config = config
        self.store = store
        self.model = model
        self.runner = runner
        self.channels = channels
        self.metrics = metrics
        self.queue = SessionQueue(
            self._run_batch,
            max_concurrent=config.agent.max_concurrent_turns,
            batch_cap=config.agent.queue_cap,
        )
        self.bot_usernames: dict[str, str] = {}  # channel -> bot username, for /cmd@bot
        # Hooks later stages fill: compaction, memory flush before reset, /status lines.
        self.compactor: Callable[[str, str], Awaitable[str]] | None = None  # (key, focus)
        self.before_reset: Callable[[str], Awaitable[None]] | None = None  # (key)
        self.status_lines: list = []
        # Refusals and pairing codes each sender gets, so DM spam cannot make Krill spam back.
        self.refusal_replies = ReplyBudget()

    # --- policy lookups -------------------------------------------------------------------

    def policy_for(self, channel: str) -> ChannelPolicyConfig | None:
        policy = getattr(self.config, channel, None)
        return policy if isinstance(policy, ChannelPolicyConfig) else None

    def is_admin(self, msg: InboundMessage) -> bool:
        return access.is_admin(msg.principal, self.config.admin.users)

    def status_extras(self, key: str) -> list[str]:
        return [line for fn in self.status_lines if (line := fn(key))]

    # --- accepting messages ---------------------------------------------------------------

    async def accept(self, msg: InboundMessage) -> str:
        result = await self._accept(sanitize_inbound(msg))
        self.metrics.inbound_results.labels(msg.channel, result).inc()
        return result

    async def _accept(self, msg: InboundMessage) -> str:
        key = session_key(msg, self.config.session)
        policy = self.policy_for(msg.channel)
        admin = self.is_admin(msg)
        paired = False
        if policy and policy.dm_policy == "pairing" and msg.chat_type == ChatType.DIRECT:
            pairing = await self.store.pairing_get(msg.channel, msg.user_id)
            paired = pairing is not None and pairing.status == PairingStatus.APPROVED
        decision = access.check_access(msg, policy, is_admin=admin, is_paired=paired)
        if not decision.allowed:
            return await self._refuse(msg, key, decision)

        command = parse_command(msg.text, self.bot_usernames.get(msg.channel, ""))
        if command is not None:
            if not await self.store.mark_seen(
                msg.channel, msg.message_id, key, InboundStatus.COMMAND
            ):
                return AcceptResult.DUPLICATE
            if not authorized(command, msg, admin=admin):
                log.info("refused /%s from %s in %s", command.name, msg.principal, key)
                await self.send_text(msg.address, REFUSAL.format(name=command.name))
            elif command.name in LANE_COMMANDS:
                # Queued behind the running turn, in order with later messages; the adapter
                # (e.g. a poller handling updates one by one) is not held up meanwhile.
                handler = HANDLERS[command.name]
                self._command_in_lane(key, msg, lambda: handler(self, command, msg, key))
            else:
                await self.send_text(
                    msg.address, await HANDLERS[command.name](self, command, msg, key)
                )
            return AcceptResult.COMMAND

        is_group = msg.chat_type != ChatType.DIRECT
        if is_group and requires_mention(policy, msg.chat_id) and not msg.mentioned:
            line = None
            if msg.text.strip():
                line = BufferedLine(msg.user_name or msg.user_id, msg.text, time.time())
            limit = policy.group_buffer_limit if policy is not None else 0
            if not await self.store.buffer_message(
                msg.channel, msg.message_id, key, line, limit=limit
            ):
                return AcceptResult.DUPLICATE
            return AcceptResult.BUFFERED

        inbound_id, _lines = await self.store.accept_inbound(
            msg.channel,
            msg.message_id,
            key,
            msg.to_json(),
            take_buffer=is_group,
            merge=_merge_buffer,
            buffer_key=await self._buffer_key(msg, key),
        )
        if inbound_id is None:
            return AcceptResult.DUPLICATE
        if _lines:
            msg.context_lines = [f"{x.sender}: {x.text}" for x in _lines] + msg.context_lines
        self.metrics.messages_in.labels(msg.channel).inc()
        self.queue.submit(key, WorkItem("message", (inbound_id, msg)))
        self.metrics.queue_depth.set(self.queue.total_depth())
        return AcceptResult.ACCEPTED

    async def _buffer_key(self, msg: InboundMessage, key: str) -> str:
        """Whose buffered chatter a message takes: its own session's, except that a new
        channel thread (e.g. a Slack thread opened by a mention) starts with the chatter of
        the channel it was opened from, which is where unmentioned messages are kept."""
        if msg.chat_type != ChatType.CHANNEL or not msg.thread_id:
            return key
        if await self.session_exists(msg):
            return key
        return session_key(dataclasses.replace(msg, thread_id=None), self.config.session)

    async def _refuse(self, msg: InboundMessage, key: str, decision: access.AccessDecision) -> str:
        if not await self.store.mark_seen(msg.channel, msg.message_id, key, InboundStatus.REFUSED):
            return AcceptResult.DUPLICATE
        log.info("refused %s in %s: %s", msg.principal, key, decision.reason)
        if decision.action == "ignore":
            return AcceptResult.IGNORED
        if not self.refusal_replies.take(msg.principal):
            log.info("not answering %s: its replies to refused messages are used up", msg.principal)
            return AcceptResult.REFUSED
        if decision.action == "pair":
            await self.send_text(msg.address, await self._pairing_reply(msg))
        elif msg.chat_type == ChatType.DIRECT:
            await self.send_text(msg.address, DM_REFUSAL)
        return AcceptResult.REFUSED

    async def _pairing_reply(self, msg: InboundMessage) -> str:
        now = time.time()
        existing = await self.store.pairing_get(msg.channel, msg.user_id)
        if existing and now - existing.created_at < access.PAIRING_TTL_SECONDS:
            code = existing.code
        else:
            pending = [
                p
                for p in await self.store.pairing_pending(msg.channel)
                if now - p.created_at < access.PAIRING_TTL_SECONDS
            ]
            if len(pending) >= access.MAX_PENDING_PAIRINGS:
                return PAIRING_FULL
            code = access.new_pairing_code()
            await self.store.pairing_put(
                Pairing(msg.channel, msg.user_id, code, PairingStatus.PENDING, now, msg.user_name)
            )
        return PAIRING_REPLY.format(code=code, channel=msg.channel)

    async def send_text(self, address: Address, text: str) -> None:
        """Send a reply that is not a model turn (commands, refusals)."""
        from bot.types import OutboundMessage

        channel = self.channels.get(address.channel)
        if channel is None:
            log.warning("no channel %r to send a reply to", address.channel)
            return
        for index, chunk in enumerate(channel.render(text)):
            try:
                await channel.deliver(OutboundMessage(address, chunk, "", index))
            except Exception:
                log.exception("could not send a reply on %s", address.channel)
                return

    # --- running turns --------------------------------------------------------------------

    def _history_limit(self, msg: InboundMessage) -> int:
        return resolve_history_limit(
            self.policy_for(msg.channel), msg.chat_type, msg.chat_id, msg.user_id
        )

    async def _run_batch(self, key: str, items: list[WorkItem]) -> None:
        self.metrics.queue_depth.set(self.queue.total_depth())
        first = items[0]
        if first.kind == "resume":
            turn_id, ids, messages = first.data
            job = TurnJob(key, turn_id, messages, ids, resume=True)
        elif first.kind == "message":
            ids = [item.data[0] for item in items]
            messages = [item.data[1] for item in items]
            job = TurnJob(key, new_turn_id(), messages, ids)
        elif first.kind == "call":
            await first.data()
            return
        else:
            raise ValueError(f"unknown work item kind {first.kind!r}")
        if job.first is not None:
            job.history_limit = self._history_limit(job.first)
        try:
            await self.runner.run(job)
        finally:
            self.metrics.queue_depth.set(self.queue.total_depth() - len(items))

    async def recover(self, rows: list[InboundRow] | None = None) -> int:
        """Queue every accepted message that was not answered before the last stop: `rows`
        as read from the store before this process began accepting, else read now."""
        if rows is None:
            rows = await self.store.unfinished_inbound()
        resumed: dict[str, tuple[str, list[int], list[InboundMessage]]] = {}
        count = 0
        for row in rows:
            if row.channel not in self.channels:
                continue  # another process (e.g. `krill run`) owns that channel
            try:
                msg = InboundMessage.from_json(row.payload)
            except (ValueError, TypeError, KeyError):
                log.error("inbound %d has an unreadable payload; marking it failed", row.id)
                await self.store.set_inbound_status([row.id], InboundStatus.FAILED)
                continue
            count += 1
            if row.status == InboundStatus.PROCESSING and row.turn_id:
                turn = resumed.setdefault(row.turn_id, (row.turn_id, [], []))
                if not turn[1]:
                    self.queue.submit(row.session_key, WorkItem("resume", turn))
                turn[1].append(row.id)
                turn[2].append(msg)
            else:
                self.queue.submit(row.session_key, WorkItem("message", (row.id, msg)))
        if count:
            log.info("recovering %d accepted message(s) that were not answered", count)
        return count

    # --- session commands -----------------------------------------------------------------

    async def reset_session(self, key: str, origin: SessionOrigin, *, reason: str) -> SessionRow:
        if self.before_reset is not None:
            try:
                await self.before_reset(key)
            except Exception:
                log.exception("pre-reset hook failed for %s; resetting anyway", key)
        return await self.store.start_new_session(key, origin, reason)

    async def stop_session(self, key: str) -> int:
        running, waiting = self.queue.stop(key)
        dropped = [item.data[0] for item in waiting if item.kind == "message"]
        stopped = [item.data[0] for item in running if item.kind == "message"]
        stopped += [i for item in running if item.kind == "resume" for i in item.data[1]]
        await self.store.set_inbound_status(stopped + dropped, InboundStatus.CANCELLED)
        return len(dropped)

    async def session_exists(self, msg: InboundMessage) -> bool:
        """Whether `msg`'s session has any history yet (e.g. to seed a new Slack thread)."""
        session = await self.store.current_session(session_key(msg, self.config.session))
        return session is not None and session.turns > 0

    async def wait_idle(self, msg: InboundMessage) -> None:
        await self.queue.wait_idle(session_key(msg, self.config.session))

    def _command_in_lane(
        self, key: str, msg: InboundMessage, work: Callable[[], Awaitable[str]]
    ) -> None:
        async def run() -> None:
            try:
                reply = await work()
            except Exception as exc:
                log.exception("/command in %s failed", key)
                reply = f"Sorry, that failed: {type(exc).__name__}."
            await self.send_text(msg.address, reply)

        self.queue.submit(key, WorkItem("call", run))

    async def compact_now(self, key: str, focus: str) -> str:
        """Compact `key`'s history; the caller holds the session's lane."""
        if self.compactor is None:
            return "Compaction is not available in this build."
        try:
            return await self.compactor(key, focus)
        except Exception as exc:
            log.exception("compaction of %s failed", key)
            return f"Compaction failed: {exc}"

    async def compact_session(self, key: str, focus: str) -> str:
        """Compact `key`'s history from outside its lane (e.g. the scheduler) and wait."""
        result = ["Compaction was stopped before it ran."]

        async def run() -> None:
            result[0] = await self.compact_now(key, focus)

        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.queue.submit(key, WorkItem("call", run, done))
        await done  # settled even when /stop drops or cancels the work
        return result[0]

    async def close(self) -> None:
        await self.queue.close()
