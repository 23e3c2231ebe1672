"""The session lanes: typed work items and what runs them, one at a time per session key.

A person's messages (`MessageWork`) merge into one turn; a turn interrupted by a restart
(`ResumeWork`) and anything else that must not overlap a turn (`CallWork`: commands, memory
flushes, compaction, heartbeats) run alone. `Lanes.run_in_lane` is the one way to run code
in a session's lane, waiting for it or not.

Each batch runs under the session's lease (`bot/gateway/leases.py`): the in-process queue
orders work and merges messages, the lease makes one turn at a time per session key hold
across processes too.

With `agent.sender_turns_per_minute`, a person's messages wait before a turn while any of
their senders has started that many turns in the current minute (counted in the store, so
across replicas), and the waiting messages then go into that one turn: spam costs one model
call per allowance, never one per message.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from bot.agent.runner import TurnJob, new_turn_id
from bot.gateway.budgets import TURN_WINDOW_SECONDS
from bot.sessions.limits import history_limit_for
from bot.sessions.queue import SessionQueue
from bot.store.budgets import BudgetName, SenderBudget
from bot.types import InboundMessage, SessionOrigin

if TYPE_CHECKING:
    from bot.agent.runner import AgentRunner
    from bot.config import Config
    from bot.gateway.leases import SessionLeases
    from bot.metrics import Metrics
    from bot.store.base import InboundStore, SharedStateStore

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
        metrics: Metrics,
        turn_window: float = TURN_WINDOW_SECONDS,
    ) -> None:
        self.config = config
        self.runner = runner
        self.leases = leases
        self.inbound = inbound
        per_minute = config.agent.sender_turns_per_minute
        self.sender_turns = (
            SenderBudget(budgets, BudgetName.TURNS, limit=per_minute, window=turn_window)
            if per_minute > 0
            else None
        )
        self.queue: SessionQueue[Work] = SessionQueue(
            self._run_batch,
            mergeable=lambda item: isinstance(item, MessageWork),
            max_concurrent=config.agent.max_concurrent_turns,
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
        senders = _senders(items)
        delay = await budget.wait(senders)
        if delay > 0:
            log.info("%s: %s over the turn budget; next turn in %.0fs", key, senders, delay)
            await asyncio.sleep(delay)
        if delay > 0 or any([await budget.left(s) <= 1 for s in senders]):
            items.extend(self.queue.take_waiting(key))
        await budget.record(_senders(items))

    async def _run_batch(self, key: str, items: list[Work]) -> None:
        try:
            async with self.leases.hold(key):
                # Checked under the lease every time: another process may have answered some
                # of these rows, and "we had to wait for its lease" would miss a turn it
                # finished just before this claim.
                todo = await self._still_unanswered(items)
                if todo:
                    await self._run_leased(key, todo)
        finally:
            _settle(items)  # /stop cancelled the batch before its calls finished

    async def _still_unanswered(self, items: list[Work]) -> list[Work]:
        open_ids = await self.inbound.unfinished_among(inbound_ids(items))
        todo: list[Work] = []
        for item in items:
            if isinstance(item, MessageWork) and item.inbound_id not in open_ids:
                log.info("inbound %d was answered by another process", item.inbound_id)
            elif isinstance(item, ResumeWork) and not open_ids.intersection(item.inbound_ids):
                log.info("turn %s was finished by another process", item.turn_id)
            else:
                todo.append(item)
        return todo

    async def _run_leased(self, key: str, items: list[Work]) -> None:
        first = items[0]
        if isinstance(first, CallWork):
            await _call(key, first)
            return
        if isinstance(first, ResumeWork):
            job = TurnJob(key, first.turn_id, first.messages, first.inbound_ids, resume=True)
        else:
            messages = [item.message for item in items if isinstance(item, MessageWork)]
            job = TurnJob(key, new_turn_id(), messages, inbound_ids(items))
        if job.first is not None:
            job.history_limit = self._history_limit(job.first)
        await self.runner.run(job)


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
