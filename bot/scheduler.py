"""All timed work, on one APScheduler 3.x `AsyncIOScheduler`: idle memory flushes shortly
before a session's prompt cache expires, compaction of large sessions once it has expired,
periodic memory reindexing, and the optional heartbeat.

Jobs keep no state of their own: each is derived from the store (session rows, the last
heartbeat) when the service starts and re-derived from fresh rows whenever it fires, so a
restart loses none and a stale schedule corrects itself. Everything that touches a session
runs on that session's lane, after any turn in progress, and a job id exists once per
session, so no job runs twice at once for the same session.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import re
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.date import DateTrigger
from apscheduler.triggers.interval import IntervalTrigger

from bot.agent.runner import TurnJob, new_turn_id
from bot.memory.flush import (
    Reason,
    flush_threshold,
    has_unflushed_conversation,
    history_limit_for_key,
    idle_flush_at,
)
from bot.sessions.keys import is_direct_key
from bot.sessions.queue import WorkItem
from bot.transcript import PromptPurpose
from bot.types import Address

if TYPE_CHECKING:
    from bot.config import Config
    from bot.gateway import Core
    from bot.memory.flush import Flusher
    from bot.memory.index import MemoryIndex
    from bot.store.base import SessionRow, Store

log = logging.getLogger(__name__)

HEARTBEAT_JOB = "heartbeat"
REINDEX_JOB = "memory-reindex"
HEARTBEAT_FILE = "HEARTBEAT.md"
HEARTBEAT_OK = "HEARTBEAT_OK"
HEARTBEAT_PROMPT = (
    "[Heartbeat: a scheduled check, not a message from anyone] Work through the checklist "
    "below, which the operator keeps in HEARTBEAT.md. Do not infer or repeat old tasks from "
    "earlier chats. If something needs the person's attention, write the message for them; "
    f"if nothing does, reply exactly {HEARTBEAT_OK}.\n\n{{checklist}}"
)

# A fired job finding the session busy looks again this much later.
BUSY_RETRY_SECONDS = 5.0
# A fired job whose moment is still this far off (its session moved on) is rescheduled.
EARLY_SLACK_SECONDS = 0.5
# Maintenance waits this long past the TTL, so the cache has expired for certain.
EXPIRY_MARGIN_SECONDS = 1.0
# Overdue work found at start-up waits for channels to come up, and is spread out.
STARTUP_DELAY_SECONDS = 2.0
STARTUP_STAGGER_SECONDS = 0.5
# At start-up, overdue idle flushes are caught up only for sessions this recent; older ones
# wait for their next turn, /reset, or compaction rather than waking a whole fleet at once.
CATCH_UP_WINDOW_SECONDS = 24 * 3600
MAX_TRACKED_KEYS = 10_000

_HTML_COMMENT_RE = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
# The token with the punctuation models put around it ("HEARTBEAT_OK." / "HEARTBEAT_OK - ").
_LEADING_OK_RE = re.compile(rf"\A\s*{HEARTBEAT_OK}[\s.:!\-–—]*")
_TRAILING_OK_RE = re.compile(rf"\s*{HEARTBEAT_OK}[\s.!]*\Z")


# --- decisions (pure) -------------------------------------------------------------------------


def heartbeat_checklist(text: str | None) -> str:
    """HEARTBEAT.md without HTML comments; "" when nothing but comments and blanks is left."""
    return _HTML_COMMENT_RE.sub("", text or "").strip()


def heartbeat_message(reply: str) -> str | None:
    """What to send after a heartbeat: None for an acknowledgement (`HEARTBEAT_OK` with
    nothing else), else the reply without a leading or trailing token."""
    text = _TRAILING_OK_RE.sub("", _LEADING_OK_RE.sub("", reply, count=1), count=1).strip()
    return text or None


def next_periodic_run(last_run: float | None, interval: float, now: float) -> float:
    """When a periodic job runs next: one interval after its last run, or soon if overdue."""
    if last_run is None:
        return now + interval
    return max(last_run + interval, now + STARTUP_DELAY_SECONDS)


def cache_expires_at(session: SessionRow, ttl_seconds: float) -> float | None:
    if session.last_model_call_at is None:
        return None
    return session.last_model_call_at + ttl_seconds


def idle_compaction_due(
    session: SessionRow, *, threshold: int, ttl_seconds: float, now: float
) -> bool:
    """A session worth compacting in the background: large, and its cache already cold (so
    compacting costs no cache the next turn could have read)."""
    expires = cache_expires_at(session, ttl_seconds)
    return expires is not None and expires <= now and session.context_tokens >= threshold


def _remember(seen: dict[str, float | None], key: str, value: float | None) -> None:
    """Record one attempt per key, forgetting the oldest keys past MAX_TRACKED_KEYS (a
    forgotten key costs at most one more attempt)."""
    seen.pop(key, None)
    seen[key] = value
    while len(seen) > MAX_TRACKED_KEYS:
        del seen[next(iter(seen))]


def _utc(ts: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(ts, dt.UTC)


# --- the scheduler ----------------------------------------------------------------------------


IdleCompact = Callable[[str], Awaitable[Any]]


class Scheduler:
    """Owns the AsyncIOScheduler and the jobs. `start()` inside the running loop."""

    def __init__(
        self,
        *,
        config: Config,
        store: Store,
        core: Core,
        flusher: Flusher | None = None,
        index: MemoryIndex | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.core = core
        self.flusher = flusher
        self.index = index
        self.ttl = config.scheduler.cache_ttl_seconds or config.anthropic.cache_ttl_seconds
        self.lead = config.memory.flush.idle_lead_seconds
        self.threshold = flush_threshold(
            config.agent.context_window,
            config.context.reserve_tokens,
            config.memory.flush.soft_threshold_tokens,
        )
        # The hook idle maintenance calls; by default the core's compactor, on the lane.
        self.idle_compact: IdleCompact = self._compact_via_core
        self._scheduler: AsyncIOScheduler | None = None
        self._running: set[str] = set()  # job ids in progress
        self._tasks: set[asyncio.Task[Any]] = set()  # the tasks running them
        self._stopping = False
        # The activity (last_activity_at) whose idle flush was already tried, per key, and
        # the model call whose cold cache was already compacted: one attempt each.
        self._flush_tried: dict[str, float | None] = {}
        self._compacted: dict[str, float | None] = {}
        self.index_stats: tuple[int, int] | None = None

    @property
    def idle_flush_enabled(self) -> bool:
        flush = self.config.memory.flush
        return self.flusher is not None and flush.enabled and flush.idle

    # --- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        self._scheduler = AsyncIOScheduler(
            timezone=dt.UTC,
            # Defaults for every job; each add_job below restates what matters for it.
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
        )
        self._scheduler.start()
        await self._rebuild()
        if self.index is not None:
            interval = self.config.memory.reindex_interval_seconds
            trigger = IntervalTrigger(seconds=interval) if interval > 0 else DateTrigger()
            self._scheduler.add_job(
                self._reindex,
                trigger,
                id=REINDEX_JOB,
                next_run_time=_utc(time.time()),  # index once at start-up, in the background
                replace_existing=True,
                coalesce=True,
                # Missed runs are worthless: the next interval (and every search) catches up.
                misfire_grace_time=max(1, int(interval)) if interval > 0 else None,
            )
        minutes = self.config.scheduler.heartbeat_minutes
        if minutes > 0:
            interval = minutes * 60
            last = await self.store.job_last_run(HEARTBEAT_JOB)
            self._scheduler.add_job(
                self._heartbeat,
                IntervalTrigger(seconds=interval),
                id=HEARTBEAT_JOB,
                next_run_time=_utc(next_periodic_run(last, interval, time.time())),
                replace_existing=True,
                coalesce=True,
                # A beat more than one interval late is dropped; the next is already due.
                misfire_grace_time=max(1, int(interval)),
            )

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

    async def _rebuild(self) -> None:
        """Recreate the per-session jobs from the store, so a restart keeps every one."""
        now = time.time()
        soon = now + STARTUP_DELAY_SECONDS
        overdue = 0
        for session in await self.store.list_sessions(current_only=True):
            key = session.session_key
            if self.idle_flush_enabled:
                at = idle_flush_at(session, self.ttl, self.lead)
                last_call = session.last_model_call_at or 0.0
                if at is not None and (at > now or now - last_call <= CATCH_UP_WINDOW_SECONDS):
                    if at <= now:
                        at = soon + overdue * STARTUP_STAGGER_SECONDS
                        overdue += 1
                    self._schedule(f"flush:{key}", self._idle_flush, key, at)
            expires = cache_expires_at(session, self.ttl)
            if (
                self._compaction_on
                and expires is not None
                and session.context_tokens >= self.threshold
            ):
                self._schedule(
                    f"idle:{key}",
                    self._idle_maintenance,
                    key,
                    max(expires + EXPIRY_MARGIN_SECONDS, soon),
                )
        jobs = len(self._scheduler.get_jobs()) if self._scheduler else 0
        log.info("scheduler: %d job(s) rebuilt from the store", jobs)

    @property
    def _compaction_on(self) -> bool:
        return self.config.scheduler.idle_compaction

    def _schedule(
        self, job_id: str, func: Callable[[str], Awaitable[None]], key: str, at: float
    ) -> None:
        if self._scheduler is None:
            return
        self._scheduler.add_job(
            func,
            DateTrigger(run_date=_utc(at)),
            args=[key],
            id=job_id,
            replace_existing=True,
            max_instances=1,
            # Never skipped for lateness: a late flush costs a cache write, a skipped one
            # loses what it would have saved. The job re-checks everything when it runs.
            misfire_grace_time=None,
            coalesce=True,
        )

    def next_run(self, job_id: str) -> float | None:
        job = self._scheduler.get_job(job_id) if self._scheduler else None
        run = getattr(job, "next_run_time", None) if job is not None else None
        return run.timestamp() if run is not None else None

    # --- hooks --------------------------------------------------------------------------------

    async def note_activity(self, job: TurnJob, session: SessionRow) -> None:
        """Runner hook before a person's turn: (re)schedule this session's timed work. The
        times are estimates (the turn has not called the model yet); jobs correct them."""
        now = time.time()
        key = job.session_key
        if self.idle_flush_enabled:
            self._schedule(
                f"flush:{key}", self._idle_flush, key, now + max(0.0, self.ttl - self.lead)
            )
        if self._compaction_on:
            self._schedule(
                f"idle:{key}", self._idle_maintenance, key, now + self.ttl + EXPIRY_MARGIN_SECONDS
            )

    def status_line(self, key: str) -> str | None:
        """A /status line: index size and when this session's idle flush is due."""
        parts: list[str] = []
        if self.index_stats is not None:
            files, chunks = self.index_stats
            parts.append(f"{chunks} chunks from {files} file(s) indexed")
        at = self.next_run(f"flush:{key}")
        if at is not None:
            parts.append(f"idle flush in {max(0, int(at - time.time()))}s")
        return "Memory: " + " · ".join(parts) if parts else None

    # --- jobs ---------------------------------------------------------------------------------

    async def _guarded(
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
            self._tasks.discard(task)

    def _retry_later(self, func: Callable[[str], Awaitable[None]], kind: str, key: str) -> None:
        self._schedule(f"{kind}:{key}", func, key, time.time() + BUSY_RETRY_SECONDS)

    def _busy(self, key: str) -> bool:
        return self.core.queue.busy(key) or self.core.queue.depth(key) > 0

    async def _idle_flush(self, key: str) -> None:
        async def body() -> None:
            session = await self.store.current_session(key)
            if session is None or self.flusher is None:
                return
            at = idle_flush_at(session, self.ttl, self.lead)
            if at is None or self._flush_tried.get(key) == session.last_activity_at:
                return
            now = time.time()
            if at > now + EARLY_SLACK_SECONDS:
                self._schedule(f"flush:{key}", self._idle_flush, key, at)
                return
            if self._busy(key):
                self._retry_later(self._idle_flush, "flush", key)
                return
            _remember(self._flush_tried, key, session.last_activity_at)
            await self.flusher.flush_in_lane(
                key, session.session_id, Reason.IDLE, has_unflushed_conversation
            )

        await self._guarded(
            f"flush:{key}", body, lambda: self._retry_later(self._idle_flush, "flush", key)
        )

    async def _idle_maintenance(self, key: str) -> None:
        async def body() -> None:
            session = await self.store.current_session(key)
            expires = cache_expires_at(session, self.ttl) if session else None
            if session is None or expires is None:
                return
            now = time.time()
            if expires + EXPIRY_MARGIN_SECONDS > now + EARLY_SLACK_SECONDS:
                self._schedule(
                    f"idle:{key}", self._idle_maintenance, key, expires + EXPIRY_MARGIN_SECONDS
                )
                return
            due = idle_compaction_due(
                session, threshold=self.threshold, ttl_seconds=self.ttl, now=now
            )
            if not due or self._compacted.get(key) == session.last_model_call_at:
                return
            if self._busy(key):
                self._retry_later(self._idle_maintenance, "idle", key)
                return
            _remember(self._compacted, key, session.last_model_call_at)
            await self.idle_compact(key)

        await self._guarded(
            f"idle:{key}", body, lambda: self._retry_later(self._idle_maintenance, "idle", key)
        )

    async def _compact_via_core(self, key: str) -> None:
        if self.core.compactor is None:
            log.debug("idle compaction of %s skipped: no compactor is installed", key)
            return
        result = await self.core.compact_session(key, "")
        log.info("idle compaction of %s: %s", key, result)

    async def _reindex(self) -> None:
        async def body() -> None:
            if self.index is None:
                return
            await self.index.refresh()
            self.index_stats = await self.index.stats()

        await self._guarded(REINDEX_JOB, body)

    async def _heartbeat(self) -> None:
        await self._guarded(HEARTBEAT_JOB, self._beat)

    async def _beat(self) -> None:
        await self.store.job_record_run(HEARTBEAT_JOB, time.time())
        checklist = heartbeat_checklist(self.core.runner.workspace.read_text(HEARTBEAT_FILE))
        if not checklist:
            return
        session = await self._heartbeat_session()
        if session is None or session.address is None:
            log.info("heartbeat skipped: no direct-message session to report to yet")
            return
        key = session.session_key
        if self._busy(key):
            log.info("heartbeat skipped: %s is busy", key)
            return
        address = Address.from_dict(session.address)
        prompt = HEARTBEAT_PROMPT.format(checklist=checklist)

        async def run() -> None:
            outcome = await self.core.runner.run(
                TurnJob(
                    key,
                    new_turn_id(),
                    prompt=prompt,
                    kind=PromptPurpose.HEARTBEAT,
                    history_limit=history_limit_for_key(self.core, key),
                )
            )
            message = heartbeat_message(outcome.text) if outcome.error is None else None
            if message:
                await self.core.send_text(address, message)

        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.core.queue.submit(key, WorkItem("call", run, done))
        await done  # settled even when the lane is stopped

    async def _heartbeat_session(self) -> SessionRow | None:
        wanted = self.config.scheduler.heartbeat_session.strip().lower()
        if wanted:
            return await self.store.current_session(wanted)
        candidates = [
            s
            for s in await self.store.list_sessions(current_only=True)
            if s.address is not None and is_direct_key(s.session_key)
        ]
        return max(candidates, key=lambda s: s.last_activity_at or 0.0, default=None)
