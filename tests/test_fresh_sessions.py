"""Automatic fresh sessions (`[session.reset]`): the pure idle/daily decision, and end to
end with a test clock: after the idle time the old session is flushed, a new session starts
whose first request carries a short summary, and the reply says so once. A reminder's turn
is not activity: it does not hold the reset off."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from bot.config import SessionResetConfig
from bot.memory.fresh_start import SUMMARY_SYSTEM
from bot.sessions.fresh import fresh_reason
from bot.types import ChatType
from tests.app_harness import Harness
from tests.fakes.anthropic import FakeAnthropic, Reply

KEY = "agent:main:local:direct:alice"
GROUP_KEY = "agent:main:local:group:g1"
SUMMARY = "- planning the Lisbon trip; the hotel is not booked yet"
TZ = "Europe/Berlin"


def at(day: int, hour: int, minute: int = 0) -> float:
    return dt.datetime(2026, 3, day, hour, minute, tzinfo=ZoneInfo(TZ)).timestamp()


def test_idle_and_daily_decisions() -> None:
    idle = SessionResetConfig(mode="idle", idle_after="90s")
    assert fresh_reason(idle, 1000.0, 1089.0, TZ) is None
    assert fresh_reason(idle, 1000.0, 1090.0, TZ) == "idle"
    assert fresh_reason(idle, None, 99999.0, TZ) is None  # nothing to leave behind
    assert fresh_reason(SessionResetConfig(), 0.0, 1e9, TZ) is None  # mode off
    daily = SessionResetConfig(mode="daily", at="04:00")
    assert fresh_reason(daily, at(14, 3, 59), at(14, 4, 1), TZ) == "daily"
    assert fresh_reason(daily, at(14, 4, 1), at(14, 23), TZ) is None
    assert fresh_reason(daily, at(14, 23), at(15, 3, 30), TZ) is None  # not 04:00 yet
    assert fresh_reason(daily, at(14, 23), at(15, 4, 0), TZ) == "daily"


class JumpClock:
    """The wall clock plus an offset a test moves forward."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


def script(body: dict[str, Any]) -> Reply | str:
    system = str(body.get("system"))
    last = body["messages"][-1]["content"]
    text = last if isinstance(last, str) else " ".join(str(b.get("text", "")) for b in last)
    if SUMMARY_SYSTEM[:40] in system:
        return SUMMARY
    if "[Memory flush" in text:
        return "NO_REPLY"
    return "noted"


async def test_idle_conversation_continues_in_a_fresh_session_that_remembers(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.default_handler = script
    clock = JumpClock()
    config = '[session.reset]\nmode = "idle"\nidle_after = "30s"\n'
    async with Harness(tmp_path, fake_anthropic.url, config, clock=clock) as h:
        store = h.app.store
        await h.send("let's plan the Lisbon trip")
        old = await store.current_session(KEY)
        await h.send("the hotel can wait")
        assert (await store.current_session(KEY)).session_id == old.session_id
        clock.offset += 31  # thirty-one quiet seconds
        before = len(fake_anthropic.message_requests)
        await h.send("where were we?")
        requests = fake_anthropic.message_requests[before:]
        fresh = await store.current_session(KEY)
        notice_reply = h.channel.finals[-1]
        await h.send("and the flights?")
        later_reply = h.channel.finals[-1]
        await h.send("/status")
        status = h.channel.finals[-1]
        old_row = await store.get_session(old.session_id)
    assert fresh.session_id != old.session_id
    assert old_row.memory_flush_count == 1  # flushed before the switch
    kinds = [("flush" if "[Memory flush" in r.last_user_text else "turn") for r in requests]
    assert kinds[0] == "flush"  # the old session went to memory first
    turn = requests[-1]
    assert "where were we?" in turn.last_user_text
    assert SUMMARY in str(turn.messages[0])  # the new session's first turn carries it
    assert notice_reply.startswith("🆕 A fresh session began")
    assert old.session_id in notice_reply and f"krill sessions show {KEY}" in notice_reply
    assert notice_reply.endswith("noted")
    assert later_reply == "noted"  # told once
    assert f"Previous session: {old.session_id}" in status


async def test_groups_follow_the_same_rule(tmp_path: Path, fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.default_handler = script
    clock = JumpClock()
    config = '[session.reset]\nmode = "idle"\nidle_after = "5s"\n'
    group = {"chat_type": ChatType.GROUP, "chat_id": "g1", "mentioned": True}
    async with Harness(tmp_path, fake_anthropic.url, config, clock=clock) as h:
        await h.send("group plans", **group)
        old = await h.app.store.current_session(GROUP_KEY)
        clock.offset += 6
        await h.send("anyone here?", **group)
        fresh = await h.app.store.current_session(GROUP_KEY)
    assert old is not None and fresh is not None and fresh.session_id != old.session_id
    assert h.channel.finals[-1].startswith("🆕 A fresh session began")


async def test_a_reminder_turn_does_not_hold_off_the_idle_reset(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.default_handler = script
    clock = JumpClock()
    config = '[session.reset]\nmode = "idle"\nidle_after = "30s"\n'
    async with Harness(tmp_path, fake_anthropic.url, config, clock=clock) as h:
        store = h.app.store
        await h.send("remind me to stretch")
        old = await store.current_session(KEY)
        clock.offset += 20
        reminder = await store.reminder_add(
            session_key=KEY,
            address=old.address,
            creator="local:alice",
            due_at=clock(),
            text="stretch",
            created_at=clock() - 20,
        )
        await h.app.scheduler.reminders.fire(str(reminder.id))
        deadline = time.time() + 10
        while len(h.channel.finals) < 2:  # until the reminder is delivered
            assert time.time() < deadline, "the reminder was not delivered"
            await asyncio.sleep(0.05)
        clock.offset += 15  # 35 s since alice wrote, 15 s since the reminder
        await h.send("back again")
        fresh = await store.current_session(KEY)
    assert fresh.session_id != old.session_id
    assert h.channel.finals[-1].startswith("🆕 A fresh session began")


async def test_the_carry_over_summary_uses_the_sessions_model(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.default_handler = script
    clock = JumpClock()
    config = (
        '[agent]\nmodels = ["claude-sonnet-4-6", "claude-haiku-4-5"]\n'
        '[session.reset]\nmode = "idle"\nidle_after = "30s"\n'
    )
    async with Harness(tmp_path, fake_anthropic.url, config, clock=clock) as h:
        await h.send("/model claude-haiku-4-5")
        await h.send("let's plan the Lisbon trip")
        clock.offset += 31
        await h.send("where were we?")
    carry = [r for r in fake_anthropic.message_requests if SUMMARY_SYSTEM[:40] in r.system_text]
    assert len(carry) == 1
    assert {r.body["model"] for r in fake_anthropic.message_requests} == {"claude-haiku-4-5"}
