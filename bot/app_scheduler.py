"""Part of the composition root (bot/app.py): the scheduler with the timed work it runs
(idle flushes and compaction, the heartbeat, retention, reminders, scheduled jobs, and
sessions left unattended by a stopped replica). Kept apart so App stays one readable page."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from bot.gateway.recovery import Unattended
from bot.scheduler.heartbeat import Heartbeat
from bot.scheduler.idle import IdleWork
from bot.scheduler.retention import Retention
from bot.scheduler.service import Scheduler

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from bot.agent.prefix import RequestPrefixes
    from bot.agent.runner import AgentRunner
    from bot.channel_contract import Channel
    from bot.config import Config
    from bot.context.pipeline import ContextPipeline
    from bot.gateway.lanes import Lanes
    from bot.gateway.replies import Replies
    from bot.media.files import MediaFiles
    from bot.memory.flush_service import FlushService
    from bot.memory.index import MemoryIndex
    from bot.scheduler.jobs import Jobs
    from bot.scheduler.reminders import Reminders
    from bot.scheduler.schedule_timers import ScheduleTimers
    from bot.store.base import Store
    from bot.tools.results import ResultStore


class Built(Protocol):
    """What the scheduler's work uses of the collaborators App has built before it."""

    config: Config
    store: Store
    lanes: Lanes
    runner: AgentRunner
    replies: Replies
    flusher: FlushService | None
    context: ContextPipeline
    index: MemoryIndex | None
    results: ResultStore
    reminders: Reminders
    media_files: MediaFiles

    @property
    def channels(self) -> Mapping[str, Channel]: ...


def scheduler_for(
    built: Built,
    *,
    jobs: Jobs,
    prefixes: RequestPrefixes,
    timers: ScheduleTimers,
    clock: Callable[[], float],
) -> Scheduler:
    config, store, lanes = built.config, built.store, built.lanes
    return Scheduler(
        config=config,
        store=store,
        jobs=jobs,
        idle=IdleWork(
            config=config,
            store=store,
            jobs=jobs,
            lanes=lanes,
            flusher=built.flusher,
            prefixes=prefixes,
            compactor=built.context,
        ),
        heartbeat=Heartbeat(
            config=config,
            store=store,
            jobs=jobs,
            lanes=lanes,
            runner=built.runner,
            replies=built.replies,
        ),
        index=built.index,
        results=built.results,
        retention=Retention(
            store, config.storage.retention_days, clock=clock, media=built.media_files
        ),
        reminders=built.reminders,
        schedules=timers,
        unattended=Unattended(store, lanes, built.channels, after=config.storage.lease_seconds),
    )
