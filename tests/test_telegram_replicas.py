"""Telegram long polling with several replicas, end to end: two real `krill run` processes
sharing one store, polling the fake Bot API (which answers a second poller with 409 like the
real one). Exactly one polls and the other stands by; every message is answered once; after
a kill -9 of the leader the other replica polls within 30 s, without a 409 loop."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tests.channel_env import telegram_section
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.telegram import FakeTelegram
from tests.krill_process import KrillProcess, run_cli
from tests.replica_storage import STORES, storage_url

TAKEOVER_LIMIT = 30.0  # docs/contracts.md section 10: another replica polls within 30 s
REPLY_TIMEOUT = 20.0


def replica_config(tg: FakeTelegram, storage_url: str, workspace: Path) -> dict[str, Any]:
    return {
        "anthropic": {"max_retries": 0},
        "storage": {"url": storage_url},
        "workspace": {"path": str(workspace)},  # replicas share one workspace folder
        "telegram": telegram_section(tg, mode="polling"),
    }


async def telegram_health(krill: KrillProcess) -> tuple[int, object]:
    status, body = await krill.get("/healthz")
    return status, json.loads(body)["channels"]["telegram"]


async def answered(tg: FakeTelegram, chat: int, said: str, within: float = REPLY_TIMEOUT) -> None:
    """Wait until the bot's reply to `said` is in `chat` (the fake model echoes it)."""
    async with asyncio.timeout(within):
        while not any(said in m.get("text", "") for m in tg.bot_messages(chat)):  # noqa: ASYNC110
            await asyncio.sleep(0.05)


def replies_to(tg: FakeTelegram, said: str) -> int:
    return sum(said in text for text in tg.sent_texts())


async def status_leader(krill: KrillProcess) -> str | None:
    code, out, err = await run_cli(
        krill.directory, "status", "--json", "--config", str(krill.config_path)
    )
    assert code == 0, err
    return json.loads(out)["telegram"]["leader"]


async def run_two_replicas(
    tmp_path: Path, tg: FakeTelegram, model: FakeAnthropic, url: str
) -> None:
    workspace = tmp_path / "workspace"
    dirs = [tmp_path / "replica-a", tmp_path / "replica-b"]
    for d in (workspace, *dirs):
        d.mkdir()
    env = model.env()
    first = await KrillProcess(dirs[0], replica_config(tg, url, workspace), env).start()
    second = KrillProcess(dirs[1], replica_config(tg, url, workspace), env)
    restarted: KrillProcess | None = None
    try:
        assert await telegram_health(first) == (200, True)
        await second.start()
        mark = len(tg.calls)
        # Waiting for the lock is not being down: the replica stays 200.
        assert await telegram_health(second) == (200, "standby")
        assert f":{first.proc.pid}:" in (await status_leader(second) or "")

        said = [(100 + i, f"message number {i}") for i in range(4)]
        for chat, text in said:
            tg.push_update(tg.private_message(chat, text))
        for chat, text in said:
            await answered(tg, chat, text)
        assert [replies_to(tg, text) for _, text in said] == [1, 1, 1, 1]
        assert len(tg.pollers(mark)) == 1 and tg.poll_conflicts == 0
        assert await telegram_health(second) == (200, "standby")

        await first.kill()  # kill -9: no lock released, its row must expire
        async with asyncio.timeout(TAKEOVER_LIMIT):  # polling again (True), not standby
            while await telegram_health(second) != (200, True):  # noqa: ASYNC110
                await asyncio.sleep(0.2)
        tg.push_update(tg.private_message(200, "after the takeover"))
        await answered(tg, 200, "after the takeover")
        assert replies_to(tg, "after the takeover") == 1
        assert f":{second.proc.pid}:" in (await status_leader(second) or "")

        # The killed replica comes back and stands by; the leader keeps polling.
        restarted = await KrillProcess(dirs[0], replica_config(tg, url, workspace), env).start()
        assert await telegram_health(restarted) == (200, "standby")
        tg.push_update(tg.private_message(201, "with both up again"))
        await answered(tg, 201, "with both up again")
        assert replies_to(tg, "with both up again") == 1
    finally:
        for krill in (restarted, second, first):
            if krill is not None:
                await krill.stop()
    # No replica ever polled against another: no 409 answered, none in any log.
    assert tg.poll_conflicts == 0
    for log in (first.log(), second.log(), restarted.log() if restarted else ""):
        assert "409 Conflict" not in log
    assert "lost the polling lock" not in second.log()


@pytest.fixture(params=STORES)
def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return storage_url(request, tmp_path)


async def test_two_replicas_on_one_store_poll_one_at_a_time(
    tmp_path: Path, fake_telegram: FakeTelegram, fake_anthropic: FakeAnthropic, shared_url: str
) -> None:
    await run_two_replicas(tmp_path, fake_telegram, fake_anthropic, shared_url)
