"""Button presses, admitted like messages: a press is checked against its stored choice (the
person it was for or an admin, before it expired, not answered yet), recorded in the store
before the platform is acknowledged, and acted on in the session's lane by its kind's
action; the message is then edited to show the outcome, without its buttons.

A press is durable work. Recording it is a conditional move from pending to pressed, so of
two presses (or two deliveries of one, to two replicas) one counts. A recorded press whose
action has not finished is acted on after a restart (`recover`), or by any replica once it
has waited longer than a session lease (`sweep`); the action re-reads the choice under the
session's lease and stops if it is done, so it runs once. The sweep also expires pending
choices nobody answered: their expiry is acted on like a press of no option.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Protocol

from bot.buttons.choices import (
    TIMED_OUT_LINE,
    ChoiceAction,
    Outcome,
    answered_text,
    parse_button_data,
    press_answer,
    press_verdict,
)
from bot.channel_contract import PressAnswer, PressResult
from bot.sessions.access import is_admin
from bot.store.choices import TIMED_OUT, Choice, ChoiceKind, ChoiceStatus, ChoiceStore

if TYPE_CHECKING:
    from bot.config import Config
    from bot.gateway.lanes import Lanes
    from bot.metrics import Metrics
    from bot.outbox.writer import Outbox
    from bot.types import ButtonPress

log = logging.getLogger(__name__)

# How often pending choices are checked for expiry (and pressed ones left behind).
SWEEP_SECONDS = 5.0
SWEEP_JOB = "button-choices"


class PressStore(ChoiceStore, Protocol):
    async def outbox_sent_id(self, turn_id: str) -> str | None:
        """The platform id of the last message of reply `turn_id` that went out."""
        ...


class Timer(Protocol):
    """The scheduler's timer (`bot.scheduler.jobs.Jobs`)."""

    def every(
        self,
        job_id: str,
        func: Callable[[], Awaitable[None]],
        interval: float,
        *,
        first: float,
        misfire_grace: int | None,
    ) -> None: ...
    async def guarded(self, job_id: str, body: Callable[[], Awaitable[None]]) -> None: ...


class Presses:
    def __init__(
        self,
        *,
        config: Config,
        store: PressStore,
        lanes: Lanes,
        outbox: Outbox,
        actions: Mapping[ChoiceKind, ChoiceAction],
        metrics: Metrics,
        timer: Timer,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.store = store
        self.lanes = lanes
        self.outbox = outbox
        self.actions = actions
        self.metrics = metrics
        self.timer = timer
        self.clock = clock
        # A pressed choice waits this long for the process that recorded it before another
        # one acts on it.
        self.stale_after = config.storage.lease_seconds
        self._queued: set[str] = set()  # choices whose action waits in a lane here

    async def press(self, press: ButtonPress) -> PressAnswer:
        parsed = parse_button_data(press.data)
        choice_id, option = parsed if parsed is not None else ("", -1)
        choice = await self.store.choice_get(choice_id) if choice_id else None
        admin = is_admin(press.principal, self.config.admin)
        now = self.clock()
        result = press_verdict(choice, press, option, now=now, admin=admin)
        if result is PressResult.DONE and choice is not None:
            if choice.status is ChoiceStatus.PENDING and not await self.store.choice_press(
                choice.id,
                option=option,
                by=press.principal,
                name=press.user_name,
                press_id=press.press_id,
                message_id=press.message_id,
                at=now,
            ):
                # Another press (or the expiry) came first: say what it was.
                choice = await self.store.choice_get(choice_id)
                result = press_verdict(choice, press, option, now=now, admin=admin)
            if result is PressResult.DONE and choice is not None:
                self._queue(choice)
        self.metrics.presses.labels(press.channel, result).inc()
        log.info("button press of %s on choice %s: %s", press.principal, choice_id or "?", result)
        return press_answer(result, choice, option)

    async def start(self) -> None:
        """`krill run` only: act on what the last run left, then sweep now and then."""
        await self.recover()
        self.timer.every(
            SWEEP_JOB,
            self._sweep_job,
            SWEEP_SECONDS,
            first=self.clock() + SWEEP_SECONDS,
            misfire_grace=int(SWEEP_SECONDS),
        )

    async def _sweep_job(self) -> None:
        await self.timer.guarded(SWEEP_JOB, self.sweep)

    async def recover(self) -> int:
        """Queue the recorded presses whose action had not finished before the last stop."""
        pressed = [
            c
            for c in await self.store.choices_unfinished(expired_by=float("-inf"))
            if c.status is ChoiceStatus.PRESSED
        ]
        for choice in pressed:
            self._queue(choice)
        if pressed:
            log.info("acting on %d button press(es) recorded before the last stop", len(pressed))
        return len(pressed)

    async def sweep(self) -> None:
        """Expire pending choices nobody answered in time, and act on presses another
        process recorded but has not acted on for longer than a lease."""
        now = self.clock()
        for choice in await self.store.choices_unfinished(expired_by=now):
            if choice.status is ChoiceStatus.PENDING:
                if await self.store.choice_press(
                    choice.id, option=TIMED_OUT, by="", name="", press_id="", message_id="", at=now
                ):
                    log.info("choice %s expired unanswered", choice.id)
                    self._queue(choice)
            elif (choice.pressed_at or now) <= now - self.stale_after:
                self._queue(choice)

    def _queue(self, choice: Choice) -> None:
        if choice.id in self._queued:
            return
        self._queued.add(choice.id)
        done = self.lanes.run_in_lane(choice.session_key, lambda: self._act(choice.id))
        done.add_done_callback(lambda _: self._queued.discard(choice.id))

    async def _act(self, choice_id: str) -> None:
        """In the session's lane: run the choice's action once, show its outcome, and
        record that it is done."""
        choice = await self.store.choice_get(choice_id)
        if choice is None or choice.status is not ChoiceStatus.PRESSED:
            return  # acted on already, here or by another process
        action = self.actions.get(choice.kind)
        if action is not None:
            outcome = await action.act(choice)
        else:
            log.warning("no action for %s choices; %s is only closed", choice.kind, choice.id)
            outcome = Outcome(TIMED_OUT_LINE)
        await self._show(choice, outcome)
        await self.store.choice_finish(choice.id, outcome.line, at=self.clock())

    async def _show(self, choice: Choice, outcome: Outcome) -> None:
        """Edit the choice's message: its text and the outcome, and no buttons."""
        target = choice.message_id or await self.store.outbox_sent_id(choice.reply_id)
        if not target:
            log.info("choice %s: its message was never sent; nothing to edit", choice.id)
            return
        await self.outbox.put(
            choice.address,
            f"{choice.reply_id}/answered",
            [answered_text(choice, outcome)],
            edit_of=target,
            buttons=(),
        )
