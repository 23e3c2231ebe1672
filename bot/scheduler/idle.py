"""Idle work on quiet sessions: shortly before a session's prompt cache expires, the memory
flush and then warm compaction (a session past `context.warm_compaction_tokens`, or a
smaller one whose summary costs less than re-writing its history, is summarized while the
summary can still read the cache, so the next burst writes a small prompt); and compaction
of a very large session once its cache has expired.

Jobs keep no state of their own: they are derived from the session rows at start-up and
re-derived from fresh rows whenever they fire, so a restart loses none and a stale
schedule corrects itself. Both run on the session's lane, after any turn in progress, and
re-read the session there, under its lease: of several replicas with the same job, the
first does the work and the others find it done.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

from cachetools import LRUCache

from bot.memory.flush_policy import (
    Reason,
    has_unflushed_conversation,
    idle_flush_at,
    session_flush_threshold,
)
from bot.scheduler.jobs import STARTUP_DELAY_SECONDS
from bot.store.base import SessionRow

if TYPE_CHECKING:
    from bot.agent.prefix import RequestPrefixes
    from bot.config import Config
    from bot.context.host import CachedPrefix
    from bot.gateway.lanes import Lanes
    from bot.memory.flush_service import FlushService
    from bot.scheduler.jobs import Jobs, KeyJob
    from bot.store.base import Store

log = logging.getLogger(__name__)

# A fired job finding the session busy looks again this much later.
BUSY_RETRY_SECONDS = 5.0
# A fired job whose moment is still this far off (its session moved on) is rescheduled.
EARLY_SLACK_SECONDS = 0.5
# Maintenance waits this long past the TTL, so the cache has expired for certain.
EXPIRY_MARGIN_SECONDS = 1.0
# Overdue work found at start-up is spread out.
STARTUP_STAGGER_SECONDS = 0.5
# At start-up, overdue idle flushes are caught up only for sessions this recent; older ones
# wait for their next turn, /reset, or compaction rather than waking a whole fleet at once.
CATCH_UP_WINDOW_SECONDS = 24 * 3600
MAX_TRACKED_KEYS = 10_000


def cache_expires_at(session: SessionRow, ttl_seconds: float) -> float | None:
    if session.last_model_call_at is None:
        return None
    return session.last_model_call_at + ttl_seconds


class IdleCompactor(Protocol):
    async def compact_idle(
        self, session_key: str, prefix: CachedPrefix | None, *, only_if_cheaper: bool = False
    ) -> str:
        """Compact the session now (the caller holds its lane); reads `prefix`'s cache.
        With `only_if_cheaper`, only when that costs less than re-writing the history."""
        ...


def flushed_since(session: SessionRow, activity: float | None) -> bool:
    """A flush (another replica's idle flush, a turn's threshold flush) has run since
    `activity`, the moment of the conversation an idle flush job was due for."""
    done = session.memory_flush_at
    return done is not None and activity is not None and done >= activity


def warm_compaction_due(session: SessionRow, threshold: int) -> bool:
    """A session compacted before its cache expires whatever it costs (0 is off)."""
    return 0 < threshold <= session.context_tokens


def warm_compaction_considered(session: SessionRow, threshold: int) -> bool:
    """A session whose warm compaction is weighed before its cache expires: warm compaction
    is on and a model call warmed the cache. At the threshold it runs whatever it costs;
    below, only when cheaper than the next burst re-writing the history."""
    return 0 < threshold and session.last_model_call_at is not None


def pre_expiry_at(
    session: SessionRow, ttl_seconds: float, lead_seconds: float, *, flush: bool, warm: int
) -> float | None:
    """When the pre-expiry work (flush, then warm compaction) should run for this session,
    or None when it has none: `flush` says whether idle flushes are on, `warm` is the warm
    compaction threshold (0 when off)."""
    if session.last_model_call_at is None:
        return None
    flush_due = flush and idle_flush_at(session, ttl_seconds, lead_seconds) is not None
    if not flush_due and not warm_compaction_considered(session, warm):
        return None
    return session.last_model_call_at + max(0.0, ttl_seconds - lead_seconds)


def idle_compaction_due(
    session: SessionRow, *, threshold: int, ttl_seconds: float, now: float
) -> bool:
    """A session worth compacting in the background: large, and its cache already cold (so
    compacting costs no cache the next turn could have read)."""
    expires = cache_expires_at(session, ttl_seconds)
    return expires is not None and expires <= now and session.context_tokens >= threshold


class IdleWork:
    def __init__(
        self,
        *,
        config: Config,
        store: Store,
        jobs: Jobs,
        lanes: Lanes,
        flusher: FlushService | None,
        prefixes: RequestPrefixes,
        compactor: IdleCompactor,
    ) -> None:
        self.config = config
        self.store = store
        self.jobs = jobs
        self.lanes = lanes
        self.flusher = flusher
        self.prefixes = prefixes
        self.compactor = compactor
        self.ttl = config.cache_ttl_seconds
        self.lead = config.memory.flush.idle_lead_seconds
        # The activity (last_activity_at) whose idle flush was already tried, per key, and
        # the model call whose cold cache was already compacted: one attempt each.
        # One attempt per key and activity moment; past MAX_TRACKED_KEYS the least recently
        # used keys are forgotten (a forgotten key costs at most one more attempt).
        self._flush_tried: LRUCache[str, float | None] = LRUCache(maxsize=MAX_TRACKED_KEYS)
        self._compacted: LRUCache[str, float | None] = LRUCache(maxsize=MAX_TRACKED_KEYS)

    @property
    def flush_enabled(self) -> bool:
        flush = self.config.memory.flush
        return self.flusher is not None and flush.enabled and flush.idle

    @property
    def compaction_enabled(self) -> bool:
        return self.config.scheduler.idle_compaction

    @property
    def warm_threshold(self) -> int:
        """The warm compaction threshold, 0 when warm compaction is off."""
        return self.config.context.warm_compaction_tokens if self.compaction_enabled else 0

    def _pre_expiry_at(self, session: SessionRow) -> float | None:
        return pre_expiry_at(
            session, self.ttl, self.lead, flush=self.flush_enabled, warm=self.warm_threshold
        )

    def rebuild(self, sessions: list[SessionRow]) -> None:
        """Recreate the per-session jobs from the store, so a restart keeps every one."""
        now = self.jobs.clock()
        soon = now + STARTUP_DELAY_SECONDS
        overdue = 0
        for session in sessions:
            key = session.session_key
            if self.flush_enabled or self.warm_threshold:
                at = self._pre_expiry_at(session)
                last_call = session.last_model_call_at or 0.0
                if at is not None and (at > now or now - last_call <= CATCH_UP_WINDOW_SECONDS):
                    if at <= now:
                        at = soon + overdue * STARTUP_STAGGER_SECONDS
                        overdue += 1
                    self.jobs.at(f"flush:{key}", self.idle_flush, key, at)
            expires = cache_expires_at(session, self.ttl)
            if (
                self.compaction_enabled
                and expires is not None
                and session.context_tokens >= session_flush_threshold(self.config, session)
            ):
                when = max(expires + EXPIRY_MARGIN_SECONDS, soon)
                self.jobs.at(f"idle:{key}", self.idle_maintenance, key, when)

    def note_activity(self, key: str) -> None:
        """A person wrote in `key`: (re)schedule its timed work. The times are estimates (the
        turn has not called the model yet); the jobs correct them when they fire."""
        now = self.jobs.clock()
        if self.flush_enabled or self.warm_threshold:
            self.jobs.at(f"flush:{key}", self.idle_flush, key, now + max(0.0, self.ttl - self.lead))
        if self.compaction_enabled:
            when = now + self.ttl + EXPIRY_MARGIN_SECONDS
            self.jobs.at(f"idle:{key}", self.idle_maintenance, key, when)

    def next_flush(self, key: str) -> float | None:
        return self.jobs.next_run(f"flush:{key}")

    def _retry_later(self, func: KeyJob, kind: str, key: str) -> None:
        self.jobs.at(f"{kind}:{key}", func, key, self.jobs.clock() + BUSY_RETRY_SECONDS)

    async def idle_flush(self, key: str) -> None:
        """The pre-expiry work: the memory flush, then warm compaction, in the lane."""

        async def body() -> None:
            session = await self.store.current_session(key)
            if session is None:
                return
            at = self._pre_expiry_at(session)
            if at is None or self._flush_tried.get(key) == session.last_activity_at:
                return
            if at > self.jobs.clock() + EARLY_SLACK_SECONDS:
                self.jobs.at(f"flush:{key}", self.idle_flush, key, at)
                return
            if self.lanes.busy(key):
                self._retry_later(self.idle_flush, "flush", key)
                return
            self._flush_tried[key] = session.last_activity_at
            session_id = session.session_id

            async def work() -> None:
                # Checked again in the lane, under the session's lease: another replica with
                # the same job may have flushed or compacted meanwhile.
                fresh = await self.store.get_session(session_id)
                flusher = self.flusher
                if fresh is None:
                    return
                if (
                    flusher is not None
                    and self.flush_enabled
                    and has_unflushed_conversation(fresh)
                    and not flushed_since(fresh, session.last_activity_at)
                ):
                    await flusher.flush(fresh, reason=Reason.IDLE)
                if fresh.compaction_count == session.compaction_count and (
                    warm_compaction_considered(fresh, self.warm_threshold)
                ):
                    await self.compact_warm(fresh)

            await self.lanes.run_in_lane(key, work)

        await self.jobs.guarded(
            f"flush:{key}", body, lambda: self._retry_later(self.idle_flush, "flush", key)
        )

    async def compact_warm(self, session: SessionRow) -> bool:
        """Compact `session` before its cache expires (the caller holds its lane): in place
        over its cached prefix while the cache is warm; below the threshold only when that
        is cheaper than the next burst re-writing it. Returns whether the cache was warm.
        (The caller has checked that warm compaction is on.)"""
        expires = cache_expires_at(session, self.ttl)
        warm = expires is not None and self.jobs.clock() < expires
        prefix = await self.prefixes.for_session(session) if warm else None
        result = await self.compactor.compact_idle(
            session.session_key,
            prefix,
            only_if_cheaper=not warm_compaction_due(
                session, self.config.context.warm_compaction_tokens
            ),
        )
        log.info("%s compaction of %s: %s", "warm" if warm else "idle", session.session_key, result)
        return warm

    async def idle_maintenance(self, key: str) -> None:
        async def body() -> None:
            session = await self.store.current_session(key)
            expires = cache_expires_at(session, self.ttl) if session else None
            if session is None or expires is None:
                return
            now = self.jobs.clock()
            if expires + EXPIRY_MARGIN_SECONDS > now + EARLY_SLACK_SECONDS:
                when = expires + EXPIRY_MARGIN_SECONDS
                self.jobs.at(f"idle:{key}", self.idle_maintenance, key, when)
                return
            due = idle_compaction_due(
                session,
                threshold=session_flush_threshold(self.config, session),
                ttl_seconds=self.ttl,
                now=now,
            )
            if not due or self._compacted.get(key) == session.last_model_call_at:
                return
            if self.lanes.busy(key):
                self._retry_later(self.idle_maintenance, "idle", key)
                return
            self._compacted[key] = session.last_model_call_at

            async def work() -> str | None:
                # Checked again under the session's lease: another replica may have done it.
                fresh = await self.store.current_session(key)
                if fresh is None or fresh.compaction_count != session.compaction_count:
                    return None
                return await self.compactor.compact_idle(key, None)

            result = await self.lanes.run_in_lane(key, work)
            log.info("idle compaction of %s: %s", key, result)

        await self.jobs.guarded(
            f"idle:{key}", body, lambda: self._retry_later(self.idle_maintenance, "idle", key)
        )
