"""Start-up after a crash: messages left unanswered are answered once, and so is a message
that arrives while the service is still starting (found by bench/reliability.py: it used to
be queued twice, once by `accept` and once more as "unanswered"); timed work is back too."""

from __future__ import annotations

import re
from pathlib import Path

from bot.app import App
from bot.config import load_config
from bot.store.sqlite import SQLiteStore
from channels.registry import CHANNELS
from tests.app_harness import Harness, RecordingChannel, message
from tests.fakes.anthropic import FakeAnthropic
from tests.krill_process import KrillProcess


class AcceptsWhileStarting(RecordingChannel):
    """A channel whose platform delivers a message the moment it connects."""

    app: App | None = None

    async def start(self) -> None:
        await super().start()
        assert self.app is not None
        await self.app.gateway.accept(message("arrived during start-up"))


async def test_unanswered_and_start_up_messages_are_each_answered_once(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    harness = Harness(tmp_path, fake_anthropic.url)
    config = load_config(str(harness.config_path), env=harness.env, channels=CHANNELS)
    # A message accepted by a process that then died before answering it.
    store = SQLiteStore(config.sqlite_path)
    await store.open()
    left = message("left unanswered")
    await store.accept_inbound(
        "local", left.message_id, "agent:main:local:direct:alice", left.to_json()
    )
    await store.close()

    app = App(config, with_server=False, background=True)
    channel = AcceptsWhileStarting()
    channel.app = app
    app.add_channel(channel)
    async with app:
        await app.gateway.lanes.wait_idle()
    answered = "\n".join(channel.finals)
    assert answered.count("left unanswered") == 1
    assert answered.count("arrived during start-up") == 1
    assert len(fake_anthropic.message_requests) == len(channel.finals)


async def test_a_sessions_scheduled_flush_is_back_after_kill_9(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    env = fake_anthropic.env()
    krill = await KrillProcess(tmp_path, {}, env).start()
    try:
        await krill.chat("remember that the boat is blue")
        before = await krill.chat("/status")
    finally:
        await krill.kill()
    async with KrillProcess(tmp_path, {}, env) as restarted:
        after = await restarted.chat("/status")
    assert re.search(r"idle flush in \d+s", before["replies"][0])
    assert re.search(r"idle flush in \d+s", after["replies"][0])
    assert "scheduler: 1 job(s) rebuilt from the store" in restarted.log()
