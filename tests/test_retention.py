"""`storage.retention_days`: the daily job prunes finished inbound and dedupe rows and old
sessions' transcripts once they are older than that, seen through a clock moved ahead."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from bot.scheduler.retention import RETENTION_JOB
from tests.app_harness import Harness, message
from tests.fakes.anthropic import FakeAnthropic

DAY = 86_400.0
KEY = "agent:main:local:direct:alice"


class Clock:
    """Wall-clock time plus a shift the test sets."""

    def __init__(self) -> None:
        self.shift = 0.0

    def __call__(self) -> float:
        return time.time() + self.shift


async def test_old_rows_and_old_sessions_are_pruned_current_ones_stay(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    clock = Clock()
    toml = "[storage]\nretention_days = 30\n[memory]\nenabled = false\n"
    async with Harness(tmp_path, fake_anthropic.url, toml, clock=clock) as h:
        assert h.app is not None
        store, retention = h.app.store, h.app.scheduler.retention
        first = message("hello there")
        await h.send(first)
        old = await store.current_session(KEY)
        await h.send("/reset")
        await h.send("and hello again")
        current = await store.current_session(KEY)
        assert old is not None and current is not None and old.session_id != current.session_id

        # The daily job ran once at start-up and is due again a day later.
        async with asyncio.timeout(5):
            while await store.job_last_run(RETENTION_JOB) is None:  # noqa: ASYNC110
                await asyncio.sleep(0.05)
        next_run = h.app.scheduler.jobs.next_run(RETENTION_JOB)
        assert next_run is not None and next_run > time.time() + DAY - 60

        clock.shift = 29 * DAY
        assert (await retention.run()).total == 0

        clock.shift = 31 * DAY
        pruned = await retention.run()
        assert pruned.sessions == 1 and pruned.entries > 0
        assert pruned.inbound == 3  # two answered messages and the /reset command
        assert not await store.seen_inbound("local", first.message_id)
        assert await store.transcript(old.session_id) == []
        assert await store.transcript(current.session_id) != []
        sessions = await store.list_sessions(current_only=False)
        assert [s.session_id for s in sessions] == [current.session_id]


async def test_retention_off_by_default_keeps_everything(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    async with Harness(tmp_path, fake_anthropic.url, "[memory]\nenabled = false\n") as h:
        assert h.app is not None
        assert not h.app.scheduler.retention.enabled
        assert h.app.scheduler.jobs.next_run(RETENTION_JOB) is None
