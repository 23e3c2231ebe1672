"""Two replicas (two `App`s on one store, each running the scheduler with the same jobs) do
each piece of due work once: an overdue idle flush, a due reminder, the heartbeat and the
retention pass, not once per replica."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Any

import pytest

from bot.scheduler.heartbeat import HEARTBEAT_JOB
from bot.scheduler.retention import Retention
from bot.store.base import Pruned, ReminderStatus
from bot.transcript import InternalPrompt, PromptPurpose
from tests.app_harness import Harness
from tests.fakes.anthropic import FakeAnthropic, Reply
from tests.log_sentinel import log_sentinel
from tests.replica_storage import STORES, storage_lines

DM_KEY = "agent:main:local:direct:alice"
FLUSH_MARK = "[Memory flush"
REMINDER_MARK = "[Reminder:"
HEARTBEAT_MARK = "[Heartbeat"
SHORT_TTL = """
[scheduler]
cache_ttl_seconds = 3.0
[memory.flush]
idle_lead_seconds = 1.0
"""
# Phase two adds the heartbeat (a beat is overdue, see below) and the daily retention pass.
HEARTBEAT = "[scheduler]\nheartbeat_minutes = 30\n"
RETENTION = "retention_days = 30\n"


@pytest.fixture(params=STORES)
def storage(request: pytest.FixtureRequest) -> str:
    return storage_lines(request)


BEAT_LOST = f"{HEARTBEAT_JOB} already ran in another process"


class Clock:
    """Wall-clock time plus a shift: the replicas start well after the first one stopped."""

    def __init__(self, shift: float = 0.0) -> None:
        self.shift = shift

    def __call__(self) -> float:
        return time.time() + self.shift


async def settled(*harnesses: Harness) -> None:
    """Until no replica has a flush still scheduled or work in a lane."""
    deadline = time.time() + 10
    for h in harnesses:
        assert h.app is not None
        while h.app.scheduler.idle.next_flush(DM_KEY) is not None:
            assert time.time() < deadline, "a flush stayed scheduled"
            await asyncio.sleep(0.05)
        await asyncio.wait_for(h.app.lanes.wait_idle(), 10)


async def test_two_replicas_do_each_due_piece_of_scheduled_work_once(
    tmp_path: Path, fake_anthropic: FakeAnthropic, monkeypatch: pytest.MonkeyPatch, storage: str
) -> None:
    asked: dict[str, int] = {FLUSH_MARK: 0, REMINDER_MARK: 0, HEARTBEAT_MARK: 0}

    def handler(body: dict[str, Any]) -> Any:
        last = body["messages"][-1]["content"]
        if any(isinstance(b, dict) and b.get("type") == "tool_result" for b in last):
            return "NO_REPLY"  # the flush after its memory_append
        text = str(last)
        for mark in asked:
            if mark in text:
                asked[mark] += 1
        if FLUSH_MARK in text:
            return Reply.tool_use("memory_append", {"text": "Alice is learning Portuguese"})
        if HEARTBEAT_MARK in text:
            return "HEARTBEAT_OK"
        return "Time to stretch!" if REMINDER_MARK in text else "ok"

    fake_anthropic.default_handler = handler
    passes: list[float] = []
    run = Retention.run

    async def counted(self: Retention) -> Pruned:
        passes.append(self.clock())
        return await run(self)

    monkeypatch.setattr(Retention, "run", counted)
    (tmp_path / "workspace").mkdir()
    (tmp_path / "workspace" / "HEARTBEAT.md").write_text("- Is the build green?\n")

    # One replica talks with alice and stops before her session's idle flush is due.
    first_toml = SHORT_TTL + f"[storage]\n{storage}"
    async with Harness(tmp_path, fake_anthropic.url, first_toml) as first:
        assert first.app is not None
        await first.send("I started learning Portuguese this week")
        store = first.app.store
        now = time.time() + 10
        reminder = await store.reminder_add(
            session_key=DM_KEY,
            address=(await store.current_session(DM_KEY)).address,  # type: ignore[union-attr]
            creator="local:alice",
            due_at=now - 5,
            text="stretch",
            created_at=now - 60,
        )
        # The next beat is due a few seconds after the replicas start (after the flush and
        # the reminder, which would make it skip a busy session).
        assert await store.job_claim(HEARTBEAT_JOB, due_before=0.0, at=now + 6 - 1800)

    # Two replicas start later: both find the flush, the reminder and the beat overdue.
    clock = Clock(shift=10)
    toml = SHORT_TTL.replace("[scheduler]\n", HEARTBEAT) + f"[storage]\n{storage}{RETENTION}"
    with (
        log_sentinel(
            "bot.scheduler.jobs", f"{HEARTBEAT_JOB} already ran in", logging.DEBUG
        ) as beat_lost,
        log_sentinel("bot.scheduler.reminders", "was already fired by another") as reminder_lost,
    ):
        async with (
            Harness(tmp_path, fake_anthropic.url, toml, clock=clock) as a,
            Harness(tmp_path, fake_anthropic.url, toml, clock=clock) as b,
        ):
            assert a.app is not None and b.app is not None
            store = a.app.store
            await asyncio.wait_for(beat_lost.wait(), 15)
            await asyncio.wait_for(reminder_lost.wait(), 10)
            deadline = time.time() + 10
            while not (row := await store.current_session(DM_KEY)) or not row.memory_flush_count:
                assert time.time() < deadline, "the overdue flush did not run"
                await asyncio.sleep(0.05)
            while not asked[HEARTBEAT_MARK]:
                assert time.time() < deadline, "the winning replica did not beat"
                await asyncio.sleep(0.05)
            await settled(a, b)
            fired = await store.reminder_get(reminder.id)
            entries = await store.transcript(row.session_id)
            after = await store.current_session(DM_KEY)

    assert asked == {FLUSH_MARK: 1, REMINDER_MARK: 1, HEARTBEAT_MARK: 1}
    assert after is not None and after.memory_flush_count == 1
    assert fired is not None and fired.status == ReminderStatus.SENT
    prompts = [e.payload.purpose for e in entries if isinstance(e.payload, InternalPrompt)]
    assert prompts.count(PromptPurpose.REMINDER) == 1
    assert len(passes) == 1  # the retention pass, due at start-up, ran in one replica
