"""Long polling in exactly one replica: Telegram answers a second `getUpdates` client with
409 Conflict, so of the replicas sharing a store only the one holding the bot's leader lock
polls, and the others stand by.

A standby replica claims the lock every few seconds; once it leads it deletes any leftover
webhook and starts polling. A leader that loses the lock (it could not renew it in time)
stops polling at once, before another replica can take the lock over, so two pollers never
overlap. A graceful stop confirms what was handled and then releases the lock, so another
replica takes over at its next try. Without a lock (a single process) it just polls.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from telegram import Bot
from telegram.error import TelegramError

from bot.channel_contract import Leadership
from channels.telegram.mapping import ALLOWED_UPDATES
from channels.telegram.polling import STALE_AFTER, Handler, Poller

log = logging.getLogger(__name__)


class LeadPolling:
    def __init__(
        self,
        bot: Bot,
        handle: Handler,
        leader: Leadership | None,
        *,
        stale_after: float = STALE_AFTER,
        redact: Callable[[BaseException], str] = str,
    ) -> None:
        self._bot = bot
        self._handle = handle
        self._leader = leader
        self._stale_after = stale_after
        self._redact = redact  # an error's text without the bot token
        self._poller: Poller | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def standby(self) -> bool:
        """Waiting while another replica polls."""
        return self._poller is None

    @property
    def healthy(self) -> bool:
        """Standing by, or polling with a getUpdates that succeeded lately."""
        return self._poller is None or self._poller.healthy

    @property
    def failing_since(self) -> float | None:
        """When its getUpdates began failing, while they do."""
        return None if self._poller is None else self._poller.failing_since

    async def start(self) -> None:
        """Poll now if this replica leads (or needs no lock), else stand by in the background;
        either way returns at once."""
        leading = self._leader is None or await self._leader.try_acquire()
        if leading:
            await self._poll()
        if self._leader is not None:
            self._task = asyncio.create_task(self._follow(leading), name="telegram-leadership")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._poller is not None:
            # Still leading, so no other replica polls while the handled offset is confirmed.
            await self._poller.stop()
            self._poller = None
        if self._leader is not None:
            await self._leader.release()

    async def _poll(self) -> None:
        # A webhook left over from an earlier webhook run would make every poll fail. Only
        # the replica about to poll deletes it; a webhook-mode replica never does.
        try:
            await self._bot.delete_webhook()
        except TelegramError as exc:  # polling then logs the 409 it causes, and retries
            log.warning("Telegram: could not delete the webhook: %s", self._redact(exc))
        self._poller = Poller(
            self._bot, self._handle, allowed_updates=ALLOWED_UPDATES, stale_after=self._stale_after
        )
        self._poller.start()
        log.info("Telegram: polling for updates as @%s", self._bot.username)

    async def _follow(self, leading: bool) -> None:
        """Stand by until leading, poll until the lead is lost, and again."""
        assert self._leader is not None
        while True:
            if not leading:
                await self._leader.acquire()
                log.info("Telegram: this replica holds the polling lock now; polling")
                await self._poll()
            leading = False
            await self._leader.lost()
            log.warning("Telegram: lost the polling lock; stopping polling and standing by")
            if self._poller is not None:
                # Another replica may poll already: a last getUpdates would cut its poll off.
                await self._poller.stop(confirm=False)
                self._poller = None
