"""Days and months of the spending caps turn over at midnight in agent.timezone."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

from bot.spending.periods import PeriodKind, day_of, describe_reset, period_of, periods_of

BERLIN = ZoneInfo("Europe/Berlin")


def at(*parts: int, zone: dt.tzinfo = BERLIN) -> float:
    return dt.datetime(*parts, tzinfo=zone).timestamp()


def test_a_day_ends_at_the_next_local_midnight() -> None:
    # 23:30 in Berlin is 21:30 UTC: still the 4th there, however UTC counts.
    day = period_of(PeriodKind.DAY, at(2026, 5, 4, 23, 30), BERLIN)
    assert day.key == "2026-05-04"
    assert day.ends_at == at(2026, 5, 5, 0, 0)
    assert period_of(PeriodKind.DAY, at(2026, 5, 5, 0, 0), BERLIN).key == "2026-05-05"
    assert day_of(at(2026, 5, 4, 23, 30), BERLIN) == "2026-05-04"
    assert day_of(at(2026, 5, 4, 23, 30), ZoneInfo("UTC")) == "2026-05-04"
    assert day_of(at(2026, 5, 5, 0, 30), ZoneInfo("UTC")) == "2026-05-04"


def test_the_day_clocks_spring_forward_has_23_hours() -> None:
    day = period_of(PeriodKind.DAY, at(2026, 3, 29, 12, 0), BERLIN)
    assert day.ends_at - at(2026, 3, 29, 0, 0) == 23 * 3600


def test_a_month_ends_on_the_first_of_the_next_even_in_december() -> None:
    day, month = periods_of(at(2026, 12, 31, 22, 0), BERLIN)
    assert (day.key, month.key) == ("2026-12-31", "2026-12")
    assert month.ends_at == day.ends_at == at(2027, 1, 1, 0, 0)
    february = period_of(PeriodKind.MONTH, at(2028, 2, 29, 9, 0), BERLIN)
    assert (february.key, february.ends_at) == ("2028-02", at(2028, 3, 1, 0, 0))


def test_resets_are_said_in_the_zone_people_live_in() -> None:
    day, month = periods_of(at(2026, 5, 4, 18, 0), BERLIN)
    assert describe_reset(day, BERLIN) == "at midnight (00:00 Europe/Berlin, 2026-05-05)"
    assert describe_reset(month, BERLIN) == "on 1 June 2026 (00:00 Europe/Berlin)"
