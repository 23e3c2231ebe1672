"""When a conversation starts a fresh session on its own (`[session.reset]`): after
`idle_after` without activity (`idle`), or at the first message past the daily hour `at`
in agent.timezone (`daily`). Pure decisions; `bot.memory.fresh_start` does the switch."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

from bot.config import SessionResetConfig


def last_daily_boundary(now: float, hour: int, minute: int, timezone: str) -> float:
    """The latest moment at or before `now` when the local clock read hour:minute."""
    local = dt.datetime.fromtimestamp(now, ZoneInfo(timezone))
    boundary = local.replace(hour=hour, minute=minute, second=0, microsecond=0)
    if boundary > local:
        boundary -= dt.timedelta(days=1)
        # Re-anchor on the wall clock, so a DST change in between keeps hour:minute.
        boundary = boundary.replace(hour=hour, minute=minute)
    return boundary.timestamp()


def fresh_reason(
    reset: SessionResetConfig, last_activity: float | None, now: float, timezone: str
) -> str | None:
    """Why a message at `now` starts a fresh session ("idle" or "daily"), or None."""
    if reset.mode == "off" or last_activity is None:
        return None
    if reset.mode == "idle":
        return "idle" if now - last_activity >= reset.idle_seconds else None
    hour, minute = reset.hour_minute
    return "daily" if last_activity < last_daily_boundary(now, hour, minute, timezone) else None
