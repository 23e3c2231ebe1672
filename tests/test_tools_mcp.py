"""MCP servers through the real SDK: tools listed as `<server>__<tool>`, calls, errors, a
crashing server restarted in the background, start failures, HTTP transport, doctor."""

from __future__ import annotations

import asyncio
import re
import socket
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from bot.checks import FAIL, OK
from bot.config import Config, ToolResultsConfig, load_config
from bot.errors import ConfigError
from bot.memory.access import readable
from bot.tools.mcp import (
    McpManager,
    ServerState,
    check_servers,
    redact,
    registered_name,
    secret_values,
)
from bot.tools.registry import ToolContext, ToolRegistry
from bot.tools.results import ResultProcessor, ResultStore
from channels.registry import CHANNELS
from tests.fakes.mcp_server import stdio_command

FAKE_TOOLS = ["fake__big", "fake__crash", "fake__echo", "fake__fail", "fake__slow"]
WAIT_SECONDS = 15.0


async def wait_until(predicate: Callable[[], bool], within: float = WAIT_SECONDS) -> None:
    async with asyncio.timeout(within):
        # Polling: the state belongs to the server's supervisor task, which signals nothing.
        while not predicate():  # noqa: ASYNC110
            await asyncio.sleep(0.02)


def stdio_server(*extra: str, **options: Any) -> dict[str, Any]:
    command, *args = stdio_command(*extra)
    return {"command": command, "args": args, **options}


def mcp_config(tmp_path: Path, servers: dict[str, dict[str, Any]]) -> Config:
    config = Config.model_validate(
        {"mcp": {"servers": servers, "retry_initial": 0.1, "health_interval": 5.0}}
    )
    config.base_dir = tmp_path
    return config


@pytest_asyncio.fixture
async def started(tmp_path: Path) -> AsyncIterator[tuple[McpManager, ToolRegistry]]:
    config = mcp_config(tmp_path, {"fake": stdio_server(timeout=1.0)})
    store = ResultStore(tmp_path, ToolResultsConfig())
    registry = ToolRegistry(result_hook=ResultProcessor(store, readable).process)
    manager = McpManager(config, registry)
    manager.start()
    try:
        await wait_until(lambda: manager.servers[0].state == ServerState.CONNECTED)
        yield manager, registry
    finally:
        await manager.stop()


def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext("key", "sid", "local:t", True, tmp_path, turn_id="turn1")


def call(name: str, **args: Any) -> dict[str, Any]:
    return {"id": f"toolu_{name}", "name": name, "input": args}


def test_registered_names() -> None:
    assert registered_name("github", "create_issue") == "github__create_issue"
    assert registered_name("fs", "read.file/v2") == "fs__read_file_v2"
    assert len(registered_name("s", "x" * 100)) == 64


def test_secrets_are_found_and_redacted() -> None:
    config = Config.model_validate(
        {
            "mcp": {
                "servers": {
                    "a": {"url": "https://u:pw-secret@h.test/mcp?key=tok123", "headers": {}},
                    "b": {"command": "x", "env": {"API_TOKEN": "sekrit-value"}},
                    "c": {"url": "https://h.test/", "headers": {"Authorization": "Bearer abc123"}},
                }
            }
        }
    ).mcp.servers
    assert "pw-secret" in secret_values(config["a"]) and "key=tok123" in secret_values(config["a"])
    assert redact("env sekrit-value leaked", secret_values(config["b"])) == "env *** leaked"
    assert redact("sent abc123", secret_values(config["c"])) == "sent ***"


@pytest.mark.parametrize(
    ("toml", "error"),
    [
        ("[mcp.servers.x]\n", "mcp.servers.x: Value error, set either command"),
        ('[mcp.servers.x]\ncommand = "a"\nurl = "http://h/"\n', "set either command"),
        ('[mcp.servers.a__b]\ncommand = "a"\n', "mcp.servers: Value error, server name 'a__b'"),
    ],
)
def test_config_rejects_bad_servers(tmp_path: Path, toml: str, error: str) -> None:
    path = tmp_path / "krill.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError, match=re.escape(error)):
        load_config(str(path), env={}, channels=CHANNELS)


async def test_tools_are_listed_and_called(started, tmp_path: Path) -> None:
    manager, registry = started
    assert [n for n in registry.names() if n.startswith("fake__")] == FAKE_TOOLS
    echo = next(d for d in registry.definitions() if d["name"] == "fake__echo")
    assert echo["description"] == "Return the text it was given."
    assert echo["input_schema"]["properties"]["text"]["type"] == "string"
    result = await registry.run(call("fake__echo", text="hi there"), ctx(tmp_path))
    assert not result.is_error
    assert str(result.content).startswith('<<<UNTRUSTED source="mcp:fake"')
    assert "echo: hi there" in str(result.content)
    assert manager.status_line("any") == "MCP: fake up (5 tools)"


async def test_errors_timeouts_and_large_output(started, tmp_path: Path) -> None:
    _, registry = started
    failed = await registry.run(call("fake__fail", reason="nope"), ctx(tmp_path))
    assert failed.is_error
    assert "reported an error" in str(failed.content) and "UNTRUSTED" in str(failed.content)
    slow = await registry.run(call("fake__slow", seconds=3), ctx(tmp_path))
    assert slow.is_error and "timed out after 1s" in str(slow.content)
    big = await registry.run(call("fake__big", kb=200), ctx(tmp_path))
    assert "[Large result: 200.0 KB" in str(big.content)
    assert len(list((tmp_path / "tool-results").glob("*/*/*.txt"))) == 1


async def test_a_crashed_server_answers_with_errors_and_comes_back(started, tmp_path) -> None:
    manager, registry = started
    server = manager.servers[0]
    crashed = await registry.run(call("fake__crash"), ctx(tmp_path))
    assert crashed.is_error
    assert "Connection closed" in str(crashed.content)
    await wait_until(lambda: server.state != ServerState.CONNECTED)
    # While it is down its tools stay listed and answer with an error the model can read.
    assert "fake__echo" in registry.names()
    await wait_until(lambda: server.state == ServerState.CONNECTED)
    again = await registry.run(call("fake__echo", text="back"), ctx(tmp_path))
    assert not again.is_error and "echo: back" in str(again.content)


async def test_down_server_calls_fail_fast(started, tmp_path: Path) -> None:
    manager, registry = started
    server = manager.servers[0]
    server.state = ServerState.DOWN  # as between a crash and the restart
    server.error = "connection lost"
    result = await registry.run(call("fake__echo", text="x"), ctx(tmp_path))
    assert result.is_error and "is not connected (down: connection lost)" in str(result.content)


async def test_start_failures_are_retried_without_blocking(tmp_path: Path) -> None:
    config = mcp_config(
        tmp_path,
        {
            "missing": {"command": str(tmp_path / "no-such-server"), "env": {"TOKEN": "hidden1"}},
            "hangs": stdio_server("--hang", start_timeout=0.3),
        },
    )
    registry = ToolRegistry()
    manager = McpManager(config, registry)
    manager.start()  # returns at once
    try:
        missing, hangs = manager.servers
        await wait_until(lambda: missing.state == ServerState.DOWN and missing.next_retry_at > 0)
        assert "FileNotFoundError" in missing.error
        await wait_until(lambda: "did not start within" in hangs.error)
        line = manager.status_line("k") or ""
        assert "missing down (FileNotFoundError" in line and "retry in" in line
        assert "hidden1" not in line
        assert registry.names() == []
    finally:
        await manager.stop()


async def test_doctor_starts_each_server(tmp_path: Path) -> None:
    config = mcp_config(
        tmp_path, {"good": stdio_server(), "bad": {"command": str(tmp_path / "missing")}}
    )
    checks = {c.name: c for c in await check_servers(config)}
    assert checks["mcp good"].status == OK and "started, 5 tool(s)" in checks["mcp good"].detail
    assert checks["mcp bad"].status == FAIL and "could not start" in checks["mcp bad"].detail
    empty = await check_servers(mcp_config(tmp_path, {}))
    assert [(c.name, c.status) for c in empty] == [("mcp", OK)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_streamable_http_server(tmp_path: Path) -> None:
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        *stdio_command("--http", str(port))[1:],
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        config = mcp_config(
            tmp_path, {"web": {"url": url, "headers": {"Authorization": "Bearer t0ken"}}}
        )
        registry = ToolRegistry()
        manager = McpManager(config, registry)
        manager.start()  # the first attempts may fail until the server listens
        try:
            await wait_until(lambda: manager.servers[0].state == ServerState.CONNECTED)
            result = await registry.run(call("web__echo", text="over http"), ctx(tmp_path))
            assert result.content == "echo: over http"  # no result hook in this registry
        finally:
            await manager.stop()
    finally:
        process.terminate()
        await process.wait()


async def test_a_server_printing_its_environment_leaks_no_secret(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Its stderr goes through the log redactor (for `krill run` and `krill doctor`) instead
    of straight to Krill's own stderr."""
    canary = "canary-Zq81xPw0Lm44"
    server = stdio_server("--print-env", env={"UPSTREAM_PASS": canary})
    config = mcp_config(tmp_path, {"leaky": server})
    caplog.set_level("INFO", logger="bot.tools.mcp")
    checks = await check_servers(config)
    assert checks[0].status == OK
    await wait_until(lambda: "UPSTREAM_PASS=" in caplog.text)
    assert "MCP server leaky (stderr): UPSTREAM_PASS=" in caplog.text
    assert canary[6:-4] not in caplog.text  # the redactor's mask keeps only both ends
