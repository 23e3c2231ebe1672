"""In-process harness: a real `App` (store, core, runner, model client) wired to the fake
Anthropic server and a channel that records what a person would see."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from bot.app import App
from bot.config import load_config
from bot.types import Address, ChatType, InboundMessage, OutboundMessage, Source
from channels.registry import CHANNELS


@dataclass
class Delivery:
    text: str
    final: bool
    edit_of: str | None
    address: Address
    message_id: str
    sources: tuple[Source, ...] = ()


@dataclass
class RecordingChannel:
    """A channel that keeps every delivery and typing pulse, with no platform behind it."""

    name: str = "local"
    stream_interval: float = 0.0
    typing_interval: float = 0.05
    chunk_size: int = 0  # 0: one chunk per reply
    deliveries: list[Delivery] = field(default_factory=list)
    typing_pulses: int = 0
    started: bool = False
    _ids: int = 0

    async def start(self) -> None:
        self.started = True

    async def stop(self) -> None:
        self.started = False

    def routes(self) -> list[web.RouteDef]:
        return []

    def render(self, markdown: str) -> list[str]:
        if not markdown:
            return []
        if not self.chunk_size:
            return [markdown]
        return [markdown[i : i + self.chunk_size] for i in range(0, len(markdown), self.chunk_size)]

    async def deliver(self, out: OutboundMessage) -> str:
        if out.edit_of:
            message_id = out.edit_of
        else:
            self._ids += 1
            message_id = str(self._ids)
        self.deliveries.append(
            Delivery(out.text, out.final, out.edit_of, out.address, message_id, out.sources)
        )
        return message_id

    async def typing(self, address: Address) -> None:
        self.typing_pulses += 1

    async def done_typing(self, address: Address) -> None:
        return None

    @property
    def finals(self) -> list[str]:
        return [d.text for d in self.deliveries if d.final]

    @property
    def previews(self) -> list[str]:
        return [d.text for d in self.deliveries if not d.final]


def message(
    text: str,
    *,
    user: str = "alice",
    channel: str = "local",
    chat_type: ChatType = ChatType.DIRECT,
    chat_id: str | None = None,
    mentioned: bool = False,
    message_id: str | None = None,
    user_name: str | None = None,
) -> InboundMessage:
    chat = chat_id or user
    return InboundMessage(
        channel=channel,
        message_id=message_id or uuid.uuid4().hex,
        chat_type=chat_type,
        chat_id=chat,
        user_id=user,
        user_name=user_name or user.title(),
        text=text,
        address=Address(channel, chat),
        mentioned=mentioned,
        timestamp=time.time(),
    )


class Harness:
    """`async with Harness(tmp_path, fake_url, config_toml) as h:` -> h.app, h.channel.

    The app runs as `krill run` does (scheduler and MCP servers included) but without the
    HTTP server; `clock` is the time its turns, flushes and jobs see.
    """

    def __init__(
        self,
        directory: Path,
        base_url: str,
        toml: str = "",
        *,
        clock: Callable[[], float] = time.time,
        channel: RecordingChannel | None = None,
        **channel_opts: Any,
    ):
        self.directory = directory
        self.clock = clock
        self.config_path = directory / "krill.toml"
        # The workspace beside the config, as tests/krill_process.py has it.
        workspace = "" if "[workspace]" in toml else '[workspace]\npath = "workspace"\n'
        self.config_path.write_text(
            "[anthropic]\nmax_retries = 0\n[server]\nport = 0\n" + workspace + toml,
            encoding="utf-8",
        )
        self.env = {"ANTHROPIC_API_KEY": "test", "ANTHROPIC_BASE_URL": base_url}
        self.channel = channel or RecordingChannel(**channel_opts)
        self.app: App | None = None

    async def __aenter__(self) -> Harness:
        config = load_config(str(self.config_path), env=self.env, channels=CHANNELS)
        self.app = App(config, with_server=False, background=True, clock=self.clock)
        self.app.add_channel(self.channel)
        await self.app.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.app is not None
        await self.app.__aexit__(*exc)

    async def send(self, msg: InboundMessage | str, *, wait: bool = True, **kw: Any) -> str:
        assert self.app is not None
        if isinstance(msg, str):
            msg = message(msg, **kw)
        result = await self.app.gateway.accept(msg)
        if wait:
            await asyncio.wait_for(self.app.gateway.wait_idle(msg), 20)
        return result

    @property
    def workspace(self) -> Path:
        assert self.app is not None
        return self.app.workspace.path
