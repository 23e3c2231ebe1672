"""The timers that run scheduled jobs: one per active job in every process, at the due time
its row holds, built at start-up and brought in line with the store every
`storage.lease_seconds` (`sync`), so a job set up, resumed, paused or cancelled in another
replica or with `krill schedules` is picked up without a restart.

A timer only wakes the job up: the run happens in the job's session lane (under the
session's lease across replicas) only while the row still holds that due time, and
recording the run moves the row on, so each due run happens in one process. A job whose
due time passed while no process ran (downtime) fires a few seconds after start-up, once
for all it missed (bot/scheduler/schedule_runs.py)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from bot.scheduler.jobs import STARTUP_DELAY_SECONDS
from bot.scheduler.schedule_runs import DueRun, ScheduledRuns
from bot.store.schedules import JobState

if TYPE_CHECKING:
    from bot.agent.runner import AgentRunner
    from bot.buttons.offers import Offers
    from bot.config import Config
    from bot.gateway.lanes import Lanes
    from bot.gateway.replies import Replies
    from bot.scheduler.jobs import Jobs
    from bot.store.base import Store
    from bot.store.schedules import ScheduledJob

log = logging.getLogger(__name__)

SYNC_JOB = "schedules-sync"
# A timer may fire this much before the injected clock reads its due time.
EARLY_TOLERANCE_SECONDS = 1.0
# A run that could not be recorded (the store failing, a bug) is tried again this much later.
RETRY_SECONDS = 60.0


def timer_id(job_id: int) -> str:
    return f"schedule:{job_id}"


def done_elsewhere(job_id: int, due: float) -> None:
    log.info("scheduled job %d: its run due at %.0f was done elsewhere", job_id, due)


class ScheduleTimers:
    def __init__(
        self,
        config: Config,
        store: Store,
        jobs: Jobs,
        lanes: Lanes,
        runner: AgentRunner,
        replies: Replies,
        offers: Offers,
    ) -> None:
        self.store = store
        self.jobs = jobs
        self.lanes = lanes
        self.runs = ScheduledRuns(config, store, runner, replies, lanes, offers)
        self._armed: dict[int, float] = {}  # job id -> the due time its timer is set for

    async def rebuild(self) -> int:
        """Arm every active job; one overdue (missed while Krill was down) runs shortly
        after start-up, once for everything it missed."""
        active = await self.store.schedules(states=(JobState.ACTIVE,))
        for job in active:
            self.arm(job)
        return len(active)

    async def sync(self) -> None:
        """Bring this process's timers in line with the store: jobs set up, resumed, run,
        paused or cancelled elsewhere."""

        async def body() -> None:
            rows = await self.store.schedules(states=(JobState.ACTIVE,))
            active = {job.id: job for job in rows}
            for job_id in set(self._armed) - set(active):
                self.jobs.cancel(timer_id(job_id))
                del self._armed[job_id]
            for job in rows:
                if self._armed.get(job.id) != job.next_run_at:
                    self.arm(job)

        await self.jobs.guarded(SYNC_JOB, body)

    def arm(self, job: ScheduledJob, *, overdue_delay: float = STARTUP_DELAY_SECONDS) -> None:
        """Set (or drop) `job`'s timer as its row now says; a due time already past fires
        after `overdue_delay`."""
        if job.state != JobState.ACTIVE:
            self.jobs.cancel(timer_id(job.id))
            self._armed.pop(job.id, None)
            return
        now = self.jobs.clock()
        at = job.next_run_at if job.next_run_at > now else now + overdue_delay
        self.jobs.at(timer_id(job.id), self.fire, str(job.id), at)
        self._armed[job.id] = job.next_run_at

    async def fire(self, key: str) -> None:
        async def body() -> None:
            await self._fire(int(key))

        await self.jobs.guarded(timer_id(int(key)), body)

    async def _fire(self, job_id: int) -> None:
        job = await self.store.schedule_get(job_id)
        fired_at = self.jobs.clock()
        if job is None or job.state != JobState.ACTIVE:
            self._armed.pop(job_id, None)
            return
        if job.next_run_at > fired_at + EARLY_TOLERANCE_SECONDS:
            armed = self._armed.get(job_id)
            if armed is not None and armed < job.next_run_at:
                done_elsewhere(job_id, armed)
            self.arm(job)  # wait for the row's new due time
            return
        due = DueRun(job.next_run_at, fired_at)

        async def run() -> None:
            # Every replica has this timer; in the lane (under the session's lease) only the
            # first finds the row still holding this due time.
            fresh = await self.store.schedule_get(job_id)
            if fresh is None or fresh.state != JobState.ACTIVE or fresh.next_run_at != due.due:
                done_elsewhere(job_id, due.due)
                return
            record = await self.runs.run(fresh, due, self.jobs.clock())
            if not await self.store.schedule_record_run(job_id, record):
                log.info("scheduled job %d: another process recorded this run first", job_id)

        await self.lanes.run_in_lane(job.session_key, run)
        latest = await self.store.schedule_get(job_id)
        if latest is not None:
            stuck = latest.next_run_at == due.due
            if stuck:
                log.warning("scheduled job %d: its run was not recorded; trying again", job_id)
            self.arm(latest, overdue_delay=RETRY_SECONDS if stuck else STARTUP_DELAY_SECONDS)
