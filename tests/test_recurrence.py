"""Schedules as people write them: plain English and cron read into a cron line in a zone,
its next runs (DST included), what it missed, its smallest gap and its words; anything not
understood is refused with what to write instead, never guessed."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest

from bot.recurrence import Recurrence, RecurrenceError, parse_schedule

BERLIN = ZoneInfo("Europe/Berlin")


def ts(year: int, month: int, day: int, hour: int = 0, minute: int = 0, tz: str = "UTC") -> float:
    return dt.datetime(year, month, day, hour, minute, tzinfo=ZoneInfo(tz)).timestamp()


def local(at: float, tz: str) -> str:
    return dt.datetime.fromtimestamp(at, ZoneInfo(tz)).strftime("%a %Y-%m-%d %H:%M")


@pytest.mark.parametrize(
    ("when", "cron"),
    [
        ("every weekday at 9:00", "0 9 * * 1-5"),
        ("every 2 hours", "0 */2 * * *"),
        ("on the first Monday of each month at 10:00", "0 10 * * 1#1"),
        ("every day at 18:30", "30 18 * * *"),
        ("every Monday and Thursday at 18:30", "30 18 * * 1,4"),
        ("mondays at 9am", "0 9 * * 1"),
        ("every mon-fri at 7:45", "45 7 * * 1-5"),
        ("every weekend at 10", "0 10 * * 0,6"),
        ("every hour at :15", "15 * * * *"),
        ("hourly", "0 * * * *"),
        ("every 15 minutes", "*/15 * * * *"),
        ("every 30 minutes between 9:00 and 17:00 on weekdays", "*/30 9-16 * * 1-5"),
        ("every 2 hours from 9 to 17", "0 9-17/2 * * *"),
        ("every day at 9am and 5pm", "0 9,17 * * *"),
        ("daily at noon", "0 12 * * *"),
        ("every sunday at midnight", "0 0 * * 0"),
        ("on the 15th of each month at 8am", "0 8 15 * *"),
        ("every month on the 1st and 15th at 9", "0 9 1,15 * *"),
        ("on the last Friday of every month at 16:00", "0 16 * * L5"),
        ("on the last day of the month at 23:00", "0 23 L * *"),
        ("every year on March 14 at 8am", "0 8 14 3 *"),
        ("Every day at 9 o'clock.", "0 9 * * *"),
        ("0 9 * * 1-5", "0 9 * * 1-5"),
        ("  */10   *  * * * ", "*/10 * * * *"),
        ("@daily", "0 0 * * *"),
    ],
)
def test_plain_english_and_cron_become_one_cron_line(when: str, cron: str) -> None:
    assert parse_schedule(when, "UTC").cron == cron


@pytest.mark.parametrize(
    ("when", "zone", "cron"),
    [
        ("every day at 18:30 Berlin time", "Europe/Berlin", "30 18 * * *"),
        ("every day at 9 in New York", "America/New_York", "0 9 * * *"),
        ("every friday at 5pm in London", "Europe/London", "0 17 * * 5"),
        ("0 9 * * 1-5 Europe/Berlin", "Europe/Berlin", "0 9 * * 1-5"),
        ("TZ=Asia/Tokyo 30 8 * * *", "Asia/Tokyo", "30 8 * * *"),
        ("every day at 9:00 UTC", "UTC", "0 9 * * *"),
        ("every weekday at 9:00", "Europe/Paris", "0 9 * * 1-5"),  # agent.timezone
    ],
)
def test_a_named_zone_wins_over_the_default(when: str, zone: str, cron: str) -> None:
    recurrence = parse_schedule(when, "Europe/Paris")
    assert (recurrence.timezone, recurrence.cron) == (zone, cron)


def test_first_monday_of_the_month_is_only_first_mondays() -> None:
    # In plain cron "0 10 1-7 * 1" would run on every day 1-7 and every Monday (the two
    # day fields are ORed); the first Monday is exactly one day a month.
    recurrence = parse_schedule("on the first Monday of each month at 10:00", "Europe/Berlin")
    runs = recurrence.next_runs(ts(2026, 1, 1), 4)
    assert [local(r, "Europe/Berlin") for r in runs] == [
        "Mon 2026-01-05 10:00",
        "Mon 2026-02-02 10:00",
        "Mon 2026-03-02 10:00",
        "Mon 2026-04-06 10:00",
    ]


def test_standard_cron_ors_day_of_month_and_day_of_week() -> None:
    runs = Recurrence("0 9 1 * 1", "UTC").next_runs(ts(2026, 1, 1), 3)
    assert [local(r, "UTC") for r in runs] == [
        "Thu 2026-01-01 09:00",  # the 1st
        "Mon 2026-01-05 09:00",  # a Monday
        "Mon 2026-01-12 09:00",
    ]


def test_weekdays_count_from_sunday_as_in_crontab() -> None:
    runs = parse_schedule("0 9 * * 1-5", "UTC").next_runs(ts(2026, 1, 3), 2)  # a Saturday
    assert [local(r, "UTC") for r in runs] == ["Mon 2026-01-05 09:00", "Tue 2026-01-06 09:00"]


@pytest.mark.parametrize(
    ("start", "expected_utc"),
    [
        # Spring: CET (UTC+1) on Saturday 28 March 2026, CEST (UTC+2) from Sunday 29 March.
        (ts(2026, 3, 27, 12), ["08:00", "07:00", "07:00"]),
        # Autumn: CEST until Sunday 25 October 2026, CET after.
        (ts(2026, 10, 23, 12), ["07:00", "08:00", "08:00"]),
    ],
)
def test_a_nine_oclock_berlin_job_stays_at_nine_local_across_dst(
    start: float, expected_utc: list[str]
) -> None:
    recurrence = parse_schedule("every day at 9:00 Berlin time", "UTC")
    runs = recurrence.next_runs(start, 3)
    assert [dt.datetime.fromtimestamp(r, BERLIN).strftime("%H:%M") for r in runs] == ["09:00"] * 3
    assert [local(r, "UTC")[-5:] for r in runs] == expected_utc


def test_a_time_the_clock_skips_runs_right_after_the_change() -> None:
    recurrence = Recurrence("30 2 * * *", "Europe/Berlin")
    runs = recurrence.next_runs(ts(2026, 3, 28, 12), 2)
    assert [local(r, "Europe/Berlin") for r in runs] == [
        "Sun 2026-03-29 03:00",  # 02:30 does not exist that night
        "Mon 2026-03-30 02:30",
    ]


def test_runs_through_lists_what_was_missed() -> None:
    recurrence = Recurrence("0 * * * *", "UTC")
    missed = recurrence.runs_through(ts(2026, 5, 1, 9), ts(2026, 5, 1, 11, 30), 100)
    assert [local(r, "UTC") for r in missed] == ["Fri 2026-05-01 10:00", "Fri 2026-05-01 11:00"]
    assert recurrence.runs_through(ts(2026, 5, 1, 9), ts(2026, 5, 1, 9, 59), 100) == []


@pytest.mark.parametrize(
    ("cron", "gap_minutes"),
    [
        ("*/15 * * * *", 15),
        ("0 */2 * * *", 120),
        ("0 9,17 * * *", 8 * 60),
        ("0,5 9 1 1 *", 5),  # two runs five minutes apart once a year
        ("0 9 * * 1-5", 24 * 60),
    ],
)
def test_the_smallest_gap_between_runs(cron: str, gap_minutes: int) -> None:
    assert Recurrence(cron, "UTC").smallest_gap(ts(2026, 2, 1)) == gap_minutes * 60


def test_a_schedule_is_said_back_in_words_with_its_zone() -> None:
    assert parse_schedule("every weekday at 9:00 Berlin time", "UTC").describe() == (
        "At 09:00, Monday through Friday (Europe/Berlin)"
    )
    assert parse_schedule("on the first Monday of each month at 10:00", "UTC").describe() == (
        "At 10:00, on the first Monday of the month (UTC)"
    )


@pytest.mark.parametrize(
    ("when", "says"),
    [
        ("", "when is empty"),
        ("at 9:00", "reads as one time"),
        ("tomorrow at 9", "reads as one time"),
        ("every other day at 9", "could not read 'other'"),
        ("every day except sunday at 9", "could not read 'except'"),
        ("every weekday at 9:00 Mars time", "could not read 'mars"),
        ("every day", "at what time?"),
        ("every 90 minutes", "divides an hour"),
        ("every 5 hours", "divides a day"),
        ("every day at 9:00 and 17:30", "one job per time"),
        ("every tuesday at 25:00", "not a time of day"),
        ("every day at 13pm", "the hour is 1-12"),
        ("every 2 hours at 9:00", "not both"),
        ("every month on the 32nd at 9", "no day 32"),
        ("0 9 * * * *", "has 6"),
        ("0 9 * *", "has 4"),
        ("0 25 * * *", "not a valid cron expression"),
        ("0 9 * * 1 Moon/Base", "unknown time zone 'Moon/Base'"),
        ("every day at 9 Moon/Base", "unknown time zone 'Moon/Base'"),
    ],
)
def test_what_cannot_be_read_is_refused_with_what_to_write(when: str, says: str) -> None:
    with pytest.raises(RecurrenceError, match=None) as caught:
        parse_schedule(when, "UTC")
    assert says in str(caught.value)


def test_a_schedule_that_never_runs_is_refused_when_asked_for_runs() -> None:
    recurrence = parse_schedule("0 9 31 2 *", "UTC")
    with pytest.raises(RecurrenceError, match="never runs"):
        recurrence.next_after(ts(2026, 1, 1))
