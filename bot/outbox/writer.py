"""Writing replies to the outbox: every chunk a row before anything is sent, then a nudge
to the sender. Writing is all a turn (or a command's answer) waits for; delivery is the
sender's job."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from bot.store.outbox_rows import OutboxChunk, OutboxKind

if TYPE_CHECKING:
    from bot.channel_contract import Channel
    from bot.store.base import OutboxStore
    from bot.types import Address, ButtonRows, OutboundFile, Source

log = logging.getLogger(__name__)


class Outbox:
    def __init__(
        self,
        *,
        store: OutboxStore,
        channels: Mapping[str, Channel],
        clock: Callable[[], float] = time.time,
    ):
        self.store = store
        self.channels = channels
        self.clock = clock
        # Set when rows were written: the sender looks for work at once.
        self.wakeup = asyncio.Event()

    async def put(
        self,
        address: Address,
        reply_id: str,
        chunks: Sequence[str],
        *,
        edit_of: str | None = None,
        sources: tuple[Source, ...] = (),
        buttons: ButtonRows | None = None,
    ) -> None:
        """Write the chunks of reply `reply_id` (chunk 0 replacing message `edit_of`, if
        given; the last one showing `sources` and `buttons`). Writing a reply that is
        already in the outbox again changes nothing."""
        last = len(chunks) - 1
        rows = [
            OutboxChunk(
                turn_id=reply_id,
                chunk_index=index,
                chunk_count=len(chunks),
                address=address,
                text=chunk,
                edit_of=edit_of if index == 0 else None,
                sources=sources if index == last else (),
                buttons=buttons if index == last else None,
            )
            for index, chunk in enumerate(chunks)
        ]
        if rows:
            await self.store.outbox_add(rows, self.clock())
            self.wakeup.set()

    async def put_file(self, address: Address, file: OutboundFile) -> None:
        """Queue `file` for `address`, in order with the chat's replies. Its `key` names
        the row, so queueing the same key again (a repeated or resumed call) sends it once."""
        row = OutboxChunk(
            turn_id=file.key,
            chunk_index=0,
            chunk_count=1,
            address=address,
            text=file.caption,
            kind=OutboxKind.FILE,
            file=file,
        )
        await self.store.outbox_add([row], self.clock())
        self.wakeup.set()

    async def send_text(self, address: Address, text: str, *, reply_id: str = "") -> int:
        """Queue `text` (a reply that is not a model turn) for `address`; returns chunks.
        A `reply_id` names the reply, so queueing it again (a repeated scheduled run) sends
        it once; without one it is new."""
        channel = self.channels.get(address.channel)
        if channel is None:
            log.warning("no channel %r to send a reply to", address.channel)
            return 0
        chunks = channel.render(text)
        await self.put(address, reply_id or f"reply-{uuid.uuid4().hex}", chunks)
        return len(chunks)

    async def preview(self, turn_id: str) -> str | None:
        return await self.store.outbox_preview(turn_id)

    async def put_preview(self, turn_id: str, address: Address, platform_id: str) -> None:
        """Remember the streaming preview message the reply's chunk 0 will replace."""
        await self.store.outbox_put_preview(turn_id, address, platform_id, self.clock())
