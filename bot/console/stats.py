"""Usage over time, from the model calls the transcript recorded: per day (cost by channel,
cache hit ratio, tokens by kind), the totals at the top of the sessions page, and one
session's calls in order. Pure functions over `UsagePoint`s and transcript entries."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from bot.agent.pricing import PriceList
from bot.store.base import UsagePoint
from bot.transcript import AssistantReply, Entry
from bot.types import Usage

DAYS_SHOWN = 14
WEEK_DAYS = 7


def hit_ratio(usage: Usage) -> float:
    return usage.cache_read_tokens / usage.prompt_tokens if usage.prompt_tokens else 0.0


@dataclass(slots=True)
class DayUsage:
    day: dt.date
    cost_by_channel: dict[str, float] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    calls: int = 0

    @property
    def cost(self) -> float:
        return sum(self.cost_by_channel.values())


@dataclass(frozen=True, slots=True)
class Totals:
    cost: float
    calls: int
    usage: Usage


@dataclass(frozen=True, slots=True)
class CallPoint:
    """One model call of a session: when, what it cost, how much of its prompt was cached."""

    at: float
    cost: float
    cache_hit: float


def first_day(now: float, zone: dt.tzinfo, days: int = DAYS_SHOWN) -> float:
    """The start (unix seconds) of the oldest day shown, in `zone`."""
    today = dt.datetime.fromtimestamp(now, zone).date()
    start = dt.datetime.combine(today - dt.timedelta(days=days - 1), dt.time(), zone)
    return start.timestamp()


def daily(
    points: Iterable[UsagePoint],
    *,
    now: float,
    zone: dt.tzinfo,
    prices: PriceList,
    days: int = DAYS_SHOWN,
) -> list[DayUsage]:
    """One entry per day of the last `days` days (oldest first), empty days included."""
    today = dt.datetime.fromtimestamp(now, zone).date()
    shown = [today - dt.timedelta(days=n) for n in range(days - 1, -1, -1)]
    by_day = {day: DayUsage(day) for day in shown}
    for point in points:
        bucket = by_day.get(dt.datetime.fromtimestamp(point.created_at, zone).date())
        if bucket is None:
            continue
        cost = prices.cost(point.model, point.usage)
        channel = point.channel or "unknown"
        bucket.cost_by_channel[channel] = bucket.cost_by_channel.get(channel, 0.0) + cost
        bucket.usage = bucket.usage + point.usage
        bucket.calls += 1
    return [by_day[day] for day in shown]


def totals(days: list[DayUsage], last: int) -> Totals:
    """Cost, calls and tokens of the newest `last` days of `days`."""
    window = days[-last:]
    usage = Usage()
    for day in window:
        usage = usage + day.usage
    return Totals(sum(d.cost for d in window), sum(d.calls for d in window), usage)


def channels_of(days: list[DayUsage]) -> list[str]:
    return sorted({channel for day in days for channel in day.cost_by_channel})


def cost_series(days: list[DayUsage]) -> dict[str, list[float]]:
    series: dict[str, list[float]] = defaultdict(list)
    for channel in channels_of(days):
        series[channel] = [day.cost_by_channel.get(channel, 0.0) for day in days]
    return dict(series)


def token_series(days: list[DayUsage]) -> dict[str, list[float]]:
    return {
        "input": [float(d.usage.input_tokens) for d in days],
        "cache read": [float(d.usage.cache_read_tokens) for d in days],
        "cache write": [float(d.usage.cache_write_tokens) for d in days],
        "output": [float(d.usage.output_tokens) for d in days],
    }


def session_calls(entries: Iterable[Entry], *, model: str, prices: PriceList) -> list[CallPoint]:
    """The session's model calls in order, each priced with the model that answered."""
    calls = []
    for entry in entries:
        if entry.usage is None or not isinstance(entry.payload, AssistantReply):
            continue
        cost = prices.cost(entry.payload.model or model, entry.usage)
        calls.append(CallPoint(entry.created_at, cost, hit_ratio(entry.usage)))
    return calls
