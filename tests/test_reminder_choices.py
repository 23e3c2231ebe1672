"""When a snoozed reminder is due again: some minutes after the press, or tomorrow at the time
of day it was due (in agent.timezone, across a daylight-saving change too)."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

from bot.scheduler.reminder_choices import snooze_until

BERLIN = ZoneInfo("Europe/Berlin")


def at(*parts: int) -> float:
    return dt.datetime(*parts, tzinfo=BERLIN).timestamp()


def test_minutes_count_from_the_press() -> None:
    assert snooze_until("600", 5_000.0, 1_000.0, "UTC") == 5_600.0


def test_tomorrow_is_the_same_time_of_day_as_it_was_due() -> None:
    due, pressed = at(2026, 3, 10, 9, 0), at(2026, 3, 10, 9, 4)
    assert snooze_until("tomorrow", pressed, due, "Europe/Berlin") == at(2026, 3, 11, 9, 0)
    # Clocks go forward on 29 March: still 09:00 on the wall, 23 hours later.
    due, pressed = at(2026, 3, 28, 9, 0), at(2026, 3, 28, 9, 1)
    later = snooze_until("tomorrow", pressed, due, "Europe/Berlin")
    assert later == at(2026, 3, 29, 9, 0) and later - pressed < 23 * 3600
