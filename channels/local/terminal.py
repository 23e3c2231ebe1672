"""The terminal chat behind `krill chat`: one DM session for the OS user, replies streamed to
stdout. Works with piped stdin, so conversations can be scripted.
"""

from __future__ import annotations

import sys
from typing import TextIO

from aiohttp import web

from bot.types import Address, OutboundMessage

CHANNEL = "local"


class TerminalChannel:
    name = CHANNEL
    stream_interval = 0.05
    typing_interval = 0.0

    def __init__(self, out: TextIO | None = None):
        self.out = out or sys.stdout
        self._shown: dict[str, str] = {}  # message id -> text already printed

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    def routes(self) -> list[web.RouteDef]:
        return []

    def render(self, markdown: str) -> list[str]:
        return [markdown] if markdown else []

    async def deliver(self, out: OutboundMessage) -> str:
        message_id = out.edit_of or f"{out.turn_id or 'note'}:{out.chunk_index}"
        shown = self._shown.get(message_id, "")
        if out.text.startswith(shown):
            self.out.write(out.text[len(shown) :])
        else:  # the final text differs from what was streamed: print it whole
            self.out.write("\n" + out.text)
        if out.final:
            self.out.write("\n")
            for source in out.sources:
                # Page titles are outside text: no control characters reach the terminal.
                shown = "".join(ch for ch in f"{source.title} <{source.url}>" if ch.isprintable())
                self.out.write(f"  ↪ {shown}\n")
            self._shown.pop(message_id, None)
        else:
            self._shown[message_id] = out.text
        self.out.flush()
        return message_id

    async def typing(self, address: Address) -> None:
        return None

    async def done_typing(self, address: Address) -> None:
        return None
