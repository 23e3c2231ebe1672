"""The session lanes: typed work items and what runs them, one at a time per session key.

A person's messages (`MessageWork`) merge into one turn; a turn interrupted by a restart
(`ResumeWork`) and anything else that must not overlap a turn (`CallWork`: commands, memory
flushes, compaction, heartbeats) run alone. `Lanes.run_in_lane` is the one way to run code
in a session's lane, waiting for it or not.

Each batch runs under the session's lease (`bot/gateway/leases.py`): the in-process queue
orders work and merges messages, the lease makes one turn at a time per session key hold
across processes too. Under the lease a lane answers the session's unanswered messages in
the order they were accepted, whichever process (replica) accepted them, so messages of
one chat that reached different replicas are answered once each and in order.

With `agent.sender_turns_per_minute`, a person's messages wait before a turn while any of
their senders has started that many turns in the current minute (counted in the store, so
across replicas), and the waiting messages then go into that one turn: spam costs one model
call per allowance, never one per message.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable, Container
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from bot.agent.job import TurnJob, new_turn_id
from bot.gateway.budgets import TURN_WINDOW_SECONDS
from bot.sessions.limits import history_limit_for
from bot.sessions.queue import SessionQueue
from bot.store.base import InboundRow, InboundStatus
from bot.store.budgets import BudgetName, SenderBudget
from bot.types import InboundMessage, SessionOrigin

if TYPE_CHECKING:
    from bot.agent.runner import AgentRunner
    from bot.config import Config
    from bot.gateway.leases import SessionLeases
    from bot.metrics import Metrics
    from bot.sessions.slots import TurnSlots
    from bot.store.base import InboundStore
    from bot.store.shared_state import SharedStateStore

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class MessageWork:
    """An accepted message waiting for its turn; merges with the messages queued after it."""

    inbound_id: int
    message: InboundMessage


@dataclass(slots=True)
class ResumeWork:
    """A turn that was running when the process stopped, with every message it answers."""

    turn_id: str
    inbound_ids: list[int] = field(default_factory=list)
    messages: list[InboundMessage] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class CallWork:
    """Code that must run in the lane; `done` gets its result, or None when it was dropped,
    stopped or failed (the failure is logged)."""

    run: Callable[[], Awaitable[Any]]
    done: asyncio.Future[Any]


Work = MessageWork | ResumeWork | CallWork


def inbound_ids(items: list[Work]) -> list[int]:
    """The inbound rows a batch of work answers."""
    ids: list[int] = []
    for item in items:
        if isinstance(item, MessageWork):
            ids.append(item.inbound_id)
        elif isinstance(item, ResumeWork):
            ids.extend(item.inbound_ids)
    return ids


class Lanes:
    """Owns the per-session queue and runs what it hands over."""

    def __init__(
        self,
        *,
        config: Config,
        runner: AgentRunner,
        leases: SessionLeases,
        inbound: InboundStore,
        budgets: SharedStateStore,
        channels: Container[str],
        metrics: Metrics,
        slots: TurnSlots,
        turn_window: float = TURN_WINDOW_SECONDS,
    ) -> None:
        self.config = config
        self.runner = runner
        self.leases = leases
        self.inbound = inbound
        # The channels this process runs: of other processes' messages it answers only theirs.
        self.channels = channels
        per_minute = config.agent.sender_turns_per_minute
        self.sender_turns = (
            SenderBudget(budgets, BudgetName.TURNS, limit=per_minute, window=turn_window)
            if per_minute > 0
            else None
        )
        self.queue: SessionQueue[Work] = SessionQueue(
            self._run_batch,
            mergeable=lambda item: isinstance(item, MessageWork),
            slots=slots,
            batch_cap=config.agent.queue_cap,
            gate=self._hold_for_senders if self.sender_turns is not None else None,
        )
        # Read at scrape time, so the gauge cannot drift from the queue it describes.
        metrics.queue_depth.set_function(self.queue.total_depth)

    def submit(self, key: str, work: Work) -> None:
        self.queue.submit(key, work)

    def run_in_lane(self, key: str, run: Callable[[], Awaitable[T]]) -> asyncio.Future[T | None]:
        """Queue `run` behind the work already in `key`'s lane. Await the returned future to
        wait for its result (None when /stop dropped it or it failed), or ignore it."""
        done: asyncio.Future[T | None] = asyncio.get_running_loop().create_future()
        self.submit(key, CallWork(run, done))
        return done

    def busy(self, key: str) -> bool:
        """Something is running or waiting in `key`'s lane."""
        return self.queue.busy(key) or self.queue.depth(key) > 0

    def stop(self, key: str) -> tuple[list[Work], list[Work]]:
        """Cancel `key`'s running work and drop what waits: (the running, the dropped)."""
        running, dropped = self.queue.stop(key)
        _settle(dropped)
        return running, dropped

    async def wait_idle(self, key: str | None = None) -> None:
        await self.queue.wait_idle(key)

    async def close(self) -> None:
        await self.queue.close()

    def _history_limit(self, msg: InboundMessage) -> int:
        return history_limit_for(self.config, SessionOrigin.of(msg))

    async def _hold_for_senders(self, key: str, items: list[Work]) -> None:
        """Before a turn for people's messages: wait while a sender is over their turn
        budget, then take every message waiting in the lane into this turn. A sender's last
        turn of the window takes them all too, since what it left behind would wait."""
        budget = self.sender_turns
        if budget is None or not isinstance(items[0], MessageWork):
            return
        senders = _senders(items)  # never empty: items[0] is a person's message
        standing = await budget.standing(senders)
        if standing.delay > 0:
            log.info(
                "%s: %s over the turn budget; next turn in %.0fs", key, senders, standing.delay
            )
            await asyncio.sleep(standing.delay)
        if standing.delay > 0 or standing.fewest_left <= 1:
            items.extend(self.queue.take_waiting(key))
        await budget.record(_senders(items))

    async def _run_batch(self, key: str, items: list[Work]) -> None:
        try:
            async with self.leases.hold(key):
                first = items[0]
                if isinstance(first, CallWork):
                    await _call(key, first)
                else:
                    await self._answer(key, items)
        finally:
            _settle(items)  # /stop cancelled the batch before its calls finished

    async def _answer(self, key: str, items: list[Work]) -> None:
        """Under the lease: answer the session's unanswered messages oldest first, up to the
        newest of `items`, whichever process took them in. Read under the lease every time,
        so what another process answered (before this claim, or while this lane waited for
        it) is not answered again, and no message overtakes an older one. Newer messages
        are left to the lanes that queued them, so this process's queue keeps its order."""
        mine = set(inbound_ids(items))
        if not mine:
            return
        newest = max(mine)
        known: dict[int, InboundMessage] = {}
        for item in items:
            if isinstance(item, MessageWork):
                known[item.inbound_id] = item.message
            elif isinstance(item, ResumeWork):
                known.update(zip(item.inbound_ids, item.messages, strict=True))
        # A batch the sender budget grew past the queue cap stays one turn.
        cap = max(self.config.agent.queue_cap, len(known))
        tried: set[int] = set()
        while mine - tried:
            rows = [
                row
                for row in await self.inbound.unfinished_in(key)
                if row.id not in tried and (row.id in mine or row.channel in self.channels)
            ]
            if not mine.intersection(row.id for row in rows):
                break
            group = next_group(rows, cap, newest)
            tried.update(row.id for row in group)
            job = await self._turn_for(key, group, known)
            if job is None:
                continue
            # What the turn answers for other processes counts as running here, for /stop.
            items.extend(
                MessageWork(i, m)
                for i, m in zip(job.inbound_ids, job.messages, strict=True)
                if i not in mine
            )
            await self.runner.run(job)
        elsewhere = sorted(mine - tried)
        if elsewhere:
            log.info("inbound %s was answered by another process", elsewhere)

    async def _turn_for(
        self, key: str, group: list[InboundRow], known: dict[int, InboundMessage]
    ) -> TurnJob | None:
        """The turn answering `group` (None if no message of it could be read)."""
        messages: list[InboundMessage] = []
        ids: list[int] = []
        for row in group:
            msg = known.get(row.id)
            if msg is None:
                msg = await readable(self.inbound, row)
            if msg is not None:
                messages.append(msg)
                ids.append(row.id)
        if not ids:
            return None
        head = group[0]
        resume = _interrupted(head)
        turn_id = head.turn_id if resume and head.turn_id else new_turn_id()
        job = TurnJob(key, turn_id, messages, ids, resume=resume)
        job.history_limit = self._history_limit(messages[0])
        return job


def next_group(rows: list[InboundRow], cap: int, newest: int) -> list[InboundRow]:
    """The oldest unanswered rows (`rows` is in id order) that go into one turn: an
    interrupted turn's rows, to be resumed; else the waiting messages up to the next
    interrupted turn or `newest`, `cap` at most."""
    head = rows[0]
    if _interrupted(head):
        return [row for row in rows if row.turn_id == head.turn_id]
    waiting = itertools.takewhile(lambda row: not _interrupted(row) and row.id <= newest, rows)
    return list(itertools.islice(waiting, cap))


def _interrupted(row: InboundRow) -> bool:
    return row.status == InboundStatus.PROCESSING and row.turn_id is not None


async def readable(inbound: InboundStore, row: InboundRow) -> InboundMessage | None:
    """`row`'s message; None (and the row marked failed) when its payload does not parse."""
    try:
        return InboundMessage.from_json(row.payload)
    except (ValueError, TypeError, KeyError):
        log.error("inbound %d has an unreadable payload; marking it failed", row.id)
        await inbound.set_inbound_status([row.id], InboundStatus.FAILED)
        return None


def _senders(items: list[Work]) -> set[str]:
    return {item.message.principal for item in items if isinstance(item, MessageWork)}


async def _call(key: str, work: CallWork) -> None:
    try:
        result = await work.run()
    except Exception:
        log.exception("work in the lane of %s failed", key)
        result = None
    if not work.done.done():
        work.done.set_result(result)


def _settle(items: list[Work]) -> None:
    for item in items:
        if isinstance(item, CallWork) and not item.done.done():
            item.done.set_result(None)
