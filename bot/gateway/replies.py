"""Replies that are not a model turn (command answers, refusals, pairing codes, heartbeat
messages): rendered and delivered straight through the session's channel."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from bot.types import Address, OutboundMessage

if TYPE_CHECKING:
    from bot.channel_contract import Channel

log = logging.getLogger(__name__)


class Replies:
    def __init__(self, channels: Mapping[str, Channel]) -> None:
        self.channels = channels

    async def send_text(self, address: Address, text: str) -> None:
        """Send `text` to `address`; a failure is logged, never raised."""
        channel = self.channels.get(address.channel)
        if channel is None:
            log.warning("no channel %r to send a reply to", address.channel)
            return
        for index, chunk in enumerate(channel.render(text)):
            try:
                await channel.deliver(OutboundMessage(address, chunk, "", index))
            except Exception:
                log.exception("could not send a reply on %s", address.channel)
                return
