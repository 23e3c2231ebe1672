"""Reminders: reading `when` with a fixed clock and timezone, the limits (10 s to a year,
pending per person), and the tools' own-reminders-only rules, against a real store."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from bot.scheduler.when import WhenError, check_due, parse_when
from bot.store.base import ReminderStatus
from bot.tools.registry import ToolContext, ToolError
from bot.types import Address
from tests.app_harness import Harness
from tests.fakes.anthropic import FakeAnthropic

TZ = "Europe/Berlin"
# Sunday 2026-03-15 17:25 in Berlin.
NOW = dt.datetime(2026, 3, 15, 17, 25, tzinfo=ZoneInfo(TZ)).timestamp()


def local(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, ZoneInfo(TZ)).strftime("%a %Y-%m-%d %H:%M")


@pytest.mark.parametrize(
    ("when", "expected"),
    [
        ("in 10 minutes", "Sun 2026-03-15 17:35"),
        ("in 2 hours", "Sun 2026-03-15 19:25"),
        ("tomorrow 9:00", "Mon 2026-03-16 09:00"),
        ("next monday 8am", "Mon 2026-03-16 08:00"),
        ("18:00", "Sun 2026-03-15 18:00"),  # later today
        ("8:00", "Mon 2026-03-16 08:00"),  # already past today: tomorrow
        ("2026-03-20T09:30", "Fri 2026-03-20 09:30"),  # ISO 8601 in agent.timezone
        ("2026-03-20T09:30:00+00:00", "Fri 2026-03-20 10:30"),  # with an offset
    ],
)
def test_when_is_read_in_the_agent_timezone(when: str, expected: str) -> None:
    assert local(parse_when(when, NOW, TZ)) == expected


def test_unreadable_when_and_limits_are_refused_with_what_to_do() -> None:
    with pytest.raises(WhenError, match="could not read"):
        parse_when("when the cows come home", NOW, TZ)
    with pytest.raises(WhenError, match="10 seconds"):
        check_due(NOW + 5, NOW)
    with pytest.raises(WhenError, match="10 seconds"):
        check_due(NOW - 60, NOW)
    with pytest.raises(WhenError, match="a year"):
        check_due(NOW + 400 * 86400, NOW)
    check_due(NOW + 10, NOW)


def ctx(session_id: str, principal: str, *, admin: bool = False) -> ToolContext:
    return ToolContext(
        session_key="agent:main:local:direct:alice",
        session_id=session_id,
        principal=principal,
        is_direct=True,
        workspace=Path("."),
        admin=admin,
    )


async def call(h: Harness, name: str, args: dict[str, Any], context: ToolContext) -> Any:
    assert h.app is not None
    tool = h.app.tools.get(name)
    assert tool is not None
    return await tool.handler(args, context)


async def test_tools_keep_to_the_limit_and_to_their_own_reminders(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    config = "[reminders]\nmax_pending_per_person = 2\n"
    async with Harness(tmp_path, fake_anthropic.url, config) as h:
        await h.send("hello")  # the session and its address exist from here on
        session = await h.app.store.current_session("agent:main:local:direct:alice")
        alice = ctx(session.session_id, "local:alice")
        first = await call(h, "reminder_create", {"when": "in 1 hour", "text": "tea"}, alice)
        await call(h, "reminder_create", {"when": "tomorrow 9:00", "text": "post"}, alice)
        with pytest.raises(ToolError, match="limit is 2"):
            await call(h, "reminder_create", {"when": "in 2 hours", "text": "x"}, alice)
        with pytest.raises(ToolError, match="10 seconds"):
            await call(h, "reminder_create", {"when": "in 3 seconds", "text": "x"}, alice)
        listed = await call(h, "reminder_list", {}, alice)
        bob = ctx(session.session_id, "local:bob")
        bob_list = await call(h, "reminder_list", {}, bob)
        with pytest.raises(ToolError, match="no pending reminder #1"):
            await call(h, "reminder_cancel", {"id": 1}, bob)
        cancelled = await call(h, "reminder_cancel", {"id": 1}, alice)
        rows = await h.app.store.reminders()
    assert first.startswith("Reminder set: #1") and "tea" in first
    assert "#1" in listed and "#2" in listed and "post" in listed
    assert bob_list == "No pending reminders in this conversation."
    assert cancelled.startswith("Cancelled: #1")
    assert [r.status for r in rows] == [ReminderStatus.CANCELLED, ReminderStatus.PENDING]
    assert rows[0].address == Address("local", "alice")
