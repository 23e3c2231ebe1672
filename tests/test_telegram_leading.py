"""Long polling in exactly one replica, in-process: two Telegram channels sharing one store
(each with its own leader lock view) against the fake Bot API, which answers a second
poller with 409 like the real one."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from bot.gateway.leader import Leader
from bot.store.base import Store
from channels.telegram import polling
from channels.telegram.adapter import TelegramChannel
from channels.telegram.config import TelegramConfig
from tests.fakes.telegram import FakeTelegram
from tests.replica_storage import STORES, opened_store
from tests.stub_gateway import StubGateway

SECONDS = 1.0
RENEW = 0.2


@pytest.fixture(params=STORES)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    async with opened_store(request, tmp_path) as opened:
        yield opened


def replica(
    fake: FakeTelegram, store: Store, holder: str, ahead: float = 0.0
) -> tuple[TelegramChannel, StubGateway]:
    settings = TelegramConfig(enabled=True, token=fake.token, api_base_url=fake.url)
    leader = Leader(
        store,
        settings.polling_lock,
        holder=holder,
        seconds=SECONDS,
        renew_every=RENEW,
        clock=lambda: time.time() + ahead,
    )
    core = StubGateway()
    return TelegramChannel(settings, core, leader=leader), core


async def until(condition: Callable[[], object], within: float = 5.0) -> None:
    """Wait for `condition` (a channel's state or the fake's calls, which have no event)."""
    async with asyncio.timeout(within):
        while not condition():  # noqa: ASYNC110
            await asyncio.sleep(0.02)


async def test_only_the_leader_polls_and_the_other_takes_over_when_it_stops(
    fake_telegram: FakeTelegram, store: Store
) -> None:
    first, first_core = replica(fake_telegram, store, "replica-a")
    second, second_core = replica(fake_telegram, store, "replica-b")
    await first.start()
    await second.start()
    try:
        assert not first.standby and second.standby and second.healthy
        fake_telegram.push_update(fake_telegram.private_message(42, "to whoever leads"))
        assert [m.text for m in await first_core.wait(1)] == ["to whoever leads"]
        assert len(fake_telegram.pollers()) == 1
        deletes = len(fake_telegram.calls_to("deleteWebhook"))

        await first.stop()  # graceful: confirms its offset, then releases the lock
        await until(lambda: not second.standby, within=RENEW * 5)
        fake_telegram.push_update(fake_telegram.private_message(42, "after the handover"))
        assert [m.text for m in await second_core.wait(1)] == ["after the handover"]
        assert [m.text for m in first_core.accepted] == ["to whoever leads"]
        # The new leader deleted any leftover webhook before polling; no poll was cut off.
        assert len(fake_telegram.calls_to("deleteWebhook")) == deletes + 1
        assert fake_telegram.poll_conflicts == 0
    finally:
        await second.stop()
        await first.stop()


async def test_a_leader_that_loses_its_lock_stops_polling_at_once(
    fake_telegram: FakeTelegram, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="channels.telegram")
    first, _ = replica(fake_telegram, store, "replica-a")
    await first.start()
    # A replica whose clock is far ahead sees the lock as expired and takes it, as if the
    # leader had stalled past it; the leader learns at its next renewal.
    second, second_core = replica(fake_telegram, store, "replica-b", ahead=SECONDS * 3)
    await second.start()
    try:
        assert not second.standby
        await until(lambda: first.standby, within=RENEW * 5)
        assert "lost the polling lock; stopping polling and standing by" in caplog.text
        mark = len(fake_telegram.calls)
        fake_telegram.push_update(fake_telegram.private_message(42, "only once"))
        assert [m.text for m in await second_core.wait(1)] == ["only once"]
        # The poll that confirms it comes from the new leader alone. (The old leader's last
        # poll may have met a 409: here the lock changed hands early, by the skewed clock.)
        await until(lambda: fake_telegram.pollers(mark))
        assert len(fake_telegram.pollers(mark)) == 1
    finally:
        await second.stop()
        await first.stop()


async def test_a_webhook_replica_that_stops_leaves_the_webhook_to_the_others(
    fake_telegram: FakeTelegram,
) -> None:
    """In webhook mode every replica receives; one stopping (an upgrade, a scale-down) must
    not delete the webhook the others still serve."""
    settings = TelegramConfig(
        enabled=True,
        token=fake_telegram.token,
        api_base_url=fake_telegram.url,
        mode="webhook",
        webhook_url="https://bot.example.org/telegram/webhook",
        webhook_secret="secret",
    )
    replicas = [TelegramChannel(settings, StubGateway()) for _ in range(2)]
    for channel in replicas:
        await channel.start()
    assert not any(channel.standby for channel in replicas)
    await replicas[0].stop()
    assert fake_telegram.webhook is not None
    assert fake_telegram.webhook["url"] == "https://bot.example.org/telegram/webhook"
    await replicas[1].stop()
    assert fake_telegram.calls_to("deleteWebhook") == []
    assert fake_telegram.calls_to("getUpdates") == []


async def test_a_409_while_leading_is_logged_once_and_backed_off(
    fake_telegram: FakeTelegram, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Some other program polls the same token: the leader backs off and says so once,
    instead of a warning at every retry."""
    monkeypatch.setattr(polling, "FIRST_BACKOFF", 0.05)
    caplog.set_level(logging.DEBUG, logger="channels.telegram")
    fake_telegram.fail_next_getupdates_conflict(times=4)
    core = StubGateway()
    channel = TelegramChannel(
        TelegramConfig(enabled=True, token=fake_telegram.token, api_base_url=fake_telegram.url),
        core,
    )
    await channel.start()
    try:
        fake_telegram.push_update(fake_telegram.private_message(42, "once it is free"))
        assert [m.text for m in await core.wait(1)] == ["once it is free"]
    finally:
        await channel.stop()
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len([w for w in warnings if "409 Conflict" in w]) == 1
    assert "Telegram polling recovered after 4 failed attempt(s)" in caplog.text
    delays = [
        float(r.getMessage().rpartition("retrying in ")[2].rstrip("s"))
        for r in caplog.records
        if "409 Conflict" in r.getMessage()
    ]
    assert delays == sorted(delays) and delays[-1] > delays[0]  # backed off, not looped
