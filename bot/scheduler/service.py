"""The scheduler `krill run` starts: per-session idle work, reminders and scheduled jobs
rebuilt from the store, periodic memory reindexing, the removal of expired stored tool
results, the heartbeat, the daily retention pass, and picking up unanswered messages nobody
is working on.

Every replica runs it. Periodic jobs other than the pick-up claim each due run in the store
(`claim_run`), so one replica does it; per-session work runs under the session's lease and
re-checks under it whether another replica did it already."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from bot.scheduler.heartbeat import HEARTBEAT_JOB
from bot.scheduler.jobs import claim_run, next_periodic_run
from bot.scheduler.retention import RETENTION_INTERVAL_SECONDS, RETENTION_JOB
from bot.scheduler.schedule_timers import SYNC_JOB
from bot.tools.results import CLEANUP_INTERVAL_SECONDS, remove_expired

if TYPE_CHECKING:
    from bot.config import Config
    from bot.gateway.recovery import Unattended
    from bot.memory.index import MemoryIndex
    from bot.scheduler.heartbeat import Heartbeat
    from bot.scheduler.idle import IdleWork
    from bot.scheduler.jobs import Jobs
    from bot.scheduler.reminders import Reminders
    from bot.scheduler.retention import Retention
    from bot.scheduler.schedule_timers import ScheduleTimers
    from bot.store.base import Store
    from bot.tools.results import ResultStore

log = logging.getLogger(__name__)

REINDEX_JOB = "memory-reindex"
RESULTS_CLEANUP_JOB = "tool-results-cleanup"
UNATTENDED_JOB = "unattended-inbound"


class Scheduler:
    """The gateway tells it about activity (`note_activity`); /status asks it for a line."""

    def __init__(
        self,
        *,
        config: Config,
        store: Store,
        jobs: Jobs,
        idle: IdleWork,
        heartbeat: Heartbeat,
        index: MemoryIndex | None,
        results: ResultStore,
        retention: Retention,
        reminders: Reminders,
        schedules: ScheduleTimers,
        unattended: Unattended,
    ) -> None:
        self.config = config
        self.store = store
        self.jobs = jobs
        self.idle = idle
        self.heartbeat = heartbeat
        self.index = index
        self.results = results
        self.retention = retention
        self.reminders = reminders
        self.schedules = schedules
        self.unattended = unattended
        self.index_stats: tuple[int, int] | None = None

    async def start(self) -> None:
        self.jobs.start()
        now = self.jobs.clock()
        self.idle.rebuild(await self.store.list_sessions(current_only=True))
        await self.reminders.rebuild()
        await self.schedules.rebuild()
        log.info("scheduler: %d job(s) rebuilt from the store", self.jobs.count())
        self.jobs.every(
            RESULTS_CLEANUP_JOB,
            self._cleanup,
            CLEANUP_INTERVAL_SECONDS,
            first=now,
            misfire_grace=int(CLEANUP_INTERVAL_SECONDS),
        )
        lease = self.config.storage.lease_seconds
        self.jobs.every(
            UNATTENDED_JOB,
            self._pick_up,
            lease,
            first=now + lease,  # start-up recovery has just queued what was left
            misfire_grace=max(1, int(lease)),
        )
        # Jobs set up, changed or run in other processes (replicas, `krill schedules`).
        self.jobs.every(
            SYNC_JOB,
            self.schedules.sync,
            lease,
            first=now + lease,
            misfire_grace=max(1, int(lease)),
        )
        if self.index is not None:
            interval = self.config.memory.reindex_interval_seconds
            self.jobs.every(
                REINDEX_JOB,
                self._reindex,
                interval,
                first=now,  # index once at start-up, in the background
                # Missed runs are worthless: the next interval (and every search) catches up.
                misfire_grace=max(1, int(interval)) if interval > 0 else None,
            )
        minutes = self.config.scheduler.heartbeat_minutes
        if minutes > 0:
            interval = minutes * 60
            last = await self.store.job_last_run(HEARTBEAT_JOB)
            self.jobs.every(
                HEARTBEAT_JOB,
                self.heartbeat.run,
                interval,
                first=next_periodic_run(last, interval, now),
                # A beat more than one interval late is dropped; the next is already due.
                misfire_grace=max(1, int(interval)),
            )

        if self.retention.enabled:
            last = await self.store.job_last_run(RETENTION_JOB)
            self.jobs.every(
                RETENTION_JOB,
                self._prune,
                RETENTION_INTERVAL_SECONDS,
                # A store never pruned is pruned at start-up, in the background.
                first=now
                if last is None
                else next_periodic_run(last, RETENTION_INTERVAL_SECONDS, now),
                misfire_grace=int(RETENTION_INTERVAL_SECONDS),
            )

    async def stop(self) -> None:
        await self.jobs.stop()

    def note_activity(self, key: str) -> None:
        self.idle.note_activity(key)

    def status_line(self, key: str) -> str | None:
        """A /status line: index size and when this session's idle flush is due."""
        parts: list[str] = []
        if self.index_stats is not None:
            files, chunks = self.index_stats
            parts.append(f"{chunks} chunks from {files} file(s) indexed")
        at = self.idle.next_flush(key)
        if at is not None:
            parts.append(f"idle flush in {max(0, int(at - self.jobs.clock()))}s")
        return "Memory: " + " · ".join(parts) if parts else None

    async def _reindex(self) -> None:
        async def body() -> None:
            if self.index is None:
                return
            interval = self.config.memory.reindex_interval_seconds
            if await claim_run(self.store, REINDEX_JOB, interval, self.jobs.clock()):
                await self.index.refresh()
            self.index_stats = await self.index.stats()  # the shared index, for /status

        await self.jobs.guarded(REINDEX_JOB, body)

    async def _pick_up(self) -> None:
        async def body() -> None:
            await self.unattended.pick_up()

        await self.jobs.guarded(UNATTENDED_JOB, body)

    async def _cleanup(self) -> None:
        async def body() -> None:
            now = self.jobs.clock()
            if await claim_run(self.store, RESULTS_CLEANUP_JOB, CLEANUP_INTERVAL_SECONDS, now):
                await remove_expired(self.results)

        await self.jobs.guarded(RESULTS_CLEANUP_JOB, body)

    async def _prune(self) -> None:
        async def body() -> None:
            now = self.jobs.clock()
            if await claim_run(self.store, RETENTION_JOB, RETENTION_INTERVAL_SECONDS, now):
                await self.retention.run()

        await self.jobs.guarded(RETENTION_JOB, body)
