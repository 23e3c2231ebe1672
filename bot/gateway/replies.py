"""Replies that are not a model turn (command answers, refusals, pairing codes, heartbeat
messages): written to the outbox like every reply, and delivered by its sender. The one
exception is the note that the store itself is unavailable, which cannot wait for it."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING

from bot.types import OutboundMessage

if TYPE_CHECKING:
    from bot.channel_contract import Channel
    from bot.outbox.writer import Outbox
    from bot.types import Address

log = logging.getLogger(__name__)


class Replies:
    def __init__(self, channels: Mapping[str, Channel], outbox: Outbox) -> None:
        self.channels = channels
        self.outbox = outbox

    async def send_text(self, address: Address, text: str, *, reply_id: str = "") -> int:
        """Queue `text` for `address` (as reply `reply_id`, see `Outbox.send_text`); the
        number of chunks queued, 0 when it could not be. A failure is logged, never raised."""
        try:
            return await self.outbox.send_text(address, text, reply_id=reply_id)
        except Exception:
            log.exception("could not queue a reply on %s", address.channel)
            return 0

    async def send_now(self, address: Address, text: str) -> None:
        """Send `text` straight through the channel, once, bypassing the outbox: for the
        note that the store is locked or unreachable, when an outbox row could not be
        written either. A failure is logged, never raised."""
        channel = self.channels.get(address.channel)
        if channel is None:
            return
        turn_id = f"notice-{uuid.uuid4().hex}"
        try:
            for index, chunk in enumerate(channel.render(text)):
                await channel.deliver(OutboundMessage(address, chunk, turn_id, index))
        except Exception:
            log.warning("could not tell %s that the store is busy", address.channel, exc_info=True)
