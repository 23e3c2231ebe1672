"""Run the real `krill run` process in end-to-end tests: write a config, start, wait for
/healthz, talk to it, stop it (gracefully or with kill -9), read its log."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from pathlib import Path
from typing import Any

import aiohttp
import tomli_w

# Generous: start-up takes a second alone but much longer on a loaded 2-core CI machine.
STARTUP_TIMEOUT = 60.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_config(directory: Path, config: dict[str, Any]) -> Path:
    """Write krill.toml; server host/port, storage and workspace default to this folder."""
    data = {k: dict(v) if isinstance(v, dict) else v for k, v in config.items()}
    server = data.setdefault("server", {})
    server.setdefault("host", "127.0.0.1")
    server.setdefault("port", free_port())
    data.setdefault("storage", {}).setdefault("url", "sqlite:///data/krill.db")
    data.setdefault("workspace", {}).setdefault("path", "workspace")
    path = directory / "krill.toml"
    path.write_bytes(tomli_w.dumps(data).encode())
    return path


class KrillProcess:
    """`async with KrillProcess(tmp_path, config, env) as krill:` -> a running service."""

    def __init__(
        self,
        directory: Path,
        config: dict[str, Any] | None = None,
        env: dict[str, str] | None = None,
        *,
        args: list[str] | None = None,
        wait_healthy: bool = True,
        log_name: str | None = None,
        bare: bool = False,
        module: str = "bot.cli",
    ):
        self.directory = directory
        self.config_path = write_config(directory, config or {})
        self.config = (config or {}) | {}
        import tomllib

        written = tomllib.loads(self.config_path.read_text())
        self.port = int(written["server"]["port"])
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = env or {}
        # README's quick start: no krill.toml at all, the port from the environment.
        self.bare = bare
        if bare:
            self.config_path.unlink()
            self.env = {"KRILL_SERVER__PORT": str(self.port)} | self.env
        self.args = args or ["run"]
        self.wait_healthy = wait_healthy
        self.module = module  # what `python -m` runs: the `krill` command line
        # Processes sharing a folder (replicas) name their logs; otherwise one per start.
        log_name = log_name or f"krill-{len(list(directory.glob('krill-*.log')))}"
        self.log_path = directory / f"{log_name}.log"
        self.proc: asyncio.subprocess.Process | None = None

    def command_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("KRILL_", "ANTHROPIC_"))}
        env.update(self.env)
        env.setdefault("KRILL_LOG_LEVEL", "INFO")
        return env

    async def start(self) -> KrillProcess:
        log = self.log_path.open("wb")
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            self.module,
            *self.args,
            *([] if self.bare else ["--config", str(self.config_path)]),
            cwd=self.directory,
            env=self.command_env(),
            stdout=log,
            stderr=asyncio.subprocess.STDOUT,
        )
        log.close()
        if self.wait_healthy:
            await self.wait_for_health()
        return self

    async def wait_for_health(self, timeout: float = STARTUP_TIMEOUT) -> None:
        deadline = asyncio.get_running_loop().time() + timeout
        async with aiohttp.ClientSession() as http:
            while True:
                if self.proc is not None and self.proc.returncode is not None:
                    raise AssertionError(f"krill exited with {self.proc.returncode}:\n{self.log()}")
                try:
                    async with http.get(f"{self.url}/healthz") as resp:
                        if resp.status == 200:
                            return
                except aiohttp.ClientError:
                    pass
                if asyncio.get_running_loop().time() > deadline:
                    raise AssertionError(f"krill did not become healthy:\n{self.log()}")
                await asyncio.sleep(0.1)

    async def chat(self, text: str, user: str = "tester", **extra: Any) -> dict[str, Any]:
        """Send through the local web channel's JSON API and wait for the reply."""
        async with aiohttp.ClientSession() as http:
            async with http.post(
                f"{self.url}/api/chat", json={"user": user, "text": text, **extra}
            ) as resp:
                assert resp.status == 200, await resp.text()
                return dict(await resp.json())

    async def get(self, path: str) -> tuple[int, str]:
        async with aiohttp.ClientSession() as http, http.get(f"{self.url}{path}") as resp:
            return resp.status, await resp.text()

    async def stop(self, timeout: float = 15.0) -> int:
        if self.proc is None or self.proc.returncode is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return await asyncio.wait_for(self.proc.wait(), timeout)
        except TimeoutError:
            self.proc.kill()
            return await self.proc.wait()

    async def kill(self) -> None:
        """kill -9: no chance to clean up, as in a crash."""
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    async def logged(self, needle: str, within: float = 10.0) -> None:
        """Wait until the process has logged `needle` (a file has no change event to await)."""
        async with asyncio.timeout(within):
            while needle not in self.log():  # noqa: ASYNC110
                await asyncio.sleep(0.05)

    async def __aenter__(self) -> KrillProcess:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


async def run_cli(
    directory: Path,
    *args: str,
    env: dict[str, str] | None = None,
    stdin: bytes | None = None,
    timeout: float = 60.0,
    module: str = "bot.cli",
) -> tuple[int, str, str]:
    """Run `krill ARGS` (`python -m module ARGS`) to completion; returns (exit code, stdout,
    stderr)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("KRILL_", "ANTHROPIC_"))}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        module,
        *args,
        cwd=directory,
        env=base | (env or {}),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(stdin), timeout)
    except TimeoutError:  # e.g. `krill run` that started when it should have refused to
        proc.kill()
        await proc.wait()
        raise
    return proc.returncode or 0, out.decode(), err.decode()
