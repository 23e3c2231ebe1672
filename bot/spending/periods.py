"""The days and months spending caps count in: each begins at midnight in `agent.timezone`,
on the service's clock (the one reminders follow), so a cap resets when the people it
applies to see their day or month turn over."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from enum import StrEnum


class PeriodKind(StrEnum):
    DAY = "day"
    MONTH = "month"


@dataclass(frozen=True, slots=True)
class Period:
    """One day ("2026-05-04") or one month ("2026-05") and the moment the next begins."""

    kind: PeriodKind
    key: str
    ends_at: float


def _midnight(day: dt.date, zone: dt.tzinfo) -> float:
    return dt.datetime.combine(day, dt.time(), zone).timestamp()


def period_of(kind: PeriodKind, now: float, zone: dt.tzinfo) -> Period:
    """The day or month `now` falls in, in `zone`."""
    today = dt.datetime.fromtimestamp(now, zone).date()
    if kind == PeriodKind.DAY:
        return Period(kind, today.isoformat(), _midnight(today + dt.timedelta(days=1), zone))
    first_next = (today.replace(day=1) + dt.timedelta(days=32)).replace(day=1)
    return Period(kind, today.strftime("%Y-%m"), _midnight(first_next, zone))


def periods_of(now: float, zone: dt.tzinfo) -> tuple[Period, Period]:
    """Today and this month."""
    return period_of(PeriodKind.DAY, now, zone), period_of(PeriodKind.MONTH, now, zone)


def day_of(at: float, zone: dt.tzinfo) -> str:
    """The day (YYYY-MM-DD) a moment falls on, in `zone`."""
    return dt.datetime.fromtimestamp(at, zone).date().isoformat()


def describe_reset(period: Period, zone: dt.tzinfo) -> str:
    """When `period` ends, as a person reads it: "at midnight (00:00 UTC, 2026-05-05)"."""
    start = dt.datetime.fromtimestamp(period.ends_at, zone)
    name = getattr(zone, "key", None) or start.tzname() or "UTC"
    if period.kind == PeriodKind.DAY:
        return f"at midnight ({start:%H:%M} {name}, {start:%Y-%m-%d})"
    return f"on {start.day} {start:%B %Y} (00:00 {name})"
