"""Offering a choice: its row in the store first, then its message with buttons in the outbox,
in order with the chat's other replies. The buttons carry only the row's id.

A channel that cannot show buttons (the terminal) gets the choice as text and no row: the
person answers by typing, as they always may.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from bot.buttons.choices import ChoiceSpec, as_text, button_rows, new_choice_id
from bot.channel_contract import ButtonChannel
from bot.store.choices import Choice, ChoiceStatus

if TYPE_CHECKING:
    from bot.channel_contract import Channel
    from bot.config import Config
    from bot.outbox.writer import Outbox
    from bot.store.choices import ChoiceStore
    from bot.types import Address

log = logging.getLogger(__name__)


class Offers:
    def __init__(
        self,
        *,
        config: Config,
        store: ChoiceStore,
        outbox: Outbox,
        channels: Mapping[str, Channel],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.store = store
        self.outbox = outbox
        self.channels = channels
        self.clock = clock

    def shows_buttons(self, channel: str) -> bool:
        return isinstance(self.channels.get(channel), ButtonChannel)

    async def offer(
        self, spec: ChoiceSpec, session_key: str, address: Address, *, key: str = ""
    ) -> Choice | None:
        """Send `spec` to `address` with its buttons; the stored choice, or None where the
        channel has no buttons (the options were sent as text). A `key` names the choice
        and its reply, so offering it again (a repeated scheduled run) sends it once."""
        channel = self.channels.get(address.channel)
        if channel is None:
            log.warning("no channel %r to offer a choice on", address.channel)
            return None
        if not isinstance(channel, ButtonChannel):
            text = spec.fallback or as_text(spec.text, spec.options)
            await self.outbox.send_text(address, text, reply_id=key)
            return None
        chunks = channel.render(spec.text) or [spec.text]
        now = self.clock()
        expires = spec.expire_seconds or self.config.buttons.expire_seconds
        choice_id = key or new_choice_id()
        choice = Choice(
            id=choice_id,
            kind=spec.kind,
            session_key=session_key,
            address=address,
            owner=spec.owner,
            owner_name=spec.owner_name,
            text=chunks[-1],  # the message the buttons are under
            options=spec.options,
            payload=spec.payload,
            reply_id=key or f"choice-{choice_id}",
            status=ChoiceStatus.PENDING,
            created_at=now,
            expires_at=now + expires,
        )
        await self.store.choice_add(choice)
        rows = button_rows(choice.id, spec.options, spec.columns, channel.button_label_chars)
        await self.outbox.put(address, choice.reply_id, chunks, buttons=rows)
        log.info("offered %s choice %s to %s in %s", spec.kind, choice.id, spec.owner, session_key)
        return choice
