"""Replies that are not a model turn (command answers, refusals, pairing codes, heartbeat
messages): written to the outbox like every reply, and delivered by its sender."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.channel_contract import Channel
    from bot.outbox.writer import Outbox
    from bot.types import Address

log = logging.getLogger(__name__)


class Replies:
    def __init__(self, channels: Mapping[str, Channel], outbox: Outbox) -> None:
        self.channels = channels
        self.outbox = outbox

    async def send_text(self, address: Address, text: str) -> None:
        """Queue `text` for `address`; a failure is logged, never raised."""
        try:
            await self.outbox.send_text(address, text)
        except Exception:
            log.exception("could not queue a reply on %s", address.channel)
