"""The console's day and per-call figures: calls land on their day in the configured zone,
cost is split by channel and priced per model, empty days stay in the charts, and the
charts scale to their container."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

from bot.agent.pricing import PriceList, estimate_cost
from bot.console import charts, stats
from bot.store.base import Store, UsagePoint
from bot.transcript import AssistantReply, Entry, PersonTurn
from bot.types import ChatType, SessionOrigin, Usage

ZONE = ZoneInfo("Europe/Berlin")
NOW = dt.datetime(2026, 3, 10, 12, 0, tzinfo=ZONE).timestamp()
USAGE = Usage(input_tokens=100, output_tokens=50, cache_read_tokens=300, cache_write_tokens=0)


def at(day: int, hour: int) -> float:
    return dt.datetime(2026, 3, day, hour, 0, tzinfo=ZONE).timestamp()


def test_calls_land_on_their_local_day_and_split_by_channel() -> None:
    points = [
        UsagePoint("s1", "telegram", "claude-sonnet-4-6", at(10, 0) + 60, USAGE),  # 00:01 local
        UsagePoint("s2", "slack", "claude-opus-4-1", at(10, 9), USAGE),
        UsagePoint("s1", "telegram", "claude-sonnet-4-6", at(3, 9), USAGE),  # before the week
        UsagePoint("s1", "telegram", "claude-sonnet-4-6", at(1, 9), USAGE),  # not shown at all
    ]
    days = stats.daily(points, now=NOW, zone=ZONE, prices=PriceList({}, "5m"), days=8)
    assert [d.day.day for d in days] == [3, 4, 5, 6, 7, 8, 9, 10]
    today = days[-1]
    assert today.calls == 2
    assert today.cost_by_channel == {
        "telegram": estimate_cost("claude-sonnet-4-6", USAGE),
        "slack": estimate_cost("claude-opus-4-1", USAGE),
    }
    week = stats.totals(days, stats.WEEK_DAYS)
    assert week.calls == 2 and week.usage.cache_read_tokens == 600
    assert stats.totals(days, 8).calls == 3
    assert stats.hit_ratio(week.usage) == 0.75
    assert stats.cost_series(days)["slack"][:-1] == [0.0] * 7


def test_session_calls_price_each_reply_with_its_model() -> None:
    entries = [
        Entry("s", PersonTurn(messages=[])),
        Entry("s", AssistantReply(content=[], model="claude-haiku-4-5"), usage=USAGE),
        Entry("s", AssistantReply(content=[]), usage=Usage(input_tokens=10)),
    ]
    calls = stats.session_calls(entries, model="claude-opus-4-1", prices=PriceList({}, "5m"))
    assert [c.cost for c in calls] == [
        estimate_cost("claude-haiku-4-5", USAGE),
        estimate_cost("claude-opus-4-1", Usage(input_tokens=10)),
    ]
    assert [c.cache_hit for c in calls] == [0.75, 0.0]


def test_charts_scale_through_their_viewbox_and_escape_labels() -> None:
    svg = charts.stacked_bars("Cost", ["<a>", "b"], {"x<y": [1.0, 3.0]}, str)
    assert 'viewBox="0 0' in svg and "width=" not in svg.split("<svg", 1)[1].split(">", 1)[0]
    assert "&lt;a&gt;" in svg and "x&lt;y" in svg and "<a>" not in svg
    assert charts.line("Hit", ["a", "b"], [None, 0.5], str).count("<circle") == 1


async def test_the_store_returns_usage_since_a_moment_with_channel_and_model(
    any_store: Store,
) -> None:
    store = any_store
    origin = SessionOrigin("telegram", ChatType.DIRECT, "42", peer_id="42")
    session = await store.get_or_create_session("agent:main:telegram:direct:42", origin)
    await store.append_entries(
        [
            Entry(session.session_id, PersonTurn(messages=[]), created_at=100.0),
            Entry(
                session.session_id,
                AssistantReply(content=[], model="claude-haiku-4-5"),
                usage=USAGE,
                created_at=101.0,
            ),
            Entry(session.session_id, AssistantReply(content=[]), usage=USAGE, created_at=50.0),
        ]
    )
    points = await store.usage_since(100.0)
    assert points == [UsagePoint(session.session_id, "telegram", "claude-haiku-4-5", 101.0, USAGE)]
