"""The timer under all scheduled work: one APScheduler 3.x `AsyncIOScheduler`, with jobs at a
moment or at an interval, and a guard that runs each job id once at a time.

Decisions use the injected clock; APScheduler fires at the matching wall-clock moments (the
clock may run ahead of the wall clock by a fixed offset: `scheduler.clock_offset_seconds`).

Every replica sharing a store runs the same timers; `claim_run` makes a periodic job's due
run happen in one of them.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.date import DateTrigger
from apscheduler.triggers.interval import IntervalTrigger

if TYPE_CHECKING:
    from bot.config import Config
    from bot.store.base import JobStore

log = logging.getLogger(__name__)

# Overdue work found at start-up waits this long, for channels to come up.
STARTUP_DELAY_SECONDS = 2.0

Clock = Callable[[], float]
KeyJob = Callable[[str], Awaitable[None]]


def service_clock(config: Config) -> Clock:
    """The wall clock, or one `scheduler.clock_offset_seconds` ahead of it (tests only)."""
    offset = config.scheduler.clock_offset_seconds
    return (lambda: time.time() + offset) if offset else time.time


def next_periodic_run(last_run: float | None, interval: float, now: float) -> float:
    """When a periodic job runs next: one interval after its last run, or soon if overdue."""
    if last_run is None:
        return now + interval
    return max(last_run + interval, now + STARTUP_DELAY_SECONDS)


# Replicas fire a periodic job at nearly the same moment, each on its own timer: a run is
# claimed unless another replica's run is less than this share of an interval old.
CLAIM_SHARE = 0.5


async def claim_run(store: JobStore, job: str, interval: float, now: float) -> bool:
    """Whether this process runs `job`'s run due at `now` (recorded as run if so), or
    another process sharing the store already ran it this interval."""
    if await store.job_claim(job, now - interval * CLAIM_SHARE, now):
        return True
    log.debug("%s already ran in another process this interval", job)
    return False


def _utc(ts: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(ts, dt.UTC)


class Jobs:
    """Owns the AsyncIOScheduler. `start()` inside the running loop; before it (and after
    `stop()`) scheduling does nothing, which is how CLI commands other than `krill run`
    never run background work."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._scheduler: AsyncIOScheduler | None = None
        self._running: set[str] = set()  # job ids in progress
        self._tasks: set[asyncio.Task[Any]] = set()  # the tasks running them
        self._stopping = False

    @property
    def started(self) -> bool:
        return self._scheduler is not None

    def start(self) -> None:
        self._scheduler = AsyncIOScheduler(
            timezone=dt.UTC,
            # Defaults for every job; each add_job below restates what matters for it.
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
        )
        self._scheduler.start()

    async def stop(self) -> None:
        self._stopping = True
        if self._scheduler is not None and self._scheduler.running:
            self._scheduler.shutdown(wait=False)
        # Jobs still running are stopped and waited for here, so none touches the store
        # after the app has closed it.
        running = list(self._tasks)
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        self._scheduler = None

    def _wall(self, when: float) -> dt.datetime:
        """The wall-clock moment at which the injected clock reads `when`."""
        return _utc(when - (self.clock() - time.time()))

    def count(self) -> int:
        return len(self._scheduler.get_jobs()) if self._scheduler else 0

    def at(self, job_id: str, func: KeyJob, key: str, when: float) -> None:
        """Run `func(key)` at `when`, replacing any job with the same id."""
        if self._scheduler is None:
            return
        self._scheduler.add_job(
            func,
            DateTrigger(run_date=self._wall(when)),
            args=[key],
            id=job_id,
            replace_existing=True,
            max_instances=1,
            # Never skipped for lateness: a late flush costs a cache write, a skipped one
            # loses what it would have saved. The job re-checks everything when it runs.
            misfire_grace_time=None,
            coalesce=True,
        )

    def every(
        self,
        job_id: str,
        func: Callable[[], Awaitable[None]],
        interval: float,
        *,
        first: float,
        misfire_grace: int | None,
    ) -> None:
        """Run `func()` at `first` and every `interval` seconds after (once if interval is 0).
        A run later than `misfire_grace` seconds is dropped (None: never dropped)."""
        if self._scheduler is None:
            return
        trigger = IntervalTrigger(seconds=interval) if interval > 0 else DateTrigger()
        self._scheduler.add_job(
            func,
            trigger,
            id=job_id,
            next_run_time=self._wall(first),
            replace_existing=True,
            coalesce=True,
            misfire_grace_time=misfire_grace,
        )

    def cancel(self, job_id: str) -> None:
        """Drop a scheduled job; nothing happens when there is none."""
        if self._scheduler is not None and self._scheduler.get_job(job_id) is not None:
            self._scheduler.remove_job(job_id)

    def next_run(self, job_id: str) -> float | None:
        job = self._scheduler.get_job(job_id) if self._scheduler else None
        run = getattr(job, "next_run_time", None) if job is not None else None
        return run.timestamp() + (self.clock() - time.time()) if run is not None else None

    async def guarded(
        self,
        job_id: str,
        body: Callable[[], Awaitable[None]],
        retry: Callable[[], None] | None = None,
    ) -> None:
        """Run `body` unless the same job is still running; then `retry` reschedules it, so
        a session's job fired again mid-run is postponed, never run twice nor lost."""
        if job_id in self._running:
            if retry is not None:
                retry()
            return
        self._running.add(job_id)
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            await body()
        except Exception:  # one failing job must not stop the others
            log.exception("scheduled job %s failed", job_id)
        except asyncio.CancelledError:
            if not self._stopping:
                raise
            log.info("scheduled job %s stopped for shutdown", job_id)
        finally:
            self._running.discard(job_id)
            if task is not None:
                self._tasks.discard(task)
