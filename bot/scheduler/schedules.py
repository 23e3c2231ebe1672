"""Scheduled jobs set up, listed, paused, resumed and cancelled: for the schedule_* tools,
/jobs, `krill schedules` and the console. What runs them when due is
bot/scheduler/schedule_timers.py, told of every change through `on_change`.

Who may do what: anyone allowed to talk to the bot sets up jobs in their own DM; in groups
and channels admins and `schedules.group_creators` do. A person sees the jobs of the
conversation they are in and changes the ones they set up (group creators and admins also
the others there); admins change any job from anywhere."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from bot.recurrence import Recurrence, RecurrenceError, parse_schedule
from bot.scheduler.when import describe_time
from bot.store.schedules import JobState, ScheduledJob
from bot.types import Address, ChatType, InboundMessage

if TYPE_CHECKING:
    from collections.abc import Callable

    from bot.config import Config
    from bot.scheduler.jobs import Clock
    from bot.store.base import Store

log = logging.getLogger(__name__)

Action = Literal["pause", "resume", "cancel"]
NEXT_RUNS_SHOWN = 3


class ScheduleRefused(ValueError):
    """What someone asked of a job that cannot be done; the message says why and what to do."""


@dataclass(frozen=True, slots=True)
class Actor:
    """Who asks, and where: `address` is the conversation they are in (None: nowhere,
    such as the operator's CLI or console, which act as admins)."""

    principal: str
    admin: bool
    address: Address | None
    direct: bool = False
    name: str = ""


# The operator on the host (`krill schedules`, the console): an admin who is in no chat.
OPERATOR = Actor(principal="operator", admin=True, address=None, name="the operator")


def same_conversation(job: ScheduledJob, address: Address | None) -> bool:
    """Whether `job` posts to the chat, thread or topic `address` is in."""
    if address is None:
        return False
    target = job.address
    return (target.channel, target.chat_id, target.thread_id) == (
        address.channel,
        address.chat_id,
        address.thread_id,
    )


class Schedules:
    def __init__(
        self,
        config: Config,
        store: Store,
        clock: Clock,
        *,
        on_change: Callable[[ScheduledJob], None] | None = None,
    ) -> None:
        self.config = config
        self.settings = config.schedules
        self.store = store
        self.clock = clock
        # This process's timers (None where nothing runs jobs: the CLI, whose changes the
        # service's periodic sync picks up).
        self.on_change = on_change
        self.timezone = config.agent.timezone

    # Setting up and changing jobs.

    def may_create_here(self, actor: Actor) -> bool:
        if actor.admin or actor.direct:
            return True
        wanted = actor.principal.strip().casefold()
        return any(entry.strip().casefold() == wanted for entry in self.settings.group_creators)

    def refusal(self, actor: Actor) -> str:
        return (
            "only admins and the people listed in schedules.group_creators may set up "
            "scheduled jobs in a group or channel; ask one of them, or set it up in a direct "
            f"message with me. An operator can allow you by adding {actor.principal!r} to "
            "schedules.group_creators in krill.toml"
        )

    async def create(
        self, actor: Actor, *, session_key: str, when: str, task: str, name: str
    ) -> ScheduledJob:
        if actor.address is None:
            raise ScheduleRefused("this conversation has no address to post a job's runs to yet")
        if not self.may_create_here(actor):
            raise ScheduleRefused(self.refusal(actor))
        try:
            recurrence = parse_schedule(when, self.timezone)
        except RecurrenceError as exc:
            raise ScheduleRefused(str(exc)) from None
        now = self.clock()
        minimum = self.settings.min_interval_minutes
        gap = recurrence.smallest_gap(now)
        if gap < minimum * 60:
            raise ScheduleRefused(
                f"that runs every {describe_gap(gap)} at the closest; the shortest interval "
                f"allowed is {minimum} minutes (schedules.min_interval_minutes)"
            )
        await self._check_caps(actor)
        address = actor.address
        # Runs post new messages in the conversation, not replies to the one that asked.
        target = Address(address.channel, address.chat_id, address.thread_id)
        job = await self.store.schedule_add(
            session_key=session_key,
            address=target,
            creator=actor.principal,
            creator_name=actor.name,
            name=name,
            task=task,
            cron=recurrence.cron,
            timezone=recurrence.timezone,
            next_run_at=recurrence.next_after(now),
            created_at=now,
        )
        log.info("scheduled job %d set up in %s: %s", job.id, session_key, recurrence.describe())
        self._changed(job)
        return job

    async def _check_caps(self, actor: Actor) -> None:
        assert actor.address is not None
        per_chat = self.settings.max_per_chat
        here = await self.store.schedules(
            channel=actor.address.channel, chat_id=actor.address.chat_id
        )
        if len(here) >= per_chat:
            raise ScheduleRefused(
                f"this chat already has {len(here)} scheduled jobs, counting its threads and "
                f"topics and paused ones (the limit, schedules.max_per_chat, is {per_chat}); "
                "cancel one first"
            )
        per_person = self.settings.max_per_person
        mine = await self.store.schedules(creator=actor.principal)
        if len(mine) >= per_person:
            raise ScheduleRefused(
                f"you already have {len(mine)} scheduled jobs, counting paused ones (the "
                f"limit, schedules.max_per_person, is {per_person}); cancel one first"
            )

    async def visible(self, actor: Actor, *, everywhere: bool = False) -> list[ScheduledJob]:
        """The jobs of the actor's conversation (every job with `everywhere`, which the
        caller allows admins only)."""
        every = await self.store.schedules()
        if everywhere:
            return every
        return [job for job in every if same_conversation(job, actor.address)]

    def may_change(self, actor: Actor, job: ScheduledJob) -> bool:
        if actor.admin:
            return True
        if not same_conversation(job, actor.address):
            return False
        return job.creator == actor.principal or (not actor.direct and self.may_create_here(actor))

    async def change(self, actor: Actor, job_id: int, action: Action) -> ScheduledJob:
        """Pause, resume or cancel a job the actor may change; the job as it now is."""
        job = await self.store.schedule_get(job_id)
        if job is None or job.state == JobState.CANCELLED or not self.may_change(actor, job):
            raise ScheduleRefused(
                f"no scheduled job #{job_id} you may change in this conversation; "
                "schedule_list shows them"
            )
        if action == "pause":
            done = await self.store.schedule_set_state(
                job_id,
                JobState.PAUSED,
                was=(JobState.ACTIVE,),
                reason=f"paused by {actor.name or actor.principal}",
            )
        elif action == "cancel":
            done = await self.store.schedule_set_state(
                job_id, JobState.CANCELLED, was=(JobState.ACTIVE, JobState.PAUSED)
            )
        else:
            recurrence = Recurrence(job.cron, job.timezone)
            done = await self.store.schedule_set_state(
                job_id,
                JobState.ACTIVE,
                was=(JobState.PAUSED,),
                next_run_at=recurrence.next_after(self.clock()),
            )
        if not done:
            state = {"pause": "paused", "resume": "active", "cancel": "cancelled"}[action]
            raise ScheduleRefused(f"scheduled job #{job_id} is already {state}")
        changed = await self.store.schedule_get(job_id)
        assert changed is not None
        log.info("scheduled job %d: %s by %s", job_id, action, actor.principal)
        self._changed(changed)
        return changed

    async def operate(self, job_id: int, action: Action) -> ScheduledJob:
        """Change any job as the operator."""
        return await self.change(OPERATOR, job_id, action)

    def _changed(self, job: ScheduledJob) -> None:
        if self.on_change is not None:
            self.on_change(job)

    # Words for people.

    def when(self, job: ScheduledJob, ts: float) -> str:
        return describe_time(ts, job.timezone)

    def describe(self, job: ScheduledJob) -> str:
        return Recurrence(job.cron, job.timezone).describe()

    def next_runs(self, job: ScheduledJob, count: int = NEXT_RUNS_SHOWN) -> list[str]:
        recurrence = Recurrence(job.cron, job.timezone)
        first = job.next_run_at
        return [self.when(job, first)] + [
            self.when(job, at) for at in recurrence.next_runs(first, count - 1)
        ]

    def summary(self, job: ScheduledJob) -> str:
        """One job in a few lines: id, name, schedule, state, next run, last outcome, cost."""
        head = f"#{job.id} “{job.name}” · {self.describe(job)}"
        if job.state == JobState.PAUSED:
            state = f"⏸ paused ({job.paused_reason})" if job.paused_reason else "⏸ paused"
        else:
            state = f"next: {self.when(job, job.next_run_at)}"
        lines = [head, f"  {state}"]
        if job.runs or job.last_outcome:
            last = f"  last: {job.last_outcome or '-'}"
            if job.last_run_at is not None:
                last += f" (for {self.when(job, job.last_run_at)})"
            lines.append(last)
        lines.append(f"  cost: ${job.cost_usd:.4f} over {job.runs} run(s){per_run(job)}")
        return "\n".join(lines)

    async def listing_for(self, msg: InboundMessage, *, admin: bool) -> str:
        """/jobs: the jobs of `msg`'s conversation, with their next runs and costs."""
        actor = Actor(
            principal=msg.principal,
            admin=admin,
            address=msg.address,
            direct=msg.chat_type == ChatType.DIRECT,
            name=msg.user_name,
        )
        jobs = await self.visible(actor)
        if not jobs:
            return (
                "No scheduled jobs in this chat. Ask me to set one up: “every weekday at 9:00, …”."
            )
        return "\n".join([f"Scheduled jobs here ({len(jobs)}):", *(self.summary(j) for j in jobs)])


def describe_gap(seconds: float) -> str:
    minutes = round(seconds / 60)
    return f"{minutes} minute(s)" if minutes < 120 else f"{minutes // 60} hour(s)"


def per_run(job: ScheduledJob) -> str:
    return f", ${job.cost_usd / job.runs:.4f} a run on average" if job.runs else ""
