"""A job's schedule as a checked five-field cron expression in a time zone: its next runs
(croniter, with standard cron semantics: day of month and day of week are ORed when both
are restricted; `1#1` is the first Monday, `L5` the last Friday, `L` the month's last day),
the runs between two moments, its smallest gap, and its description in words
(cron-descriptor). Run times are computed in the zone, so a 9:00 job stays 9:00 local across
a daylight-saving change; a time the change skips runs at the first moment after it."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cron_descriptor import ExpressionDescriptor, FormatException, Options
from croniter import CroniterBadDateError, CroniterError, croniter

CRON_FIELDS = 5
# `@daily` and friends, written out (croniter would also take them; the stored form is
# always five fields so every reader sees the same).
MACROS = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}
# How far ahead the smallest gap between runs is looked for: enough runs to see every gap
# a cron line can have within a day, and a window long enough for the rare ones.
GAP_SAMPLE_RUNS = 600
GAP_SAMPLE_SECONDS = 2 * 366 * 86400.0


class RecurrenceError(ValueError):
    """A schedule that cannot be read or never runs; the message says what to write."""


@dataclass(frozen=True, slots=True)
class Recurrence:
    """When a job runs: a five-field cron expression read in `timezone` (an IANA name)."""

    cron: str
    timezone: str

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    def _iter(self, after: float) -> croniter:
        return croniter(self.cron, dt.datetime.fromtimestamp(after, self.zone))

    def next_after(self, after: float) -> float:
        """The first run strictly after `after` (unix seconds)."""
        try:
            return float(self._iter(after).get_next(float))
        except CroniterBadDateError:
            raise RecurrenceError(f"{self.cron!r} never runs") from None

    def next_runs(self, after: float, count: int) -> list[float]:
        runs: list[float] = []
        at = after
        for _ in range(count):
            at = self.next_after(at)
            runs.append(at)
        return runs

    def runs_through(self, after: float, end: float, limit: int) -> list[float]:
        """Runs after `after` and at or before `end`, the first `limit` of them."""
        runs: list[float] = []
        at = self.next_after(after)
        while at <= end and len(runs) < limit:
            runs.append(at)
            at = self.next_after(at)
        return runs

    def smallest_gap(self, after: float) -> float:
        """The shortest time between two consecutive runs, looking ahead from `after`."""
        runs = self.next_runs(after, 2)
        gap = runs[1] - runs[0]
        previous = runs[1]
        for _ in range(GAP_SAMPLE_RUNS):
            if previous - after > GAP_SAMPLE_SECONDS:
                break
            at = self.next_after(previous)
            gap = min(gap, at - previous)
            previous = at
        return gap

    def describe(self) -> str:
        """In words, with the zone: "At 09:00, Monday through Friday (Europe/Berlin)"."""
        options = Options()
        options.use_24hour_time_format = True
        try:
            words = ExpressionDescriptor(self.cron, options).get_description()
        except FormatException:  # croniter accepted it; say it as written
            words = f"cron {self.cron}"
        return f"{words} ({self.timezone})"


def zone_named(name: str) -> str:
    """`name` as an IANA zone, or a RecurrenceError that says what is accepted."""
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise RecurrenceError(
            f"unknown time zone {name!r}; name an IANA zone like Europe/Berlin or a city "
            "('Berlin time')"
        ) from None
    return name


def looks_like_cron(text: str) -> bool:
    """Whether `text` is written as a cron line (three or more fields, the first two made of
    digits and * / , -) rather than in words."""
    words = text.split()
    if text.strip().lower() in MACROS:
        return True
    return len(words) >= 3 and all(re.fullmatch(r"[0-9*/,-]+", w) for w in words[:2])


def parse_cron(text: str, timezone: str) -> Recurrence:
    """A cron line (five fields, or a macro like @daily) checked by croniter."""
    expression = MACROS.get(text.strip().lower(), text.strip())
    fields = expression.split()
    if len(fields) > CRON_FIELDS and re.search(r"[A-Za-z]/", fields[-1]):
        zone_named(fields[-1])  # a zone after the fields that is not one: say so
    if len(fields) != CRON_FIELDS:
        raise RecurrenceError(
            f"a cron expression has five fields (minute hour day-of-month month day-of-week); "
            f"{text!r} has {len(fields)}"
        )
    expression = " ".join(fields)
    try:
        croniter(expression)
    except (CroniterError, ValueError) as exc:
        raise RecurrenceError(f"{text!r} is not a valid cron expression ({exc})") from None
    return Recurrence(expression, zone_named(timezone))
