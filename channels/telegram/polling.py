"""Long polling for Telegram updates, with the offset confirmed only after the core has
durably recorded each update.

python-telegram-bot's own `Updater` confirms a batch (by asking for the next offset) as soon
as it is queued in memory, so a crash right then would lose it. Here an update's offset is
advanced only once `handle(update)` has returned, i.e. once the core has committed it, and
the core's dedupe absorbs the redelivery that a crash before confirming causes. The updates
of one album are handed over together, since each one's handler waits for the whole album.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import warnings
from collections.abc import Awaitable, Callable, Sequence

from telegram import Bot, Update
from telegram.error import (
    Conflict,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
    TimedOut,
)
from telegram.warnings import PTBDeprecationWarning, PTBUserWarning

from bot.backoff import Backoff, backoff_delay

log = logging.getLogger(__name__)

POLL_TIMEOUT = 25  # seconds Telegram may hold a getUpdates request open
# Seconds without a successful getUpdates after which the poller counts as down (/healthz).
STALE_AFTER = 90.0
FIRST_BACKOFF = 1.0  # seconds before retrying after a failed poll; doubles per failure
MAX_BACKOFF = 30.0
# A single update the core keeps failing on is skipped after this many tries, so one bad
# update cannot stop every later one from arriving.
MAX_HANDLE_ATTEMPTS = 5

Handler = Callable[[Update], Awaitable[object]]


def in_runs(updates: Sequence[Update]) -> list[list[Update]]:
    """`updates` in order, consecutive members of one album (`media_group_id`) together."""
    runs: list[list[Update]] = []
    previous = None
    for update in updates:
        group = update.message.media_group_id if update.message else None
        if group is not None and group == previous:
            runs[-1].append(update)
        else:
            runs.append([update])
        previous = group
    return runs


def retry_after_seconds(exc: RetryAfter) -> float:
    """The wait Telegram asked for, whichever type this PTB version reports it in."""
    with warnings.catch_warnings():
        # PTB 22 warns that the int form will become a timedelta; both are handled here.
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        value = exc.retry_after
    return value if isinstance(value, int | float) else value.total_seconds()


class Poller:
    """Runs getUpdates in a loop on the current event loop until `stop()`."""

    def __init__(
        self,
        bot: Bot,
        handle: Handler,
        *,
        allowed_updates: Sequence[str],
        stale_after: float = STALE_AFTER,
    ):
        self._bot = bot
        self._handle = handle
        self._allowed = list(allowed_updates)
        # A healthy long poll must answer well inside the staleness window, or an idle bot
        # would look down between two empty answers.
        self._timeout = max(1, min(POLL_TIMEOUT, int(stale_after / 3)))
        self._stale_after = stale_after
        self._last_ok = time.monotonic()
        self._failing_since: float | None = None  # wall clock, for the console's "since"
        self._offset: int | None = None
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._backoff = Backoff(FIRST_BACKOFF, MAX_BACKOFF)
        self._handle_failures: dict[int, int] = {}
        self._conflicts = 0  # 409s in a row, logged only the first time

    def start(self) -> None:
        self._last_ok = time.monotonic()
        self._task = asyncio.create_task(self._run(), name="telegram-polling")
        self._task.add_done_callback(self._ended)

    @property
    def running(self) -> bool:
        """Still fetching updates (False once stopped, or after a rejected token or a crash)."""
        return self._task is not None and not self._task.done() and not self._stopping.is_set()

    @property
    def healthy(self) -> bool:
        """Running, and a getUpdates succeeded within the last `stale_after` seconds."""
        return self.running and time.monotonic() - self._last_ok <= self._stale_after

    @property
    def failing_since(self) -> float | None:
        """When the getUpdates failing since the last success began to fail; None while
        the latest one succeeded."""
        return self._failing_since

    def _ended(self, task: asyncio.Task[None]) -> None:
        # _run only returns when stopped; anything else is a bug that must not go unnoticed.
        if not task.cancelled() and task.exception() is not None:
            log.error(
                "Telegram polling stopped unexpectedly; restart Krill",
                exc_info=task.exception(),
            )

    async def stop(self, *, confirm: bool = True) -> None:
        """Stop polling; an update being handled is finished first, never cut off. Without
        `confirm` no last getUpdates is sent (another replica may be polling already)."""
        self._stopping.set()
        if self._task is not None:
            await self._task
            self._task = None
        if confirm and self._offset is not None:
            # Confirm what was handled, so a restart does not fetch it again (dedupe would
            # catch it, but there is no need to make Telegram resend it).
            with contextlib.suppress(TelegramError):
                await self._bot.get_updates(offset=self._offset, timeout=0, limit=1)

    async def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                updates = await self._fetch()
            except Exception as exc:  # e.g. one update PTB cannot parse fails the whole batch
                log.warning("Telegram getUpdates failed (%r); reading the updates one by one", exc)
                updates = await self._fetch_leniently()
            if updates is None:
                continue
            for run in in_runs(updates):
                if self._stopping.is_set() or not await self._deliver(run):
                    break

    async def _failure(self, update: Update) -> bool:
        """Hand one update to the core; True when it could not be recorded."""
        try:
            await self._handle(update)
        except Exception:  # the store or core failed; anything it raises means "not recorded"
            log.exception("could not record Telegram update %d", update.update_id)
            return True
        return False

    async def _deliver(self, run: list[Update]) -> bool:
        """Hand updates to the core (an album's at once); False when one failed and polling
        should back off. The offset only ever moves past updates that were recorded."""
        failures = await asyncio.gather(*(self._failure(update) for update in run))
        for update, failed in zip(run, failures, strict=True):
            if not failed:
                self._handle_failures.pop(update.update_id, None)
                self._offset = update.update_id + 1
                continue
            tries = self._handle_failures.get(update.update_id, 0) + 1
            if tries < MAX_HANDLE_ATTEMPTS:
                self._handle_failures[update.update_id] = tries
                log.warning(
                    "Telegram update %d not recorded (attempt %d of %d); fetching it again",
                    update.update_id,
                    tries,
                    MAX_HANDLE_ATTEMPTS,
                )
                await self._pause(backoff_delay(tries, FIRST_BACKOFF, MAX_BACKOFF))
                return False
            log.error(
                "giving up on Telegram update %d after %d attempts; skipping it",
                update.update_id,
                tries,
            )
            self._handle_failures.pop(update.update_id, None)
            self._offset = update.update_id + 1
        return True

    async def _fetch(self) -> list[Update] | None:
        """One getUpdates call; None when it failed (after waiting) or polling is stopping."""
        request = asyncio.ensure_future(
            self._bot.get_updates(
                offset=self._offset, timeout=self._timeout, allowed_updates=self._allowed
            )
        )
        stopping = asyncio.ensure_future(self._stopping.wait())
        try:
            await asyncio.wait({request, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
        if not request.done():
            request.cancel()
            with contextlib.suppress(asyncio.CancelledError, TelegramError):
                await request
            return None
        try:
            updates = list(request.result())
        except TimedOut:
            return None  # the long poll outlived its read timeout; just ask again
        except RetryAfter as exc:
            await self._failed(f"flood control: {exc}", retry_after_seconds(exc))
            return None
        except Conflict as exc:
            # Said once, not at every retry: it lasts as long as the other poller does.
            await self._failed(
                f"409 Conflict ({exc.message}). Another process is polling this bot token, or "
                "a webhook is set for it; only one Krill (or other client) may use a token "
                "(replicas sharing one store take turns by themselves); until it ends, the "
                "next 409s are logged at debug level only",
                quiet=self._conflicts > 0,
            )
            self._conflicts += 1
            return None
        except InvalidToken as exc:
            log.error(
                "Telegram rejected the bot token while polling (%s); polling stopped. "
                "Check telegram.token and restart Krill.",
                exc.message,
            )
            self._stopping.set()
            return None
        except NetworkError as exc:
            await self._failed(f"network error: {exc.message}")
            return None
        except TelegramError as exc:
            await self._failed(f"unexpected error: {exc.message}")
            return None
        self._last_ok, self._failing_since = time.monotonic(), None
        if self._backoff.failures:
            log.info(
                "Telegram polling recovered after %d failed attempt(s)", self._backoff.failures
            )
        self._backoff.reset()
        self._conflicts = 0
        return updates

    async def _fetch_leniently(self) -> list[Update] | None:
        """getUpdates as raw JSON, each update parsed on its own. One PTB cannot read becomes
        an empty update (skipped by the channel, its offset confirmed), so it cannot block
        every update behind it."""
        query = {"offset": self._offset, "timeout": 0, "allowed_updates": self._allowed}
        try:
            with warnings.catch_warnings():
                # PTB suggests get_updates instead, which is what just failed.
                warnings.simplefilter("ignore", PTBUserWarning)
                raw = await self._bot.do_api_request("getUpdates", api_kwargs=query)
        except Exception as exc:  # polling must survive whatever this fallback meets
            await self._failed(f"unexpected error: {exc}")
            return None
        self._last_ok, self._failing_since = time.monotonic(), None
        updates: list[Update] = []
        for item in raw if isinstance(raw, list) else []:
            try:
                updates.append(Update.de_json(item, self._bot))
            except Exception as exc:
                update_id = item.get("update_id") if isinstance(item, dict) else None
                if not isinstance(update_id, int):
                    continue
                log.warning("skipping Telegram update %d, which cannot be read: %r", update_id, exc)
                updates.append(Update(update_id))
        return updates

    async def _failed(self, reason: str, wait: float | None = None, *, quiet: bool = False) -> None:
        backoff = self._backoff.next()
        self._failing_since = self._failing_since or time.time()
        delay = backoff if wait is None else wait
        level = logging.DEBUG if quiet else logging.WARNING
        log.log(level, "Telegram polling failed: %s; retrying in %.1fs", reason, delay)
        await self._pause(delay)

    async def _pause(self, seconds: float) -> None:
        """Sleep, but wake at once when polling is stopped."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)
