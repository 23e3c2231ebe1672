"""Start and stop of the real `App` as `krill run` builds it (store, MCP server over stdio,
scheduler, HTTP server, web chat, Telegram polling against the fake Bot API, outbox sender):
components stop in the reverse of their start order, and when the Nth component fails to
start, for each N, the ones before it are stopped and no task, listening socket, child
process or thread is left."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from bot.app import App
from bot.config import Config, load_config
from bot.lifespan import Lifespan
from channels.registry import CHANNELS
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.mcp_server import stdio_command
from tests.fakes.telegram import FakeTelegram
from tests.krill_process import free_port, write_config

# Every component of this set-up, in start order; a new component must be added here, so
# the failed-start test below covers it.
COMPONENTS = (
    "store",
    "model client",
    "MCP servers",
    "scheduler",
    "gateway",
    "server",
    "channel local",
    "channel telegram",
    "outbox sender",
)


class StartFailed(Exception):
    pass


def service_config(tmp_path: Path, tg: FakeTelegram, model: FakeAnthropic, port: int) -> Config:
    command, *args = stdio_command()
    path = write_config(
        tmp_path,
        {
            "server": {"port": port},
            "anthropic": {"max_retries": 0},
            "telegram": {"enabled": True, "token": tg.token, "api_base_url": tg.url},
            "mcp": {"servers": {"fake": {"command": command, "args": args}}},
        },
    )
    env = {"ANTHROPIC_API_KEY": "test", "ANTHROPIC_BASE_URL": model.url}
    return load_config(str(path), env=env, channels=CHANNELS)


def children() -> set[int]:
    """This process's child processes (zombies included: an unreaped child is left too)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:  # it ended meanwhile
            continue
        if int(fields[1]) == os.getpid():
            found.add(int(stat.parent.name))
    return found


async def listening(port: int) -> bool:
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return False
    writer.close()
    return True


def fail_starting(monkeypatch: pytest.MonkeyPatch, failing: str) -> None:
    """Make the component named `failing` fail after its own start did its work: the worst
    case, a component halfway up."""
    original = Lifespan.start

    async def start(
        self: Lifespan,
        name: str,
        begin: Callable[[], Awaitable[object]] | None,
        stop: Callable[[], Awaitable[object]],
    ) -> None:
        if name != failing:
            return await original(self, name, begin, stop)

        async def fails() -> None:
            if begin is not None:
                await begin()
            raise StartFailed(name)

        await original(self, name, fails, stop)

    monkeypatch.setattr(Lifespan, "start", start)


async def test_components_stop_in_the_reverse_of_their_start_order(
    tmp_path: Path,
    fake_telegram: FakeTelegram,
    fake_anthropic: FakeAnthropic,
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = service_config(tmp_path, fake_telegram, fake_anthropic, free_port())
    caplog.set_level(logging.DEBUG, logger="bot.lifespan")
    async with App(config, background=True) as app:
        started = list(app.lifespan.components)
    stopped = [r.args[0] for r in caplog.records if r.msg == "stopping %s"]  # type: ignore[index]
    assert started == list(COMPONENTS)
    assert stopped == started[::-1]


@pytest.mark.parametrize("failing", COMPONENTS)
async def test_a_component_that_fails_to_start_leaves_nothing_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    tasks_before = asyncio.all_tasks()
    threads_before = set(threading.enumerate())
    children_before = children()
    port = free_port()
    fail_starting(monkeypatch, failing)
    # The fakes stop before the count, so whatever task is left is Krill's.
    async with FakeTelegram() as tg, FakeAnthropic() as model:
        app = App(service_config(tmp_path, tg, model, port), background=True)
        with pytest.raises(StartFailed):
            async with app:
                pytest.fail("the App started although a component failed")
        assert not await listening(port)
    left = [t for t in asyncio.all_tasks() - tasks_before if not t.done()]
    assert not left, f"tasks left after {failing} failed to start: {left}"
    assert children() - children_before == set()
    # A store's connection thread ends soon after it is closed; one never closed runs on.
    # (The event loop's executor threads live as long as the loop, not the App.)
    threads = [t for t in set(threading.enumerate()) - threads_before if t.name[:8] != "asyncio_"]
    for thread in threads:
        thread.join(timeout=5)
    assert [t for t in threads if t.is_alive()] == []
