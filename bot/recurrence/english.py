"""Plain English schedules turned into a five-field cron expression: "every weekday at 9:00",
"every 2 hours", "on the first Monday of each month at 10:00", "every 30 minutes between
9:00 and 17:00 on weekdays", "every year on March 14 at 8am". Every word must be
understood: a schedule with a word left over is refused with what was not read, never
guessed at, so a misparse cannot quietly become a job that runs at the wrong time.

The time zone is read separately (bot/recurrence/zones.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from bot.recurrence.cron import RecurrenceError

DAYS = {
    "sunday": 0, "sun": 0, "monday": 1, "mon": 1, "tuesday": 2, "tue": 2, "tues": 2,
    "wednesday": 3, "wed": 3, "thursday": 4, "thu": 4, "thur": 4, "thurs": 4, "friday": 5,
    "fri": 5, "saturday": 6, "sat": 6,
}  # fmt: skip
MONTHS = {
    "january": 1, "jan": 1, "february": 2, "feb": 2, "march": 3, "mar": 3, "april": 4,
    "apr": 4, "may": 5, "june": 6, "jun": 6, "july": 7, "jul": 7, "august": 8, "aug": 8,
    "september": 9, "sep": 9, "sept": 9, "october": 10, "oct": 10, "november": 11, "nov": 11,
    "december": 12, "dec": 12,
}  # fmt: skip
NUMBERS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "eight": 8, "ten": 10,
    "twelve": 12, "fifteen": 15, "twenty": 20, "thirty": 30,
}  # fmt: skip
ORDINALS = {
    "first": "1", "1st": "1", "second": "2", "2nd": "2", "third": "3", "3rd": "3",
    "fourth": "4", "4th": "4", "fifth": "5", "5th": "5", "last": "L",
}  # fmt: skip

_DAY = r"(?:" + "|".join(sorted(DAYS, key=len, reverse=True)) + r")s?"
_MONTH = r"(?:" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")"
_NUM = r"(?:\d+|" + "|".join(NUMBERS) + r")"
_ORD = r"(?:" + "|".join(ORDINALS) + r")"
_AMPM = r"(?:am|pm|a\.m\.|p\.m\.)"
# A time of day: 9:00, 09.30, 9am, 9:30 pm, noon, midnight (a bare hour only after "at").
_CLOCK = rf"(?:\d{{1,2}}[:.h]\d{{2}}(?:\s*{_AMPM})?|\d{{1,2}}\s*{_AMPM}|noon|midday|midnight)"
_AT_TIME = rf"(?:{_CLOCK}|\d{{1,2}}(?:\s*o'?clock)?)"
_AND = r"\s*(?:,|&|\band\b)\s*"
_EVERY = r"(?:every|each)"
_MONTH_END = rf"(?:of|in)\s+(?:{_EVERY}|the|a)\s+month"

# Words that carry no meaning of their own once the parts around them were read.
FILLER = frozenset(
    "every each on at the and of in a an day days daily week weeks weekly month months "
    "monthly year years yearly annually time please , morning mornings evening evenings "
    "night nights afternoon afternoons starting from".split()
)
# Words that make a schedule recurring; without one, "at 9:00" is a one-off.
_PLURAL_DAYS = "|".join(f"{name}s" for name in DAYS if name.endswith("day"))
RECURRING = re.compile(
    rf"\b(?:{_EVERY}|daily|weekly|monthly|yearly|annually|hourly|weekdays|weekends|workdays"
    rf"|{_PLURAL_DAYS})\b|\bof\s+the\s+month\b"
)


@dataclass(slots=True)
class _Parts:
    """What was read so far; `text` keeps what is still unread."""

    text: str
    minutes_step: int | None = None
    hours_step: int | None = None
    minute_past: int | None = None
    times: list[tuple[int, int]] = field(default_factory=list)
    window: tuple[int, int] | None = None
    start: tuple[int, int] | None = None
    weekdays: set[int] = field(default_factory=set)
    nth: str | None = None  # day-of-week field for "first Monday" (1#1) or "last Friday" (L5)
    month_days: list[str] = field(default_factory=list)
    month: int | None = None

    def take(self, pattern: str) -> list[re.Match[str]]:
        """Every match of `pattern` in what is unread, which then no longer is."""
        found = list(re.finditer(pattern, self.text))
        for match in reversed(found):
            self.text = self.text[: match.start()] + " " + self.text[match.end() :]
        return found


def _number(word: str) -> int:
    return int(word) if word.isdigit() else NUMBERS[word]


def clock_time(text: str) -> tuple[int, int]:
    """(hour, minute) of a time of day as people write it; RecurrenceError if impossible."""
    text = text.strip().replace("o'clock", "").replace("oclock", "").strip()
    if text in ("noon", "midday"):
        return 12, 0
    if text == "midnight":
        return 0, 0
    match = re.fullmatch(rf"(\d{{1,2}})(?:[:.h](\d{{2}}))?\s*({_AMPM})?", text)
    if match is None:
        raise RecurrenceError(f"could not read {text!r} as a time of day")
    hour, minute = int(match[1]), int(match[2] or 0)
    ampm = (match[3] or "").replace(".", "")
    if ampm and not 1 <= hour <= 12:
        raise RecurrenceError(f"{text!r} is not a time: with am/pm the hour is 1-12")
    if ampm == "pm" and hour != 12:
        hour += 12
    elif ampm == "am" and hour == 12:
        hour = 0
    if hour > 23 or minute > 59:
        raise RecurrenceError(f"{text!r} is not a time of day")
    return hour, minute


def _read_frequency(parts: _Parts) -> None:
    for match in parts.take(rf"\b{_EVERY}\s+(?:({_NUM})\s+)?(minutes?|mins?|hours?|hrs?)\b"):
        count = _number(match[1]) if match[1] else 1
        if match[2].startswith("m"):
            parts.minutes_step = count
        else:
            parts.hours_step = count
    if parts.take(rf"\b{_EVERY}\s+half\s+(?:an\s+)?hour\b"):
        parts.minutes_step = 30
    if parts.take(rf"\b{_EVERY}\s+quarter\s+(?:of\s+an\s+)?hour\b"):
        parts.minutes_step = 15
    if parts.take(rf"\b{_EVERY}\s+other\s+hour\b"):
        parts.hours_step = 2
    if parts.take(r"\bhourly\b"):
        parts.hours_step = 1
    for match in parts.take(
        r"\bat\s+(?::(\d{2})|(\d{1,2})\s+(?:minutes?\s+)?past(?:\s+the\s+hour)?)"
    ):
        parts.minute_past = int(match[1] or match[2])
    if parts.take(r"\bat\s+half\s+past(?:\s+the\s+hour)?\b"):
        parts.minute_past = 30
    if parts.take(r"\bat\s+(?:a\s+)?quarter\s+past(?:\s+the\s+hour)?\b"):
        parts.minute_past = 15


def _read_times(parts: _Parts) -> None:
    window = parts.take(
        rf"\b(?:between|from)\s+({_AT_TIME})\s+(?:and|to|until|till|through|-)\s+({_AT_TIME})\b"
    )
    for match in window:
        start, end = clock_time(match[1]), clock_time(match[2])
        if start[1] or end[1]:
            raise RecurrenceError("a range of hours starts and ends on the hour (9:00 to 17:00)")
        if end[0] < start[0]:
            raise RecurrenceError("a range of hours must end after it starts, on the same day")
        parts.window = (start[0], end[0])
    for match in parts.take(rf"\b(?:starting\s+(?:at|from)|from)\s+({_AT_TIME})\b"):
        parts.start = clock_time(match[1])
    listed = rf"{_AT_TIME}(?:{_AND}{_AT_TIME})*"
    for match in parts.take(rf"\bat\s+({listed})\b"):
        parts.times += [clock_time(t) for t in re.split(_AND, match[1]) if t.strip()]
    for match in parts.take(rf"\b{_CLOCK}(?![\w:])"):
        parts.times.append(clock_time(match[0]))


def _day_number(word: str) -> int:
    return DAYS[word.rstrip("s") if word.rstrip("s") in DAYS else word]


def _read_days(parts: _Parts) -> None:
    for match in parts.take(rf"\b(?:on\s+)?(?:the\s+)?({_ORD})\s+({_DAY})\s+{_MONTH_END}\b"):
        day = _day_number(match[2])
        order = ORDINALS[match[1]]
        parts.nth = f"L{day}" if order == "L" else f"{day}#{order}"
    month_day = r"(\d{1,2})(?:st|nd|rd|th)?"
    if parts.take(rf"\b(?:on\s+)?(?:the\s+)?last\s+day\s+{_MONTH_END}\b"):
        parts.month_days.append("L")
    for match in parts.take(
        rf"\b(?:on\s+)?(?:the\s+)?{month_day}((?:{_AND}(?:the\s+)?{month_day})*)\s+(?:day\s+)?"
        rf"{_MONTH_END}\b"
    ):
        parts.month_days += re.findall(r"\d{1,2}", match[0])
    for match in parts.take(
        rf"\b(?:{_EVERY}\s+month|monthly)\s+on\s+the\s+{month_day}"
        rf"((?:{_AND}(?:the\s+)?{month_day})*)\b"
    ):
        parts.month_days += re.findall(r"\d{1,2}", match[0])
    for match in parts.take(
        rf"\bon\s+(?:({_MONTH})\s+{month_day}|(?:the\s+)?{month_day}\s+(?:of\s+)?({_MONTH}))\b"
    ):
        parts.month = MONTHS[match[1] or match[4]]
        parts.month_days.append(match[2] or match[3])
    if parts.take(r"\b(?:weekdays?|workdays?|business\s+days?)\b"):
        parts.weekdays |= {1, 2, 3, 4, 5}
    if parts.take(r"\bweekends?\b"):
        parts.weekdays |= {0, 6}
    for match in parts.take(rf"\b({_DAY})\s*(?:-|–|to|through|thru|until)\s*({_DAY})\b"):
        first, last = _day_number(match[1]), _day_number(match[2])
        span = range(first, last + 1) if first <= last else [*range(first, 7), *range(last + 1)]
        parts.weekdays |= set(span)
    for match in parts.take(rf"\b({_DAY})\b"):
        parts.weekdays.add(_day_number(match[1]))


def _check_leftover(parts: _Parts, original: str) -> None:
    unread = [w for w in re.findall(r"[\w'./:-]+|,", parts.text) if w not in FILLER]
    if unread:
        raise RecurrenceError(
            f"could not read {' '.join(unread)!r} in {original!r}. Say it like 'every "
            "weekday at 9:00', 'every 2 hours', 'every Monday and Thursday at 18:30', 'on "
            "the first Monday of each month at 10:00', 'on the 15th of each month at 8am', "
            "or give a five-field cron expression"
        )


def _minute_field(parts: _Parts) -> str:
    if parts.minutes_step is not None:
        step = parts.minutes_step
        if step < 1 or 60 % step:
            raise RecurrenceError(
                f"every {step} minutes cannot be a cron schedule: use a number of minutes "
                "that divides an hour (5, 10, 15, 20, 30) or whole hours"
            )
        return "*" if step == 1 else f"*/{step}"
    return str(parts.minute_past or 0)


def _hour_field(parts: _Parts) -> str:
    step = parts.hours_step
    if step is not None and (step < 1 or 24 % step):
        raise RecurrenceError(
            f"every {step} hours cannot be a cron schedule: use a number of hours that "
            "divides a day (1, 2, 3, 4, 6, 8, 12), or list the times"
        )
    if parts.window is not None:
        start, end = parts.window
        if parts.minutes_step is not None and end > start:
            end -= 1  # "every 30 minutes between 9:00 and 17:00" ends at 16:30
        span = f"{start}-{end}" if end > start else str(start)
        return f"{span}/{step}" if step and step > 1 else span
    if parts.start is not None:
        return f"{parts.start[0]}-23/{step}" if step and step > 1 else f"{parts.start[0]}-23"
    return f"*/{step}" if step and step > 1 else "*"


def _time_fields(parts: _Parts) -> tuple[str, str]:
    """The minute and hour fields."""
    if parts.minutes_step is not None or parts.hours_step is not None:
        if parts.times:
            raise RecurrenceError(
                "give either an interval ('every 2 hours') or times of day ('at 9:00 and "
                "17:00'), not both; 'every 2 hours from 9:00 to 17:00' gives a range"
            )
        if parts.start is not None and parts.minute_past is None:
            parts.minute_past = parts.start[1]
        return _minute_field(parts), _hour_field(parts)
    if not parts.times:
        raise RecurrenceError(
            "at what time? Add one, like 'every day at 9:00' or 'every Monday at 8am'"
        )
    hours = sorted({h for h, _ in parts.times})
    minutes = sorted({m for _, m in parts.times})
    if len(hours) > 1 and len(minutes) > 1:
        raise RecurrenceError(
            "times with different hours and minutes (9:00 and 17:30) cannot be one cron "
            "schedule; set up one job per time"
        )
    return ",".join(map(str, minutes)), ",".join(map(str, hours))


def _day_fields(parts: _Parts) -> tuple[str, str, str]:
    """Day of month, month and day of week."""
    if parts.nth is not None:
        if parts.month_days or parts.weekdays:
            raise RecurrenceError("say either a weekday of the month or dates, not both")
        return "*", "*", parts.nth
    if parts.month_days and parts.weekdays:
        raise RecurrenceError(
            "dates and weekdays together ('the 1st of each month on Mondays') would run on "
            "both in cron; say 'the first Monday of each month' for that"
        )
    days = sorted(set(parts.month_days), key=lambda d: (d == "L", int(d) if d != "L" else 0))
    for day in days:
        if day != "L" and not 1 <= int(day) <= 31:
            raise RecurrenceError(f"there is no day {day} in a month")
    month = str(parts.month) if parts.month is not None else "*"
    weekdays = (
        _runs(sorted(parts.weekdays)) if len(parts.weekdays) < len(set(DAYS.values())) else "*"
    )
    return ",".join(days) or "*", month, weekdays


def _runs(numbers: list[int]) -> str:
    """1,2,3,5 -> "1-3,5": a cron list with its consecutive runs as ranges."""
    spans: list[list[int]] = []
    for number in numbers:
        if spans and number == spans[-1][1] + 1:
            spans[-1][1] = number
        else:
            spans.append([number, number])
    return (
        ",".join(str(a) if a == b else f"{a}-{b}" if b > a + 1 else f"{a},{b}" for a, b in spans)
        or "*"
    )


def english_to_cron(text: str) -> str:
    """The cron expression `text` (lower case, zone already removed) describes."""
    original = text
    text = " " + re.sub(r"\s+", " ", text.lower().strip().rstrip(".!")) + " "
    if not RECURRING.search(text):
        raise RecurrenceError(
            f"{original!r} reads as one time, not a repeating schedule: say how often "
            "('every day at 9:00', 'every Monday at 8am'), or use a reminder for a one-off"
        )
    parts = _Parts(text)
    _read_frequency(parts)
    _read_days(parts)
    _read_times(parts)
    _check_leftover(parts, original)
    minute, hour = _time_fields(parts)
    day, month, weekday = _day_fields(parts)
    if parts.month is not None and not parts.month_days:
        raise RecurrenceError("on which day of the month? e.g. 'every year on March 14 at 9:00'")
    return f"{minute} {hour} {day} {month} {weekday}"
