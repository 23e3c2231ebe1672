"""Telegram albums as one turn: the photos of an album arrive as separate updates sharing a
`media_group_id` (the caption rides on one of them). They are held until the album has been
quiet for a moment and handed to the core as one message with every attachment.

Each member's handler returns only once that merged message is recorded, with the core's
answer, so neither the webhook's 200 nor the poller's offset confirms an update before it is
durable. The merged message keeps the first member's id: a redelivered album is a duplicate.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace

from bot.channel_contract import AcceptResult
from bot.types import InboundMessage

# How long an album must stay quiet before it is taken as complete. A phone uploads an album
# in one request, so its updates arrive within milliseconds of each other.
ALBUM_WAIT = 1.0

Accept = Callable[[InboundMessage], Awaitable[AcceptResult]]


@dataclass
class _Album:
    done: asyncio.Future[tuple[AcceptResult, InboundMessage]]
    members: list[InboundMessage] = field(default_factory=list)


def _order(msg: InboundMessage) -> int:
    return int(msg.message_id.rpartition(":")[2])


def merge(members: list[InboundMessage]) -> InboundMessage:
    """One message from an album's members: the first one's id and address, every caption,
    every attachment in the order they were sent."""
    ordered = sorted(members, key=_order)
    return replace(
        ordered[0],
        text="\n".join(m.text for m in ordered if m.text),
        attachments=[a for m in ordered for a in m.attachments],
        mentioned=any(m.mentioned for m in ordered),
    )


class Albums:
    def __init__(self, accept: Accept, wait: float = ALBUM_WAIT) -> None:
        self._accept = accept
        self._wait = wait
        self._open: dict[tuple[str, str], _Album] = {}
        self._flushing: set[asyncio.Task[None]] = set()

    async def add(self, group_id: str, msg: InboundMessage) -> tuple[AcceptResult, InboundMessage]:
        """Add a member; returns the core's answer for the whole album and the merged message
        once it is accepted. Raises what accepting raised, so every member is retried."""
        key = (msg.chat_id, group_id)
        album = self._open.get(key)
        if album is None:
            album = self._open[key] = _Album(asyncio.get_running_loop().create_future())
            task = asyncio.create_task(self._flush_when_quiet(key, album), name="telegram-album")
            self._flushing.add(task)
            task.add_done_callback(self._flushing.discard)
        album.members.append(msg)
        # Shielded: a member whose request is dropped must not cancel the album for the rest.
        return await asyncio.shield(album.done)

    async def _flush_when_quiet(self, key: tuple[str, str], album: _Album) -> None:
        seen = 0
        while seen != len(album.members):
            seen = len(album.members)
            await asyncio.sleep(self._wait)
        del self._open[key]
        merged = merge(album.members)
        try:
            album.done.set_result((await self._accept(merged), merged))
        except Exception as exc:  # every member's handler raises it, so nothing is confirmed
            album.done.set_exception(exc)

    async def drain(self) -> None:
        """Finish the albums still being collected (at shutdown)."""
        while self._flushing:
            await asyncio.gather(*self._flushing, return_exceptions=True)
