"""The compaction breaker, as pure functions: after `context.compaction_max_failures` failed
compactions in a row a session stops trying for a while, so an outage or a model that will
not summarize does not turn every message into several paid, failed calls. The pause is
5 minutes, doubling with each further failure up to an hour; a success closes it.

The state lives on the session row (`compaction_failures`, `compaction_paused_until`), so
it holds across restarts and replicas.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

FIRST_PAUSE_SECONDS = 300.0
MAX_PAUSE_SECONDS = 3_600.0


@dataclass(frozen=True, slots=True)
class BreakerState:
    failures: int = 0  # failed compactions in a row
    paused_until: float | None = None  # no compaction is tried before this (epoch seconds)


CLOSED = BreakerState()


def is_paused(paused_until: float | None, now: float) -> bool:
    return paused_until is not None and now < paused_until


def after_failure(failures: int, now: float, max_failures: int) -> BreakerState:
    """The state after one more failure, `failures` being the count before it."""
    failures += 1
    if failures < max_failures:
        return BreakerState(failures)
    doublings = min(failures - max_failures, 16)  # the cap is reached long before
    pause = min(FIRST_PAUSE_SECONDS * 2**doublings, MAX_PAUSE_SECONDS)
    return BreakerState(failures, now + pause)


def paused_until_text(paused_until: float | None) -> str | None:
    """`paused_until` as ISO 8601 in UTC (`krill status --json`), or None."""
    if paused_until is None:
        return None
    return dt.datetime.fromtimestamp(paused_until, dt.UTC).isoformat(timespec="seconds")
