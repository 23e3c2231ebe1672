"""Every compaction of a session runs through here: behind its breaker (state on the session
row, so it holds across restarts and replicas) and under its deadline. A failed or timed out
compaction leaves the history untouched and counts towards the breaker; a successful one
closes it.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any, Protocol

from bot.context.compaction import CompactionReason, CompactionResult, compact_session
from bot.context.host import ContextHost
from bot.sessions.breaker import CLOSED, after_failure, is_paused
from bot.store.base import SessionRow

log = logging.getLogger(__name__)

PAUSED = (
    "Compaction is paused until {until} UTC after {failures} failed attempts in a row; "
    "meanwhile the oldest turns are left out of requests when they no longer fit."
)


class FailureCounter(Protocol):
    """`krill_compaction_failures_total` (a prometheus Counter with a `cause` label)."""

    def labels(self, cause: str) -> Any: ...


async def guarded_compaction(
    host: ContextHost,
    session: SessionRow,
    *,
    reason: CompactionReason,
    now: float,
    failures: FailureCounter | None,
    **options: Any,
) -> CompactionResult:
    """Compact `session` unless its breaker is open; `/compact` (reason "manual") is a
    person asking, so it runs anyway, and its outcome moves the breaker like any other."""
    cfg = host.config.context
    fresh = await host.store.get_session(session.session_id) or session
    paused_until = fresh.compaction_paused_until
    if reason != "manual" and is_paused(paused_until, now):
        assert paused_until is not None
        until = dt.datetime.fromtimestamp(paused_until, dt.UTC).strftime("%Y-%m-%d %H:%M")
        message = PAUSED.format(until=until, failures=fresh.compaction_failures)
        return CompactionResult("skipped", reason, message, paused=True)
    result = await compact_session(
        host, fresh, reason=reason, timeout=cfg.compaction_timeout_seconds, **options
    )
    if result.status == "failed":
        state = after_failure(fresh.compaction_failures, now, cfg.compaction_max_failures)
        if failures is not None:
            failures.labels("timeout" if result.timed_out else "error").inc()
        if state.paused_until is not None:
            log.warning(
                "compaction of %s failed %d times in a row; paused for %.0f minutes",
                fresh.session_key,
                state.failures,
                (state.paused_until - now) / 60,
            )
    elif result.compacted and (fresh.compaction_failures or fresh.compaction_paused_until):
        state = CLOSED
    else:
        return result
    await host.store.set_compaction_breaker(
        fresh.session_id, failures=state.failures, paused_until=state.paused_until
    )
    return result
