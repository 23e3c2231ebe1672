"""When a scheduled job runs: what a person or the model writes (a five-field cron
expression, or plain English, with an optional time zone) read into a `Recurrence` that
croniter evaluates in that zone. Pure functions; nothing here knows about jobs or the
store."""

from __future__ import annotations

from bot.recurrence.cron import Recurrence, RecurrenceError, looks_like_cron, parse_cron
from bot.recurrence.english import english_to_cron
from bot.recurrence.zones import take_zone

__all__ = ["Recurrence", "RecurrenceError", "parse_schedule"]


def parse_schedule(when: str, default_timezone: str) -> Recurrence:
    """`when` as a Recurrence: cron or English, in the zone it names, else
    `default_timezone` (agent.timezone)."""
    text = " ".join(when.split())
    if not text:
        raise RecurrenceError(
            "when is empty; say it like 'every weekday at 9:00' or as cron '0 9 * * 1-5'"
        )
    rest, zone = take_zone(text)
    timezone = zone or default_timezone
    if looks_like_cron(rest):
        return parse_cron(rest, timezone)
    return parse_cron(english_to_cron(rest), timezone)
