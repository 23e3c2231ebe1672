"""Wiring of the running service: store, model, workspace, tools, core, channels and server.

`App.start()` brings everything up in dependency order and `App.stop()` takes it down in
reverse; `run_service` adds signal handling for `krill run`.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import signal
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from bot.agent.model import ModelClient
from bot.agent.runner import AgentRunner
from bot.agent.workspace import Workspace, ensure_workspace
from bot.channel_contract import Channel
from bot.config import Config
from bot.gateway import Core
from bot.metrics import Metrics
from bot.server import build_server
from bot.store.base import Store
from bot.store.sqlite import SQLiteStore
from bot.tools.registry import ToolRegistry

log = logging.getLogger(__name__)

# Optional parts register here so the core never imports them: each is called with the
# App after the core exists and may return an async stop callable.
Extension = Callable[["App"], Awaitable[Callable[[], Awaitable[None]] | None]]
EXTENSIONS: list[str] = ["bot.context.pipeline", "bot.tools.extension", "bot.memory.extension"]

PLATFORM_CHANNELS = {"telegram": "channels.telegram", "slack": "channels.slack"}


class App:
    def __init__(self, config: Config, *, with_server: bool = True, recover: bool = True):
        self.config = config
        self.with_server = with_server
        self.recover = recover
        self.metrics = Metrics()
        self.store: Store = SQLiteStore(config.sqlite_path)
        self.model = ModelClient(config)
        self.workspace = Workspace(
            config.workspace_dir,
            file_max_chars=config.workspace.file_max_chars,
            total_max_chars=config.workspace.total_max_chars,
        )
        self.tools = ToolRegistry()
        self.channels: dict[str, Channel] = {}
        self.runner = AgentRunner(
            config=config,
            store=self.store,
            model=self.model,
            workspace=self.workspace,
            tools=self.tools,
            channels=self.channels,
            metrics=self.metrics,
        )
        self.core = Core(
            config=config,
            store=self.store,
            model=self.model,
            runner=self.runner,
            channels=self.channels,
            metrics=self.metrics,
        )
        self._ready: dict[str, bool] = {}
        self._runner: web.AppRunner | None = None
        self._stops: list[Callable[[], Awaitable[None]]] = []
        self.server_url = ""

    def add_channel(self, channel: Channel) -> None:
        self.channels[channel.name] = channel
        self._ready[channel.name] = False

    def _platform_channels(self) -> list[Channel]:
        found = []
        for name, module_name in PLATFORM_CHANNELS.items():
            if getattr(self.config, name).enabled:
                module: Any = importlib.import_module(module_name)
                found.append(module.create(self.config, self.core))
        return found

    async def start(self) -> None:
        if ensure_workspace(self.workspace.path):
            log.info("created workspace %s from the bundled template", self.workspace.path)
        await self.store.open()
        if not self.model.configured:
            log.warning(
                "ANTHROPIC_API_KEY is not set: Krill will run, but every reply will ask the "
                "operator to set it (export ANTHROPIC_API_KEY=... or anthropic.api_key in "
                "krill.toml)"
            )
        if self.with_server and self.config.local.enabled:
            from channels.local.web import WebChannel, is_loopback_host

            token = self.config.local.token
            if token or is_loopback_host(self.config.server.host):
                self.add_channel(WebChannel(self.core, self.core.wait_idle, token=token))
            else:
                log.warning(
                    "the local web chat is off: server.host %s is reachable from the network "
                    "and local.token is not set",
                    self.config.server.host,
                )
        for channel in self._platform_channels():
            self.add_channel(channel)
        for name in EXTENSIONS:
            extension: Extension = importlib.import_module(name).extension
            stop = await extension(self)
            if stop is not None:
                self._stops.append(stop)
        # Read before any channel can accept a message: one accepted during start-up is
        # queued by `accept` already and must not be queued a second time as "unanswered".
        unanswered = await self.store.unfinished_inbound() if self.recover else []
        if self.with_server:
            await self._start_server()
        for name, channel in self.channels.items():
            await channel.start()
            self._ready[name] = True
            log.info("channel %s is up", name)
        recovered = await self.core.recover(unanswered) if self.recover else 0
        if recovered:
            log.info("answering %d message(s) accepted before the last shutdown", recovered)

    def _health(self) -> dict[str, bool]:
        return {
            name: up and getattr(self.channels[name], "healthy", True)
            for name, up in self._ready.items()
        }

    async def _start_server(self) -> None:
        routes = [route for channel in self.channels.values() for route in channel.routes()]
        app = build_server(
            metrics=self.metrics,
            ready=self._health,
            routes=routes,
            max_body_bytes=self.config.server.max_body_bytes,
            allowed_hosts=self.config.server.allowed_hosts,
        )
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.config.server.host, self.config.server.port)
        await site.start()
        sockets = getattr(site._server, "sockets", None) or []
        port = sockets[0].getsockname()[1] if sockets else self.config.server.port
        self.server_url = f"http://{self.config.server.host}:{port}"
        log.info("listening on %s", self.server_url)

    async def stop(self) -> None:
        for name, channel in reversed(list(self.channels.items())):
            try:
                await channel.stop()
            except Exception:
                log.exception("channel %s did not stop cleanly", name)
        await self.core.close()
        for stop in reversed(self._stops):
            with contextlib.suppress(Exception):
                await stop()
        if self._runner is not None:
            await self._runner.cleanup()
        await self.model.close()
        await self.store.close()


async def run_service(config: Config) -> None:
    app = App(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    try:
        await app.start()
        await stop.wait()
        log.info("shutting down")
    finally:
        await app.stop()
