"""When a reminder is due: `when` as the model passes it to reminder_create (ISO 8601, or
natural forms such as "in 10 minutes", "tomorrow 9:00", "next monday 8am") read by
`dateparser` in agent.timezone against an injected "now", and the limits a due time must
respect."""

from __future__ import annotations

import datetime as dt
from typing import Any
from zoneinfo import ZoneInfo

import dateparser

MIN_LEAD_SECONDS = 10.0
MAX_LEAD_SECONDS = 365 * 86400.0


class WhenError(ValueError):
    """A `when` that cannot be read, or a due time outside the limits; says what to do."""


def _parse(text: str, now: dt.datetime, timezone: str, **extra: Any) -> dt.datetime | None:
    settings = {
        "TIMEZONE": timezone,
        "TO_TIMEZONE": timezone,
        "RETURN_AS_TIMEZONE_AWARE": True,
        # dateparser reads RELATIVE_BASE as wall time in TIMEZONE.
        "RELATIVE_BASE": now.replace(tzinfo=None),
        **extra,
    }
    return dateparser.parse(text, languages=["en"], settings=settings)


def parse_when(text: str, now: float, timezone: str) -> float:
    """The unix time `text` names, read in `timezone` relative to `now`. A time of day or a
    weekday already past today means the next one ("8:00" at 9:00 is tomorrow's)."""
    text = text.strip()
    if not text:
        raise WhenError("when is empty; give a time like 'in 10 minutes' or ISO 8601")
    zone = ZoneInfo(timezone)
    local_now = dt.datetime.fromtimestamp(now, zone)
    try:
        iso = dt.datetime.fromisoformat(text)
    except ValueError:
        iso = None
    if iso is not None:
        return (iso if iso.tzinfo else iso.replace(tzinfo=zone)).timestamp()
    parsed = _parse(text, local_now, timezone)
    if parsed is not None and parsed.timestamp() < now:
        parsed = _parse(text, local_now, timezone, PREFER_DATES_FROM="future")
    if parsed is None:
        raise WhenError(
            f"could not read {text!r} as a time; use ISO 8601 (2026-03-14T09:00) or forms "
            "like 'in 10 minutes', 'tomorrow 9:00', 'next monday 8am'"
        )
    return parsed.timestamp()


def check_due(due_at: float, now: float) -> None:
    """Refuse a due time sooner than MIN_LEAD_SECONDS or later than a year from `now`."""
    if due_at < now + MIN_LEAD_SECONDS:
        raise WhenError(
            f"that is less than {MIN_LEAD_SECONDS:.0f} seconds from now (or in the past); "
            "choose a later time"
        )
    if due_at > now + MAX_LEAD_SECONDS:
        raise WhenError("that is more than a year away; reminders can be set up to a year ahead")


def describe_time(ts: float, timezone: str) -> str:
    """A due time as people read it, in agent.timezone: "Mon 2026-03-16 08:00 CET"."""
    return dt.datetime.fromtimestamp(ts, ZoneInfo(timezone)).strftime("%a %Y-%m-%d %H:%M %Z")
