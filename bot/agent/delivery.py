"""Getting one reply to a person: NO_REPLY gating, typing, throttled previews (best effort),
and the final text written to the outbox, whose sender delivers it. A retried turn writes
the same rows again, which changes nothing, so no chunk is sent twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bot.agent.silent import SilentGate
from bot.errors import PreviewSkipped

if TYPE_CHECKING:
    from bot.channel_contract import Channel
    from bot.outbox.writer import Outbox
    from bot.types import Address, Source

from bot.types import OutboundMessage

log = logging.getLogger(__name__)

ITERATION_SEPARATOR = "\n\n"


@dataclass(frozen=True, slots=True)
class StreamMark:
    """Where a reply stood before one model call, so a failed call's text can be dropped."""

    text: str
    gate: SilentGate
    pending_separator: bool
    previews: int


class ReplyStream:
    """Collects the model's text for one turn and shows it to the person as it grows.

    Nothing is shown (no typing, no preview) until the text can no longer turn out to be a
    silent `NO_REPLY`. A silent turn (`visible=False`) never shows anything at all.
    """

    def __init__(
        self,
        *,
        channel: Channel | None,
        address: Address | None,
        turn_id: str,
        outbox: Outbox,
        visible: bool = True,
        typing_on_tools: bool = True,
        resumed: bool = False,
    ):
        self.channel = channel
        self.address = address
        self.turn_id = turn_id
        self.outbox = outbox
        self.visible = visible and channel is not None and address is not None
        # Tool work shows typing before any text exists. Only where a reply is expected (a
        # DM): in a group the turn may well end in NO_REPLY, which must show nothing.
        self.typing_on_tools = typing_on_tools
        # Only a turn run before (a crash, a takeover) can have a preview in the outbox that
        # this process did not show; a new turn's reply needs no look there.
        self.resumed = resumed
        self._gate = SilentGate()
        self._text = ""
        self._typing: asyncio.Task[None] | None = None
        self._preview_task: asyncio.Task[None] | None = None
        self._preview_id: str | None = None
        self._preview_shown = ""
        # Counting from creation means a reply that completes within one interval is sent
        # once, as a final message, instead of as a preview plus an edit.
        self._last_preview = time.monotonic()
        self._pending_separator = False
        self._previews = 0  # previews started this turn; each may have shown text

    @property
    def text(self) -> str:
        return self._text

    @property
    def previewed(self) -> bool:
        """Whether a preview may have shown part of the reply to the person."""
        return self._previews > 0

    def mark(self) -> StreamMark:
        gate = copy.copy(self._gate)
        return StreamMark(self._text, gate, self._pending_separator, self._previews)

    def shown_since(self, mark: StreamMark) -> bool:
        """Whether a preview went out after `mark`: its text is then no longer ours to drop."""
        return self._previews != mark.previews

    def rewind(self, mark: StreamMark) -> None:
        """Forget the text received after `mark` (a model call that failed half-way)."""
        self._text = mark.text
        self._gate = copy.copy(mark.gate)
        self._pending_separator = mark.pending_separator

    async def on_text(self, delta: str) -> None:
        released = self._gate.feed(delta)
        if not released:
            return
        if self._pending_separator and self._text:
            released = ITERATION_SEPARATOR + released
        self._pending_separator = False
        self._text += released
        self._start_typing()
        self._maybe_preview()

    async def on_tool_start(self, _name: str) -> None:
        if self.typing_on_tools:
            self._start_typing()

    def next_iteration(self) -> None:
        """A tool round happened; the next text belongs after a paragraph break.

        Each model call's text is gated on its own, so a `NO_REPLY` said before a tool call
        is dropped rather than delivered ahead of later text."""
        rest = self._gate.finish()
        if rest:
            self._text += ITERATION_SEPARATOR if self._pending_separator and self._text else ""
            self._text += rest
            self._maybe_preview()
        self._gate = SilentGate()
        self._pending_separator = True

    def _start_typing(self) -> None:
        if not self.visible or self._typing is not None:
            return
        assert self.channel is not None
        if self.channel.typing_interval > 0:
            self._typing = asyncio.create_task(self._typing_loop(), name=f"typing:{self.turn_id}")

    async def _typing_loop(self) -> None:
        assert self.channel is not None and self.address is not None
        while True:
            try:
                await self.channel.typing(self.address)
            except Exception as exc:  # an indicator is never worth failing a turn for
                log.debug("typing indicator failed: %s", exc)
            await asyncio.sleep(self.channel.typing_interval)

    def _maybe_preview(self) -> None:
        if not self.visible:
            return
        assert self.channel is not None
        interval = self.channel.stream_interval
        if interval <= 0 or (self._preview_task and not self._preview_task.done()):
            return
        if time.monotonic() - self._last_preview < interval:
            return
        self._previews += 1
        self._preview_task = asyncio.create_task(self._send_preview())

    async def _send_preview(self) -> None:
        assert self.channel is not None and self.address is not None
        chunks = self.channel.render(self._text)
        if not chunks:
            return
        preview = chunks[0]
        if preview == self._preview_shown:
            return
        self._last_preview = time.monotonic()
        try:
            message_id = await self.channel.deliver(
                OutboundMessage(
                    self.address, preview, self.turn_id, 0, edit_of=self._preview_id, final=False
                )
            )
        except PreviewSkipped as exc:  # pacing: a later preview or the final reply shows it
            log.debug("streaming preview of turn %s skipped: %s", self.turn_id, exc)
            return
        except Exception as exc:
            log.warning("streaming preview failed (the final reply will still be sent): %s", exc)
            return
        self._preview_shown = preview
        if self._preview_id is None:
            self._preview_id = message_id
            await self.outbox.put_preview(self.turn_id, self.address, message_id)

    def finish_text(self) -> str:
        """The whole reply as it should be delivered ("" when the turn is silent)."""
        self._text += self._gate.finish()
        return self._text.strip()

    async def deliver(self, text: str, sources: tuple[Source, ...] = ()) -> int:
        """Write every chunk of `text` to the outbox (chunk 0 replacing the preview, if one
        was shown; the last carrying `sources`). Returns the number of chunks; the sender
        delivers them."""
        if self._preview_task is not None:
            try:
                await self._preview_task
            except Exception:  # the final reply below replaces whatever the preview showed
                log.warning("streaming preview of turn %s failed", self.turn_id, exc_info=True)
        if not self.visible or not text:
            return 0
        assert self.channel is not None and self.address is not None
        preview_id = self._preview_id
        if preview_id is None and self.resumed:
            preview_id = await self.outbox.preview(self.turn_id)
        chunks = self.channel.render(text)
        await self.outbox.put(
            self.address, self.turn_id, chunks, edit_of=preview_id, sources=sources
        )
        return len(chunks)

    async def close(self) -> None:
        # A turn cut short (/stop, shutdown) must not leave a preview send running on
        # into a closed store.
        if self._preview_task is not None and not self._preview_task.done():
            self._preview_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._preview_task
        if self._typing is not None:
            self._typing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._typing
            self._typing = None
        if not self.visible:
            return
        # Also after a silent or failed turn: an acknowledgement reaction set when the
        # message arrived must not stay behind.
        assert self.channel is not None and self.address is not None
        try:
            await self.channel.done_typing(self.address)
        except Exception:  # a leftover indicator is cosmetic; the reply went out
            log.warning(
                "could not clear the typing indicator of turn %s", self.turn_id, exc_info=True
            )
